//! `kube-apf-proxy lint`: `check`'s errors, then the findings of [`crate::lint`].
//!
//! Text: one line per problem or finding on standard output (`FILE: KIND/NAME: FIELD.PATH: [CODE]
//! message`), skipped objects on standard error. JSON: one object,
//! `{"errors":[{"file","object","message"}],"findings":[{code,severity,file,kind,name,fieldPath,message}]}`.
//! Exit 0 clean, 1 when the configuration has errors, 3 when it has findings only.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use crate::config::{ConfigError, Loaded, Problem};
use crate::lint::{lint, Finding, LintOptions};

/// Exit code: the configuration loads and nothing was found.
pub const EXIT_CLEAN: u8 = 0;
/// Exit code: the configuration does not load (what `check` reports).
pub const EXIT_ERRORS: u8 = 1;
/// Exit code: the configuration loads, with findings.
pub const EXIT_WARNINGS: u8 = 3;

/// How the report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// Text for people (`lint`: one line per problem or finding; `simulate`: tables).
    #[default]
    Text,
    /// JSON for pipelines.
    Json,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    file: &'a str,
    object: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct Report<'a> {
    errors: Vec<ErrorJson<'a>>,
    findings: &'a [Finding],
}

/// Runs the command on a directory (the embedded default configuration without one).
/// An unreadable directory or file is an `Err` (exit 2 in `main`).
pub fn run(
    config_dir: Option<&Path>,
    options: &LintOptions,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let loaded = crate::config::load(config_dir);
    if let Err(e) = &loaded {
        if e.is_io() {
            return Err(anyhow::anyhow!("{e}"));
        }
    }
    let mut out = std::io::stdout().lock();
    let code = report(
        loaded,
        options,
        output,
        &mut out,
        &mut std::io::stderr().lock(),
    )?;
    Ok(ExitCode::from(code))
}

/// Writes the report of a load result and returns the exit code.
pub fn report(
    loaded: Result<Loaded, ConfigError>,
    options: &LintOptions,
    output: Output,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<u8> {
    let (problems, warnings, findings) = match &loaded {
        Ok(loaded) => (&[][..], loaded.warnings.as_slice(), lint(loaded, options)),
        Err(ConfigError::Invalid { problems, warnings }) => {
            (problems.as_slice(), warnings.as_slice(), Vec::new())
        }
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(2);
        }
    };
    // Dangling FlowSchemas are findings of their own; the loader's other warnings (skipped
    // objects) go to standard error as `check` prints them.
    let dangling: Vec<String> = findings
        .iter()
        .filter(|f| f.code == crate::lint::Code::FlowSchemaDangling)
        .map(|f| format!("{}/{}", f.kind, f.name))
        .collect();
    for w in warnings.iter().filter(|w| !dangling.contains(&w.object)) {
        writeln!(err, "warning: {w}")?;
    }
    match output {
        Output::Text => write_text(problems, &findings, out)?,
        Output::Json => {
            let report = Report {
                errors: problems.iter().map(error_json).collect(),
                findings: &findings,
            };
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
    }
    Ok(if !problems.is_empty() {
        EXIT_ERRORS
    } else if !findings.is_empty() {
        EXIT_WARNINGS
    } else {
        EXIT_CLEAN
    })
}

fn error_json(p: &Problem) -> ErrorJson<'_> {
    ErrorJson {
        file: &p.file,
        object: &p.object,
        message: &p.message,
    }
}

fn write_text(
    problems: &[Problem],
    findings: &[Finding],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for p in problems {
        writeln!(out, "{p}")?;
    }
    for f in findings {
        writeln!(out, "{f}")?;
    }
    Ok(())
}
