//! Trace readers: the workloads `simulate` replays, detected by content.
//!
//! Three formats, one request per JSON line:
//! - Kubernetes audit events (`audit.k8s.io/v1` `Event`, as kube-apiserver writes them with
//!   `--audit-log-path`; an `EventList` line is also read);
//! - the proxy's own JSON access log (`--log-format json -v=1`, target `kube_apf_proxy::access`);
//! - plain trace lines: a `classify --requests` line plus `at` (seconds from any origin) and
//!   `durationMs`.
//!
//! The reader yields [`TraceEvent`]s in arrival order, whatever order the file has them in:
//! audit logs and access logs are written when a request *completes*, so a reorder buffer of
//! [`TraceOptions::reorder_window`] holds events until no earlier arrival can still come. Memory is
//! bounded by the requests that arrive within that window, not by the trace length.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::io::BufRead;
use std::time::Duration;

use crate::auth::Identity;
use crate::classify::{read_bounded_line, MAX_LINE_BYTES};

/// One thing that happens in a recorded workload.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// A request arrives.
    Request(TraceRequest),
    /// A long-running request that arrived earlier with `duration: None` ends (its audit
    /// `ResponseComplete` stage). Events of the same `key` pair up.
    Ended {
        /// The key of the [`TraceRequest`] it ends.
        key: String,
        /// When it ended, on the trace's clock.
        at: Duration,
    },
}

/// One recorded request.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// The line it came from (1-based), for messages.
    pub line: u64,
    /// An identifier unique within the trace (the audit ID; for other formats the line number).
    pub key: String,
    /// When it arrived, on the trace's clock: since the UNIX epoch for audit events and access
    /// logs, since the trace's own origin for trace lines.
    pub arrival: Duration,
    /// How long it took from arrival to completion, when the trace knows it now. `None` for a
    /// long-running request whose end comes later as [`TraceEvent::Ended`].
    pub duration: Option<Duration>,
    /// For a long-running request: how long from arrival until its response head was sent
    /// (audit stage `ResponseStarted`), when known.
    pub first_byte: Option<Duration>,
    /// The HTTP method (audit events give the Kubernetes verb; it is mapped back).
    pub method: http::Method,
    /// The request target: path and query, as the apiserver received it.
    pub uri: String,
    /// The user flow control classifies: the impersonated user when there is one.
    pub identity: Identity,
    /// The response status the recording server gave, when known.
    pub status: Option<u16>,
}

/// How a trace is read.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// How far behind the latest timestamp seen an arrival may still turn up. The default is the
    /// request timeout plus 5 s: a request that is not long-running completes within it.
    pub reorder_window: Duration,
    /// Stop at the first malformed line instead of reporting and skipping it.
    pub strict: bool,
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceLineError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

/// The format a trace turned out to be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// `audit.k8s.io/v1` events.
    AuditEvents,
    /// The proxy's JSON access log.
    AccessLog,
    /// Plain trace lines.
    TraceLines,
}

/// Why the reader could not go on, or skipped a line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A malformed line: report it and go on (or stop, under `--strict`).
    #[error(transparent)]
    Line(#[from] TraceLineError),
    /// The input could not be read: fatal.
    #[error("reading the trace: {0}")]
    Io(#[from] std::io::Error),
}

/// What a reader has seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Lines read (blank ones included).
    pub lines: u64,
    /// Requests yielded.
    pub requests: u64,
    /// Malformed lines reported.
    pub malformed: u64,
    /// Audit events of stages that do not start or end a request (`RequestReceived`), and
    /// access-log lines that are not request events.
    pub ignored: u64,
    /// Events yielded after one that arrived later (further out of order than the window).
    pub late: u64,
    /// Audit events in the old form with only `timestamp` (no `stageTimestamp`): replayed as
    /// taking no time.
    pub without_duration: u64,
}

