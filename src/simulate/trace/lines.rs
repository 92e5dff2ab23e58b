//! Plain trace lines: a `classify --requests` line plus `at` (seconds from any origin) and
//! `durationMs`, for synthetic workloads and tests. A watch (`?watch=true`) may give
//! `firstByteMs`, the time until it was initialised (0 without it).

use std::time::Duration;

use serde::Deserialize;

use super::{LineProblem, Parsed, TraceEvent, TraceRequest};
use crate::classify::ClassifyInput;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    at: f64,
    duration_ms: f64,
    #[serde(default)]
    first_byte_ms: Option<f64>,
    #[serde(flatten)]
    request: ClassifyInput,
}

fn seconds(value: f64, field: &'static str) -> Result<Duration, LineProblem> {
    Duration::try_from_secs_f64(value).map_err(|_| LineProblem::NotATime { field, value })
}

pub(super) fn parse_line(line: &[u8], number: u64) -> Result<Parsed, LineProblem> {
    let l: Line =
        serde_json::from_slice(line).map_err(|e| LineProblem::NotTraceLine(e.to_string()))?;
    let arrival = seconds(l.at, "at")?;
    let duration = seconds(l.duration_ms / 1e3, "durationMs")?;
    let first_byte = l
        .first_byte_ms
        .map(|ms| seconds(ms / 1e3, "firstByteMs"))
        .transpose()?;
    let method: http::Method = l
        .request
        .method
        .parse()
        .map_err(|e: http::method::InvalidMethod| LineProblem::Method(e.to_string()))?;
    let request = TraceRequest {
        line: number,
        key: number.to_string(),
        arrival,
        duration: Some(duration),
        first_byte,
        recorded_wait: Duration::ZERO,
        method,
        uri: l.request.target().to_string(),
        identity: l.request.identity(),
        status: None,
    };
    Ok(Parsed::Events(
        vec![TraceEvent::Request(request)],
        arrival + duration,
    ))
}
