//! `simulate --report FILE.html`: one self-contained page (inline SVG and CSS, nothing fetched)
//! with the tables of the text output and, per priority level that saw requests, charts over time:
//! seats in use against the concurrency and nominal limits, requests waiting, rejections, and the
//! queue-wait p50 and p99 of each interval. Drawn with `plotters`' SVG backend.
//!
//! Long traces are downsampled to at most [`MAX_POINTS`] points per series, keeping the largest
//! value of each bucket so that peaks survive. Every name from the configuration or the trace is
//! escaped.

use std::fmt::Write as _;
use std::io::{self, Write};

use plotters::prelude::*;

use super::record::{LevelReport, Sample, SimReport};

/// The most points drawn per series.
pub const MAX_POINTS: usize = 2_000;

const COLOURS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14)];
const WIDTH: u32 = 560;
const HEIGHT: u32 = 240;

/// Writes the page for one run, or two (`baseline` and `candidate`) drawn on the same axes.
pub fn write_report(
    runs: &[(&str, &SimReport)],
    title: &str,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>kube-apf-proxy simulate: {t}</title><style>{CSS}</style></head><body>\
         <h1>What flow control would have done</h1><p class=\"trace\">Trace: <code>{t}</code></p>",
        t = escape(title)
    );
    for (label, report) in runs {
        summary(&mut page, label, report, runs.len() > 1);
    }
    page.push_str("<h2>Over time, per priority level</h2>");
    let downsampled = runs
        .iter()
        .flat_map(|(_, r)| &r.priority_levels)
        .any(|l| l.timeline.len() > MAX_POINTS);
    if downsampled {
        let _ = write!(
            page,
            "<p class=\"note\">Long timelines are drawn with at most {MAX_POINTS} points per series, \
             each the largest value of its interval.</p>"
        );
    }
    if runs.len() > 1 {
        page.push_str("<p class=\"legend\">");
        for (i, (label, _)) in runs.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let _ = write!(
                page,
                "<span style=\"color:rgb({},{},{})\">&#9632; {}</span> ",
                c.0,
                c.1,
                c.2,
                escape(label)
            );
        }
        page.push_str("</p>");
    }
    for name in level_names(runs) {
        let levels: Vec<(usize, &LevelReport)> = runs
            .iter()
            .enumerate()
            .filter_map(|(i, (_, r))| {
                r.priority_levels
                    .iter()
                    .find(|l| l.name == name)
                    .map(|l| (i, l))
            })
            .collect();
        if levels
            .iter()
            .all(|(_, l)| l.arrivals == 0 || l.timeline.is_empty())
        {
            continue;
        }
        let _ = write!(
            page,
            "<section class=\"level\"><h3>{}</h3><div class=\"charts\">",
            escape(&name)
        );
        for chart in &CHARTS {
            page.push_str(&draw(chart, &levels).map_err(io::Error::other)?);
        }
        page.push_str("</div></section>");
    }
    page.push_str("</body></html>\n");
    out.write_all(page.as_bytes())
}

const CSS: &str =
    "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;\
margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th:first-child,\
td:first-child{text-align:left}th{background:#f4f4f4}.charts{display:flex;flex-wrap:wrap;gap:1em}\
.note,.trace{color:#555}section.level{margin-bottom:2em}";