/// Reads a trace as [`TraceEvent`]s in arrival order (see the module documentation).
pub struct TraceReader<R> {
    source: Source<R>,
    options: TraceOptions,
    format: Option<TraceFormat>,
    stats: TraceStats,
    line: u64,
    /// Events waiting for the window to pass them, earliest first.
    pending: BinaryHeap<Reverse<Pending>>,
    /// The latest completion time seen: events this far behind it are released.
    watermark: Duration,
    /// The key of the last event released, for late detection.
    released: Duration,
    /// Audit IDs of long-running requests whose `ResponseStarted` was seen and whose end was not.
    open: HashSet<String>,
    /// Line errors and events ready to go out, before `pending`.
    ready: VecDeque<Result<TraceEvent, TraceError>>,
    eof: bool,
    seq: u64,
}

impl<R> std::fmt::Debug for TraceReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("format", &self.format)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// An event held by the reorder buffer, ordered by its time then its line. Boxed: the heap
/// holds a window's worth of events and moves entries on every push and pop.
#[derive(Debug)]
struct Pending {
    key: Duration,
    seq: u64,
    event: Box<TraceEvent>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.key, self.seq) == (other.key, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.key, self.seq).cmp(&(other.key, other.seq))
    }
}

/// What one line turned out to hold.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// Events, with the time the line was written (its completion).
    Events(Vec<TraceEvent>, Duration),
    /// Nothing to replay (another stage, another log event).
    Ignored,
}

// === impl TraceReader ===

impl<R: BufRead> TraceReader<R> {
    /// A reader over `input`, on the calling thread.
    pub fn new(input: R, options: TraceOptions) -> Self {
        Self::with_source(Source::Inline(Lines::new(input)), options)
    }

    /// A reader over `input` whose lines are read and decoded (JSON, timestamps: most of the
    /// work) on a thread of its own, a few hundred lines ahead of the caller; what depends on
    /// the order of events (the reorder window, which watches are open, the counts) stays with
    /// the caller, so the events, errors and counts are those of [`TraceReader::new`]. The
    /// thread stops at the end of the input, at a read error, or when the reader is dropped.
    pub fn read_ahead(input: R, options: TraceOptions) -> std::io::Result<Self>
    where
        R: Send + 'static,
    {
        let (batches, thread) = ahead::spawn(Lines::new(input))?;
        Ok(Self::with_source(
            Source::Ahead {
                batches,
                batch: Vec::new().into_iter(),
                thread: Some(thread),
            },
            options,
        ))
    }

    fn with_source(source: Source<R>, options: TraceOptions) -> Self {
        TraceReader {
            source,
            options,
            format: None,
            stats: TraceStats::default(),
            line: 0,
            pending: BinaryHeap::new(),
            watermark: Duration::ZERO,
            released: Duration::ZERO,
            open: HashSet::new(),
            ready: VecDeque::new(),
            eof: false,
            seq: 0,
        }
    }

    /// The format, known once the first non-blank line has been read.
    pub fn format(&self) -> Option<TraceFormat> {
        self.format
    }

    /// What has been read so far.
    pub fn stats(&self) -> TraceStats {
        self.stats
    }

