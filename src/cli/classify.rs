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

use super::ClassifySource;
use crate::classify::{read_bounded_line, ClassifyInput, MAX_LINE_BYTES};
use crate::lint::request::{Offline, DEFAULT_SERVER_CONCURRENCY_LIMIT};
use crate::request_info::RequestInfo;

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
        Err(super::LoadFailure::Invalid) => return Ok(ExitCode::from(1)),
        Err(super::LoadFailure::Io(e)) => return Err(e.into()),
    };
    let classifier = Classifier(Offline::new(&config, DEFAULT_SERVER_CONCURRENCY_LIMIT)?);
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
            let file =
                File::open(&path).with_context(|| format!("--requests {path}: cannot read"))?;
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
pub struct Classifier(pub Offline);

impl Classifier {
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
        let judged = match self.0.judge(input) {
            Ok(judged) => judged,
            Err(message) => {
                write_error(out, &message)?;
                return Ok(false);
            }
        };
        let classification = &judged.classification;
        let hand = classification.hand();
        let line = Classified {
            request_info: &judged.info,
            flow_schema: &classification.flow_schema.name,
            priority_level: &classification.priority_level.name,
            flow_distinguisher: &classification.flow_distinguisher,
            exempt: classification.is_exempt(),
            seats: judged.seats,
            flow_hash: hand.map(|_| classification.flow_hash.to_string()),
            hand: hand.as_ref().map(|h| h.as_slice()),
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
        Ok(true)
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

#[cfg(test)]
mod tests;
