//! `kube-apf-proxy simulate`: replay a recorded workload through flow control in virtual time
//! ([`crate::simulate`]) and report what it would have done — a text table, one JSON object,
//! and optionally a self-contained HTML page with charts.
//!
//! Exit 0 when the replay ran (malformed trace lines are reported on standard error and skipped),
//! 1 when a configuration or the workload file is invalid, `--strict` met a malformed line or no
//! line of the trace could be replayed, 2 when a file or directory cannot be read.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::config::Config;
use crate::simulate::html::ReportSource;
use crate::simulate::record::{paired, LevelReport, SimReport, SkipReason};
use crate::simulate::trace::{
    TraceError, TraceEvent, TraceFormat, TraceLineError, TraceOptions, TraceReader, TraceStats,
    EXPECTED_FORMATS,
};
use crate::simulate::workload::parse_workload;
use crate::simulate::{simulate, simulate_workload, SimOptions};

use super::lint::Output;

/// How often each level is sampled for the HTML report's charts.
const TIMELINE_INTERVAL: Duration = Duration::from_secs(1);

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
    let baseline = load(args.config_dir.as_deref(), "--config-dir")?;
    let candidate = args
        .compare_config_dir
        .as_deref()
        .map(|dir| load(Some(dir), "--compare-config-dir"))
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
        reorder_window: args
            .reorder_window
            .unwrap_or(args.options.request_timeout + Duration::from_secs(5)),
        strict: args.strict,
    };
    // With a second CPU, lines are read on a thread of their own and their decoding (most of the
    // reading's work) shared with the thread `simulate` feeds the replay from: the same events,
    // errors and counts.
    let mut reader = if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        TraceReader::read_ahead(input, trace_options)
            .context("simulate: cannot start the thread that reads the trace")?
    } else {
        TraceReader::new(input, trace_options)
    };
    let mut errors = LineErrors::default();
    // The replay's time 0: the first event replayed, on the trace's clock.
    let mut first: Option<Duration> = None;
    let events = Window::new(
        std::iter::from_fn(|| next_event(&mut reader, args.strict, &mut errors)),
        args.from,
        args.until,
    )
    .inspect(|event| {
        let at = match event {
            TraceEvent::Request(request) => request.arrival,
            TraceEvent::Ended { at, .. } => *at,
        };
        first.get_or_insert(at);
    });
    let mut reports = simulate(events, &configs, &options)?;
    // Audit events and access logs are stamped by the wall clock: the report can read UTC.
    let wall_clock = matches!(
        reader.format(),
        Some(TraceFormat::AuditEvents | TraceFormat::AccessLog)
    );
    for report in &mut reports {
        report.start_unix_seconds = first.filter(|_| wall_clock).map(|d| d.as_secs_f64());
    }
    if let Some(error) = errors.fatal.take() {
        return Err(error).context(format!("--trace {trace}"));
    }
    let stats = reader.stats();
    if stats.requests == 0 {
        // Zeros would read as "flow control had nothing to do"; the truth is that nothing
        // in the trace could be replayed (with --strict, the line that stopped it was said).
        if !errors.strict_stop {
            eprintln!("simulate: {}", no_usable_line(trace, &stats, &errors));
        }
        return Ok(ExitCode::from(1));
    }
    let skipped = errors.count;
    for report in &mut reports {
        report.skipped = skipped;
        report.skip_reasons = errors.reasons.clone();
    }
    if skipped > REPORTED_LINE_ERRORS {
        eprintln!("simulate: {skipped} malformed lines skipped in all");
    }
    if stats.without_duration > 0 {
        eprintln!(
            "simulate: {} audit events have only the old `timestamp` (audit.k8s.io/v1beta1 \
             before Kubernetes 1.10, no stageTimestamp): replayed as taking no time",
            stats.without_duration
        );
    }
    write_all(args, &reports, ReportSource::Trace(trace))?;
    if errors.strict_stop {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
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
    let labels = label_runs(args, reports);
    write_output(
        &labels,
        args.output,
        &mut BufWriter::new(io::stdout().lock()),
    )?;
    if let Some(path) = &args.report {
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        crate::simulate::html::write_report(&labels, source, &mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// The configuration `flag` names (the embedded default without a directory). Warnings are
/// printed on standard error as `check` prints them; an invalid configuration prints each
/// problem, then `FLAG DIR: N problem(s)`, and is `None` (exit 1). An unreadable directory or
/// file is an error naming `flag` once.
fn load(dir: Option<&Path>, flag: &str) -> anyhow::Result<Option<Config>> {
    use crate::config::ConfigError;
    let shown = dir.map_or_else(|| "(embedded)".to_owned(), |d| d.display().to_string());
    match crate::config::load(dir) {
        Ok(loaded) => {
            super::print_warnings(&loaded.warnings);
            Ok(Some(loaded.config))
        }
        Err(ConfigError::Invalid { problems, warnings }) => {
            super::print_warnings(&warnings);
            problems.iter().for_each(|p| eprintln!("{p}"));
            eprintln!("{flag} {shown}: {} problem(s)", problems.len());
            Ok(None)
        }
        Err(ConfigError::ReadDir { source, .. }) => Err(anyhow::anyhow!(
            "{flag} {shown}: cannot read the directory: {source}"
        )),
        Err(e) => Err(anyhow::anyhow!("{flag} {shown}: {e}")),
    }
}

fn label_runs<'a>(args: &SimulateArgs, reports: &'a [SimReport]) -> Vec<(&'a str, &'a SimReport)> {
    match (args.compare_config_dir.is_some(), reports) {
        (true, [baseline, candidate]) => vec![("baseline", baseline), ("candidate", candidate)],
        _ => reports.iter().map(|r| ("simulated", r)).collect(),
    }
}

#[derive(Debug, Default)]
struct LineErrors {
    count: u64,
    strict_stop: bool,
    fatal: Option<io::Error>,
    /// One entry per kind of problem, the first line that had it as the example.
    reasons: Vec<SkipReason>,
}

impl LineErrors {
    /// Counts `error` under its kind: the message up to its first `:` or `(`.
    fn record(&mut self, error: &TraceLineError) {
        let kind = |message: &str| {
            message
                .split([':', '('])
                .next()
                .unwrap_or(message)
                .trim()
                .to_string()
        };
        let this = kind(&error.message);
        let example = error.to_string();
        match self
            .reasons
            .iter_mut()
            .find(|r| kind(r.example.split_once(": ").map_or("", |(_, m)| m)) == this)
        {
            Some(reason) => reason.lines += 1,
            None => self.reasons.push(SkipReason { example, lines: 1 }),
        }
    }
}

/// The one line a run with nothing to replay ends with: what was read and what was expected.
fn no_usable_line(trace: &str, stats: &TraceStats, errors: &LineErrors) -> String {
    let what = if stats.lines == 0 {
        "it is empty".to_string()
    } else {
        let first = errors
            .reasons
            .first()
            .map(|r| {
                // Said once, at the end of the message, not again inside the example.
                let example = r.example.trim_end_matches(EXPECTED_FORMATS);
                let example = example.trim_end_matches([';', ':', ' ']);
                format!("; first problem: {example}")
            })
            .unwrap_or_default();
        format!(
            "{} lines read, {} malformed, {} of stages or events that are not requests{first}",
            stats.lines, errors.count, stats.ignored
        )
    };
    format!("{trace}: no line could be replayed ({what}); {EXPECTED_FORMATS}")
}

/// The next event of the trace; malformed lines are reported and skipped (or end the replay
/// under `--strict`), a read error ends it and is kept for the caller.
fn next_event<R: BufRead>(
    reader: &mut TraceReader<R>,
    strict: bool,
    errors: &mut LineErrors,
) -> Option<TraceEvent> {
    loop {
        match reader.next()? {
            Ok(event) => return Some(event),
            Err(TraceError::Line(error)) => {
                errors.count += 1;
                errors.record(&error);
                if errors.count <= REPORTED_LINE_ERRORS || strict {
                    eprintln!("simulate: {error}");
                }
                if strict {
                    errors.strict_stop = true;
                    return None;
                }
            }
            Err(TraceError::Io(error)) => {
                errors.fatal = Some(error);
                return None;
            }
        }
    }
}

/// Keeps the requests that arrived within `[from, until]` of the trace's first arrival.
struct Window<I> {
    inner: I,
    from: Option<Duration>,
    until: Option<Duration>,
    first: Option<Duration>,
}

impl<I> Window<I> {
    fn new(inner: I, from: Option<Duration>, until: Option<Duration>) -> Self {
        Window {
            inner,
            from,
            until,
            first: None,
        }
    }
}

impl<I: Iterator<Item = TraceEvent>> Iterator for Window<I> {
    type Item = TraceEvent;

    fn next(&mut self) -> Option<TraceEvent> {
        loop {
            let event = self.inner.next()?;
            let TraceEvent::Request(request) = &event else {
                return Some(event);
            };
            let first = *self.first.get_or_insert(request.arrival);
            let offset = request.arrival.saturating_sub(first);
            if self.until.is_some_and(|until| offset > until) {
                return None;
            }
            if self.from.is_none_or(|from| offset >= from) {
                return Some(event);
            }
        }
    }
}

#[derive(Serialize)]
struct Comparison<'a> {
    baseline: &'a SimReport,
    candidate: &'a SimReport,
}

/// Writes the reports: one JSON object (`{"baseline":..,"candidate":..}` when comparing) or the
/// text tables.
pub fn write_output(
    runs: &[(&str, &SimReport)],
    output: Output,
    out: &mut impl Write,
) -> io::Result<()> {
    match (output, runs) {
        (Output::Json, [(_, baseline), (_, candidate)]) => {
            serde_json::to_writer(
                &mut *out,
                &Comparison {
                    baseline,
                    candidate,
                },
            )?;
            writeln!(out)?;
        }
        (Output::Json, runs) => {
            for (_, report) in runs {
                serde_json::to_writer(&mut *out, report)?;
                writeln!(out)?;
            }
        }
        (Output::Text, runs) => {
            for (label, report) in runs {
                if runs.len() > 1 {
                    writeln!(out, "== {label}")?;
                }
                write_text(report, out)?;
            }
            if let [(_, baseline), (_, candidate)] = runs {
                write_differences(baseline, candidate, out)?;
            }
        }
    }
    out.flush()
}

fn write_text(report: &SimReport, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{} requests over {:.1} s ({} bypassing flow control, {} arrived late, {} lines skipped); \
         server concurrency limit {}",
        report.requests,
        report.duration_seconds,
        report.bypassed,
        report.late,
        report.skipped,
        report.server_concurrency_limit
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<28} {:>5} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}",
        "PRIORITY LEVEL",
        "SEATS",
        "ARRIVALS",
        "DISPATCHED",
        "QUEUE-FULL",
        "CONC-LIMIT",
        "TIME-OUT",
        "WAIT-P50",
        "WAIT-P90",
        "WAIT-P99",
        "WAIT-MAX",
        "PEAK"
    )?;
    for level in &report.priority_levels {
        let seats = if level.exempt {
            "-".to_string()
        } else {
            level.nominal_limit.to_string()
        };
        writeln!(
            out,
            "{:<28} {:>5} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}",
            level.name,
            seats,
            level.arrivals,
            level.dispatched,
            level.rejected.queue_full,
            level.rejected.concurrency_limit,
            level.rejected.time_out,
            secs(level.wait_seconds.p50),
            secs(level.wait_seconds.p90),
            secs(level.wait_seconds.p99),
            secs(level.wait_seconds.max),
            level.max_seats_in_use
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<40} {:<28} {:>9} {:>10} {:>9}",
        "FLOW SCHEMA", "PRIORITY LEVEL", "ARRIVALS", "DISPATCHED", "REJECTED"
    )?;
    for schema in &report.flow_schemas {
        writeln!(
            out,
            "{:<40} {:<28} {:>9} {:>10} {:>9}",
            schema.name,
            schema.priority_level,
            schema.arrivals,
            schema.dispatched,
            schema.rejected.total()
        )?;
    }
    write_clients(report, out)?;
    let rejected: Vec<&LevelReport> = report
        .priority_levels
        .iter()
        .filter(|l| !l.top_flows.is_empty())
        .collect();
    if !rejected.is_empty() {
        writeln!(out)?;
        writeln!(out, "Flows rejected most:")?;
        for level in rejected {
            for flow in &level.top_flows {
                let distinguisher = if flow.flow_distinguisher.is_empty() {
                    String::new()
                } else {
                    format!(" / {}", flow.flow_distinguisher)
                };
                writeln!(
                    out,
                    "  {}: {}{}: {}",
                    level.name, flow.flow_schema, distinguisher, flow.rejected
                )?;
            }
        }
    }
    writeln!(out)
}

