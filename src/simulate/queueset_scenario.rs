//! The queue-set differential: a scenario of arrivals run through our [`QueueSet`] on a virtual
//! clock, the same scenario's outcomes from k8s.io/apiserver's queue set (the Go driver in
//! `tests/queueset-oracle/`), a seeded generator of scenarios and a comparer
//! (`scripts/queueset-differential.sh`, DESIGN.md "Queue-set differential").
//!
//! A scenario is a queue set's configuration and its requests, each with its arrival, flow hash
//! (given directly, not derived from a flow), seats, execution time and, optionally, a context
//! deadline. Both drivers replay it in the same order within an instant:
//! 1. waiting requests whose wait limit (`time-out`) or context deadline (`cancelled`) is due
//!    leave their queue;
//! 2. final seats whose additional latency is over are released;
//! 3. executions that end now finish, by request index;
//! 4. requests that arrive now start, by request index.
//!
//! The outcome of each request: dispatched (when, in which position among all dispatches, when
//! it finished), or rejected (when, and why: `queue-full`, `time-out`, `cancelled`).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::fairqueue::queueset::{
    Arrival, EventKind, FlowMeta, QueueSet, QueueShape, QueuingConfig, Removal, RequestId, Started,
};
use crate::fairqueue::WorkEstimate;
use crate::shuffle_sharding::Dealer;

mod generate;

pub use generate::generate;

/// The largest instant or duration a scenario may give, in nanoseconds (about 11.5 days).
pub const MAX_NS: u64 = 1_000_000_000_000_000;
/// The most seats a request may ask for.
pub const MAX_SEATS: u32 = 1_000_000;
/// The most queues, and the largest limits, a configuration may give.
const MAX_CONFIG: u64 = 1 << 20;

/// A queue set's configuration and the requests that arrive at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// The queue set.
    pub config: ScenarioConfig,
    /// The requests, in any order (replayed by arrival, then index).
    pub requests: Vec<ScenarioRequest>,
}

/// A queuing priority level's queue set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioConfig {
    /// `queues` (≥ 1).
    pub queues: u32,
    /// `handSize` (1..=8, at most `queues`).
    pub hand_size: u32,
    /// `queueLengthLimit`.
    pub queue_length_limit: u32,
    /// The concurrency limit (≥ 1).
    pub concurrency_limit: u32,
    /// How long a request may wait in its queue; zero: for ever.
    pub request_wait_limit_ns: u64,
}

/// One request of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioRequest {
    /// When it arrives, from the scenario's start.
    pub arrival_ns: u64,
    /// Its flow's hash (the shuffle-sharding entropy).
    pub flow_hash: u64,
    /// Seats while executing (≥ 1).
    pub initial_seats: u32,
    /// Seats held after execution, for `additional_latency_ns`.
    pub final_seats: u32,
    /// How long the final seats are held.
    pub additional_latency_ns: u64,
    /// How long it executes once dispatched (≥ 1).
    pub execution_ns: u64,
    /// When its context ends, if it does (after its arrival): it leaves its queue `cancelled`.
    pub deadline_ns: Option<u64>,
}

/// What became of one request. Instants are nanoseconds from the scenario's start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Outcome {
    /// `dispatched` or `rejected`.
    pub outcome: String,
    /// When it was dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatched_at_ns: Option<u64>,
    /// Its position among all dispatches, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_seq: Option<u64>,
    /// When its execution ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ns: Option<u64>,
    /// Why it was rejected: `queue-full`, `time-out` or `cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_at_ns: Option<u64>,
}

/// The outcomes of a scenario's requests, in request order (the drivers' output).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcomes {
    /// One per request.
    pub requests: Vec<Outcome>,
}

/// How our queue set behaves where it chooses to differ from the apiserver's
/// (docs/apf-differences.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// As the apiserver: a request leaving its queue is not followed by a dispatch.
    Apiserver,
    /// As we ship it.
    AsShipped,
}

// === reading and writing ===

