//! What a simulation reports, and its renderings: the model (one [`SimReport`] per
//! configuration run), the text tables and the JSON of standard output ([`write()`]), and the
//! self-contained HTML page ([`html`]).
//!
//! A run is labelled: `simulated` alone, `baseline` and `candidate` when a second configuration
//! is compared over the same input ([`labelled`]).

use std::io::{self, Write};

use serde::Serialize;

pub mod html;
mod json;
mod text;

/// How standard output reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables, and when comparing the differences per level.
    Text,
    /// One JSON object per run, or `{"baseline":..,"candidate":..}` when comparing.
    Json,
}

/// The reports of a run labelled for its renderings: `baseline` and `candidate` when
/// `comparing` two configurations, `simulated` otherwise.
pub fn labelled(reports: &[SimReport], comparing: bool) -> Vec<(&str, &SimReport)> {
    match (comparing, reports) {
        (true, [baseline, candidate]) => vec![("baseline", baseline), ("candidate", candidate)],
        _ => reports.iter().map(|r| ("simulated", r)).collect(),
    }
}

/// Writes labelled `runs` as `format` and flushes `out`.
pub fn write(runs: &[(&str, &SimReport)], format: Format, out: &mut impl Write) -> io::Result<()> {
    match format {
        Format::Json => json::write(runs, out)?,
        Format::Text => text::write(runs, out)?,
    }
    out.flush()
}

/// Rejections by reason, as the apiserver's `rejected_requests_total{reason}` counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Rejected {
    /// The queue was full.
    #[serde(rename = "queue-full")]
    pub queue_full: u64,
    /// A `Reject` level had no room.
    #[serde(rename = "concurrency-limit")]
    pub concurrency_limit: u64,
    /// The request waited its whole wait limit.
    #[serde(rename = "time-out")]
    pub time_out: u64,
}

impl Rejected {
    /// Every rejection.
    pub fn total(&self) -> u64 {
        self.queue_full + self.concurrency_limit + self.time_out
    }
}

/// Queue-wait percentiles of dispatched requests, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WaitSeconds {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Longest.
    pub max: f64,
}

/// A flow (FlowSchema and distinguisher) and how many of its requests were rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowRejections {
    /// The FlowSchema.
    pub flow_schema: String,
    /// The flow distinguisher (`""` when the level has one queue or the schema no method).
    pub flow_distinguisher: String,
    /// Its rejected requests.
    pub rejected: u64,
}

/// A flow (FlowSchema and distinguisher) and the longest queue wait of its requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowWait {
    /// The FlowSchema.
    pub flow_schema: String,
    /// The flow distinguisher (`""` when the level has one queue or the schema no method).
    pub flow_distinguisher: String,
    /// Its longest queue wait, in seconds.
    pub wait_seconds: f64,
}

/// One sample of a priority level over time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Seconds since the trace's first arrival.
    pub t: f64,
    /// Seats held at the sample.
    pub seats_in_use: u64,
    /// Most seats held at once since the previous sample (its interval's peak, which the
    /// sample's own instant may miss).
    pub max_seats_in_use: u64,
    /// The concurrency limit in force (nominal ± borrowing).
    pub concurrency_limit: u32,
    /// The nominal concurrency limit.
    pub nominal_limit: u32,
    /// Requests waiting in queues.
    pub waiting: u32,
    /// Requests dispatched since the previous sample.
    pub dispatched: u64,
    /// Requests rejected since the previous sample.
    pub rejected: u64,
    /// Queue-wait p50 of the requests dispatched since the previous sample, in seconds.
    pub wait_p50: f64,
    /// Queue-wait p99 of the same.
    pub wait_p99: f64,
}

/// The totals of one priority level.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LevelReport {
    /// The level.
    pub name: String,
    /// Whether it is exempt (never queued).
    pub exempt: bool,
    /// Its nominal concurrency limit at the simulated server limit.
    pub nominal_limit: u32,
    /// Requests classified to it.
    pub arrivals: u64,
    /// Requests that got seats.
    pub dispatched: u64,
    /// Requests refused.
    pub rejected: Rejected,
    /// Queue waits of dispatched requests.
    pub wait_seconds: WaitSeconds,
    /// Most seats held at once, as sampled (with a timeline) and at each dispatch.
    pub max_seats_in_use: u64,
    /// The flows rejected most, most first.
    pub top_flows: Vec<FlowRejections>,
    /// The flows that waited longest in a queue, longest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub longest_waits: Vec<FlowWait>,
    /// The level over time (only when a timeline was asked for).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Sample>,
}

