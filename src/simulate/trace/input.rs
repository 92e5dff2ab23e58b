//! A trace as a replay takes it ([`TraceInput`]): the reader's events within the `--from` /
//! `--until` window, and beside them what reading found ([`TraceRun`]): the lines skipped, by
//! kind of problem, the queue waits the trace records for the requests replayed, and when the
//! replay started on the wall clock.

use std::io::BufRead;
use std::time::Duration;

use super::{
    TraceError, TraceEvent, TraceFormat, TraceLineError, TraceReader, TraceStats, EXPECTED_FORMATS,
};

/// Which requests are replayed: those that arrived `from` after the trace's first arrival or
/// later, and `until` after it or sooner (each unbounded when `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// Replay only requests that arrived this long after the trace's first one, or later.
    pub from: Option<Duration>,
    /// ... and no later than this after it.
    pub until: Option<Duration>,
}

/// The lines of a trace that were skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkippedLines {
    /// How many.
    pub lines: u64,
    /// One entry per kind of problem ([`same_kind`](super::LineProblem::same_kind)), in the
    /// order first met.
    pub kinds: Vec<SkippedKind>,
}

/// The lines skipped for one kind of problem.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedKind {
    /// The first line that had it.
    pub example: TraceLineError,
    /// How many lines had it.
    pub lines: u64,
}

/// The requests replayed whose trace records a queue wait ([`TraceRequest::recorded_wait`](super::TraceRequest::recorded_wait)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordedWaits {
    /// How many.
    pub requests: u64,
    /// Their waits, added up.
    pub total: Duration,
}

/// What reading a trace found, once the replay has taken its events.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRun {
    /// The format, when a line was one of them.
    pub format: Option<TraceFormat>,
    /// What the reader counted.
    pub stats: TraceStats,
    /// The malformed lines, skipped (under `strict`, the one that stopped the reading).
    pub skipped: SkippedLines,
    /// When the replay's time 0 was (its first event), since the UNIX epoch, for a trace whose
    /// clock is the wall clock (audit events, access logs).
    pub wall_clock_start: Option<Duration>,
    /// Reading stopped at a malformed line (`strict`).
    pub stopped: bool,
    /// The requests the window let through to the replay.
    pub in_window: u64,
    /// From the trace's first arrival to its last (zero with one request, `None` with none).
    pub span: Option<Duration>,
    /// The recorded queue waits of the requests the window let through.
    pub recorded_waits: RecordedWaits,
    /// They were replayed as written ([`TraceOptions::keep_recorded_waits`](super::TraceOptions::keep_recorded_waits)), not taken out.
    pub waits_kept: bool,
}

/// The events of a trace, in arrival order, within a [`Window`]; malformed lines are counted
/// by kind and handed to `on_skip` as they are met (reading stops at the first under
/// `strict`). [`TraceInput::finish`] says what reading found.
pub struct TraceInput<R, F> {
    reader: TraceReader<R>,
    window: Window,
    /// The trace's first arrival: where the window is measured from.
    origin: Option<Duration>,
    /// The first event replayed, on the trace's clock.
    first: Option<Duration>,
    /// The latest arrival read, and how many requests the window let through.
    last: Option<Duration>,
    in_window: u64,
    recorded_waits: RecordedWaits,
    skipped: SkippedLines,
    strict: bool,
    stopped: bool,
    /// The input could not be read: the replay ends there.
    fatal: Option<std::io::Error>,
    done: bool,
    on_skip: F,
}

impl<R, F> std::fmt::Debug for TraceInput<R, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceInput")
            .field("reader", &self.reader)
            .field("window", &self.window)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl<R: BufRead, F: FnMut(&TraceLineError)> TraceInput<R, F> {
    /// The events of `reader` within `window`; `on_skip` sees each malformed line.
    pub fn new(reader: TraceReader<R>, window: Window, on_skip: F) -> Self {
        let strict = reader.options.strict;
        TraceInput {
            reader,
            window,
            origin: None,
            first: None,
            last: None,
            in_window: 0,
            recorded_waits: RecordedWaits::default(),
            skipped: SkippedLines::default(),
            strict,
            stopped: false,
            fatal: None,
            done: false,
            on_skip,
        }
    }

    /// What reading found, or the error that ended it.
    pub fn finish(self) -> std::io::Result<TraceRun> {
        if let Some(error) = self.fatal {
            return Err(error);
        }
        // Audit events and access logs are stamped by the wall clock: the report can read UTC.
        let format = self.reader.format();
        let wall_clock = matches!(
            format,
            Some(TraceFormat::AuditEvents | TraceFormat::AccessLog)
        );
        Ok(TraceRun {
            format,
            stats: self.reader.stats(),
            skipped: self.skipped,
            wall_clock_start: self.first.filter(|_| wall_clock),
            stopped: self.stopped,
            in_window: self.in_window,
            span: self
                .origin
                .zip(self.last)
                .map(|(origin, last)| last.saturating_sub(origin)),
            recorded_waits: self.recorded_waits,
            waits_kept: self.reader.options.keep_recorded_waits,
        })
    }

    /// The next event within the window, or `None` once the window or the trace has ended.
    fn next_in_window(&mut self) -> Option<TraceEvent> {
        loop {
            let event = self.next_event()?;
            let TraceEvent::Request(request) = &event else {
                return Some(event);
            };
            let origin = *self.origin.get_or_insert(request.arrival);
            self.last = self.last.max(Some(request.arrival));
            let offset = request.arrival.saturating_sub(origin);
            if self.window.until.is_some_and(|until| offset > until) {
                return None;
            }
            if self.window.from.is_none_or(|from| offset >= from) {
                self.in_window += 1;
                if !request.recorded_wait.is_zero() {
                    self.recorded_waits.requests += 1;
                    self.recorded_waits.total += request.recorded_wait;
                }
                return Some(event);
            }
        }
    }

    /// The next event of the trace; malformed lines are counted and skipped (or end the
    /// reading under `strict`), a read error ends it.
    fn next_event(&mut self) -> Option<TraceEvent> {
        loop {
            match self.reader.next()? {
                Ok(event) => return Some(event),
                Err(TraceError::Line(error)) => {
                    self.skipped.count(&error);
                    (self.on_skip)(&error);
                    if self.strict {
                        self.stopped = true;
                        return None;
                    }
                }
                Err(TraceError::Io(error)) => {
                    self.fatal = Some(error);
                    return None;
                }
            }
        }
    }
}