/// A scenario that cannot be read: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

fn field_error(path: &str, msg: impl fmt::Display) -> ScenarioError {
    if path.is_empty() {
        ScenarioError(msg.to_string())
    } else {
        ScenarioError(format!("{path}: {msg}"))
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn object<'a>(
    value: &'a Value,
    path: &str,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, ScenarioError> {
    let Value::Object(map) = value else {
        return Err(field_error(path, "not a JSON object"));
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    if let Some(unknown) = keys.into_iter().find(|k| !allowed.contains(&k.as_str())) {
        return Err(field_error(&join(path, unknown), "unknown field"));
    }
    Ok(map)
}

/// `map[field]`, an integer in `lo..=hi`; absent: `default`, or an error when it is `None`.
fn integer(
    map: &Map<String, Value>,
    path: &str,
    field: &str,
    lo: u64,
    hi: u64,
    default: Option<u64>,
) -> Result<u64, ScenarioError> {
    let p = join(path, field);
    let Some(value) = map.get(field) else {
        return default.ok_or_else(|| field_error(&p, "missing"));
    };
    let Value::Number(n) = value else {
        return Err(field_error(&p, "not a number"));
    };
    let Some(v) = n.as_i64() else {
        return Err(field_error(&p, "not an integer"));
    };
    match u64::try_from(v) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(field_error(&p, format!("must be between {lo} and {hi}"))),
    }
}

fn small(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn flow_hash(map: &Map<String, Value>, path: &str) -> Result<u64, ScenarioError> {
    let p = join(path, "flowHash");
    let text = match map.get("flowHash") {
        None => return Err(field_error(&p, "missing")),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(field_error(&p, "not a number or a decimal string")),
    };
    text.parse::<u64>()
        .map_err(|_| field_error(&p, "not an unsigned 64-bit integer"))
}

impl Scenario {
    /// Reads a scenario (JSON). The error names the first field that is wrong.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let top: Value = serde_json::from_str(text)
            .map_err(|_| ScenarioError("not a JSON object".to_string()))?;
        let top = object(&top, "", &["config", "requests"])?;
        let config = top
            .get("config")
            .ok_or_else(|| field_error("config", "missing"))?;
        let c = object(
            config,
            "config",
            &[
                "queues",
                "handSize",
                "queueLengthLimit",
                "concurrencyLimit",
                "requestWaitLimitNs",
            ],
        )?;
        let queues = small(integer(c, "config", "queues", 1, MAX_CONFIG, None)?);
        let hand_size = small(integer(c, "config", "handSize", 1, 8, None)?);
        let queue_length_limit = small(integer(
            c,
            "config",
            "queueLengthLimit",
            0,
            MAX_CONFIG,
            None,
        )?);
        let concurrency_limit = small(integer(
            c,
            "config",
            "concurrencyLimit",
            1,
            MAX_CONFIG,
            None,
        )?);
        if hand_size > queues {
            return Err(field_error(
                "config.handSize",
                "must not exceed config.queues",
            ));
        }
        if let Err(e) = Dealer::new(i64::from(queues), i64::from(hand_size)) {
            return Err(field_error("config.handSize", e));
        }
        let request_wait_limit_ns = integer(c, "config", "requestWaitLimitNs", 0, MAX_NS, Some(0))?;
        let list = match top.get("requests") {
            None => return Err(field_error("requests", "missing")),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(field_error("requests", "not a JSON array")),
        };
        let mut requests = Vec::with_capacity(list.len());
        for (i, value) in list.iter().enumerate() {
            let path = format!("requests[{i}]");
            let m = object(
                value,
                &path,
                &[
                    "arrivalNs",
                    "flowHash",
                    "initialSeats",
                    "finalSeats",
                    "additionalLatencyNs",
                    "executionNs",
                    "deadlineNs",
                ],
            )?;
            let seats = u64::from(MAX_SEATS);
            let arrival_ns = integer(m, &path, "arrivalNs", 0, MAX_NS, None)?;
            let flow_hash = flow_hash(m, &path)?;
            let initial_seats = small(integer(m, &path, "initialSeats", 1, seats, None)?);
            let final_seats = small(integer(m, &path, "finalSeats", 0, seats, Some(0))?);
            let additional_latency_ns =
                integer(m, &path, "additionalLatencyNs", 0, MAX_NS, Some(0))?;
            let execution_ns = integer(m, &path, "executionNs", 1, MAX_NS, None)?;
            let deadline_ns = match m.get("deadlineNs") {
                None => None,
                Some(_) => Some(integer(m, &path, "deadlineNs", 0, MAX_NS, None)?),
            };
            if deadline_ns.is_some_and(|d| d <= arrival_ns) {
                return Err(field_error(
                    &join(&path, "deadlineNs"),
                    "must be after arrivalNs",
                ));
            }
            requests.push(ScenarioRequest {
                arrival_ns,
                flow_hash,
                initial_seats,
                final_seats,
                additional_latency_ns,
                execution_ns,
                deadline_ns,
            });
        }
        Ok(Scenario {
            config: ScenarioConfig {
                queues,
                hand_size,
                queue_length_limit,
                concurrency_limit,
                request_wait_limit_ns,
            },
            requests,
        })
    }

    /// The scenario as JSON, as [`parse`](Self::parse) reads it (flow hashes as strings).
    pub fn to_json(&self) -> String {
        let c = &self.config;
        let requests: Vec<Value> = self
            .requests
            .iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("arrivalNs".into(), r.arrival_ns.into());
                m.insert("flowHash".into(), r.flow_hash.to_string().into());
                m.insert("initialSeats".into(), r.initial_seats.into());
                if r.final_seats > 0 {
                    m.insert("finalSeats".into(), r.final_seats.into());
                }
                if r.additional_latency_ns > 0 {
                    m.insert("additionalLatencyNs".into(), r.additional_latency_ns.into());
                }
                m.insert("executionNs".into(), r.execution_ns.into());
                if let Some(d) = r.deadline_ns {
                    m.insert("deadlineNs".into(), d.into());
                }
                Value::Object(m)
            })
            .collect();
        serde_json::json!({
            "config": {
                "queues": c.queues,
                "handSize": c.hand_size,
                "queueLengthLimit": c.queue_length_limit,
                "concurrencyLimit": c.concurrency_limit,
                "requestWaitLimitNs": c.request_wait_limit_ns,
            },
            "requests": requests,
        })
        .to_string()
    }
}

