//! The report's charts over time, per priority level that saw requests, drawn with `plotters`'
//! SVG backend: one colour per series, one dash pattern per run (the baseline solid, the
//! candidate dashed), legends in HTML beside the plot rather than on it.
//!
//! Long traces are downsampled to at most [`MAX_POINTS`] points per series, keeping the largest
//! value of each bucket so that peaks survive. Queue waits are drawn only over intervals in
//! which something was dispatched: a gap, not a misleading zero.

use std::fmt::Write as _;

use plotters::prelude::*;

use super::{active, anchor, escape, utc_parts};
use crate::simulate::report::{LevelReport, Sample, SimReport};

/// The most points drawn per series.
pub const MAX_POINTS: usize = 2_000;

const WIDTH: u32 = 520;
const HEIGHT: u32 = 240;

/// A series: its name, colour, line width, whether it is a limit (not drawn for exempt levels),
/// whether it is drawn only where something was dispatched, and its value in a sample. Series
/// are drawn in order, wide ones first, so that lines at the same value all stay visible.
struct Series {
    name: &'static str,
    colour: RGBColor,
    width: u32,
    limit: bool,
    dispatched_only: bool,
    value: fn(&Sample) -> f64,
}

/// One chart: its caption, its y axis (with the unit) and its series.
struct Chart {
    caption: &'static str,
    y: &'static str,
    series: &'static [Series],
}

const BLUE: RGBColor = RGBColor(31, 119, 180);
const RED: RGBColor = RGBColor(214, 39, 40);
const PALE_GREY: RGBColor = RGBColor(200, 200, 200);
const PURPLE: RGBColor = RGBColor(148, 103, 189);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const ORANGE: RGBColor = RGBColor(255, 127, 14);

const fn series(name: &'static str, colour: RGBColor, value: fn(&Sample) -> f64) -> Series {
    Series {
        name,
        colour,
        width: 2,
        limit: false,
        dispatched_only: false,
        value,
    }
}

const CHARTS: [Chart; 4] = [
    Chart {
        caption: "Seats",
        y: "seats",
        series: &[
            // A wide pale band, the limit in use a thin line on top of what is in use: where
            // all three meet (a level at its limit) each is still seen.
            Series {
                limit: true,
                width: 7,
                ..series("nominal limit", PALE_GREY, |s| f64::from(s.nominal_limit))
            },
            series("in use", BLUE, |s| s.seats_in_use as f64),
            Series {
                limit: true,
                width: 1,
                ..series("concurrency limit", RED, |s| f64::from(s.concurrency_limit))
            },
        ],
    },
    Chart {
        caption: "Waiting in queues",
        y: "requests",
        series: &[series("waiting", PURPLE, |s| f64::from(s.waiting))],
    },
    Chart {
        caption: "Rejected",
        y: "requests per interval",
        series: &[series("rejected", RED, |s| s.rejected as f64)],
    },
    Chart {
        caption: "Queue wait of the requests dispatched",
        y: "seconds",
        series: &[
            Series {
                dispatched_only: true,
                ..series("p50", GREEN, |s| s.wait_p50)
            },
            Series {
                dispatched_only: true,
                ..series("p99", ORANGE, |s| s.wait_p99)
            },
        ],
    },
];

/// How the x axis reads.
#[derive(Clone, Copy)]
enum Axis {
    /// Wall-clock time (UTC) from this UNIX instant.
    Utc(f64),
    /// Seconds since the start of a workload.
    Workload,
    /// Seconds since a trace's first arrival (its clock is not the wall clock).
    Trace,
}

impl Axis {
    fn of(runs: &[(&str, &SimReport)]) -> Axis {
        match runs.first() {
            Some((_, r)) if r.start_unix_seconds.is_some() => {
                Axis::Utc(r.start_unix_seconds.unwrap_or_default())
            }
            Some((_, r)) if !r.clients.is_empty() => Axis::Workload,
            _ => Axis::Trace,
        }
    }

