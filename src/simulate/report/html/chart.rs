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

/// The most points drawn per series: about one per two pixels of the plot, so that the peak of
/// a single interval still draws a visible spike.
pub const MAX_POINTS: usize = 240;

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

/// One chart: its caption, its y axis (with the unit), whether its quantity is a whole number
/// (integer ticks), and its series.
struct Chart {
    caption: &'static str,
    y: &'static str,
    integer: bool,
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

const LIGHT_BLUE: RGBColor = RGBColor(158, 202, 225);

/// The name of the seats chart's series of each interval's peak: the table's "peak in use" is
/// the largest of them.
pub const PEAK_SERIES: &str = "most in use in the interval";

const CHARTS: [Chart; 4] = [
    Chart {
        caption: "Seats",
        y: "seats",
        integer: true,
        series: &[
            // A wide pale band, the limit in use a thin line on top of what is in use: where
            // all of them meet (a level at its limit) each is still seen.
            Series {
                limit: true,
                width: 7,
                ..series("nominal limit (the table's)", PALE_GREY, |s| {
                    f64::from(s.nominal_limit)
                })
            },
            // Each interval's peak, so that the table's peak is seen; what was held at the
            // sample's instant beside it.
            series(PEAK_SERIES, BLUE, |s| s.max_seats_in_use as f64),
            Series {
                width: 1,
                ..series("in use at the interval's end", LIGHT_BLUE, |s| {
                    s.seats_in_use as f64
                })
            },
            Series {
                limit: true,
                width: 1,
                ..series("current limit (nominal ± borrowing)", RED, |s| {
                    f64::from(s.concurrency_limit)
                })
            },
        ],
    },
    Chart {
        caption: "Waiting in queues",
        y: "requests",
        integer: true,
        series: &[series("waiting", PURPLE, |s| f64::from(s.waiting))],
    },
    Chart {
        caption: "Rejected",
        y: "requests per interval",
        integer: true,
        series: &[series("rejected", RED, |s| s.rejected as f64)],
    },
    Chart {
        caption: "Queue wait of the requests dispatched",
        y: "seconds",
        integer: false,
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

    /// The ticks of a time axis from 0 to `t_max`: at most [`X_TICKS`] of them, a round step
    /// apart (sub-second for a short trace), on round wall-clock instants for UTC.
    fn ticks(self, t_max: f64) -> (Vec<f64>, f64) {
        let step = nice_step(t_max / X_TICKS as f64, TIME_STEPS);
        let first = match self {
            Axis::Utc(start) => (start / step).ceil() * step - start,
            Axis::Workload | Axis::Trace => 0.0,
        };
        let ticks = (0..)
            .map(|i| first + f64::from(i) * step)
            .take_while(|t| *t <= t_max + step * 1e-9)
            .take(X_TICKS * 2)
            .collect();
        (ticks, step)
    }

    /// A tick's label, with as many decimals as the `step` between ticks needs.
    fn label(self, t: f64, step: f64) -> String {
        let decimals = decimals(step);
        match self {
            Axis::Utc(start) if decimals == 0 => utc_parts(start + t).1,
            Axis::Utc(start) => {
                let at = start + t;
                let fraction = format!("{:.*}", decimals, at - at.floor());
                format!("{}{}", utc_parts(at).1, fraction.trim_start_matches('0'))
            }
            Axis::Workload | Axis::Trace => format!("{t:.decimals$}"),
        }
    }
}

/// A range of `f64` with the ticks given (the default ones without), labelled by the chart's
/// own formatters.
struct Ticked {
    inner: plotters::coord::types::RangedCoordf64,
    ticks: Option<Vec<f64>>,
}

impl Ticked {
    fn new(range: std::ops::Range<f64>, ticks: Option<Vec<f64>>) -> Self {
        Ticked {
            inner: range.into(),
            ticks,
        }
    }
}

impl plotters::coord::ranged1d::Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        match &self.ticks {
            Some(_) if hint.weight().allow_light_points() => Vec::new(),
            Some(ticks) => ticks.clone(),
            None => self.inner.key_points(hint),
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// The most x ticks a chart has.
const X_TICKS: usize = 6;

/// Round steps of time, in seconds: sub-second, then seconds, minutes, hours and days.
const TIME_STEPS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
    60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0,
];

/// Round steps of a count: whole numbers only.
const COUNT_STEPS: &[f64] = &[1.0, 2.0, 5.0];

/// The smallest step of `steps` (the last repeated by powers of ten) at least `at_least`.
fn nice_step(at_least: f64, steps: &[f64]) -> f64 {
    if let Some(step) = steps.iter().copied().find(|s| *s >= at_least) {
        return step;
    }
    let mut scale = 10.0;
    loop {
        if let Some(step) = steps.iter().map(|s| s * scale).find(|s| *s >= at_least) {
            return step;
        }
        scale *= 10.0;
    }
}

/// How many decimals a tick label needs for ticks `step` apart.
fn decimals(step: f64) -> usize {
    let mut decimals = 0;
    while decimals < 3 && (step * 10f64.powi(decimals as i32)).fract().abs() > 1e-6 {
        decimals += 1;
    }
    decimals
}

/// The y ticks of a chart of whole numbers up to `y_max`: integers, a round step apart.
fn integer_ticks(y_max: f64) -> Vec<f64> {
    let step = nice_step(y_max / 5.0, COUNT_STEPS);
    (0..)
        .map(|i| f64::from(i) * step)
        .take_while(|y| *y <= y_max)
        .collect()
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
            "<p class=\"note\">Each chart draws at most {MAX_POINTS} points per series, each the \
             largest value of the intervals it covers, so that every peak stays visible.</p>"
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
    let mut plotted = Vec::new();
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
            "<section class=\"level\" id=\"{}\"><h3>{}{}</h3>",
            anchor(&name),
            escape(&name),
            if exempt {
                " <small>(exempt: no limit)</small>"
            } else {
                ""
            }
        );
        for (run, l) in &levels {
            if let Some(words) = idle_start(l, axis) {
                let of_run = if runs.len() > 1 {
                    format!(" ({} run)", escape(runs[*run].0))
                } else {
                    String::new()
                };
                let _ = write!(
                    page,
                    "<p class=\"note\">{}{of_run} {words}</p>",
                    escape(&name)
                );
            }
            plotted.push(serde_json::json!({
                "level": name,
                "run": runs[*run].0,
                "peakInUse": l.max_seats_in_use,
                "mostInUse": downsample(&l.timeline, |s| s.max_seats_in_use as f64),
            }));
        }
        page.push_str("<div class=\"charts\">");
        for chart in &CHARTS {
            figure(page, chart, &levels, exempt, axis)?;
        }
        page.push_str("</div></section>");
    }
    // The points the seats charts draw, for a reader (or a test) that checks them against the
    // tables. `<` is escaped so that no name can end the script element.
    let plotted = serde_json::to_string(&plotted).map_err(|e| e.to_string())?;
    let _ = write!(
        page,
        "<script type=\"application/json\" id=\"plotted-seats\">{}</script>",
        plotted.replace('<', "\\u003c")
    );
    if !idle.is_empty() {
        let _ = write!(
            page,
            "<p class=\"note\">Not drawn, as nothing reached them: {}.</p>",
            idle.join(", ")
        );
    }
    Ok(())
}