/// The totals of one FlowSchema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaReport {
    /// The FlowSchema.
    pub name: String,
    /// Its priority level.
    pub priority_level: String,
    /// Requests it matched.
    pub arrivals: u64,
    /// Of those, dispatched.
    pub dispatched: u64,
    /// Of those, refused.
    pub rejected: Rejected,
}

/// One kind of problem that made trace lines unusable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkipReason {
    /// The problem, as the first line that had it was reported (`line 1: not a JSON object ...`).
    pub example: String,
    /// How many lines had this kind of problem.
    pub lines: u64,
}

/// The queue waits a trace recorded ([`TraceRequest::recorded_wait`]) that the replay took out of
/// the requests' executions.
///
/// [`TraceRequest::recorded_wait`]: crate::simulate::trace::TraceRequest::recorded_wait
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WaitsTakenOut {
    /// Requests replayed with their recorded wait taken out.
    pub requests: u64,
    /// Those waits added up, in seconds.
    pub seconds: f64,
}

/// What flow control would have done with a workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimReport {
    /// Requests replayed (classified, bypassing or not).
    pub requests: u64,
    /// Trace lines skipped as malformed.
    pub skipped: u64,
    /// Why they were skipped, one entry per kind of problem.
    pub skip_reasons: Vec<SkipReason>,
    /// The recorded queue waits taken out of the requests replayed (none under
    /// `--keep-recorded-waits`, and for a workload).
    pub recorded_waits_taken_out: WaitsTakenOut,
    /// Long-running requests other than watches: they bypass flow control.
    pub bypassed: u64,
    /// Requests that arrived before one already replayed (they are replayed at once).
    pub late: u64,
    /// Seconds of trace time replayed, from the first arrival to the last completion.
    pub duration_seconds: f64,
    /// The server concurrency limit simulated.
    pub server_concurrency_limit: u32,
    /// Per priority level, by name.
    pub priority_levels: Vec<LevelReport>,
    /// Per FlowSchema, by name.
    pub flow_schemas: Vec<SchemaReport>,
    /// Per workload client, in file order (a workload only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientReport>,
    /// Where the simulation is less exact than it looks (e.g. sub-millisecond times).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// When the replay's time 0 was, in seconds since the UNIX epoch, when the trace's clock is
    /// the wall clock (audit events, access logs): the HTML report's axes read UTC then.
    #[serde(skip)]
    pub start_unix_seconds: Option<f64>,
}

/// What one workload client got.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientReport {
    /// The client's label.
    pub name: String,
    /// The level its requests were classified to.
    pub priority_level: String,
    /// The FlowSchema they matched.
    pub flow_schema: String,
    /// Calls its threads made.
    pub calls: u64,
    /// Of those, dispatched (or bypassing flow control).
    pub dispatched: u64,
    /// Of those, refused.
    pub rejected: u64,
    /// Seat-seconds of execution (initial seats × execution time, within the duration) divided
    /// by the duration: the seats it held on average.
    pub average_seats: f64,
    /// Queue waits of its dispatched calls.
    pub wait_seconds: WaitSeconds,
}

/// The same-named rows of two runs (`baseline`, `candidate`), by name, each side `None` where
/// that run has no such row: what a comparison's difference rows are made of.
pub fn paired<'a, T>(
    baseline: &'a [T],
    candidate: &'a [T],
    name: impl Fn(&T) -> &str,
) -> Vec<(&'a str, Option<&'a T>, Option<&'a T>)> {
    let mut names: Vec<&'a str> = baseline.iter().chain(candidate).map(&name).collect();
    names.sort_unstable();
    names.dedup();
    let find = |rows: &'a [T], n: &str| rows.iter().find(|row| name(row) == n);
    names
        .into_iter()
        .map(|n| (n, find(baseline, n), find(candidate, n)))
        .collect()
}

#[cfg(test)]
mod tests;