    fn description(self) -> String {
        match self {
            Axis::Utc(start) => format!("time (UTC), from {}", utc_parts(start).0),
            Axis::Workload => "seconds since the start".to_string(),
            Axis::Trace => "seconds since the first arrival".to_string(),
        }
    }

    fn label(self, t: f64) -> String {
        match self {
            Axis::Utc(start) => utc_parts(start + t).1,
            Axis::Workload | Axis::Trace => format!("{t:.0}"),
        }
    }
}

/// Writes the charts of every level that saw requests, and says which levels saw none.
pub(super) fn timelines(page: &mut String, runs: &[(&str, &SimReport)]) -> Result<(), String> {
    page.push_str("<h2>Over time, per priority level</h2>");
    let downsampled = runs
        .iter()
        .flat_map(|(_, r)| &r.priority_levels)
        .any(|l| l.timeline.len() > MAX_POINTS);
    if downsampled {
        let _ = write!(
            page,
            "<p class=\"note\">Long timelines are drawn with at most {MAX_POINTS} points per \
             series, each the largest value of its interval.</p>"
        );
    }
    if runs.len() > 1 {
        page.push_str("<p>");
        for (i, (label, _)) in runs.iter().enumerate() {
            let _ = write!(
                page,
                "<span class=\"key\">{} {} run</span>",
                key_line(BLACK, i),
                escape(label)
            );
        }
        page.push_str("(each series keeps its colour; the runs differ by line style)</p>");
    }
    let axis = Axis::of(runs);
    let mut idle = Vec::new();
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
        if !levels.iter().any(|(_, l)| active(l)) {
            idle.push(escape(&name));
            continue;
        }
        if levels.iter().all(|(_, l)| l.timeline.is_empty()) {
            continue;
        }
        let exempt = levels.iter().all(|(_, l)| l.exempt);
        let _ = write!(
            page,
            "<section class=\"level\" id=\"{}\"><h3>{}{}</h3><div class=\"charts\">",
            anchor(&name),
            escape(&name),
            if exempt {
                " <small>(exempt: no limit)</small>"
            } else {
                ""
            }
        );
        for chart in &CHARTS {
            figure(page, chart, &levels, exempt, axis)?;
        }
        page.push_str("</div></section>");
    }
    if !idle.is_empty() {
        let _ = write!(
            page,
            "<p class=\"note\">Not drawn, as nothing reached them: {}.</p>",
            idle.join(", ")
        );
    }
    Ok(())
}

