//! The text of the admin listener's `/debug/api_priority_and_fairness/*` endpoints.
//!
//! Mirrors `pkg/util/flowcontrol/apf_controller_debug.go`: every row's cells are joined by `",\t"`,
//! rows end in `"\n"`, and the whole text goes through Go's `text/tabwriter` with minwidth 8,
//! tabwidth 0, padding 1, padchar `' '` and no flags ([`TabWriter::APF_DEBUG`]). The tables are
//! pure functions over plain rows, which the queue sets fill in; times are UTC RFC3339Nano and
//! durations Go's `Duration.String`.
//!
//! Differences: the apiserver lists levels in `dump_queues` and `dump_requests` in Go map order
//! (random); here they come in the order given (pass them sorted by name for stable output). The
//! apiserver prints cells raw; here their control characters are escaped (`\n`, `\t`, `\x1b`),
//! so that a path with `%0A`, a resource name or a user name cannot start a row of its own.

mod tabwriter;
mod time;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use tabwriter::TabWriter;
pub use time::{format_rfc3339_nano, format_seat_seconds, seat_seconds_from_f64, WallClock};

use crate::duration::format_duration;
use crate::request_info::RequestInfo;

/// The query parameter that adds the request-detail columns to `dump_requests`.
pub const INCLUDE_REQUEST_DETAILS: &str = "includeRequestDetails";

/// One row of `dump_priority_levels`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityLevelRow {
    /// The level's name.
    pub name: String,
    /// Queues holding at least one waiting request.
    pub active_queues: usize,
    /// Whether nothing waits or executes (`QueueSet.IsIdle`).
    pub is_idle: bool,
    /// Whether the level was removed from the configuration and is draining.
    pub is_quiescing: bool,
    /// Requests waiting in the level's queues.
    pub waiting_requests: u64,
    /// Requests executing.
    pub executing_requests: u64,
    /// Requests dispatched since the queue set was made.
    pub dispatched_requests: u64,
    /// Requests rejected since then.
    pub rejected_requests: u64,
    /// Always 0 in the apiserver (it counts time-outs as rejections); kept for the column.
    pub timedout_requests: u64,
    /// Requests whose client gave up while queued.
    pub cancelled_requests: u64,
}

/// One row of `dump_queues`: one queue of one level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueRow {
    /// The level's name.
    pub priority_level: String,
    /// The queue's index in its queue set.
    pub index: usize,
    /// Requests waiting in the queue.
    pub pending_requests: u64,
    /// Requests from this queue executing.
    pub executing_requests: u64,
    /// Seats those hold.
    pub seats_in_use: u64,
    /// The queue's next dispatch R, in 1e-8 seat-seconds (Go's `SeatSeconds`).
    pub next_dispatch_r: u64,
    /// Σ initial seats of the waiting requests.
    pub initial_seats_sum: u64,
    /// Σ max seats of the waiting requests.
    pub max_seats_sum: u64,
    /// Σ total work of the waiting requests, in 1e-8 seat-seconds.
    pub total_work_sum: u64,
}

/// One row of `dump_requests`: a waiting or executing request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRow {
    /// The level's name.
    pub priority_level: String,
    /// The flow schema that matched.
    pub flow_schema: String,
    /// The queue index; −1 for requests executing without a queue (exempt and `Reject` levels).
    pub queue_index: i64,
    /// The position among the queue's waiting requests; −1 for executing ones.
    pub request_index_in_queue: i64,
    /// The flow distinguisher.
    pub flow_distinguisher: String,
    /// When the request arrived.
    pub arrive_time: SystemTime,
    /// Seats while executing.
    pub initial_seats: u32,
    /// Seats held after execution.
    pub final_seats: u32,
    /// How long the final seats are held.
    pub additional_latency: Duration,
    /// When it started executing; `None` while waiting (Go prints the zero time).
    pub start_time: Option<SystemTime>,
    /// The detail columns, when asked for; `None` prints empty cells.
    pub details: Option<RequestDetails>,
}

/// The columns `?includeRequestDetails=…` adds: the user and the request's attributes, shared
/// with the request rather than copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestDetails {
    /// The user's name.
    pub user_name: String,
    /// The request's attributes (verb, path, namespace, name, group, version, resource,
    /// subresource are printed).
    pub request: Arc<RequestInfo>,
}

/// Whether a query string asks for request details: the first `includeRequestDetails` value is
/// non-empty (Go: `len(r.URL.Query().Get(...)) > 0`).
pub fn include_request_details(query: Option<&str>) -> bool {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(key, _)| *key == INCLUDE_REQUEST_DETAILS)
        .is_some_and(|(_, value)| !value.is_empty())
}