// === running ===

enum State {
    Pending,
    Waiting {
        id: RequestId,
        /// When its context ends before its wait limit: it is cancelled then.
        cancel_at: Option<u64>,
        /// When it leaves its queue undispatched (wait limit or context).
        leave_at: u64,
    },
    Executing {
        id: RequestId,
        finish_at: u64,
    },
    Done,
}

/// Runs `scenario` through our queue set on a virtual clock: the outcome of each request, in
/// request order. Fails only if the queue set refuses the configuration or a call.
pub fn run(scenario: &Scenario, behaviour: Behaviour) -> Result<Vec<Outcome>, String> {
    let origin = Instant::now();
    let at = |ns: u64| origin + Duration::from_nanos(ns);
    let c = &scenario.config;
    let shape = QueueShape {
        queues: c.queues,
        hand_size: c.hand_size,
        queue_length_limit: c.queue_length_limit,
    };
    let mut qs: QueueSet<()> =
        QueueSet::new(QueuingConfig::Queue(shape), c.concurrency_limit, origin)
            .map_err(|e| e.to_string())?;
    qs.log_dispatches();
    qs.dispatch_when_a_request_leaves(behaviour == Behaviour::AsShipped);
    let requests = &scenario.requests;
    let n = requests.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| requests[i].arrival_ns);
    let mut book = Book {
        states: (0..n).map(|_| State::Pending).collect(),
        outcomes: vec![Outcome::default(); n],
        ids: HashMap::new(),
        seq: 0,
    };
    let mut lingering: Vec<(u64, RequestId)> = Vec::new();
    let mut next = 0;
    let flow = FlowMeta {
        flow_schema: Arc::from("scenario"),
        flow_distinguisher: Arc::from(""),
        details: None,
        mutating: false,
    };
    loop {
        let mut t = order
            .get(next)
            .map_or(u64::MAX, |&i| requests[i].arrival_ns);
        for state in &book.states {
            match state {
                State::Waiting { leave_at, .. } => t = t.min(*leave_at),
                State::Executing { finish_at, .. } => t = t.min(*finish_at),
                State::Pending | State::Done => {}
            }
        }
        for (release_at, _) in &lingering {
            t = t.min(*release_at);
        }
        if t == u64::MAX {
            break;
        }
        let now = t;
        let instant = at(now);
        // 1. Wait limits and contexts that end now.
        let timeouts = book.states.iter().any(
            |s| matches!(s, State::Waiting { cancel_at: None, leave_at, .. } if *leave_at <= now),
        );
        if timeouts {
            qs.tick(instant);
            book.collect(&mut qs, now, requests);
        }
        for i in 0..n {
            if let State::Waiting {
                id,
                cancel_at: Some(when),
                ..
            } = book.states[i]
            {
                if when <= now {
                    qs.cancel(id, instant, Removal::Cancelled);
                    book.states[i] = State::Done;
                    book.outcomes[i] = rejected("cancelled", now);
                    book.collect(&mut qs, now, requests);
                }
            }
        }
        // 2. Final seats released.
        let mut k = 0;
        while k < lingering.len() {
            if lingering[k].0 <= now {
                let (_, id) = lingering.swap_remove(k);
                qs.release_final_seats(id, instant)
                    .map_err(|e| e.to_string())?;
                book.collect(&mut qs, now, requests);
            } else {
                k += 1;
            }
        }
        // 3. Executions that end now.
        for i in 0..n {
            if let State::Executing { id, finish_at } = book.states[i] {
                if finish_at == now {
                    book.states[i] = State::Done;
                    book.outcomes[i].finished_at_ns = Some(now);
                    let finished = qs.finish(id, instant).map_err(|e| e.to_string())?;
                    if let Some(linger) = finished.linger {
                        let ns = u64::try_from(linger.as_nanos()).unwrap_or(u64::MAX);
                        lingering.push((now.saturating_add(ns), id));
                    }
                    book.collect(&mut qs, now, requests);
                }
            }
        }
        // 4. Arrivals.
        while let Some(&i) = order.get(next) {
            let r = &requests[i];
            if r.arrival_ns != now {
                break;
            }
            next += 1;
            let wait_limit = (c.request_wait_limit_ns > 0).then(|| now + c.request_wait_limit_ns);
            let cancel_at = r.deadline_ns.filter(|&d| wait_limit.is_none_or(|w| d < w));
            let leave_at = cancel_at.or(wait_limit).unwrap_or(u64::MAX);
            let arrival = Arrival {
                estimate: WorkEstimate {
                    initial_seats: r.initial_seats,
                    final_seats: r.final_seats,
                    additional_latency: Duration::from_nanos(r.additional_latency_ns),
                },
                hash: r.flow_hash,
                deadline: wait_limit.map(at),
                flow: flow.clone(),
            };
            match qs.start_request(instant, arrival) {
                Started::Executing(id) | Started::Queued(id) => {
                    book.ids.insert(id, i);
                    book.states[i] = State::Waiting {
                        id,
                        cancel_at,
                        leave_at,
                    };
                }
                Started::Rejected(reason) => {
                    book.states[i] = State::Done;
                    book.outcomes[i] = rejected(reason.as_str(), now);
                }
            }
            book.collect(&mut qs, now, requests);
        }
    }
    if !qs.is_drained() {
        return Err("the queue set is not drained at the end".into());
    }
    Ok(book.outcomes)
}

