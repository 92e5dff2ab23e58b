//! `simulate --workload FILE`: synthetic closed-loop clients, for capacity planning without a
//! recording and for checking fairness against the apiserver's own queue-set scenarios.
//!
//! Read → parse → validate: [`parse_workload`] turns the YAML into a [`Workload`] or lists every
//! problem with its field path (`clients[1].execution: ...`). [`super::closed_loop`] runs it.

use std::time::Duration;

use serde::Deserialize;

use crate::auth::Identity;
use crate::server::parse_duration;

/// A workload file that cannot be used: every problem, each with its field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("; "))]
pub struct WorkloadError {
    /// `FIELD.PATH: message`, one per problem.
    pub problems: Vec<String>,
}

/// A validated workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Virtual time simulated; no call starts at or after it.
    pub duration: Duration,
    /// The clients, in file order (their index staggers their threads).
    pub clients: Vec<Client>,
}

/// One closed-loop client: `threads` threads that each call, wait for the reply, think and call
/// again.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    /// Its label (unique).
    pub name: String,
    /// Who it calls as: the user, its groups and `system:authenticated`.
    pub identity: Identity,
    /// The HTTP method.
    pub method: http::Method,
    /// The request target (path and query).
    pub url: String,
    /// Threads calling concurrently.
    pub threads: u32,
    /// Calls per thread (`None`: as many as fit in the duration).
    pub calls: Option<u64>,
    /// How long the upstream takes once the request is dispatched.
    pub execution: Duration,
    /// The pause between a reply and the thread's next call.
    pub think: Duration,
    /// From a negative `think` (`-1ns`): the thread's next call goes out this long *before* the
    /// reply, as soon as the call is dispatched (the apiserver's queue-set tests do this to
    /// keep a flow's queue from running empty). Zero otherwise.
    pub overlap: Duration,
    /// When its threads start.
    pub start: Duration,
    /// The initial seats, replacing the estimator's.
    pub seats: Option<u32>,
    /// Seats held after the reply, and for how long, replacing the estimator's.
    pub final_seats: Option<(u32, Duration)>,
}