impl<R: BufRead, F: FnMut(&TraceLineError)> Iterator for TraceInput<R, F> {
    type Item = TraceEvent;

    fn next(&mut self) -> Option<TraceEvent> {
        if self.done {
            return None;
        }
        let Some(event) = self.next_in_window() else {
            self.done = true;
            return None;
        };
        let at = match &event {
            TraceEvent::Request(request) => request.arrival,
            TraceEvent::Ended { at, .. } => *at,
        };
        self.first.get_or_insert(at);
        Some(event)
    }
}

// === impl SkippedLines ===

impl SkippedLines {
    /// Counts `error` under its kind.
    fn count(&mut self, error: &TraceLineError) {
        self.lines += 1;
        match self
            .kinds
            .iter_mut()
            .find(|kind| kind.example.problem.same_kind(&error.problem))
        {
            Some(kind) => kind.lines += 1,
            None => self.kinds.push(SkippedKind {
                example: error.clone(),
                lines: 1,
            }),
        }
    }
}

// === impl TraceRun ===

impl TraceRun {
    /// No request of the trace could be replayed.
    pub fn nothing_replayed(&self) -> bool {
        self.stats.requests == 0
    }

    /// Requests were read, but `--from` is past the last of them: what to say, naming the
    /// trace's span.
    pub fn from_past_the_end(&self, window: &Window) -> Option<String> {
        let from = window.from?;
        let span = self.span?;
        (self.in_window == 0 && from > span).then(|| {
            let requests = self.stats.requests;
            let arrived = if span.is_zero() {
                format!("its {requests} requests all arrived at once")
            } else {
                format!(
                    "its {requests} requests arrived within {} of the first (give --from at \
                     most that)",
                    crate::duration::format_duration(span)
                )
            };
            format!(
                "--from {} is past the end of the trace: {arrived}",
                crate::duration::format_duration(from)
            )
        })
    }

    /// Whether a skipped line was none of the formats at all, so that the formats expected are
    /// worth saying (once).
    pub fn wants_the_formats(&self) -> bool {
        let unknown = |k: &SkippedKind| k.example.problem.to_string() != k.example.problem.brief();
        self.skipped.kinds.iter().any(unknown)
    }

    /// The recorded queue waits taken out of the requests replayed: none when they were kept.
    pub fn waits_taken_out(&self) -> RecordedWaits {
        if self.waits_kept {
            RecordedWaits::default()
        } else {
            self.recorded_waits
        }
    }

    /// What to say of recorded queue waits replayed as written, if there were any.
    pub fn waits_kept_note(&self) -> Option<String> {
        let waits = self.recorded_waits;
        (self.waits_kept && waits.requests > 0).then(|| {
            format!(
                "{} requests have a recorded queue wait ({:.1} s in all), replayed as part of \
                 their execution (--keep-recorded-waits)",
                waits.requests,
                waits.total.as_secs_f64()
            )
        })
    }

    /// What to say of audit events of the old form, if there were any.
    pub fn old_form_note(&self) -> Option<String> {
        let events = self.stats.without_duration;
        (events > 0).then(|| {
            format!(
                "{events} audit events have only the old `timestamp` (audit.k8s.io/v1beta1 \
                 before Kubernetes 1.10, no stageTimestamp): replayed as taking no time"
            )
        })
    }

    /// What to say when nothing could be replayed, zeros reading as "flow control had nothing
    /// to do": that `trace` (its path) reads as a workload file, or what was read and what was
    /// expected; after `--strict` stopped the reading (the line that stopped it was said), only
    /// the formats expected, if the line was none of them.
    pub fn why_nothing_replayed(&self, trace: &str) -> Option<String> {
        if crate::simulate::workload::looks_like_a_workload(std::path::Path::new(trace)) {
            Some(format!(
                "{trace}: no line could be replayed: this looks like a workload; use \
                 `--workload {trace}`"
            ))
        } else if !self.stopped {
            Some(self.why_nothing(trace))
        } else {
            self.wants_the_formats()
                .then(|| EXPECTED_FORMATS.to_string())
        }
    }

    /// What a run with nothing to replay says of `trace` (its name): what was read and what
    /// was expected.
    pub fn why_nothing(&self, trace: &str) -> String {
        let stats = &self.stats;
        let what = if stats.lines == 0 {
            "it is empty".to_string()
        } else {
            // The formats expected are said once, at the end, not again inside the example.
            let first = self
                .skipped
                .kinds
                .first()
                .map(|kind| {
                    let example = &kind.example;
                    format!(
                        "; first problem: line {}: {}",
                        example.line,
                        example.problem.brief()
                    )
                })
                .unwrap_or_default();
            format!(
                "{} lines read, {} malformed, {} of stages or events that are not requests{first}",
                stats.lines, self.skipped.lines, stats.ignored
            )
        };
        format!("{trace}: no line could be replayed ({what}); {EXPECTED_FORMATS}")
    }
}

#[cfg(test)]
mod tests;