/// What to say of a limited level whose current limit starts at 0 (on a small server limit
/// a level may lend all it has and borrow nothing yet, as in kube-apiserver): until when it
/// could run nothing.
fn idle_start(l: &LevelReport, axis: Axis) -> Option<String> {
    if l.exempt || l.timeline.first()?.concurrency_limit > 0 {
        return None;
    }
    let at = |t: f64| match axis {
        Axis::Utc(start) => format!("{} UTC", utc_parts(start + t).1),
        Axis::Workload | Axis::Trace => format!("{t:.2} s"),
    };
    let nominal = l.nominal_limit;
    Some(match l.timeline.iter().find(|s| s.concurrency_limit > 0) {
        Some(s) => format!(
            "could borrow no seats until {}: its current limit (nominal {nominal} ± borrowing) \
             was 0 from the start, so nothing ran there before then; the apiserver starts the \
             same way.",
            at(s.t)
        ),
        None => format!(
            "could borrow no seats at all: its current limit (nominal {nominal} ± borrowing) \
             stayed 0, so nothing ran there."
        ),
    })
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
            // A sample reads the interval that ends at its time: the bucket ends with its last.
            let t = bucket.last().map_or(0.0, |s| s.t);
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
        let (x_ticks, x_step) = axis.ticks(t_max);
        let y_ticks = if chart.integer {
            integer_ticks(y_max)
        } else {
            Vec::new()
        };
        let y_count = y_ticks.len().max(1);
        let mut c = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .margin_right(32)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(
                Ticked::new(0.0..t_max, Some(x_ticks.clone())),
                Ticked::new(0.0..y_max, chart.integer.then_some(y_ticks)),
            )
            .map_err(|e| e.to_string())?;
        let x_label = |t: &f64| axis.label(*t, x_step);
        let y_label = |y: &f64| {
            if chart.integer {
                format!("{y:.0}")
            } else {
                let text = format!("{y:.3}");
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            }
        };
        let mut mesh = c.configure_mesh();
        mesh.x_desc(axis.description())
            .y_desc(chart.y)
            .x_labels(x_ticks.len())
            .x_label_formatter(&x_label);
        if chart.integer {
            mesh.y_labels(y_count);
        }
        mesh.y_label_formatter(&y_label);
        mesh.draw().map_err(|e| e.to_string())?;
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