impl Client {
    /// When thread `thread` of the client at `index` makes its first call: `start + (90·thread +
    /// 20·index)` ns, as the apiserver's queue-set tests stagger their threads.
    pub fn first_call(&self, index: usize, thread: u32) -> Duration {
        let stagger = 90 * u64::from(thread) + 20 * index as u64;
        self.start + Duration::from_nanos(stagger)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    duration: Option<String>,
    #[serde(default)]
    clients: Vec<RawClient>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawClient {
    name: Option<String>,
    user: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    method: Option<String>,
    url: Option<String>,
    threads: Option<u32>,
    calls: Option<u64>,
    execution: Option<String>,
    think: Option<String>,
    start: Option<String>,
    seats: Option<u32>,
    final_seats: Option<u32>,
    final_duration: Option<String>,
}

/// The URL a client calls when it names none.
pub const DEFAULT_URL: &str = "/api/v1/namespaces/default/pods";

/// Whether the file at `path` reads as a workload file (a `clients` list that parses): what
/// `simulate` says when such a file is given as a trace. Only files up to 1 MiB are read.
pub fn looks_like_a_workload(path: &std::path::Path) -> bool {
    const MOST: u64 = 1 << 20;
    let small = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MOST);
    small
        && std::fs::read_to_string(path)
            .is_ok_and(|text| text.contains("clients") && parse_workload(&text).is_ok())
}

/// Parses and validates a workload file's text.
pub fn parse_workload(text: &str) -> Result<Workload, WorkloadError> {
    let raw: RawWorkload = crate::yaml::from_str(text).map_err(|e| WorkloadError {
        problems: vec![format!("not a workload: {e}")],
    })?;
    let mut problems = Vec::new();
    let duration = match raw.duration.as_deref() {
        None => {
            problems.push("duration: required".to_string());
            Duration::ZERO
        }
        Some(d) => duration_field("duration", d, &mut problems).unwrap_or_default(),
    };
    if raw.duration.is_some() && duration.is_zero() {
        problems.push("duration: must be more than 0s".to_string());
    }
    if raw.clients.is_empty() {
        problems.push("clients: at least one client is required".to_string());
    }
    let mut clients = Vec::with_capacity(raw.clients.len());
    for (i, raw) in raw.clients.into_iter().enumerate() {
        let path = format!("clients[{i}]");
        if let Some(client) = validate_client(&path, raw, &mut problems) {
            if clients.iter().any(|c: &Client| c.name == client.name) {
                problems.push(format!("{path}.name: {:?} is used twice", client.name));
            }
            clients.push(client);
        }
    }
    if problems.is_empty() {
        Ok(Workload { duration, clients })
    } else {
        Err(WorkloadError { problems })
    }
}

fn duration_field(path: &str, text: &str, problems: &mut Vec<String>) -> Option<Duration> {
    match parse_duration(text) {
        Ok(d) => Some(d),
        Err(e) => {
            problems.push(format!("{path}: {e}"));
            None
        }
    }
}

fn validate_client(path: &str, raw: RawClient, problems: &mut Vec<String>) -> Option<Client> {
    let before = problems.len();
    let field = |name: &str| format!("{path}.{name}");
    let name = raw.name.filter(|n| !n.is_empty());
    if name.is_none() {
        problems.push(format!("{}: required", field("name")));
    }
    let user = raw.user.filter(|u| !u.is_empty());
    if user.is_none() {
        problems.push(format!("{}: required", field("user")));
    }
    let method = raw.method.as_deref().unwrap_or("GET");
    let method = match http::Method::from_bytes(method.as_bytes()) {
        Ok(m) => Some(m),
        Err(_) => {
            problems.push(format!(
                "{}: {method:?} is not an HTTP method",
                field("method")
            ));
            None
        }
    };
    let url = raw.url.unwrap_or_else(|| DEFAULT_URL.to_string());
    if !url.starts_with('/') {
        problems.push(format!("{}: {url:?} must start with /", field("url")));
    } else if let Some(m) = &method {
        if let Err(e) = crate::request_info::parse(m.as_str(), &url) {
            problems.push(format!("{}: {e}", field("url")));
        }
    }
    let threads = raw.threads.unwrap_or(1);
    if threads == 0 {
        problems.push(format!("{}: must be at least 1", field("threads")));
    }
    if raw.calls == Some(0) {
        problems.push(format!("{}: must be at least 1", field("calls")));
    }
    let mut duration = |name: &str, value: Option<String>| {
        value.and_then(|v| duration_field(&field(name), &v, problems))
    };
    let execution = duration("execution", raw.execution);
    let (think, overlap) = match raw.think.as_deref().map(|t| t.strip_prefix('-')) {
        Some(Some(before)) => (Duration::ZERO, duration("think", Some(before.to_string()))),
        _ => (duration("think", raw.think).unwrap_or_default(), None),
    };
    let overlap = overlap.unwrap_or_default();
    let start = duration("start", raw.start).unwrap_or_default();
    let final_duration = duration("finalDuration", raw.final_duration);
    if execution.is_none() && !problems.iter().any(|p| p.starts_with(&field("execution"))) {
        problems.push(format!("{}: required", field("execution")));
    }
    if raw.calls.is_none() && execution.is_some_and(|e| (e + think).is_zero()) {
        problems.push(format!(
            "{}: execution and think are both 0s: give calls, or a time",
            field("execution")
        ));
    }
    if execution.is_some_and(|e| !overlap.is_zero() && overlap >= e) {
        problems.push(format!(
            "{}: a negative think must be shorter than the execution",
            field("think")
        ));
    }
    if raw.seats == Some(0) {
        problems.push(format!("{}: must be at least 1", field("seats")));
    }
    let final_seats = match (raw.final_seats, final_duration) {
        (Some(seats), Some(d)) => Some((seats, d)),
        (None, None) => None,
        (Some(_), None) => {
            problems.push(format!(
                "{}: required with finalSeats",
                field("finalDuration")
            ));
            None
        }
        (None, Some(_)) => {
            problems.push(format!(
                "{}: required with finalDuration",
                field("finalSeats")
            ));
            None
        }
    };
    if problems.len() > before {
        return None;
    }
    Some(Client {
        name: name?,
        identity: Identity::authenticated(user?, "", raw.groups),
        method: method?,
        url,
        threads,
        calls: raw.calls,
        execution: execution?,
        think,
        overlap,
        start,
        seats: raw.seats,
        final_seats,
    })
}

#[cfg(test)]
mod tests;
