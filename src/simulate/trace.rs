//! Trace readers: the workloads `simulate` replays, detected by content.
//!
//! Three formats, one request per JSON line:
//! - Kubernetes audit events (`audit.k8s.io/v1` `Event`, as kube-apiserver writes them with
//!   `--audit-log-path`; an `EventList` line is also read);
//! - the proxy's own JSON access log (`--log-format json -v=1`, target `kube_apf_proxy::access`);
//! - plain trace lines: a `classify --requests` line plus `at` (seconds from any origin) and
//!   `durationMs`.
//!
//! A request's recorded time includes any queue wait the recording server's flow control added:
//! where the trace records that wait (the audit annotation
//! `apiserver.latency.k8s.io/apf-queue-wait`, the access log's `queue_wait_ms`), the reader takes
//! it out of the request's execution, unless [`TraceOptions::keep_recorded_waits`] (see
//! [`TraceRequest::recorded_wait`]).
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
use crate::classify::read_bounded_line;

pub use input::{RecordedWaits, SkippedKind, SkippedLines, TraceInput, TraceRun, Window};
pub use problem::LineProblem;

/// One thing that happens in a recorded workload. Requests are nearly all of them: not boxed.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
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
    /// long-running request whose end comes later as [`TraceEvent::Ended`]. The reader takes
    /// [`recorded_wait`](Self::recorded_wait) out of it unless told to keep it.
    pub duration: Option<Duration>,
    /// For a long-running request: how long from arrival until its response head was sent
    /// (audit stage `ResponseStarted`), when known; the recorded wait taken out as from
    /// `duration`.
    pub first_byte: Option<Duration>,
    /// How long the recording server's flow control held it in a queue, where the trace records
    /// it (zero where it does not): the audit annotation `apiserver.latency.k8s.io/apf-queue-wait`,
    /// which kube-apiserver writes only for requests that took over 500 ms, or the access log's
    /// `queue_wait_ms`. It is part of the time the trace records, not of the request's execution:
    /// the reader takes it out of `duration` and `first_byte` (down to zero at most), unless
    /// [`TraceOptions::keep_recorded_waits`], which replays the times as written.
    pub recorded_wait: Duration,
    /// The HTTP method (audit events give the Kubernetes verb; it is mapped back).
    pub method: http::Method,
    /// The request target: path and query, as the apiserver received it.
    pub uri: String,
    /// The user flow control classifies: the impersonated user when there is one.
    pub identity: Identity,
    /// The response status the recording server gave, when known.
    pub status: Option<u16>,
}

// === impl TraceRequest ===

impl TraceRequest {
    /// Takes [`recorded_wait`](Self::recorded_wait) out of `duration` and `first_byte`, down to
    /// zero at most (the wait is measured apart from the timestamps the times come from).
    pub fn take_out_recorded_wait(&mut self) {
        let wait = self.recorded_wait;
        for time in [&mut self.duration, &mut self.first_byte]
            .into_iter()
            .flatten()
        {
            *time = time.saturating_sub(wait);
        }
    }
}

/// How a trace is read.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// How far behind the latest timestamp seen an arrival may still turn up. The default is the
    /// request timeout plus 5 s: a request that is not long-running completes within it.
    pub reorder_window: Duration,
    /// Stop at the first malformed line instead of reporting and skipping it.
    pub strict: bool,
    /// Replay each request's recorded time as written, its recorded queue wait included, instead
    /// of taking the wait out ([`TraceRequest::recorded_wait`]).
    pub keep_recorded_waits: bool,
}

impl TraceOptions {
    /// Options for a replay at `request_timeout`: the reorder window is `reorder_window`, or
    /// without it the request timeout plus 5 s; recorded queue waits are taken out.
    pub fn new(reorder_window: Option<Duration>, request_timeout: Duration, strict: bool) -> Self {
        TraceOptions {
            reorder_window: reorder_window.unwrap_or(request_timeout + Duration::from_secs(5)),
            strict,
            keep_recorded_waits: false,
        }
    }
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct TraceLineError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub problem: LineProblem,
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
    /// At the end of the input, what `pending` still held, in order: out after `ready`.
    flushed: std::vec::IntoIter<Reverse<Pending>>,
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

