//! The admin listener's paths beyond the health endpoints: `/metrics` and the
//! `/debug/api_priority_and_fairness/*` dumps.
//!
//! Mirrors `apf_controller_debug.go` for the dumps: rows come from [`FlowControl::levels`] (sorted
//! by name, quiescing levels included), one row per level, per queue, per waiting or executing
//! request. The apiserver walks levels in Go map order in `dump_queues` and `dump_requests`; we
//! use name order so the output is stable.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{Response, StatusCode};
use tokio::time::Instant;

use crate::body::{full_body, ProxyBody};
use crate::classify::ClassifyInput;
use crate::coordination::Coordinator;
use crate::debug_dump::{self, PriorityLevelRow, QueueRow, RequestRow, WallClock};
use crate::fairqueue::controller::{FlowControl, LevelInfo};
use crate::fairqueue::queueset::RequestDump;
use crate::fairqueue::shadow::Shadow;
use crate::fairqueue::work_estimate::WorkEstimator;
use crate::lint::request::{explain_request, input_from_query, Explained};
use crate::metrics::Metrics;
use crate::proxy::rejections::{RecentRejections, RejectedRequest};
use crate::server::not_found;

/// Where the debug endpoints live.
pub const DEBUG_PREFIX: &str = "/debug/api_priority_and_fairness/";

/// Answers `/metrics` and the debug dumps from the live flow controller and registry.
#[derive(Debug, Clone)]
pub struct AdminPaths {
    metrics: Arc<Metrics>,
    flow_control: Arc<FlowControl>,
    /// Each shadow's flow control by its name, for `.../shadow/NAME/dump_*`.
    shadows: Vec<(&'static str, Arc<FlowControl>)>,
    rejections: Option<Arc<RecentRejections>>,
    coordinator: Option<Arc<Coordinator>>,
    clock: WallClock,
}

impl AdminPaths {
    /// Paths over `metrics` and `flow_control`; queue times are shown in wall-clock time by
    /// pairing the monotonic clock with the system clock now.
    pub fn new(metrics: Arc<Metrics>, flow_control: Arc<FlowControl>) -> AdminPaths {
        AdminPaths {
            metrics,
            flow_control,
            shadows: Vec::new(),
            rejections: None,
            coordinator: None,
            clock: WallClock::new(Instant::now(), SystemTime::now()),
        }
    }

    /// Also serves `/debug/api_priority_and_fairness/rejected?priorityLevel=NAME&limit=N`: the
    /// last rejected requests (newest first, at most 100 per level), each with its
    /// classification explained against the configuration in force.
    pub fn with_rejections(mut self, rejections: Arc<RecentRejections>) -> AdminPaths {
        self.rejections = Some(rejections);
        self
    }

    /// Also serves `/debug/api_priority_and_fairness/dump_replicas`: this replica's share and
    /// every peer's share, claim, demand and when it was last seen to change, as JSON.
    pub fn with_coordination(mut self, coordinator: Arc<Coordinator>) -> AdminPaths {
        self.coordinator = Some(coordinator);
        self
    }

    /// Also serves each shadow's dumps under `/debug/api_priority_and_fairness/shadow/NAME/`
    /// (`dry-run`, `candidate`), in the same formats.
    pub fn with_shadows(mut self, shadows: &[Arc<Shadow>]) -> AdminPaths {
        self.shadows = shadows
            .iter()
            .map(|s| (s.name(), Arc::clone(s.flow_control())))
            .collect();
        self
    }

