//! `kube-apf-proxy simulate`: replay a recorded workload through flow control in virtual time
//! ([`crate::simulate`]) and report what it would have done — a text table, one JSON object,
//! and optionally a self-contained HTML page with charts.
//! Malformed trace lines are reported on standard error and skipped; exit codes are every
//! command's (`kube-apf-proxy --help`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::config::Config;
use crate::fairqueue::work_estimate::ObjectStats;
use crate::simulate::report::html::{ReportSource, TIMELINE_INTERVAL};
use crate::simulate::report::{self, Format, SimReport};
use crate::simulate::trace::{
    TraceInput, TraceLineError, TraceOptions, TraceReader, Window, EXPECTED_FORMATS,
};
use crate::simulate::workload::parse_workload;
use crate::simulate::{object_counts, replay_trace, simulate_workload, ReplayError, SimOptions};

use super::lint::Output;

/// The most malformed lines reported one by one on standard error; the rest are only counted.
const REPORTED_LINE_ERRORS: u64 = 20;

/// What `simulate` was asked to do.
#[derive(Debug, Clone)]
pub struct SimulateArgs {
    /// The configuration (the embedded default without it).
    pub config_dir: Option<PathBuf>,
    /// The trace file (`-` for standard input), or a workload file.
    pub input: SimInput,
    /// A second configuration replayed over the same trace.
    pub compare_config_dir: Option<PathBuf>,
    /// Server limits, timeout, object counts.
    pub options: SimOptions,
    /// Replay only requests that arrived this long after the trace's first one, or later.
    pub from: Option<Duration>,
    /// ... and no later than this after it.
    pub until: Option<Duration>,
    /// How far out of order a trace's arrivals may be (`None`: the request timeout + 5 s).
    pub reorder_window: Option<Duration>,
    /// Stop at the first malformed line.
    pub strict: bool,
    /// Replay recorded times as written, recorded queue waits included.
    pub keep_recorded_waits: bool,
    /// Text or JSON on standard output.
    pub output: Output,
    /// Also write the HTML report here.
    pub report: Option<PathBuf>,
}

/// What `simulate` runs.
#[derive(Debug, Clone)]
pub enum SimInput {
    /// A recorded trace: a file, or `-` for standard input.
    Trace(String),
    /// A workload file of synthetic closed-loop clients.
    Workload(PathBuf),
}

/// Runs the command.
pub fn run(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    let baseline = super::load_config_named(args.config_dir.as_deref(), "--config-dir")?;
    let candidate = args
        .compare_config_dir
        .as_deref()
        .map(|dir| super::load_config_named(Some(dir), "--compare-config-dir"))
        .transpose()?;
    // Both directories' problems are printed before giving up.
    let (Some(baseline), Some(candidate)) =
        (baseline, candidate.map_or(Some(None), |c| c.map(Some)))
    else {
        return Ok(ExitCode::from(1));
    };
    let mut configs = vec![&baseline];
    configs.extend(candidate.as_ref());
    let mut options = args.options.clone();
    if args.report.is_some() {
        options.timeline_interval = Some(TIMELINE_INTERVAL);
    }
    let trace = match &args.input {
        SimInput::Trace(trace) => trace,
        SimInput::Workload(path) => return run_workload(args, path, &configs, &options),
    };
    let input: Box<dyn BufRead + Send> = if trace == "-" {
        Box::new(BufReader::with_capacity(1 << 16, io::stdin()))
    } else {
        let file = File::open(trace).with_context(|| format!("--trace {trace}: cannot read"))?;
        Box::new(BufReader::with_capacity(1 << 16, file))
    };
    let trace_options = TraceOptions {
        keep_recorded_waits: args.keep_recorded_waits,
        ..TraceOptions::new(
            args.reorder_window,
            args.options.request_timeout,
            args.strict,
        )
    };
    let reader = TraceReader::read_ahead_on_a_second_cpu(input, trace_options)
        .context("simulate: cannot start the thread that reads the trace")?;
    let window = Window {
        from: args.from,
        until: args.until,
    };
    let mut reported = 0;
    // Each line's problem without the formats expected: those are said once, at the end.
    let on_skip = |error: &TraceLineError| {
        reported += 1;
        if reported <= REPORTED_LINE_ERRORS || args.strict {
            eprintln!("simulate: line {}: {}", error.line, error.problem.brief());
        }
    };
    let input = TraceInput::new(reader, window, on_skip);
    let replayed = match replay_trace(input, &configs, &options) {
        Ok(replayed) => replayed,
        Err(ReplayError::Sim(error)) => return Err(error.into()),
        Err(ReplayError::Read(error)) => return Err(error).context(format!("--trace {trace}")),
    };
    let run = &replayed.trace;
    if run.nothing_replayed() {
        if let Some(why) = run.why_nothing_replayed(trace) {
            eprintln!("simulate: {why}");
        }
        return Ok(ExitCode::from(1));
    }
    if let Some(past) = run.from_past_the_end(&window) {
        eprintln!("simulate: {past}");
        return Ok(ExitCode::from(1));
    }
    let skipped = run.skipped.lines;
    if skipped > REPORTED_LINE_ERRORS {
        eprintln!("simulate: {skipped} malformed lines skipped in all");
    }
    if run.wants_the_formats() {
        eprintln!("simulate: {EXPECTED_FORMATS}");
    }
    for note in [run.old_form_note(), run.waits_kept_note()]
        .into_iter()
        .flatten()
    {
        eprintln!("simulate: {note}");
    }
    write_all(args, &replayed.reports, ReportSource::Trace(trace))?;
    // Exit 1 when --strict stopped the replay at a malformed line.
    Ok(ExitCode::from(u8::from(run.stopped)))
}

/// Runs a workload file's clients through each configuration.
fn run_workload(
    args: &SimulateArgs,
    path: &Path,
    configs: &[&Config],
    options: &SimOptions,
) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--workload {}: cannot read", path.display()))?;
    let workload = match parse_workload(&text) {
        Ok(workload) => workload,
        Err(e) => {
            // Read, and wrong: each problem, exit 1 (as an invalid configuration).
            for problem in &e.problems {
                eprintln!("{}: {problem}", path.display());
            }
            return Ok(ExitCode::from(1));
        }
    };
    let reports = simulate_workload(&workload, configs, options)?;
    let name = path.display().to_string();
    write_all(args, &reports, ReportSource::Workload(&name)).map(|()| ExitCode::SUCCESS)
}

/// Standard output, then the HTML report if asked for.
fn write_all(
    args: &SimulateArgs,
    reports: &[SimReport],
    source: ReportSource<'_>,
) -> anyhow::Result<()> {
    let runs = report::labelled(reports, args.compare_config_dir.is_some());
    let format = match args.output {
        Output::Text => Format::Text,
        Output::Json => Format::Json,
    };
    report::write(&runs, format, &mut BufWriter::new(io::stdout().lock()))?;
    if let Some(path) = &args.report {
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        report::html::write_report(&runs, source, &mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// Reads `--object-counts` (the format: [`object_counts::parse`]).
pub fn read_object_counts(path: &Path) -> anyhow::Result<Vec<(String, ObjectStats)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--object-counts {}: cannot read", path.display()))?;
    object_counts::parse(&text).with_context(|| {
        format!(
            "{}: expected a map from resource to object count, e.g. `pods: 5000` or \
             `pods: {{count: 5000, averageObjectSizeBytes: 4000}}`",
            path.display()
        )
    })
}
