//! The reading thread of [`TraceReader::read_ahead`](super::TraceReader::read_ahead).
//!
//! The thread reads lines in batches and sends them, in order, over a bounded channel. Decoding
//! a line (its JSON, its timestamps) is most of the work of reading a trace, and it needs no
//! state once the format is known; so a batch goes either decoded, or as its raw lines for the
//! caller to decode, when the caller has at most one batch waiting ([`Sharing::WhenIdle`]): a
//! caller that would otherwise wait decodes, and one that is busy (with the replay) is not handed
//! more. Either way the caller sees the same decoded lines in the same order.
//!
//! The lines before the format is known are decoded on the thread, in order: the first line that
//! is one of the formats decides it.

use std::io::BufRead;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use super::{decode, Decoded, Lines, TraceFormat};

/// Lines per message: enough that the channel costs little per line.
const LINES: usize = 256;
/// Messages in flight: how far ahead of the caller the thread may read.
const BATCHES: usize = 8;
/// A raw batch ends once its text holds this much (audit events at `RequestResponse` level carry
/// whole objects): the lines in flight are bounded in bytes, not only in number.
const TEXT: usize = 1 << 20;
/// The caller is handed raw lines while no more than this many batches wait for it.
const IDLE: usize = 1;

/// Which batches the caller decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sharing {
    /// Those read while the caller has at most [`IDLE`] batches waiting.
    WhenIdle,
    /// Every batch read once the format is known (tests: the caller's decoding, every time).
    #[cfg(test)]
    Always,
    /// None (tests: the thread's decoding, every time).
    #[cfg(test)]
    Never,
}

/// A batch of lines, in order.
enum Batch {
    /// Decoded on the thread; a read error is the last item the thread sends.
    Decoded(Vec<std::io::Result<Decoded>>),
    /// For the caller to decode.
    Raw(RawLines),
}

/// Lines as read, one after the other in `text`.
struct RawLines {
    format: TraceFormat,
    text: Vec<u8>,
    /// Each line's end in `text`, its number and whether it is complete.
    lines: Vec<(usize, u64, bool)>,
}

impl RawLines {
    fn decode(self) -> Vec<std::io::Result<Decoded>> {
        let mut start = 0;
        let mut format = Some(self.format);
        self.lines
            .into_iter()
            .map(|(end, number, complete)| {
                let line = &self.text[start..end];
                start = end;
                Ok(decode(line, number, complete, &mut format))
            })
            .collect()
    }
}

/// The caller's end: batches received, decoded where they came raw.
pub(super) struct Ahead {
    batches: mpsc::Receiver<Batch>,
    /// Batches sent and not yet received.
    waiting: Arc<AtomicUsize>,
    batch: std::vec::IntoIter<std::io::Result<Decoded>>,
    /// Joined once it has sent its last batch; left to end on its own if the reader is dropped
    /// before (it may be blocked on its input, and stops at its next batch).
    thread: Option<JoinHandle<()>>,
}

impl Ahead {
    /// Starts the reading thread over `lines`.
    pub(super) fn spawn<R: BufRead + Send + 'static>(
        lines: Lines<R>,
        sharing: Sharing,
    ) -> std::io::Result<Ahead> {
        let (tx, batches) = mpsc::sync_channel(BATCHES);
        let waiting = Arc::new(AtomicUsize::new(0));
        let sent = Arc::clone(&waiting);
        let thread = std::thread::Builder::new()
            .name("trace-reader".into())
            .spawn(move || read(lines, sharing, &tx, &sent))?;
        Ok(Ahead {
            batches,
            waiting,
            batch: Vec::new().into_iter(),
            thread: Some(thread),
        })
    }

    /// The next line, decoded; `None` at the end of the input.
    pub(super) fn next_line(&mut self) -> std::io::Result<Option<Decoded>> {
        loop {
            if let Some(line) = self.batch.next() {
                return line.map(Some);
            }
            match self.batches.recv() {
                Ok(next) => {
                    self.waiting.fetch_sub(1, Ordering::Relaxed);
                    self.batch = match next {
                        Batch::Decoded(lines) => lines,
                        Batch::Raw(raw) => raw.decode(),
                    }
                    .into_iter();
                }
                // The thread has ended after its last line (or a read error, already sent):
                // joined, so that it is gone with everything it held when the input ends, and
                // so that a panic there is the caller's, not a silently short trace.
                Err(_) => {
                    if let Some(Err(panic)) = self.thread.take().map(JoinHandle::join) {
                        std::panic::resume_unwind(panic);
                    }
                    return Ok(None);
                }
            }
        }
    }
}