    /// Reads lines until something is ready to go out or the input ends.
    fn fill(&mut self) -> Result<(), std::io::Error> {
        while self.ready.is_empty() && !self.eof {
            let Some(decoded) = self.source.next_line()? else {
                self.eof = true;
                break;
            };
            self.line += 1;
            self.stats.lines += 1;
            let parsed = match decoded {
                Decoded::TooLong => {
                    self.line_error(format!("line longer than {MAX_LINE_BYTES} bytes"));
                    continue;
                }
                Decoded::Blank => continue,
                // Before the format is known: a rotated log read from mid-line starts with a
                // fragment, which is reported and skipped like any bad line.
                Decoded::Undetected(message) => {
                    self.line_error(message);
                    continue;
                }
                Decoded::Audit(decoded) => {
                    self.format = Some(TraceFormat::AuditEvents);
                    decoded.and_then(|decoded| {
                        audit::apply(
                            decoded,
                            self.line,
                            &mut self.open,
                            &mut self.stats.without_duration,
                        )
                    })
                }
                Decoded::Stateless(format, parsed) => {
                    self.format = Some(format);
                    parsed
                }
            };
            match parsed {
                Ok(Parsed::Events(events, written)) => {
                    self.watermark = self.watermark.max(written);
                    for event in events {
                        let key = match &event {
                            TraceEvent::Request(r) => r.arrival,
                            TraceEvent::Ended { at, .. } => *at,
                        };
                        self.seq += 1;
                        let seq = self.seq;
                        let event = Box::new(event);
                        self.pending.push(Reverse(Pending { key, seq, event }));
                    }
                    self.release(false);
                }
                Ok(Parsed::Ignored) => self.stats.ignored += 1,
                Err(message) => self.line_error(message),
            }
        }
        if self.eof {
            self.release(true);
        }
        Ok(())
    }

    fn line_error(&mut self, message: String) {
        self.stats.malformed += 1;
        let error = TraceLineError {
            line: self.line,
            message,
        };
        self.ready.push_back(Err(TraceError::Line(error)));
    }