fn level_names(runs: &[(&str, &SimReport)]) -> Vec<String> {
    let mut names: Vec<String> = runs
        .iter()
        .flat_map(|(_, r)| r.priority_levels.iter().map(|l| l.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn summary(page: &mut String, label: &str, report: &SimReport, labelled: bool) {
    if labelled {
        let _ = write!(page, "<h2>{}</h2>", escape(label));
    }
    let _ = write!(
        page,
        "<p>{} requests over {:.1} s ({} bypassing flow control, {} late, {} lines skipped); server \
         concurrency limit {}.</p><table><tr><th>priority level</th><th>seats</th><th>arrivals</th>\
         <th>dispatched</th><th>queue-full</th><th>concurrency-limit</th><th>time-out</th>\
         <th>wait p50</th><th>p90</th><th>p99</th><th>max</th><th>peak seats</th></tr>",
        report.requests,
        report.duration_seconds,
        report.bypassed,
        report.late,
        report.skipped,
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
    for l in &report.priority_levels {
        let seats = if l.exempt {
            "exempt".to_string()
        } else {
            l.nominal_limit.to_string()
        };
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{seats}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td></tr>",
            escape(&l.name),
            l.arrivals,
            l.dispatched,
            l.rejected.queue_full,
            l.rejected.concurrency_limit,
            l.rejected.time_out,
            l.wait_seconds.p50,
            l.wait_seconds.p90,
            l.wait_seconds.p99,
            l.wait_seconds.max,
            l.max_seats_in_use
        );
    }
    page.push_str(
        "</table><table><tr><th>FlowSchema</th><th>priority level</th><th>arrivals</th>\
         <th>dispatched</th><th>rejected</th></tr>",
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
    let flows: Vec<_> = report
        .priority_levels
        .iter()
        .flat_map(|l| l.top_flows.iter().map(move |f| (l, f)))
        .collect();
    if !flows.is_empty() {
        page.push_str(
            "<table><tr><th>priority level</th><th>FlowSchema</th><th>flow distinguisher</th>\
             <th>rejected</th></tr>",
        );
        for (l, f) in flows {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&l.name),
                escape(&f.flow_schema),
                escape(&f.flow_distinguisher),
                f.rejected
            );
        }
        page.push_str("</table>");
    }
}

/// A series of a chart: its name and its value in a sample.
type Series = (&'static str, fn(&Sample) -> f64);

/// The points of one series of one run: the run, the series, the points.
type RunSeries = (usize, usize, Vec<(f64, f64)>);

/// One chart: its caption, y-axis name and the series it draws from a sample.
struct Chart {
    caption: &'static str,
    y: &'static str,
    series: &'static [Series],
}

const CHARTS: [Chart; 4] = [
    Chart {
        caption: "Seats",
        y: "seats",
        series: &[
            ("in use", |s| s.seats_in_use as f64),
            ("concurrency limit", |s| f64::from(s.concurrency_limit)),
            ("nominal", |s| f64::from(s.nominal_limit)),
        ],
    },
    Chart {
        caption: "Waiting in queues",
        y: "requests",
        series: &[("waiting", |s| f64::from(s.waiting))],
    },
    Chart {
        caption: "Rejected per interval",
        y: "requests",
        series: &[("rejected", |s| s.rejected as f64)],
    },
    Chart {
        caption: "Queue wait of requests dispatched",
        y: "seconds",
        series: &[("p50", |s| s.wait_p50), ("p99", |s| s.wait_p99)],
    },
];

/// Every `n`th bucket's largest value, so that at most [`MAX_POINTS`] remain.
fn downsample(timeline: &[Sample], value: fn(&Sample) -> f64) -> Vec<(f64, f64)> {
    let per = timeline.len().div_ceil(MAX_POINTS).max(1);
    timeline
        .chunks(per)
        .map(|bucket| {
            let t = bucket.first().map_or(0.0, |s| s.t);
            let v = bucket.iter().map(value).fold(0.0, f64::max);
            (t, v)
        })
        .collect()
}

fn draw(chart: &Chart, levels: &[(usize, &LevelReport)]) -> Result<String, String> {
    let mut svg = String::new();
    let points: Vec<RunSeries> = levels
        .iter()
        .flat_map(|(run, l)| {
            chart
                .series
                .iter()
                .enumerate()
                .map(move |(k, (_, f))| (*run, k, downsample(&l.timeline, *f)))
        })
        .collect();
    let t_max = points
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|(t, _)| *t))
        .fold(1.0, f64::max);
    let y_max = points
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut c = ChartBuilder::on(&root)
            .caption(chart.caption, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .x_desc("seconds since the first arrival")
            .y_desc(chart.y)
            .draw()
            .map_err(|e| e.to_string())?;
        for (run, k, series) in points {
            let base = COLOURS[run % COLOURS.len()];
            // Further series of a run are lighter shades of its colour.
            let shade = |c: u8| c.saturating_add(u8::try_from(k * 60).unwrap_or(u8::MAX).min(160));
            let colour = RGBColor(shade(base.0), shade(base.1), shade(base.2));
            let name = chart.series[k].0;
            c.draw_series(LineSeries::new(series, colour.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        if chart.series.len() > 1 {
            c.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
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