/// The thread: reads `lines` to the end (or a read error) and sends them in batches, until the
/// caller is gone.
fn read<R: BufRead>(
    mut lines: Lines<R>,
    sharing: Sharing,
    tx: &mpsc::SyncSender<Batch>,
    waiting: &AtomicUsize,
) {
    loop {
        let (batch, end) = match lines.format {
            // Until the format is known, each line may decide it: decoded here, in order.
            None => decoded_batch(&mut lines),
            Some(format) => raw_batch(&mut lines, format, sharing, waiting),
        };
        let empty = match &batch {
            Batch::Decoded(lines) => lines.is_empty(),
            Batch::Raw(raw) => raw.lines.is_empty(),
        };
        if !empty {
            waiting.fetch_add(1, Ordering::Relaxed);
            // Sending fails once the reader is dropped: nothing more to read for.
            if tx.send(batch).is_err() {
                return;
            }
        }
        if end {
            return;
        }
    }
}

/// Up to [`LINES`] lines decoded here, and whether the input has ended.
fn decoded_batch<R: BufRead>(lines: &mut Lines<R>) -> (Batch, bool) {
    let mut batch = Vec::with_capacity(LINES);
    while batch.len() < LINES {
        match lines.next_line() {
            Ok(Some(decoded)) => batch.push(Ok(decoded)),
            Ok(None) => return (Batch::Decoded(batch), true),
            Err(error) => {
                batch.push(Err(error));
                return (Batch::Decoded(batch), true);
            }
        }
        // Once the format is known, the next batch may go raw.
        if lines.format.is_some() {
            break;
        }
    }
    (Batch::Decoded(batch), false)
}

/// Up to [`LINES`] lines (or [`TEXT`] bytes and one line) read, then decoded here unless the
/// caller is to decode them, and whether the input has ended.
fn raw_batch<R: BufRead>(
    lines: &mut Lines<R>,
    format: TraceFormat,
    sharing: Sharing,
    waiting: &AtomicUsize,
) -> (Batch, bool) {
    let mut raw = RawLines {
        format,
        text: Vec::new(),
        lines: Vec::with_capacity(LINES),
    };
    let mut end = None;
    while raw.lines.len() < LINES && raw.text.len() < TEXT {
        match lines.next_raw(&mut raw.text) {
            Ok(Some((number, complete))) => raw.lines.push((raw.text.len(), number, complete)),
            Ok(None) => {
                end = Some(None);
                break;
            }
            Err(error) => {
                end = Some(Some(error));
                break;
            }
        }
    }
    let share = match sharing {
        Sharing::WhenIdle => waiting.load(Ordering::Relaxed) <= IDLE,
        #[cfg(test)]
        Sharing::Always => true,
        #[cfg(test)]
        Sharing::Never => false,
    };
    match end {
        // A read error is the batch's last item: decoded here, with it.
        Some(Some(error)) => {
            let mut decoded = raw.decode();
            decoded.push(Err(error));
            (Batch::Decoded(decoded), true)
        }
        end if share => (Batch::Raw(raw), end.is_some()),
        end => (Batch::Decoded(raw.decode()), end.is_some()),
    }
}