/// The per-client table of a workload, then its notes.
fn write_clients(report: &SimReport, out: &mut impl Write) -> io::Result<()> {
    if report.clients.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<20} {:<28} {:<28} {:>7} {:>10} {:>8} {:>9} {:>8} {:>8} {:>8}",
        "CLIENT",
        "PRIORITY LEVEL",
        "FLOW SCHEMA",
        "CALLS",
        "DISPATCHED",
        "REJECTED",
        "AVG-SEATS",
        "WAIT-P50",
        "WAIT-P99",
        "WAIT-MAX"
    )?;
    for c in &report.clients {
        writeln!(
            out,
            "{:<20} {:<28} {:<28} {:>7} {:>10} {:>8} {:>9.3} {:>8} {:>8} {:>8}",
            c.name,
            c.priority_level,
            c.flow_schema,
            c.calls,
            c.dispatched,
            c.rejected,
            c.average_seats,
            secs(c.wait_seconds.p50),
            secs(c.wait_seconds.p99),
            secs(c.wait_seconds.max)
        )?;
    }
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

fn write_differences(
    baseline: &SimReport,
    candidate: &SimReport,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "== baseline → candidate")?;
    writeln!(
        out,
        "{:<28} {:>21} {:>21} {:>21}",
        "PRIORITY LEVEL", "DISPATCHED", "REJECTED", "WAIT-P99"
    )?;
    for (name, b, c) in paired(&baseline.priority_levels, &candidate.priority_levels, |l| {
        &l.name
    }) {
        let count = |l: &Option<&LevelReport>, f: fn(&LevelReport) -> u64| {
            l.map_or("-".to_string(), |l| f(l).to_string())
        };
        let wait =
            |l: &Option<&LevelReport>| l.map_or("-".to_string(), |l| secs(l.wait_seconds.p99));
        writeln!(
            out,
            "{:<28} {:>21} {:>21} {:>21}",
            name,
            format!(
                "{} → {}",
                count(&b, |l| l.dispatched),
                count(&c, |l| l.dispatched)
            ),
            format!(
                "{} → {}",
                count(&b, |l| l.rejected.total()),
                count(&c, |l| l.rejected.total())
            ),
            format!("{} → {}", wait(&b), wait(&c)),
        )?;
    }
    writeln!(out)
}

fn secs(s: f64) -> String {
    if s == 0.0 {
        "0".to_string()
    } else if s < 1.0 {
        format!("{:.0}ms", s * 1e3)
    } else {
        format!("{s:.2}s")
    }
}

/// Reads `--object-counts`: a YAML or JSON map from resource (`pods`, `deployments.apps`) to the
/// number of stored objects, as the apiserver's `apiserver_storage_objects` gives them.
pub fn read_object_counts(path: &Path) -> anyhow::Result<Vec<(String, u64)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--object-counts {}: cannot read", path.display()))?;
    let counts: std::collections::BTreeMap<String, u64> = serde_yaml::from_str(&text)
        .with_context(|| {
            format!(
                "{}: expected a map from resource to object count, e.g. `pods: 5000`",
                path.display()
            )
        })?;
    Ok(counts.into_iter().collect())
}
