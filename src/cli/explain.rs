//! `kube-apf-proxy classify --method M --url URL ... --explain [--output text|json]`: why one
//! request is classified as it is ([`crate::lint::request::explain_request`]), then the verdict.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::lint::Output;
use crate::classify::ClassifyInput;
use crate::lint::request::{Offline, DEFAULT_SERVER_CONCURRENCY_LIMIT};

/// Runs the command: exit 0, or 1 when the request does not parse or the configuration is
/// invalid.
pub fn run(
    config_dir: Option<&Path>,
    input: &ClassifyInput,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let config = match super::load_config(config_dir) {
        Ok(config) => config,
        Err(super::LoadFailure::Invalid) => return Ok(ExitCode::from(1)),
        Err(super::LoadFailure::Io(e)) => return Err(e.into()),
    };
    let mut out = std::io::stdout().lock();
    match Offline::new(&config, DEFAULT_SERVER_CONCURRENCY_LIMIT)?.explain(input) {
        Ok(explained) => {
            match output {
                Output::Text => out.write_all(explained.to_text().as_bytes())?,
                Output::Json => {
                    serde_json::to_writer_pretty(&mut out, &explained)?;
                    writeln!(out)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("error: {message}");
            Ok(ExitCode::from(1))
        }
    }
}