    /// With a second CPU, [`TraceReader::read_ahead`]; on one, [`TraceReader::new`].
    pub fn read_ahead_on_a_second_cpu(input: R, options: TraceOptions) -> std::io::Result<Self>
    where
        R: Send + 'static,
    {
        if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
            Self::read_ahead(input, options)
        } else {
            Ok(Self::new(input, options))
        }
    }

    /// A reader over `input` whose lines are read on a thread of its own, a few hundred lines
    /// ahead of the caller, and decoded (JSON, timestamps: most of the work) there or, when the
    /// caller would otherwise wait for them, by the caller: two CPUs share the decoding. What
    /// depends on the order of events (the reorder window, which watches are open, the counts)
    /// stays with the caller, so the events, errors and counts are those of
    /// [`TraceReader::new`]. The thread stops at the end of the input, at a read error, or when
    /// the reader is dropped.
    pub fn read_ahead(input: R, options: TraceOptions) -> std::io::Result<Self>
    where
        R: Send + 'static,
    {
        Self::read_ahead_sharing(input, options, ahead::Sharing::WhenIdle)
    }

    /// [`TraceReader::read_ahead`], with the lines the caller decodes chosen by `sharing`.
    fn read_ahead_sharing(
        input: R,
        options: TraceOptions,
        sharing: ahead::Sharing,
    ) -> std::io::Result<Self>
    where
        R: Send + 'static,
    {
        let ahead = ahead::Ahead::spawn(Lines::new(input), sharing)?;
        Ok(Self::with_source(Source::Ahead(ahead), options))
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
            flushed: Vec::new().into_iter(),
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
                    self.line_error(LineProblem::TooLong);
                    continue;
                }
                Decoded::Blank => continue,
                // Before the format is known: a rotated log read from mid-line starts with a
                // fragment, which is reported and skipped like any bad line.
                Decoded::Undetected(problem) => {
                    self.line_error(problem);
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
                    for mut event in events {
                        if let (TraceEvent::Request(r), false) =
                            (&mut event, self.options.keep_recorded_waits)
                        {
                            r.take_out_recorded_wait();
                        }
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
                Err(problem) => self.line_error(problem),
            }
        }
        if self.eof {
            self.release(true);
        }
        Ok(())
    }

    fn line_error(&mut self, problem: LineProblem) {
        self.stats.malformed += 1;
        let error = TraceLineError {
            line: self.line,
            problem,
        };
        self.ready.push_back(Err(TraceError::Line(error)));
    }

    /// Moves the events the window has passed to `ready`; at the end, all of them to `flushed`.
    fn release(&mut self, all: bool) {
        if all {
            // A window's worth of events at once: sorted in one go, and handed out from where
            // they are, rather than taken off the heap one by one and moved again.
            let mut rest = std::mem::take(&mut self.pending).into_vec();
            if rest.is_empty() {
                return;
            }
            rest.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for Reverse(pending) in &rest {
                self.count_release(pending.key, &pending.event);
            }
            debug_assert!(self.flushed.len() == 0);
            self.flushed = rest.into_iter();
            return;
        }
        let window = self.options.reorder_window;
        while let Some(Reverse(head)) = self.pending.peek() {
            if head.key + window > self.watermark {
                break;
            }
            let Some(Reverse(Pending { key, event, .. })) = self.pending.pop() else {
                break;
            };
            self.count_release(key, &event);
            self.ready.push_back(Ok(*event));
        }
    }

    /// Counts an event going out, of arrival `key`.
    fn count_release(&mut self, key: Duration, event: &TraceEvent) {
        if key < self.released {
            self.stats.late += 1;
        }
        self.released = self.released.max(key);
        if matches!(event, TraceEvent::Request(_)) {
            self.stats.requests += 1;
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
        let Some(item) = self.ready.pop_front() else {
            return self
                .flushed
                .next()
                .map(|Reverse(pending)| Ok(*pending.event));
        };
        if self.options.strict && matches!(item, Err(TraceError::Line(_))) {
            // Nothing after the first malformed line under --strict.
            self.eof = true;
            self.pending.clear();
            self.ready.clear();
            self.flushed = Vec::new().into_iter();
        }
        Some(item)
    }
}

/// Where a reader's decoded lines come from.
enum Source<R> {
    /// Read and decoded on the caller's thread.
    Inline(Lines<R>),
    /// Read on the reading thread, decoded there or here (see [`ahead`]).
    Ahead(ahead::Ahead),
}

impl<R: BufRead> Source<R> {
    /// The next line, decoded; `None` at the end of the input.
    fn next_line(&mut self) -> std::io::Result<Option<Decoded>> {
        match self {
            Source::Inline(lines) => lines.next_line(),
            Source::Ahead(ahead) => ahead.next_line(),
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
    Undetected(LineProblem),
    /// An audit event line.
    Audit(Result<audit::Decoded, LineProblem>),
    /// A line of a format that needs no state.
    Stateless(TraceFormat, Result<Parsed, LineProblem>),
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
        Ok(Some(decode(
            &self.buf,
            self.line,
            complete,
            &mut self.format,
        )))
    }

    /// The next line, not decoded: appended to `text` (nothing of a line cut at the limit,
    /// which is only reported), with its number and whether it is complete; `None` at the end
    /// of the input. Only once the format is known: the lines before it decide it, in order.
    fn next_raw(&mut self, text: &mut Vec<u8>) -> std::io::Result<Option<(u64, bool)>> {
        debug_assert!(self.format.is_some());
        let Some(complete) = read_bounded_line(&mut self.input, &mut self.buf)? else {
            return Ok(None);
        };
        self.line += 1;
        if complete {
            text.extend_from_slice(&self.buf);
        }
        Ok(Some((self.line, complete)))
    }
}

/// Decodes line `number` (`complete`: not cut at the limit) in `format`; while the format is
/// not known, the first line that is one of the formats decides it.
fn decode(line: &[u8], number: u64, complete: bool, format: &mut Option<TraceFormat>) -> Decoded {
    if !complete {
        return Decoded::TooLong;
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Blank;
    }
    let format = match *format {
        Some(format) => format,
        None => match detect(line) {
            Ok(detected) => *format.insert(detected),
            Err(message) => return Decoded::Undetected(message),
        },
    };
    match format {
        TraceFormat::AuditEvents => Decoded::Audit(audit::decode(line)),
        TraceFormat::AccessLog => Decoded::Stateless(format, access::parse_line(line, number)),
        TraceFormat::TraceLines => Decoded::Stateless(format, lines::parse_line(line, number)),
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
fn detect(line: &[u8]) -> Result<TraceFormat, LineProblem> {
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
        .map_err(|e| LineProblem::NotJson(e.to_string()))?;
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
        Err(LineProblem::NoFormat)
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
mod ahead;
mod audit;
mod input;
mod lines;
mod problem;
#[cfg(test)]
mod tests;