    /// The answer for `path` (with its `query`); an unknown path gets the apiserver's 404.
    pub fn answer(&self, path: &str, query: Option<&str>) -> Response<ProxyBody> {
        if path == "/metrics" {
            return text(self.metrics.encode(), Metrics::content_type());
        }
        let Some(dump) = path.strip_prefix(DEBUG_PREFIX) else {
            return not_found();
        };
        if let Some(rest) = dump.strip_prefix("shadow/") {
            let Some((name, dump)) = rest.split_once('/') else {
                return not_found();
            };
            let Some((_, flow_control)) = self.shadows.iter().find(|(n, _)| *n == name) else {
                return not_found();
            };
            return self.dump(flow_control, dump, query);
        }
        if let ("dump_replicas", Some(coordinator)) = (dump, &self.coordinator) {
            let view = crate::coordination::dump(&coordinator.replica(), Instant::now());
            return text(format!("{view:#}\n"), "application/json");
        }
        if dump == "explain" {
            return explain(&self.flow_control, query.unwrap_or_default());
        }
        if let ("rejected", Some(rejections)) = (dump, &self.rejections) {
            return rejected(&self.flow_control, rejections, query.unwrap_or_default());
        }
        self.dump(&self.flow_control, dump, query)
    }

    fn dump(
        &self,
        flow_control: &FlowControl,
        dump: &str,
        query: Option<&str>,
    ) -> Response<ProxyBody> {
        let levels = flow_control.levels();
        let body = match dump {
            "dump_priority_levels" => debug_dump::dump_priority_levels(&level_rows(&levels)),
            "dump_queues" => debug_dump::dump_queues(&queue_rows(&levels)),
            "dump_requests" => {
                let details = debug_dump::include_request_details(query);
                debug_dump::dump_requests(&request_rows(&levels, self.clock, details), details)
            }
            _ => return not_found(),
        };
        text(body, "text/plain; charset=utf-8")
    }
}

/// `explain?url=...&user=...&group=...`: `classify --explain` for a described request against the
/// configuration in force (JSON), seats at the running server limit; 400 with the reason when the
/// query does not describe a request.
fn explain(flow_control: &FlowControl, query: &str) -> Response<ProxyBody> {
    let snapshot = flow_control.snapshot();
    let explained = input_from_query(query)
        .and_then(|input| explain_request(&snapshot, &WorkEstimator::default(), &input));
    match explained.and_then(|e| serde_json::to_string_pretty(&e).map_err(|e| e.to_string())) {
        Ok(json) => text(json, "application/json"),
        Err(message) => bad_request(message),
    }
}

/// A rejected request and why it was classified as it was.
#[derive(serde::Serialize)]
struct ExplainedRejection {
    #[serde(flatten)]
    request: RejectedRequest,
    explanation: Option<Explained>,
}

/// `rejected?priorityLevel=NAME&limit=N` (both optional; limit 20 by default, at most 100 per
/// level): the last rejected requests, newest first, each explained against the configuration
/// in force now (JSON).
fn rejected(
    flow_control: &FlowControl,
    rejections: &RecentRejections,
    query: &str,
) -> Response<ProxyBody> {
    let mut level = None;
    let mut limit = 20;
    for (key, value) in crate::request_info::query_params(query) {
        match key.as_str() {
            "priorityLevel" => level = Some(value),
            "limit" => match value.parse::<usize>() {
                Ok(n) => limit = n,
                Err(_) => return bad_request(format!("limit: not a number: {value:?}")),
            },
            _ => {
                return bad_request(format!(
                    "unknown parameter {key:?}: use priorityLevel, limit"
                ))
            }
        }
    }
    let snapshot = flow_control.snapshot();
    let estimator = WorkEstimator::default();
    let explained: Vec<ExplainedRejection> = rejections
        .recent(level.as_deref(), limit)
        .into_iter()
        .map(|request| {
            let input = ClassifyInput {
                method: request.method.clone(),
                url: request.url.clone(),
                user: Some(request.user.clone()),
                groups: request.groups.clone(),
                uid: String::new(),
                extra: Default::default(),
                impersonate: None,
            };
            let explanation = explain_request(&snapshot, &estimator, &input).ok();
            ExplainedRejection {
                request,
                explanation,
            }
        })
        .collect();
    match serde_json::to_string_pretty(&explained) {
        Ok(json) => text(json, "application/json"),
        Err(e) => bad_request(e.to_string()),
    }
}

fn bad_request(message: String) -> Response<ProxyBody> {
    let mut response = text(message, "text/plain; charset=utf-8");
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

fn text(body: String, content_type: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(full_body(Bytes::from(body)));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// `dump_priority_levels` rows, one per level.
pub fn level_rows(levels: &[LevelInfo]) -> Vec<PriorityLevelRow> {
    levels
        .iter()
        .map(|level| {
            let dump = level.queues.dump();
            let (rejected, timedout, cancelled) = dump.counters.as_reference();
            PriorityLevelRow {
                name: level.priority_level.name.clone(),
                active_queues: dump.queues.iter().filter(|q| !q.waiting.is_empty()).count(),
                is_idle: dump.waiting == 0 && dump.executing == 0,
                is_quiescing: level.quiescing,
                waiting_requests: u64::from(dump.waiting),
                executing_requests: u64::from(dump.executing),
                dispatched_requests: dump.counters.dispatched,
                rejected_requests: rejected,
                timedout_requests: timedout,
                cancelled_requests: cancelled,
            }
        })
        .collect()
}

/// `dump_queues` rows, one per queue of every level.
pub fn queue_rows(levels: &[LevelInfo]) -> Vec<QueueRow> {
    let mut rows = Vec::new();
    for level in levels {
        let dump = level.queues.dump();
        for (index, q) in dump.queues.iter().enumerate() {
            rows.push(QueueRow {
                priority_level: level.priority_level.name.clone(),
                index,
                pending_requests: q.waiting.len() as u64,
                executing_requests: u64::from(q.executing_requests),
                seats_in_use: q.seats_in_use,
                next_dispatch_r: q.next_dispatch_r.units(),
                initial_seats_sum: q.sum.initial_seats,
                max_seats_sum: q.sum.max_seats,
                total_work_sum: q.sum.total_work.units(),
            });
        }
    }
    rows
}

/// `dump_requests` rows: per level, each queue's waiting requests (by position) then its
/// executing ones (−1), then the requests executing without a queue (−1, −1).
pub fn request_rows(levels: &[LevelInfo], clock: WallClock, details: bool) -> Vec<RequestRow> {
    let mut rows = Vec::new();
    for level in levels {
        let name = &level.priority_level.name;
        let dump = level.queues.dump();
        let mut push = |queue: i64, index: i64, r: &RequestDump| {
            rows.push(request_row(name, queue, index, r, clock, details));
        };
        for (qi, q) in dump.queues.iter().enumerate() {
            let qi = i64::try_from(qi).unwrap_or(i64::MAX);
            for (ri, r) in q.waiting.iter().enumerate() {
                push(qi, i64::try_from(ri).unwrap_or(i64::MAX), r);
            }
            q.executing.iter().for_each(|r| push(qi, -1, r));
        }
        dump.queueless_executing
            .iter()
            .for_each(|r| push(-1, -1, r));
    }
    rows
}

fn request_row(
    priority_level: &str,
    queue_index: i64,
    request_index_in_queue: i64,
    r: &RequestDump,
    clock: WallClock,
    details: bool,
) -> RequestRow {
    RequestRow {
        priority_level: priority_level.to_owned(),
        flow_schema: r.flow.flow_schema.to_string(),
        queue_index,
        request_index_in_queue,
        flow_distinguisher: r.flow.flow_distinguisher.to_string(),
        arrive_time: clock.system_time(r.arrival),
        initial_seats: r.estimate.initial_seats,
        final_seats: r.estimate.final_seats,
        additional_latency: r.estimate.additional_latency,
        start_time: r.start.map(|s| clock.system_time(s)),
        details: details
            .then(|| r.flow.details.as_deref().cloned())
            .flatten(),
    }
}
