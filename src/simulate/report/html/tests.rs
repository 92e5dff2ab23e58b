//! The HTML report: self-contained, escaped, one chart set per level that saw requests, both runs
//! of a comparison, and bounded however long the timeline.

use super::*;
use crate::simulate::report::{FlowRejections, Rejected, Sample, SchemaReport, WaitSeconds};

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
        longest_waits: Vec::new(),
        top_flows: vec![FlowRejections {
            flow_schema: "fs<&>".to_string(),
            flow_distinguisher: "user\"x'".to_string(),
            rejected: 3,
        }],
        timeline: (0..samples)
            .map(|i| Sample {
                t: i as f64,
                seats_in_use: (i % 11) as u64,
                max_seats_in_use: (i % 11) as u64,
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
        skip_reasons: vec![crate::simulate::report::SkipReason {
            example: "line 1: not a JSON object (EOF while parsing)".to_string(),
            lines: 1,
        }],
        recorded_waits_taken_out: crate::simulate::report::WaitsTakenOut::default(),
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
    write_report(runs, ReportSource::Trace("audit<1>.log"), &mut out).expect("write");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn one_self_contained_page_with_charts_for_the_levels_that_saw_requests() {
    let r = report(vec![level("busy", 100, 120), level("idle", 0, 120)]);
    let html = page(&[("simulated", &r)]);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // One section of four charts for `busy`; `idle` is folded away in the table.
    assert_eq!(html.matches("<section class=\"level\"").count(), 1);
    assert_eq!(
        html.matches("<svg").count() - html.matches("aria-hidden").count(),
        4
    );
    assert!(html.contains("1 levels saw no requests: idle</summary>"));
    assert!(html.contains("Not drawn, as nothing reached them: idle."));
    // Why lines were skipped, not only how many.
    assert!(
        html.contains("<li>1 line(s), such as line 1: not a JSON object (EOF while parsing)</li>")
    );
    // Nothing is fetched: the only URL is the SVG namespace.
    let urls = html.matches("http://").count() + html.matches("https://").count();
    assert_eq!(urls, html.matches("http://www.w3.org/2000/svg").count());
    // No script runs: the only script element is the data of the seats plotted.
    assert_eq!(
        html.matches("<script").count(),
        html.matches("<script type=\"application/json\" id=\"plotted-seats\">")
            .count()
    );
    assert!(!html.contains("<link"));
    for chart in ["Seats", "Waiting in queues", "Rejected", "Queue wait"] {
        assert!(html.contains(chart), "{chart}");
    }
}

#[test]
fn the_summary_says_what_was_rejected_and_queued() {
    let r = report(vec![level("busy", 100, 10)]);
    let html = page(&[("simulated", &r)]);
    let summary = &html[html.find("<h2>Summary</h2>").expect("summary")..];
    assert!(
        summary.contains(
            "<b>busy</b></a> rejected 3 of 100 requests (3.0%): 3 because its queues were full."
        ),
        "{summary}"
    );
    assert!(summary.contains("<b>busy</b></a> queued requests: half waited 10 ms or less"));
    assert!(summary.contains("used its whole nominal limit at its peak: 10 of 10 seats."));
    // Every column carries its unit.
    assert!(html.contains("wait p99 <small>(s)</small>"));
    assert!(html.contains("limit <small>(seats)</small>"));
    assert!(html.contains("x=\"1\"") || html.contains("seconds since the first arrival"));
}

#[test]
fn an_exempt_level_has_no_limit_lines() {
    let mut exempt = level("exempt", 10, 30);
    exempt.exempt = true;
    let html = page(&[("simulated", &report(vec![exempt]))]);
    assert!(html.contains("(exempt: no limit)"));
    assert!(html.contains("exempt (none)"));
    assert!(
        !html.contains("current limit (nominal ± borrowing)</span>"),
        "no limit in the legend"
    );
    let busy = page(&[("simulated", &report(vec![level("busy", 10, 30)]))]);
    assert!(busy.contains("current limit (nominal ± borrowing)</span>"));
}

#[test]
fn a_trace_on_the_wall_clock_reads_utc() {
    let mut r = report(vec![level("busy", 100, 30)]);
    // 2026-11-26 10:00:00 UTC.
    r.start_unix_seconds = Some(1_795_687_200.0);
    let html = page(&[("simulated", &r)]);
    assert!(
        html.contains("60.0 s from 2026-11-26 10:00:00 UTC"),
        "{}",
        &html[..600]
    );
    assert!(html.contains("time (UTC), from 2026-11-26"));
    assert!(html.contains("10:00:"));
    assert_eq!(utc_date_time(0.0), "1970-01-01 00:00:00");
    assert_eq!(utc_date_time(951_782_400.0), "2000-02-29 00:00:00");
}

#[test]
fn utc_dates_cross_leap_days_and_32_bit_seconds() {
    let cases = [
        (1_709_251_199.9, "2024-02-29", "23:59:59"),
        (-2_203_891_201.0, "1900-02-28", "23:59:59"),
        (4_107_542_400.0, "2100-03-01", "00:00:00"),
        (2_147_483_648.5, "2038-01-19", "03:14:08"),
        (-0.5, "1969-12-31", "23:59:59"),
        (253_402_300_799.0, "9999-12-31", "23:59:59"),
        // Outside four-digit years: the nearest day within them.
        (1e15, "9999-12-31", "23:59:59"),
        (f64::NEG_INFINITY, "0000-01-01", "00:00:00"),
    ];
    for (seconds, date, time) in cases {
        let want = (date.to_string(), time.to_string());
        assert_eq!(utc_parts(seconds), want, "{seconds}");
    }
}

#[test]
fn a_comparison_tells_the_runs_apart_and_lists_the_differences_largest_first() {
    let a = report(vec![level("busy", 100, 30), level("calm", 10, 30)]);
    let mut b = report(vec![level("busy", 100, 30), level("calm", 10, 30)]);
    b.priority_levels[0].rejected.queue_full = 40;
    b.priority_levels[0].dispatched = 60;
    b.priority_levels[1].rejected.queue_full = 5;
    b.priority_levels[1].dispatched = 5;
    b.flow_schemas[0].priority_level = "calm".to_string();
    let html = page(&[("baseline", &a), ("candidate", &b)]);
    assert!(html.contains("<h2>baseline run</h2>"));
    assert!(html.contains("<h2>candidate run</h2>"));
    assert!(html.contains("the candidate rejects 45 requests where the baseline rejects 6"));
    let busy = html.find("<td>busy</td><td>97 → 60").expect("busy's row");
    let calm = html.find("<td>calm</td><td>7 → 5").expect("calm's row");
    assert!(busy < calm, "the largest change first");
    assert!(
        html.contains("<td>busy → calm</td>"),
        "the FlowSchema moved"
    );
    // Both runs share the axes, and the candidate's lines are dashed.
    let charts = html.matches("<svg").count() - html.matches("aria-hidden").count();
    assert_eq!(charts, 8, "four charts for each of two levels");
    assert!(
        html.contains("stroke-dasharray=\"6 4\""),
        "the legend shows the dash"
    );
}

#[test]
fn a_workload_report_has_its_clients_and_seconds() {
    let mut r = report(vec![level("busy", 100, 30)]);
    r.clients = vec![crate::simulate::record::ClientRecord::new("heavy<1>")
        .report(std::time::Duration::from_secs(60))];
    let mut out = Vec::new();
    write_report(
        &[("simulated", &r)],
        ReportSource::Workload("w.yaml"),
        &mut out,
    )
    .expect("write");
    let html = String::from_utf8(out).expect("UTF-8");
    assert!(html.contains("Workload: <code>w.yaml</code>"));
    assert!(html.contains("<td>heavy&lt;1&gt;</td>"));
    assert!(html.contains("average <small>(seats)</small>"));
    assert!(html.contains("seconds since the start"));
}

#[test]
fn a_day_of_samples_stays_small_and_keeps_its_peaks() {
    let r = report(vec![level("busy", 100, 86_400)]);
    let html = page(&[("simulated", &r)]);
    assert!(html.len() < 3_000_000, "{} bytes", html.len());
    assert!(html.contains(&format!("at most {MAX_POINTS} points")));
    let points = downsample(&r.priority_levels[0].timeline, |s| s.rejected as f64);
    assert!(points.len() <= MAX_POINTS);
    assert!(
        points.iter().any(|(_, v)| *v == 1000.0),
        "the one peak survives"
    );
}

proptest::proptest! {
    /// Whatever the names in a configuration, a trace or a workload, they never open a tag:
    /// every `<` in the page starts one of the page's own tags.
    #[test]
    fn no_name_opens_a_tag(name in "[a-z<>&\"' /=]{1,16}") {
        let mut l = level(&name, 10, 5);
        l.top_flows[0].flow_distinguisher = name.clone();
        l.top_flows[0].flow_schema = name.clone();
        let mut r = report(vec![l]);
        r.flow_schemas[0].name = name.clone();
        r.flow_schemas[0].priority_level = name.clone();
        r.clients = vec![crate::simulate::record::ClientRecord::new(&name)
            .report(std::time::Duration::from_secs(1))];
        let mut b = r.clone();
        b.flow_schemas[0].dispatched = 1;
        let mut out = Vec::new();
        write_report(&[("baseline", &r), ("candidate", &b)], ReportSource::Workload(&name), &mut out)
            .expect("write");
        let html = String::from_utf8(out).expect("UTF-8");
        for (i, _) in html.match_indices('<') {
            let next = html[i + 1..].chars().next().unwrap_or(' ');
            proptest::prop_assert!(
                next.is_ascii_alphabetic() || next == '/' || next == '!',
                "a stray < at {}: {}", i, &html[i.saturating_sub(40)..(i + 40).min(html.len())]
            );
        }
        let escaped = escape(&name);
        proptest::prop_assert!(html.contains(&escaped));
    }
}
