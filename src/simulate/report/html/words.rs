//! The report's summary in words: which levels rejected or queued requests and how much, and,
//! when comparing, what the candidate changes per level and per FlowSchema — difference rows,
//! the largest change first.

use std::fmt::Write as _;

use super::{anchor, escape};
use crate::simulate::report::{paired, LevelReport, SchemaReport, SimReport};

pub(super) fn summary(page: &mut String, runs: &[(&str, &SimReport)]) {
    page.push_str("<section id=\"summary\"><h2>Summary</h2>");
    for (label, report) in runs {
        if runs.len() > 1 {
            let _ = write!(page, "<h3>{} run</h3>", escape(label));
        }
        page.push_str("<ul class=\"summary\">");
        for sentence in sentences(report) {
            let _ = write!(page, "<li>{sentence}</li>");
        }
        page.push_str("</ul>");
    }
    if let [(_, baseline), (_, candidate)] = runs {
        differences(page, baseline, candidate);
    }
    page.push_str("</section>");
}

/// A duration in words: `0 s`, `350 ms`, `1.25 s`.
pub(super) fn secs(s: f64) -> String {
    if s == 0.0 {
        "0 s".to_string()
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn level_link(l: &LevelReport) -> String {
    format!(
        "<a href=\"#{}\"><b>{}</b></a>",
        anchor(&l.name),
        escape(&l.name)
    )
}

/// One run in sentences (already escaped HTML).
fn sentences(report: &SimReport) -> Vec<String> {
    let mut out = Vec::new();
    let mut rejecting: Vec<&LevelReport> = report
        .priority_levels
        .iter()
        .filter(|l| l.rejected.total() > 0)
        .collect();
    rejecting.sort_by_key(|l| std::cmp::Reverse(l.rejected.total()));
    for l in &rejecting {
        let r = l.rejected;
        let mut why = Vec::new();
        if r.queue_full > 0 {
            why.push(format!("{} because its queues were full", r.queue_full));
        }
        if r.concurrency_limit > 0 {
            why.push(format!(
                "{} at its concurrency limit (it does not queue)",
                r.concurrency_limit
            ));
        }
        if r.time_out > 0 {
            why.push(format!(
                "{} after waiting their whole wait limit",
                r.time_out
            ));
        }
        out.push(format!(
            "{} rejected {} of {} requests ({:.1}%): {}.",
            level_link(l),
            r.total(),
            l.arrivals,
            100.0 * r.total() as f64 / l.arrivals.max(1) as f64,
            why.join(", ")
        ));
    }
    let mut queueing: Vec<&LevelReport> = report
        .priority_levels
        .iter()
        .filter(|l| l.wait_seconds.max > 0.0)
        .collect();
    queueing.sort_by(|a, b| b.wait_seconds.max.total_cmp(&a.wait_seconds.max));
    for l in &queueing {
        let w = l.wait_seconds;
        out.push(format!(
            "{} queued requests: half waited {} or less, 1 in 10 more than {}, 1 in 100 more \
             than {}; the longest wait was {}.",
            level_link(l),
            secs(w.p50),
            secs(w.p90),
            secs(w.p99),
            secs(w.max)
        ));
    }
    for l in &report.priority_levels {
        if !l.exempt && l.nominal_limit > 0 && l.max_seats_in_use >= u64::from(l.nominal_limit) {
            out.push(format!(
                "{} used its whole nominal limit at its peak: {} of {} {}.",
                level_link(l),
                l.max_seats_in_use,
                l.nominal_limit,
                if l.nominal_limit == 1 {
                    "seat"
                } else {
                    "seats"
                }
            ));
        }
    }
    if rejecting.is_empty() && queueing.is_empty() {
        out.push(
            "Every request was dispatched at once: no priority level rejected or queued any."
                .to_string(),
        );
    }
    let refused: Vec<String> = report
        .clients
        .iter()
        .filter(|c| c.rejected > 0)
        .map(|c| format!("{} ({} of {} calls)", escape(&c.name), c.rejected, c.calls))
        .collect();
    if !refused.is_empty() {
        out.push(format!("Clients refused: {}.", refused.join(", ")));
    }
    out
}

/// A count's change, signed, with the class saying whether it is for the worse.
fn delta(before: u64, after: u64, more_is_worse: bool) -> String {
    let d = after as i64 - before as i64;
    if d == 0 {
        return "±0".to_string();
    }
    let worse = (d > 0) == more_is_worse;
    let class = if worse { "up" } else { "down" };
    format!("<span class=\"{class}\">{d:+}</span>")
}

fn count(v: Option<u64>) -> String {
    v.map_or("—".to_string(), |v| v.to_string())
}

/// One difference row: its score (how much changed), then its cells.
struct Row {
    score: (u64, f64),
    cells: String,
}

fn differences(page: &mut String, baseline: &SimReport, candidate: &SimReport) {
    let total = |r: &SimReport, f: fn(&LevelReport) -> u64| -> u64 {
        r.priority_levels.iter().map(f).sum()
    };
    let rejected = |l: &LevelReport| l.rejected.total();
    let dispatched = |l: &LevelReport| l.dispatched;
    let (rb, rc) = (total(baseline, rejected), total(candidate, rejected));
    let (db, dc) = (total(baseline, dispatched), total(candidate, dispatched));
    let _ = write!(
        page,
        "<h3>What the candidate changes</h3><p>In all, the candidate rejects {rc} requests \
         where the baseline rejects {rb} ({}), and dispatches {dc} where it dispatches {db} \
         ({}).</p>",
        delta(rb, rc, true),
        delta(db, dc, false)
    );
    level_differences(page, baseline, candidate);
    schema_differences(page, baseline, candidate);
}

fn level_differences(page: &mut String, baseline: &SimReport, candidate: &SimReport) {
    let mut rows = Vec::new();
    for (name, b, c) in paired(&baseline.priority_levels, &candidate.priority_levels, |l| {
        &l.name
    }) {
        let get = |l: &Option<&LevelReport>, f: fn(&LevelReport) -> u64| l.map(f);
        let (db, dc) = (get(&b, |l| l.dispatched), get(&c, |l| l.dispatched));
        let (rb, rc) = (
            get(&b, |l| l.rejected.total()),
            get(&c, |l| l.rejected.total()),
        );
        let wait = |l: &Option<&LevelReport>| l.map_or(0.0, |l| l.wait_seconds.p99);
        let (wb, wc) = (wait(&b), wait(&c));
        let d = |x: Option<u64>| x.unwrap_or(0);
        let score = (
            d(db).abs_diff(d(dc)) + d(rb).abs_diff(d(rc)),
            (wb - wc).abs(),
        );
        if score == (0, 0.0) {
            continue;
        }
        let cells = format!(
            "<td>{}</td><td>{} → {} ({})</td><td>{} → {} ({})</td><td>{:.3} → {:.3}</td>",
            escape(name),
            count(db),
            count(dc),
            delta(d(db), d(dc), false),
            count(rb),
            count(rc),
            delta(d(rb), d(rc), true),
            wb,
            wc
        );
        rows.push(Row { score, cells });
    }
    table(
        page,
        "<tr><th>priority level</th><th>dispatched <small>(requests)</small></th>\
         <th>rejected <small>(requests)</small></th><th>wait p99 <small>(s)</small></th></tr>",
        rows,
        "priority levels",
    );
}

fn schema_differences(page: &mut String, baseline: &SimReport, candidate: &SimReport) {
    let mut rows = Vec::new();
    for (name, b, c) in paired(&baseline.flow_schemas, &candidate.flow_schemas, |s| &s.name) {
        let get = |s: &Option<&SchemaReport>, f: fn(&SchemaReport) -> u64| s.map(f);
        let (db, dc) = (get(&b, |s| s.dispatched), get(&c, |s| s.dispatched));
        let (rb, rc) = (
            get(&b, |s| s.rejected.total()),
            get(&c, |s| s.rejected.total()),
        );
        let level =
            |s: &Option<&SchemaReport>| s.map_or("—".to_string(), |s| escape(&s.priority_level));
        let (lb, lc) = (level(&b), level(&c));
        let d = |x: Option<u64>| x.unwrap_or(0);
        let score = (d(db).abs_diff(d(dc)) + d(rb).abs_diff(d(rc)), 0.0);
        if score.0 == 0 && lb == lc {
            continue;
        }
        let levels = if lb == lc {
            lb
        } else {
            format!("{lb} → {lc}")
        };
        let cells = format!(
            "<td>{}</td><td>{levels}</td><td>{} → {} ({})</td><td>{} → {} ({})</td>",
            escape(name),
            count(db),
            count(dc),
            delta(d(db), d(dc), false),
            count(rb),
            count(rc),
            delta(d(rb), d(rc), true),
        );
        rows.push(Row { score, cells });
    }
    table(
        page,
        "<tr><th>FlowSchema</th><th>priority level</th>\
         <th>dispatched <small>(requests)</small></th>\
         <th>rejected <small>(requests)</small></th></tr>",
        rows,
        "FlowSchemas",
    );
}

/// The rows, largest change first; or a line saying nothing changed.
fn table(page: &mut String, head: &str, mut rows: Vec<Row>, what: &str) {
    if rows.is_empty() {
        let _ = write!(page, "<p>No change in any of the {what}.</p>");
        return;
    }
    rows.sort_by(|a, b| {
        b.score
            .0
            .cmp(&a.score.0)
            .then(b.score.1.total_cmp(&a.score.1))
    });
    let _ = write!(
        page,
        "<p>Changes in {what}, the largest first:</p><table>{head}"
    );
    for row in rows {
        let _ = write!(page, "<tr>{}</tr>", row.cells);
    }
    page.push_str("</table>");
}