    /// Moves the events the window has passed (all of them at the end) to `ready`.
    fn release(&mut self, all: bool) {
        let window = self.options.reorder_window;
        while let Some(Reverse(head)) = self.pending.peek() {
            if !all && head.key + window > self.watermark {
                break;
            }
            let Some(Reverse(Pending { key, event, .. })) = self.pending.pop() else {
                break;
            };
            if key < self.released {
                self.stats.late += 1;
            }
            self.released = self.released.max(key);
            if matches!(*event, TraceEvent::Request(_)) {
                self.stats.requests += 1;
            }
            self.ready.push_back(Ok(*event));
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ready.is_empty() {
            if let Err(error) = self.fill() {
                self.eof = true;
                self.pending.clear();
                return Some(Err(TraceError::Io(error)));
            }
        }
        let item = self.ready.pop_front()?;
        if self.options.strict && matches!(item, Err(TraceError::Line(_))) {
            // Nothing after the first malformed line under --strict.
            self.eof = true;
            self.pending.clear();
            self.ready.clear();
        }
        Some(item)
    }
}

/// Where a reader's decoded lines come from.
enum Source<R> {
    /// Read and decoded on the caller's thread.
    Inline(Lines<R>),
    /// From the reading thread, in batches.
    Ahead {
        batches: std::sync::mpsc::Receiver<ahead::Batch>,
        batch: std::vec::IntoIter<std::io::Result<Decoded>>,
        /// Joined once it has sent its last batch; left to end on its own if the reader is
        /// dropped before (it may be blocked on its input, and stops at its next batch).
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl<R: BufRead> Source<R> {
    /// The next line, decoded; `None` at the end of the input.
    fn next_line(&mut self) -> std::io::Result<Option<Decoded>> {
        match self {
            Source::Inline(lines) => lines.next_line(),
            Source::Ahead {
                batches,
                batch,
                thread,
            } => loop {
                if let Some(line) = batch.next() {
                    return line.map(Some);
                }
                match batches.recv() {
                    Ok(next) => *batch = next.into_iter(),
                    // The thread has ended after its last line (or a read error, already sent):
                    // joined, so that it is gone with everything it held when the input ends,
                    // and so that a panic there is the caller's, not a silently short trace.
                    Err(_) => {
                        if let Some(Err(panic)) = thread.take().map(std::thread::JoinHandle::join) {
                            std::panic::resume_unwind(panic);
                        }
                        return Ok(None);
                    }
                }
            },
        }
    }
}

/// One line of the input as far as it can be read without the reader's state.
#[derive(Debug)]
enum Decoded {
    /// Longer than [`MAX_LINE_BYTES`].
    TooLong,
    /// Only whitespace.
    Blank,
    /// None of the formats, before one was found (why not).
    Undetected(String),
    /// An audit event line.
    Audit(Result<audit::Decoded, String>),
    /// A line of a format that needs no state.
    Stateless(TraceFormat, Result<Parsed, String>),
}

/// An input's lines, read and decoded in order (on the caller's thread or the reading thread):
/// the first line that is one of the formats decides it.
struct Lines<R> {
    input: R,
    buf: Vec<u8>,
    format: Option<TraceFormat>,
    /// The number of the last line read (1-based).
    line: u64,
}

impl<R: BufRead> Lines<R> {
    fn new(input: R) -> Self {
        Lines {
            input,
            buf: Vec::new(),
            format: None,
            line: 0,
        }
    }

    /// The next line, decoded; `None` at the end of the input.
    fn next_line(&mut self) -> std::io::Result<Option<Decoded>> {
        let Some(complete) = read_bounded_line(&mut self.input, &mut self.buf)? else {
            return Ok(None);
        };
        self.line += 1;
        Ok(Some(self.decode(complete)))
    }

    /// The line in `buf` (`complete`: not cut at the limit).
    fn decode(&mut self, complete: bool) -> Decoded {
        let (line, number) = (&self.buf[..], self.line);
        if !complete {
            return Decoded::TooLong;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Decoded::Blank;
        }
        let format = match self.format {
            Some(format) => format,
            None => match detect(line) {
                Ok(format) => *self.format.insert(format),
                Err(message) => return Decoded::Undetected(message),
            },
        };
        match format {
            TraceFormat::AuditEvents => Decoded::Audit(audit::decode(line)),
            TraceFormat::AccessLog => Decoded::Stateless(format, access::parse_line(line, number)),
            TraceFormat::TraceLines => Decoded::Stateless(format, lines::parse_line(line, number)),
        }
    }
}

/// The reading thread of [`TraceReader::read_ahead`].
mod ahead {
    use std::io::BufRead;
    use std::sync::mpsc;

    use super::{Decoded, Lines};

    /// Lines per message: enough that the channel costs little per line.
    const LINES: usize = 256;
    /// Messages in flight: how far ahead of the caller the thread may read.
    const BATCHES: usize = 8;

    /// Lines decoded in order; a read error is the last item the thread sends.
    pub(super) type Batch = Vec<std::io::Result<Decoded>>;

    pub(super) fn spawn<R: BufRead + Send + 'static>(
        mut lines: Lines<R>,
    ) -> std::io::Result<(mpsc::Receiver<Batch>, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::sync_channel(BATCHES);
        let thread = std::thread::Builder::new()
            .name("trace-reader".into())
            .spawn(move || {
                loop {
                    let mut batch = Vec::with_capacity(LINES);
                    let mut end = false;
                    while batch.len() < LINES {
                        match lines.next_line() {
                            Ok(Some(decoded)) => batch.push(Ok(decoded)),
                            Ok(None) => {
                                end = true;
                                break;
                            }
                            Err(error) => {
                                batch.push(Err(error));
                                end = true;
                                break;
                            }
                        }
                    }
                    // Sending fails once the reader is dropped: nothing more to read for.
                    if (!batch.is_empty() && tx.send(batch).is_err()) || end {
                        return;
                    }
                }
            })?;
        Ok((rx, thread))
    }
}

/// What a trace line is expected to be, for messages about lines that are none of them.
pub const EXPECTED_FORMATS: &str = "expected audit.k8s.io Event JSON lines (kube-apiserver \
    --audit-log-path with --audit-log-format=json), the proxy's JSON access log (--log-format \
    json -v=1) or trace lines ({\"at\":0,\"durationMs\":5,\"method\":\"GET\",\"url\":\"/api\"})";

/// The format of one line, or why it is none of them.
///
/// An audit event is `kind: Event` (or `EventList`) with an `audit.k8s.io/*` `apiVersion`, or
/// with no `apiVersion` and an `auditID` or `items` (falco's trace files leave `apiVersion` out;
/// a core `v1` `Event` is not an audit event).
fn detect(line: &[u8]) -> Result<TraceFormat, String> {
    use serde::de::IgnoredAny;
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(default, borrow)]
        kind: Option<Cow<'a, str>>,
        #[serde(default, rename = "apiVersion", borrow)]
        api_version: Option<Cow<'a, str>>,
        #[serde(default, rename = "auditID")]
        audit_id: Option<IgnoredAny>,
        #[serde(default)]
        items: Option<IgnoredAny>,
        #[serde(default, borrow)]
        target: Option<Cow<'a, str>>,
        #[serde(default)]
        at: Option<IgnoredAny>,
        #[serde(default)]
        url: Option<IgnoredAny>,
    }
    let probe = serde_json::from_slice::<Probe<'_>>(line)
        .map_err(|e| format!("not a JSON object ({e}); {EXPECTED_FORMATS}"))?;
    let audit_kind = matches!(probe.kind.as_deref(), Some("Event" | "EventList"));
    let audit_version = match probe.api_version.as_deref() {
        Some(v) => v.starts_with("audit.k8s.io/"),
        None => probe.audit_id.is_some() || probe.items.is_some(),
    };
    if audit_kind && audit_version {
        Ok(TraceFormat::AuditEvents)
    } else if probe
        .target
        .as_deref()
        .is_some_and(|t| t.starts_with("kube_apf_proxy"))
    {
        // The proxy's JSON log: its access events, among its other events.
        Ok(TraceFormat::AccessLog)
    } else if probe.at.is_some() && probe.url.is_some() {
        Ok(TraceFormat::TraceLines)
    } else {
        Err(format!("not a trace line: {EXPECTED_FORMATS}"))
    }
}

