//! The text tables of standard output: per run the totals, the priority levels, the
//! FlowSchemas, a workload's clients and the flows rejected most; when comparing, the
//! differences per level.

use std::io::{self, Write};

use super::{paired, LevelReport, SimReport};

/// Writes each run's tables (under `== label` when there are several), then, for two, the
/// differences.
pub(super) fn write(runs: &[(&str, &SimReport)], out: &mut impl Write) -> io::Result<()> {
    for (label, report) in runs {
        if runs.len() > 1 {
            writeln!(out, "== {label}")?;
        }
        write_text(report, out)?;
    }
    if let [(_, baseline), (_, candidate)] = runs {
        write_differences(baseline, candidate, out)?;
    }
    Ok(())
}

fn write_text(report: &SimReport, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{} requests over {:.1} s ({} bypassing flow control, {} arrived late, {} lines \
         skipped{}); server concurrency limit {}",
        report.requests,
        report.duration_seconds,
        report.bypassed,
        report.late,
        report.skipped,
        waits_taken_out(report),
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

/// `, N recorded queue waits taken out (S s)` when there were any: said only then, so that a
/// trace without them reads as before.
pub(super) fn waits_taken_out(report: &SimReport) -> String {
    let waits = report.recorded_waits_taken_out;
    if waits.requests == 0 {
        return String::new();
    }
    format!(
        ", {} recorded queue waits taken out ({:.1} s)",
        waits.requests, waits.seconds
    )
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