/// What a run knows of its requests.
struct Book {
    states: Vec<State>,
    outcomes: Vec<Outcome>,
    ids: HashMap<RequestId, usize>,
    seq: u64,
}

impl Book {
    /// Takes what the queue set did during the last call, at `now`: dispatches (in order) and
    /// time-outs.
    fn collect(&mut self, qs: &mut QueueSet<()>, now: u64, requests: &[ScenarioRequest]) {
        for id in qs.drain_dispatches() {
            let Some(&i) = self.ids.get(&id) else {
                continue;
            };
            self.states[i] = State::Executing {
                id,
                finish_at: now + requests[i].execution_ns,
            };
            let o = &mut self.outcomes[i];
            o.outcome = "dispatched".into();
            o.dispatched_at_ns = Some(now);
            o.dispatch_seq = Some(self.seq);
            self.seq += 1;
        }
        for event in qs.drain_events() {
            if event.kind == EventKind::TimedOut {
                if let Some(&i) = self.ids.get(&event.id) {
                    self.states[i] = State::Done;
                    self.outcomes[i] = rejected("time-out", now);
                }
            }
        }
    }
}

fn rejected(reason: &str, now: u64) -> Outcome {
    Outcome {
        outcome: "rejected".into(),
        reason: Some(reason.into()),
        rejected_at_ns: Some(now),
        ..Outcome::default()
    }
}

