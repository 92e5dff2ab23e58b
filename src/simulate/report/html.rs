//! `simulate --report FILE.html`: one self-contained page (inline SVG and CSS, nothing fetched)
//! meant to be read by a person:
//!
//! - a summary in words at the top: which levels rejected or queued requests and how much, and,
//!   when comparing, what the candidate changes per level and per FlowSchema (difference rows,
//!   largest change first) — `words`;
//! - the tables of the text output, every column with its unit, levels that saw nothing folded
//!   away;
//! - per priority level that saw requests, charts over time (`chart`): seats in use against
//!   the concurrency and nominal limits (no limits for an exempt level), requests waiting,
//!   rejections, and queue waits. Time reads in UTC for a trace recorded on the wall clock,
//!   in seconds otherwise (workloads, trace lines). Legends sit beside the plot, never on it;
//!   a comparison's runs differ by dash pattern as well as colour.
//!
//! Every name from the configuration, the trace or the workload is escaped.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{LevelReport, SimReport};

mod chart;
mod words;

pub use chart::{downsample, MAX_POINTS};

/// How often each level is sampled for the page's charts at first
/// ([`SimOptions::timeline_interval`](crate::simulate::SimOptions::timeline_interval)): finely,
/// so that a trace of a second has sub-second bins; a long trace's samples are coarsened as it
/// goes ([`TIMELINE_SAMPLES`](crate::simulate::engine::TIMELINE_SAMPLES)).
pub const TIMELINE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

/// What was simulated, for the page's heading and its time axes.
#[derive(Debug, Clone, Copy)]
pub enum ReportSource<'a> {
    /// A recorded trace (a file name or `-`).
    Trace(&'a str),
    /// A workload file.
    Workload(&'a str),
}

/// Writes the page for one run, or two (`baseline` and `candidate`) drawn on the same axes.
pub fn write_report(
    runs: &[(&str, &SimReport)],
    source: ReportSource<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    let (kind, name) = match source {
        ReportSource::Trace(name) => ("Trace", name),
        ReportSource::Workload(name) => ("Workload", name),
    };
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>kube-apf-proxy simulate: {t}</title><style>{CSS}</style></head><body>\
         <h1>What flow control would have done</h1><p class=\"source\">{kind}: <code>{t}</code>",
        t = escape(name)
    );
    if let Some((_, first)) = runs.first() {
        let _ = write!(page, " — {}", span_in_words(first));
    }
    page.push_str("</p>");
    words::summary(&mut page, runs);
    for (label, report) in runs {
        tables(&mut page, label, report, runs.len() > 1);
    }
    chart::timelines(&mut page, runs).map_err(io::Error::other)?;
    page.push_str("</body></html>\n");
    out.write_all(page.as_bytes())
}

