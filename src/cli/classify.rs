//! `kube-apf-proxy classify`: how requests would be classified, one JSON line each.
//!
//! Input is one request from flags or JSON lines ([`ClassifyInput`]); output is one JSON line per
//! request, in order: the request's attributes, its FlowSchema, priority level and flow, and —
//! when the level shuffle-shards over more than one queue — the flow hash and the hand of queues.
//! A request that cannot be read or parsed yields `{"error":"..."}` and the run goes on.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use std::collections::HashMap;

use super::{ClassifyInput, ClassifySource};
use crate::auth::Identity;
use crate::classify::{classify, Classification};
use crate::config::Config;
use crate::fairqueue::limits::compute_limits;
use crate::fairqueue::work_estimate::WorkEstimator;
use crate::request_info::{self, RequestInfo};

/// The server concurrency limit `classify` assumes: the defaults of `--max-requests-inflight`
/// (400) and `--max-mutating-requests-inflight` (200). It sets each level's `maxSeats`.
pub const DEFAULT_SERVER_CONCURRENCY_LIMIT: u32 = 600;

/// The longest input line read; a longer one yields an error line and is skipped.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One output line of a classified request. Field order is the documented one.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Classified<'a> {
    request_info: &'a RequestInfo,
    flow_schema: &'a str,
    priority_level: &'a str,
    flow_distinguisher: &'a str,
    exempt: bool,
    seats: u32,
    /// A decimal string: JSON readers lose precision on integers above 2^53.
    #[serde(skip_serializing_if = "Option::is_none")]
    flow_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hand: Option<&'a [usize]>,
}

/// How many requests a run classified and how many gave an error line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Requests classified.
    pub classified: usize,
    /// Lines answered with `{"error":...}`.
    pub failed: usize,
}