// === comparing ===

/// The first difference between two runs of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The request's index.
    pub request: usize,
    /// The field that differs.
    pub field: &'static str,
    /// Ours.
    pub ours: String,
    /// Theirs.
    pub theirs: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request {} {}: ours {} theirs {}",
            self.request, self.field, self.ours, self.theirs
        )
    }
}

fn show<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "-".to_string(), T::to_string)
}

/// Where two outcomes of one request first differ.
fn differs(ours: &Outcome, theirs: &Outcome) -> Option<(&'static str, String, String)> {
    if ours.outcome != theirs.outcome {
        return Some(("outcome", ours.outcome.clone(), theirs.outcome.clone()));
    }
    let fields: [(&'static str, String, String); 5] = [
        ("reason", show(&ours.reason), show(&theirs.reason)),
        (
            "rejectedAtNs",
            show(&ours.rejected_at_ns),
            show(&theirs.rejected_at_ns),
        ),
        (
            "dispatchedAtNs",
            show(&ours.dispatched_at_ns),
            show(&theirs.dispatched_at_ns),
        ),
        (
            "dispatchSeq",
            show(&ours.dispatch_seq),
            show(&theirs.dispatch_seq),
        ),
        (
            "finishedAtNs",
            show(&ours.finished_at_ns),
            show(&theirs.finished_at_ns),
        ),
    ];
    fields.into_iter().find(|(_, a, b)| a != b)
}

/// When a request's fate was settled (dispatched or rejected), for ordering differences.
fn settled(o: &Outcome) -> u64 {
    o.dispatched_at_ns.or(o.rejected_at_ns).unwrap_or(u64::MAX)
}

/// The earliest difference between our outcomes and theirs: of the requests that differ, the
/// one settled first (in either run), then the lowest index. `None`: identical.
pub fn compare(ours: &[Outcome], theirs: &[Outcome]) -> Option<Difference> {
    if ours.len() != theirs.len() {
        return Some(Difference {
            request: ours.len().min(theirs.len()),
            field: "requests",
            ours: ours.len().to_string(),
            theirs: theirs.len().to_string(),
        });
    }
    ours.iter()
        .zip(theirs)
        .enumerate()
        .filter_map(|(i, (a, b))| {
            differs(a, b).map(|(field, ours, theirs)| {
                let when = settled(a).min(settled(b));
                (
                    (when, i),
                    Difference {
                        request: i,
                        field,
                        ours,
                        theirs,
                    },
                )
            })
        })
        .min_by_key(|(key, _)| *key)
        .map(|(_, d)| d)
}

#[cfg(test)]
mod tests;
