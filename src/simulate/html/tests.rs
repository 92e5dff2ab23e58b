//! The HTML report: self-contained, escaped, one chart set per level that saw requests, both runs
//! of a comparison, and bounded however long the timeline.

use super::*;
use crate::simulate::record::{FlowRejections, Rejected, SchemaReport, WaitSeconds};

fn level(name: &str, arrivals: u64, samples: usize) -> LevelReport {
    LevelReport {
        name: name.to_string(),
        exempt: false,
        nominal_limit: 10,
        arrivals,
        dispatched: arrivals.saturating_sub(3),
        rejected: Rejected {
            queue_full: 3,
            concurrency_limit: 0,
            time_out: 0,
        },
        wait_seconds: WaitSeconds {
            p50: 0.01,
            p90: 0.1,
            p99: 0.5,
            max: 1.0,
        },
        max_seats_in_use: 10,
        top_flows: vec![FlowRejections {
            flow_schema: "fs<&>".to_string(),
            flow_distinguisher: "user\"x'".to_string(),
            rejected: 3,
        }],
        timeline: (0..samples)
            .map(|i| Sample {
                t: i as f64,
                seats_in_use: (i % 11) as u64,
                concurrency_limit: 10,
                nominal_limit: 10,
                waiting: (i % 7) as u32,
                dispatched: 1,
                rejected: u64::from(i == samples / 2) * 1000,
                wait_p50: 0.01,
                wait_p99: 0.5,
            })
            .collect(),
    }
}

fn report(levels: Vec<LevelReport>) -> SimReport {
    SimReport {
        requests: 100,
        skipped: 1,
        bypassed: 0,
        late: 0,
        duration_seconds: 60.0,
        server_concurrency_limit: 600,
        flow_schemas: vec![SchemaReport {
            name: "a<b&\"c\"".to_string(),
            priority_level: "busy".to_string(),
            arrivals: 100,
            dispatched: 97,
            rejected: Rejected::default(),
        }],
        priority_levels: levels,
        clients: Vec::new(),
        notes: Vec::new(),
        start_unix_seconds: None,
    }
}

fn page(runs: &[(&str, &SimReport)]) -> String {
    let mut out = Vec::new();
    write_report(runs, "audit<1>.log", &mut out).expect("write");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn one_self_contained_page_with_charts_for_the_levels_that_saw_requests() {
    let r = report(vec![level("busy", 100, 120), level("idle", 0, 120)]);
    let html = page(&[("simulated", &r)]);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // One section of four charts for `busy`; `idle` is in the table only.
    assert_eq!(html.matches("<section").count(), 1);
    assert_eq!(html.matches("<svg").count(), 4);
    assert_eq!(html.matches("</svg>").count(), 4);
    assert!(html.contains("<td>idle</td>"));
    // Nothing is fetched: the only URL is the SVG namespace.
    let urls = html.matches("http://").count() + html.matches("https://").count();
    assert_eq!(urls, html.matches("http://www.w3.org/2000/svg").count());
    assert!(!html.contains("<script"));
    assert!(!html.contains("<link"));
    for chart in [
        "Seats",
        "Waiting in queues",
        "Rejected per interval",
        "Queue wait",
    ] {
        assert!(html.contains(chart), "{chart}");
    }
}

#[test]
fn names_from_the_configuration_and_the_trace_are_escaped() {
    let r = report(vec![level("busy", 100, 10)]);
    let html = page(&[("simulated", &r)]);
    assert!(html.contains("a&lt;b&amp;&quot;c&quot;"));
    assert!(html.contains("fs&lt;&amp;&gt;"));
    assert!(html.contains("user&quot;x&#39;"));
    assert!(html.contains("audit&lt;1&gt;.log"));
    assert!(!html.contains("a<b&"));
}

#[test]
fn a_comparison_draws_both_runs_and_labels_them() {
    let (a, b) = (
        report(vec![level("busy", 100, 30)]),
        report(vec![level("busy", 100, 30)]),
    );
    let html = page(&[("baseline", &a), ("candidate", &b)]);
    assert!(html.contains("<h2>baseline</h2>"));
    assert!(html.contains("<h2>candidate</h2>"));
    assert!(html.contains("&#9632; baseline"));
    assert!(html.contains("&#9632; candidate"));
    assert_eq!(html.matches("<svg").count(), 4, "both runs share the axes");
    // Both colours appear in the charts.
    assert!(html.contains("#1F77B4"), "baseline colour");
    assert!(html.contains("#FF7F0E"), "candidate colour");
}

#[test]
fn a_day_of_samples_stays_small_and_keeps_its_peaks() {
    let r = report(vec![level("busy", 100, 86_400)]);
    let html = page(&[("simulated", &r)]);
    assert!(html.len() < 3_000_000, "{} bytes", html.len());
    assert!(html.contains("at most 2000 points"));
    let points = downsample(&r.priority_levels[0].timeline, |s| s.rejected as f64);
    assert!(points.len() <= MAX_POINTS);
    assert!(
        points.iter().any(|(_, v)| *v == 1000.0),
        "the one peak survives"
    );
}