fn level_names(runs: &[(&str, &SimReport)]) -> Vec<String> {
    let mut names: Vec<String> = runs
        .iter()
        .flat_map(|(_, r)| r.priority_levels.iter().map(|l| l.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A short line in a colour and a run's dash pattern, for legends.
fn key_line(colour: RGBColor, run: usize) -> String {
    let dash = if run == 0 {
        ""
    } else {
        " stroke-dasharray=\"6 4\""
    };
    format!(
        "<svg width=\"28\" height=\"10\" aria-hidden=\"true\"><line x1=\"1\" y1=\"5\" x2=\"27\" \
         y2=\"5\" stroke=\"rgb({},{},{})\" stroke-width=\"2\"{dash}/></svg>",
        colour.0, colour.1, colour.2
    )
}

/// One chart and, under it, its legend.
fn figure(
    page: &mut String,
    chart: &Chart,
    levels: &[(usize, &LevelReport)],
    exempt: bool,
    axis: Axis,
) -> Result<(), String> {
    let shown: Vec<&Series> = chart
        .series
        .iter()
        .filter(|s| !(exempt && s.limit))
        .collect();
    page.push_str("<figure>");
    page.push_str(&draw(chart, &shown, levels, axis)?);
    page.push_str("<figcaption>");
    for s in &shown {
        let _ = write!(
            page,
            "<span class=\"key\">{} {}</span>",
            key_line(s.colour, 0),
            s.name
        );
    }
    page.push_str("</figcaption></figure>");
    Ok(())
}

/// Every `n`th bucket's largest value, so that at most [`MAX_POINTS`] remain.
pub fn downsample(timeline: &[Sample], value: fn(&Sample) -> f64) -> Vec<(f64, f64)> {
    downsample_where(timeline, value, false)
        .into_iter()
        .map(|(t, v)| (t, v.unwrap_or(0.0)))
        .collect()
}

/// As [`downsample`]; with `dispatched_only`, a bucket in which nothing was dispatched has no
/// value.
fn downsample_where(
    timeline: &[Sample],
    value: fn(&Sample) -> f64,
    dispatched_only: bool,
) -> Vec<(f64, Option<f64>)> {
    let per = timeline.len().div_ceil(MAX_POINTS).max(1);
    timeline
        .chunks(per)
        .map(|bucket| {
            let t = bucket.first().map_or(0.0, |s| s.t);
            let v = bucket
                .iter()
                .filter(|s| !dispatched_only || s.dispatched > 0)
                .map(value)
                .reduce(f64::max);
            (t, v)
        })
        .collect()
}

/// The runs of consecutive points that have a value; a lone point becomes a short tick.
fn segments(points: &[(f64, Option<f64>)], step: f64) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for &(t, v) in points {
        match v {
            Some(v) => current.push((t, v)),
            None if !current.is_empty() => out.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    for segment in &mut out {
        if let [(t, v)] = segment[..] {
            segment.push((t + step * 0.8, v));
        }
    }
    out
}

/// `1 s`, `0.5 s`.
fn seconds(step: f64) -> String {
    format!("{} s", (step * 1e3).round() / 1e3)
}

/// The lines of one chart: per run and series, its segments.
type Lines<'a> = Vec<(usize, &'a Series, Vec<Vec<(f64, f64)>>)>;

fn draw(
    chart: &Chart,
    shown: &[&Series],
    levels: &[(usize, &LevelReport)],
    axis: Axis,
) -> Result<String, String> {
    let mut lines: Lines<'_> = Vec::new();
    // The sampling interval, for the charts that count per interval.
    let interval = levels
        .iter()
        .find_map(|(_, l)| match l.timeline.as_slice() {
            [a, b, ..] => Some(b.t - a.t),
            _ => None,
        })
        .filter(|_| chart.y.ends_with("per interval"));
    for (run, l) in levels {
        let step = match l.timeline.as_slice() {
            [a, b, ..] => (b.t - a.t) * l.timeline.len().div_ceil(MAX_POINTS) as f64,
            _ => 1.0,
        };
        for s in shown {
            let points = downsample_where(&l.timeline, s.value, s.dispatched_only);
            lines.push((*run, s, segments(&points, step)));
        }
    }
    let all = || lines.iter().flat_map(|(_, _, segs)| segs.iter().flatten());
    // Every chart of a level spans the whole timeline, whatever its series draw.
    let t_max = levels
        .iter()
        .filter_map(|(_, l)| l.timeline.last().map(|s| s.t))
        .fold(1.0, f64::max);
    let y_max = all().map(|(_, v)| *v).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let caption = match interval {
            Some(step) => format!("{} (per {} interval)", chart.caption, seconds(step)),
            None => chart.caption.to_string(),
        };
        let mut c = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .margin_right(32)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        let x_label = |t: &f64| axis.label(*t);
        c.configure_mesh()
            .x_desc(axis.description())
            .y_desc(chart.y)
            .x_labels(6)
            .x_label_formatter(&x_label)
            .draw()
            .map_err(|e| e.to_string())?;
        for (run, s, segs) in lines {
            let style = s.colour.stroke_width(s.width);
            for seg in segs {
                if run == 0 {
                    c.draw_series(LineSeries::new(seg, style))
                        .map_err(|e| e.to_string())?;
                } else {
                    c.draw_series(DashedLineSeries::new(seg, 6, 4, style))
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}
