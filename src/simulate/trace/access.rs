//! The proxy's own access log: `--log-format json -v=1`, one flattened JSON object per request with
//! target `kube_apf_proxy::access` (written by the pipeline when a response starts).
//!
//! The log knows each request's queue wait and execution: `received` is its arrival at flow
//! control (after authentication), `queue_wait_ms` its [`TraceRequest::recorded_wait`], and
//! `execution_ms` runs from the grant of its seats to its response head (older lines:
//! `duration_ms − queue_wait_ms`). As written, a request takes the wait plus the execution from its
//! arrival; the reader replays the execution alone unless told to keep the recorded waits. A
//! watch's line is written when its response head is sent, so
//! its duration is the time until it was initialised; how long it then stayed open is not logged.
//! Requests that never reached flow control (refused by authentication, bad URLs) have no FlowSchema
//! and are skipped, as the apiserver never classifies them either.

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;

use super::{parse_timestamp, LineProblem, Parsed, TraceEvent, TraceRequest};
use crate::auth::Identity;

/// The tracing target of access-log events.
pub(super) const ACCESS_TARGET: &str = "kube_apf_proxy::access";

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default, borrow)]
    target: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    received: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    uri: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    user: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    groups: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    verb: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    flow_schema: Option<Cow<'a, str>>,
    #[serde(default)]
    queue_wait_ms: Option<f64>,
    #[serde(default)]
    duration_ms: Option<f64>,
    #[serde(default)]
    execution_ms: Option<f64>,
    #[serde(default)]
    status: Option<u16>,
}

fn millis(ms: f64) -> Duration {
    Duration::try_from_secs_f64(ms.max(0.0) / 1e3).unwrap_or_default()
}

pub(super) fn parse_line(line: &[u8], number: u64) -> Result<Parsed, LineProblem> {
    let l: Line<'_> =
        serde_json::from_slice(line).map_err(|e| LineProblem::NotAccessLog(e.to_string()))?;
    if l.target.as_deref() != Some(ACCESS_TARGET) {
        // Other log events in the same stream.
        return Ok(Parsed::Ignored);
    }
    if l.flow_schema.as_deref().unwrap_or_default().is_empty() {
        return Ok(Parsed::Ignored);
    }
    let field = |v: Option<Cow<'_, str>>, name: &'static str| {
        v.map(Cow::into_owned)
            .ok_or(LineProblem::AccessWithout(name))
    };
    let arrival =
        parse_timestamp(&field(l.received, "received")?).map_err(LineProblem::Timestamp)?;
    let method: http::Method = field(l.method, "method")?
        .parse()
        .map_err(|e: http::method::InvalidMethod| LineProblem::Method(e.to_string()))?;
    let uri = field(l.uri, "uri")?;
    let user = field(l.user, "user")?;
    let groups: Vec<String> = match l.groups {
        Some(g) => serde_json::from_str(&g).map_err(|e| LineProblem::Groups(e.to_string()))?,
        None => Vec::new(),
    };
    let total = millis(l.duration_ms.ok_or(LineProblem::AccessWithoutDuration)?);
    let waited = millis(l.queue_wait_ms.unwrap_or_default());
    // `execution_ms` runs from the seats' grant; older lines only have the whole duration.
    let executed = match l.execution_ms {
        Some(ms) => millis(ms),
        None => total.saturating_sub(waited),
    };
    // As written, from the arrival at flow control: the wait, then the execution. The reader
    // takes the wait out again unless told to keep it, as it does for audit events.
    let recorded = executed + waited;
    let watch = l.verb.as_deref() == Some("watch");
    let request = TraceRequest {
        line: number,
        key: number.to_string(),
        arrival,
        duration: Some(recorded),
        first_byte: watch.then_some(recorded),
        recorded_wait: waited,
        method,
        uri,
        identity: Identity {
            user,
            groups,
            ..Identity::default()
        },
        status: l.status,
    };
    Ok(Parsed::Events(
        vec![TraceEvent::Request(request)],
        arrival + total,
    ))
}