/// Runs the command: exit 0 when every request was classified, 1 when some line gave an error.
pub fn run(config_dir: Option<&Path>, source: ClassifySource) -> anyhow::Result<ExitCode> {
    let config = match super::load_config(config_dir) {
        Ok(config) => config,
        Err(super::LoadFailure::Invalid) => return Ok(ExitCode::from(2)),
        Err(super::LoadFailure::Io(e)) => return Err(e.into()),
    };
    let classifier = Classifier::new(&config, DEFAULT_SERVER_CONCURRENCY_LIMIT);
    let mut out = BufWriter::new(io::stdout().lock());
    let summary = match source {
        ClassifySource::One(input) => {
            let ok = classifier.write_one(&input, &mut out)?;
            Summary {
                classified: usize::from(ok),
                failed: usize::from(!ok),
            }
        }
        ClassifySource::Lines(path) if path == "-" => {
            // Interactive use reads one request and expects its answer at once.
            classifier.classify_lines(io::stdin().lock(), &mut out, true)?
        }
        ClassifySource::Lines(path) => {
            let file = File::open(&path).with_context(|| format!("opening {path}"))?;
            classifier.classify_lines(BufReader::new(file), &mut out, false)?
        }
    };
    out.flush()?;
    Ok(if summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Classifies requests against one configuration, with the work estimator's seats.
#[derive(Debug)]
pub struct Classifier<'a> {
    config: &'a Config,
    estimator: WorkEstimator,
    /// Each queuing level's `maxSeats` at the assumed server concurrency limit.
    max_seats: HashMap<String, Option<u32>>,
}

impl<'a> Classifier<'a> {
    /// A classifier over `config`, with limits computed at `server_cl` and an estimator that
    /// knows no object counts (so lists, watches and writes cost what the apiserver charges for
    /// unknown resources: 1 seat).
    pub fn new(config: &'a Config, server_cl: u32) -> Self {
        let levels: Vec<_> = config.priority_levels().map(|pl| pl.as_ref()).collect();
        let max_seats = levels
            .iter()
            .zip(compute_limits(server_cl, &levels))
            .map(|(pl, limits)| (pl.name.clone(), limits.max_seats))
            .collect();
        Classifier {
            config,
            estimator: WorkEstimator::default(),
            max_seats,
        }
    }

    /// Classifies JSON lines from `input`, writing one line per request to `out`. Blank lines
    /// are skipped.
    pub fn classify_lines(
        &self,
        mut input: impl BufRead,
        out: &mut impl Write,
        flush_each: bool,
    ) -> io::Result<Summary> {
        let mut summary = Summary::default();
        let mut buf = Vec::new();
        while let Some(complete) = read_bounded_line(&mut input, &mut buf)? {
            let ok = if !complete {
                write_error(out, &format!("line longer than {MAX_LINE_BYTES} bytes"))?;
                false
            } else {
                match line_to_input(&buf) {
                    Ok(None) => continue,
                    Ok(Some(request)) => self.write_one(&request, out)?,
                    Err(message) => {
                        write_error(out, &message)?;
                        false
                    }
                }
            };
            if ok {
                summary.classified += 1;
            } else {
                summary.failed += 1;
            }
            if flush_each {
                out.flush()?;
            }
        }
        Ok(summary)
    }

    /// Classifies one request and writes its line; `false` when the line is an error.
    pub fn write_one(&self, input: &ClassifyInput, out: &mut impl Write) -> io::Result<bool> {
        let target = request_target(&input.url);
        let info = match request_info::parse(&input.method, target) {
            Ok(info) => info,
            Err(err) => {
                write_error(out, &err.to_string())?;
                return Ok(false);
            }
        };
        let identity = identity_of(input);
        let classification = classify(self.config, &identity, &info);
        let hand = classification.hand();
        let query = target.split_once('?').map(|(_, q)| q);
        let line = Classified {
            request_info: &info,
            flow_schema: &classification.flow_schema.name,
            priority_level: &classification.priority_level.name,
            flow_distinguisher: &classification.flow_distinguisher,
            exempt: classification.is_exempt(),
            seats: self.seats(&info, query, &classification),
            flow_hash: hand.map(|_| classification.flow_hash.to_string()),
            hand: hand.as_ref().map(|h| h.as_slice()),
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
        Ok(true)
    }

    /// The seats the request would occupy at its widest (`max(initial, final)` seats), capped
    /// by its level's `maxSeats` as the proxy caps them.
    pub fn seats(&self, info: &RequestInfo, query: Option<&str>, class: &Classification) -> u32 {
        let max_seats = self
            .max_seats
            .get(&class.priority_level.name)
            .copied()
            .flatten();
        let now = tokio::time::Instant::now();
        self.estimator
            .estimate(info, query, max_seats, now)
            .max_seats()
    }
}

/// The path and query of `url`: an absolute `http(s)://host/...` URL is reduced to them, as the
/// server sees only the request target.
pub(crate) fn request_target(url: &str) -> &str {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return url;
    };
    rest.find(['/', '?']).map_or("/", |i| &rest[i..])
}

/// The caller of an input: anonymous without a user name (`system:anonymous` in
/// `system:unauthenticated`; given groups are ignored), else authenticated as the apiserver
/// would (adding `system:authenticated`).
pub fn identity_of(input: &ClassifyInput) -> Identity {
    match &input.user {
        None => Identity::anonymous(),
        Some(user) => Identity {
            extra: input.extra.clone(),
            ..Identity::authenticated(user.as_str(), input.uid.as_str(), input.groups.clone())
        },
    }
}

/// Decodes one input line; `None` for a blank line.
fn line_to_input(line: &[u8]) -> Result<Option<ClassifyInput>, String> {
    let line = std::str::from_utf8(line).map_err(|e| format!("line is not UTF-8: {e}"))?;
    if line.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(line)
        .map(Some)
        .map_err(|e| format!("invalid request line: {e}"))
}

fn write_error(out: &mut impl Write, message: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &serde_json::json!({ "error": message }))?;
    out.write_all(b"\n")
}

/// Reads one line into `buf` without its line ending, reading at most [`MAX_LINE_BYTES`] of it.
/// `None` at end of input; `Some(false)` when the line was longer (the rest of it is skipped).
pub(crate) fn read_bounded_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> io::Result<Option<bool>> {
    buf.clear();
    let limit = MAX_LINE_BYTES as u64 + 1;
    let mut limited = io::Read::take(&mut *input, limit);
    if limited.read_until(b'\n', buf)? == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Some(true));
    }
    if buf.len() <= MAX_LINE_BYTES {
        return Ok(Some(true));
    }
    skip_rest_of_line(input)?;
    Ok(Some(false))
}

fn skip_rest_of_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let len = available.len();
                input.consume(len);
            }
        }
    }
}

#[cfg(test)]
mod tests;