const CSS: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:80em}\
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;\
padding:.25em .6em;text-align:right}th:first-child,td:first-child{text-align:left}\
th{background:#f4f4f4}th small{font-weight:normal;color:#555}.charts{display:flex;\
flex-wrap:wrap;gap:1em}figure{margin:0}figcaption{font-size:.85em;color:#333}\
.key{display:inline-block;margin-right:1em;white-space:nowrap}.note,.source{color:#555}\
section.level{margin-bottom:2em}details{margin:.5em 0}summary{cursor:pointer;color:#555}\
.up{color:#b00}.down{color:#070}ul.summary li{margin:.3em 0}";

/// "300.3 s from 2026-11-26 10:00:00 UTC" or "60.0 s of virtual time".
fn span_in_words(report: &SimReport) -> String {
    match report.start_unix_seconds {
        Some(start) => format!(
            "{:.1} s from {} UTC",
            report.duration_seconds,
            utc_date_time(start)
        ),
        None => format!("{:.1} s of virtual time", report.duration_seconds),
    }
}

/// `YYYY-MM-DD HH:MM:SS` for seconds since the UNIX epoch (UTC).
pub fn utc_date_time(unix_seconds: f64) -> String {
    let (date, time) = utc_parts(unix_seconds);
    format!("{date} {time}")
}

/// (`YYYY-MM-DD`, `HH:MM:SS`) for seconds since the UNIX epoch (UTC); a time outside the years
/// 0000 to 9999 reads as the nearest one within them.
pub fn utc_parts(unix_seconds: f64) -> (String, String) {
    use time::macros::datetime;
    let first = datetime!(0000-01-01 00:00:00 UTC);
    let last = datetime!(9999-12-31 23:59:59 UTC);
    // `as` saturates (NaN gives 0): out of range either way.
    let secs = unix_seconds.floor() as i64;
    let utc = time::OffsetDateTime::from_unix_timestamp(secs)
        .unwrap_or(if secs < 0 { first } else { last })
        .clamp(first, last);
    (
        format!(
            "{:04}-{:02}-{:02}",
            utc.year(),
            u8::from(utc.month()),
            utc.day()
        ),
        format!("{:02}:{:02}:{:02}", utc.hour(), utc.minute(), utc.second()),
    )
}

/// Whether anything happened at a level.
fn active(l: &LevelReport) -> bool {
    l.arrivals > 0
}

fn tables(page: &mut String, label: &str, report: &SimReport, labelled: bool) {
    if labelled {
        let _ = write!(page, "<h2>{} run</h2>", escape(label));
    }
    let _ = write!(
        page,
        "<p>{} requests ({} bypassing flow control, {} replayed late, {} lines skipped{}); \
         server concurrency limit {} seats.</p>",
        report.requests,
        report.bypassed,
        report.late,
        report.skipped,
        super::text::waits_taken_out(report),
        report.server_concurrency_limit
    );
    if !report.skip_reasons.is_empty() {
        page.push_str("<p class=\"note\">Lines skipped, by problem:</p><ul class=\"note\">");
        for reason in &report.skip_reasons {
            let _ = write!(
                page,
                "<li>{} line(s), such as {}</li>",
                reason.lines,
                escape(&reason.example)
            );
        }
        page.push_str("</ul>");
    }
    level_table(page, report);
    schema_table(page, report);
    client_table(page, report);
    flows_table(page, report);
    for note in &report.notes {
        let _ = write!(page, "<p class=\"note\">Note: {}.</p>", escape(note));
    }
}

const LEVEL_HEAD: &str = "<tr><th>priority level</th><th>nominal limit <small>(seats)</small></th>\
<th>current limit <small>(seats, nominal ± borrowing, over time)</small></th>\
<th>arrivals <small>(requests)</small></th><th>dispatched <small>(requests)</small></th>\
<th>queue-full <small>(requests)</small></th><th>concurrency-limit <small>(requests)</small></th>\
<th>time-out <small>(requests)</small></th><th>wait p50 <small>(s)</small></th>\
<th>wait p90 <small>(s)</small></th><th>wait p99 <small>(s)</small></th>\
<th>wait max <small>(s)</small></th><th>peak in use <small>(seats)</small></th></tr>";

fn level_table(page: &mut String, report: &SimReport) {
    let (busy, idle): (Vec<&LevelReport>, Vec<&LevelReport>) =
        report.priority_levels.iter().partition(|l| active(l));
    page.push_str("<table>");
    page.push_str(LEVEL_HEAD);
    for l in &busy {
        level_row(page, l);
    }
    page.push_str("</table>");
    if !idle.is_empty() {
        let names: Vec<String> = idle.iter().map(|l| escape(&l.name)).collect();
        let _ = write!(
            page,
            "<details><summary>{} levels saw no requests: {}</summary><table>{LEVEL_HEAD}",
            idle.len(),
            names.join(", ")
        );
        for l in &idle {
            level_row(page, l);
        }
        page.push_str("</table></details>");
    }
}

fn level_row(page: &mut String, l: &LevelReport) {
    let (limit, current) = if l.exempt {
        ("exempt (none)".to_string(), "exempt (none)".to_string())
    } else {
        let current = l.timeline.iter().map(|s| s.concurrency_limit);
        let current = match (current.clone().min(), current.max()) {
            (Some(low), Some(high)) if low == high => low.to_string(),
            (Some(low), Some(high)) => format!("{low}–{high}"),
            _ => "—".to_string(),
        };
        (l.nominal_limit.to_string(), current)
    };
    let _ = write!(
        page,
        "<tr><td><a href=\"#{anchor}\">{name}</a></td><td>{limit}</td><td>{current}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td>\
         <td>{:.3}</td><td>{}</td></tr>",
        l.arrivals,
        l.dispatched,
        l.rejected.queue_full,
        l.rejected.concurrency_limit,
        l.rejected.time_out,
        l.wait_seconds.p50,
        l.wait_seconds.p90,
        l.wait_seconds.p99,
        l.wait_seconds.max,
        l.max_seats_in_use,
        anchor = anchor(&l.name),
        name = escape(&l.name),
    );
}

fn schema_table(page: &mut String, report: &SimReport) {
    if report.flow_schemas.is_empty() {
        return;
    }
    page.push_str(
        "<table><tr><th>FlowSchema</th><th>priority level</th>\
         <th>arrivals <small>(requests)</small></th><th>dispatched <small>(requests)</small></th>\
         <th>rejected <small>(requests)</small></th></tr>",
    );
    for s in &report.flow_schemas {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.name),
            escape(&s.priority_level),
            s.arrivals,
            s.dispatched,
            s.rejected.total()
        );
    }
    page.push_str("</table>");
}

fn client_table(page: &mut String, report: &SimReport) {
    if report.clients.is_empty() {
        return;
    }
    page.push_str(
        "<table><tr><th>client</th><th>priority level</th><th>FlowSchema</th>\
         <th>calls <small>(requests)</small></th><th>dispatched <small>(requests)</small></th>\
         <th>rejected <small>(requests)</small></th><th>average <small>(seats)</small></th>\
         <th>wait p50 <small>(s)</small></th><th>wait p99 <small>(s)</small></th>\
         <th>wait max <small>(s)</small></th></tr>",
    );
    for c in &report.clients {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            escape(&c.name),
            escape(&c.priority_level),
            escape(&c.flow_schema),
            c.calls,
            c.dispatched,
            c.rejected,
            c.average_seats,
            c.wait_seconds.p50,
            c.wait_seconds.p99,
            c.wait_seconds.max
        );
    }
    page.push_str("</table>");
}

/// Who suffered: the flows (FlowSchema and distinguisher: the user, or the namespace) rejected
/// most, and those that waited longest in a queue, per level.
fn flows_table(page: &mut String, report: &SimReport) {
    let flows: Vec<_> = report
        .priority_levels
        .iter()
        .flat_map(|l| l.top_flows.iter().map(move |f| (l, f)))
        .collect();
    let waits: Vec<_> = report
        .priority_levels
        .iter()
        .flat_map(|l| l.longest_waits.iter().map(move |f| (l, f)))
        .collect();
    if flows.is_empty() && waits.is_empty() {
        return;
    }
    page.push_str(
        "<h3>Who suffered</h3><p class=\"note\">Flows are told apart by their FlowSchema and \
         flow distinguisher: the user (<code>ByUser</code>) or the namespace \
         (<code>ByNamespace</code>); none when the schema has no distinguisher method.</p>",
    );
    if !flows.is_empty() {
        page.push_str(
            "<table><tr><th>priority level</th><th>FlowSchema</th><th>flow distinguisher</th>\
             <th>rejected <small>(requests)</small></th></tr>",
        );
        for (l, f) in flows {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&l.name),
                escape(&f.flow_schema),
                distinguisher(&f.flow_distinguisher),
                f.rejected
            );
        }
        page.push_str("</table>");
    }
    if !waits.is_empty() {
        page.push_str(
            "<table><tr><th>priority level</th><th>FlowSchema</th><th>flow distinguisher</th>\
             <th>longest wait <small>(s)</small></th></tr>",
        );
        for (l, f) in waits {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
                escape(&l.name),
                escape(&f.flow_schema),
                distinguisher(&f.flow_distinguisher),
                f.wait_seconds
            );
        }
        page.push_str("</table>");
    }
}

/// A flow distinguisher for a table cell: escaped, or a word for none.
fn distinguisher(d: &str) -> String {
    if d.is_empty() {
        "<small>(none)</small>".to_string()
    } else {
        escape(d)
    }
}

/// The `id` of a level's charts: its name with everything but `[A-Za-z0-9-]` as `_`.
fn anchor(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("level-{safe}")
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