/// Parses an RFC 3339 timestamp (`2026-11-24T10:00:00.123456Z`) as time since the UNIX epoch.
///
/// The apiserver writes audit timestamps as `metav1.MicroTime` (UTC, `Z`, six fractional digits):
/// those take a fast path that only splits the digits, leaving the calendar to `time`; any other
/// RFC 3339 form goes through `time`'s full parser.
pub(crate) fn parse_timestamp(value: &str) -> Result<Duration, String> {
    let parsed = match micro_time(value.as_bytes()) {
        Some(t) => t,
        None => time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
            .map_err(|e| format!("timestamp {value:?}: {e}"))?,
    };
    u64::try_from(parsed.unix_timestamp_nanos())
        .map(Duration::from_nanos)
        .map_err(|_| format!("timestamp {value:?} is before 1970"))
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` exactly, or `None`.
fn micro_time(b: &[u8]) -> Option<time::OffsetDateTime> {
    let shape = b"0000-00-00T00:00:00.000000Z";
    if b.len() != shape.len() {
        return None;
    }
    for (&c, &s) in b.iter().zip(shape) {
        let ok = if s == b'0' {
            c.is_ascii_digit()
        } else {
            c == s
        };
        if !ok {
            return None;
        }
    }
    let num = |range: std::ops::Range<usize>| {
        b[range]
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'))
    };
    let month = time::Month::try_from(u8::try_from(num(5..7)).ok()?).ok()?;
    let year = i32::try_from(num(0..4)).ok()?;
    let date = time::Date::from_calendar_date(year, month, u8::try_from(num(8..10)).ok()?).ok()?;
    let clock = time::Time::from_hms_micro(
        u8::try_from(num(11..13)).ok()?,
        u8::try_from(num(14..16)).ok()?,
        u8::try_from(num(17..19)).ok()?,
        num(20..26),
    )
    .ok()?;
    Some(time::PrimitiveDateTime::new(date, clock).assume_utc())
}

mod access;
mod audit;
mod lines;
#[cfg(test)]
mod tests;