/// `dump_priority_levels`: a header and one row per level, sorted by name.
pub fn dump_priority_levels(rows: &[PriorityLevelRow]) -> String {
    let mut sorted: Vec<&PriorityLevelRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = row(&[
        "PriorityLevelName",
        "ActiveQueues",
        "IsIdle",
        "IsQuiescing",
        "WaitingRequests",
        "ExecutingRequests",
        "DispatchedRequests",
        "RejectedRequests",
        "TimedoutRequests",
        "CancelledRequests",
    ]);
    for pl in sorted {
        text += &row(&[
            &pl.name,
            &pl.active_queues.to_string(),
            &pl.is_idle.to_string(),
            &pl.is_quiescing.to_string(),
            &pl.waiting_requests.to_string(),
            &pl.executing_requests.to_string(),
            &pl.dispatched_requests.to_string(),
            &pl.rejected_requests.to_string(),
            &pl.timedout_requests.to_string(),
            &pl.cancelled_requests.to_string(),
        ]);
    }
    TabWriter::APF_DEBUG.format(&text)
}

/// `dump_queues`: a header and one row per queue, in the order given.
pub fn dump_queues(rows: &[QueueRow]) -> String {
    let mut text = row(&[
        "PriorityLevelName",
        "Index",
        "PendingRequests",
        "ExecutingRequests",
        "SeatsInUse",
        "NextDispatchR",
        "InitialSeatsSum",
        "MaxSeatsSum",
        "TotalWorkSum",
    ]);
    for q in rows {
        text += &row(&[
            &q.priority_level,
            &q.index.to_string(),
            &q.pending_requests.to_string(),
            &q.executing_requests.to_string(),
            &q.seats_in_use.to_string(),
            &format_seat_seconds(q.next_dispatch_r),
            &q.initial_seats_sum.to_string(),
            &q.max_seats_sum.to_string(),
            &format_seat_seconds(q.total_work_sum),
        ]);
    }
    TabWriter::APF_DEBUG.format(&text)
}

const REQUEST_HEADERS: [&str; 10] = [
    "PriorityLevelName",
    "FlowSchemaName",
    "QueueIndex",
    "RequestIndexInQueue",
    // Sic: the apiserver's header has this typo.
    "FlowDistingsher",
    "ArriveTime",
    "InitialSeats",
    "FinalSeats",
    "AdditionalLatency",
    "StartTime",
];

const DETAIL_HEADERS: [&str; 8] = [
    "UserName",
    "Verb",
    "APIPath",
    "Namespace",
    "Name",
    "APIVersion",
    "Resource",
    "SubResource",
];

/// `dump_requests`: a header and one row per request, in the order given (per level: each
/// queue's waiting requests then its executing ones, then the queue-less executing ones).
pub fn dump_requests(rows: &[RequestRow], include_details: bool) -> String {
    let mut headers: Vec<&str> = REQUEST_HEADERS.to_vec();
    if include_details {
        headers.extend(DETAIL_HEADERS);
    }
    let mut text = row(&headers);
    for r in rows {
        let mut cells = vec![
            r.priority_level.clone(),
            r.flow_schema.clone(),
            r.queue_index.to_string(),
            r.request_index_in_queue.to_string(),
            r.flow_distinguisher.clone(),
            format_rfc3339_nano(Some(r.arrive_time)),
            r.initial_seats.to_string(),
            r.final_seats.to_string(),
            format_duration(r.additional_latency),
            format_rfc3339_nano(r.start_time),
        ];
        if include_details {
            cells.extend(detail_cells(r.details.as_ref()));
        }
        let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
        text += &row(&cells);
    }
    TabWriter::APF_DEBUG.format(&text)
}

fn detail_cells(details: Option<&RequestDetails>) -> [String; 8] {
    let Some(d) = details else {
        return Default::default();
    };
    let r = &*d.request;
    // schema.GroupVersion.String(): "group/version", or just the version for the core group.
    let api_version = if r.api_group.is_empty() {
        r.api_version.to_string()
    } else {
        format!("{}/{}", r.api_group, r.api_version)
    };
    [
        d.user_name.clone(),
        r.verb.to_string(),
        r.path.clone(),
        r.namespace.to_string(),
        r.name.to_string(),
        api_version,
        r.resource.to_string(),
        r.subresource.to_string(),
    ]
}

/// One row: the cells joined by `",\t"`, ended by `"\n"`. A cell's control characters are
/// escaped ([`escape_controls`]): a path, name or user name chosen by a caller cannot start a row
/// or a column of its own.
fn row(cells: &[&str]) -> String {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            line.push_str(",\t");
        }
        escape_controls(&mut line, cell);
    }
    line.push('\n');
    line
}

/// Appends `text` to `out` with each control character (C0, DEL, C1) and line or paragraph
/// separator written as Go's `%q` writes it: `\n`, `\r`, `\t`, `\xHH` for other ASCII controls,
/// `\uHHHH` above. Everything else, backslashes included, is kept, so ordinary text reads as the
/// apiserver prints it.
fn escape_controls(out: &mut String, text: &str) {
    use std::fmt::Write as _;
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests;
