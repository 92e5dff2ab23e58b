//! Standard output's renderings: runs labelled, one JSON object per run or the comparison's
//! wrapper, the text tables and, for two runs, their differences.

use std::time::Duration;

use super::*;
use crate::simulate::record::Recorder;

fn report(dispatched: u64) -> SimReport {
    let mut recorder = Recorder::default();
    recorder.level("workload-low", false, 10);
    for _ in 0..dispatched {
        recorder.request(false, false);
        recorder.arrived("workload-low", "service-accounts");
        recorder.dispatched(
            "workload-low",
            &std::sync::Arc::from("service-accounts"),
            "",
            Duration::ZERO,
            1,
        );
    }
    recorder.report(Duration::from_secs(2), 600)
}

fn written(runs: &[(&str, &SimReport)], format: Format) -> String {
    let mut out = Vec::new();
    write(runs, format, &mut out).expect("written");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn runs_are_labelled_baseline_and_candidate_only_when_comparing() {
    let reports = [report(1), report(2)];
    let labels = |comparing| -> Vec<&str> {
        labelled(&reports, comparing)
            .iter()
            .map(|(l, _)| *l)
            .collect()
    };
    assert_eq!(labels(true), ["baseline", "candidate"]);
    assert_eq!(labels(false), ["simulated", "simulated"]);
    assert_eq!(labelled(&reports[..1], true)[0].0, "simulated");
}

#[test]
fn json_is_one_object_per_run_or_the_comparison_wrapper() {
    let (one, two) = (report(1), report(2));
    let alone = written(&[("simulated", &one)], Format::Json);
    assert_eq!(alone.lines().count(), 1);
    let value: serde_json::Value = serde_json::from_str(&alone).expect("JSON");
    assert_eq!(value["requests"], 1);
    assert_eq!(value["skipReasons"], serde_json::json!([]));
    let compared = written(&[("baseline", &one), ("candidate", &two)], Format::Json);
    assert_eq!(compared.lines().count(), 1);
    let value: serde_json::Value = serde_json::from_str(&compared).expect("JSON");
    assert_eq!(value["baseline"]["requests"], 1);
    assert_eq!(value["candidate"]["requests"], 2);
}

#[test]
fn text_gives_each_run_its_tables_and_two_runs_their_differences() {
    let (one, two) = (report(1), report(2));
    let alone = written(&[("simulated", &one)], Format::Text);
    assert!(
        alone.starts_with(
            "1 requests over 2.0 s (0 bypassing flow control, 0 arrived late, 0 lines \
             skipped); server concurrency limit 600\n"
        ),
        "{alone}"
    );
    assert!(!alone.contains("=="), "{alone}");
    let compared = written(&[("baseline", &one), ("candidate", &two)], Format::Text);
    assert!(compared.starts_with("== baseline\n"), "{compared}");
    assert!(compared.contains("\n== candidate\n"), "{compared}");
    let differences = compared
        .split("== baseline → candidate\n")
        .nth(1)
        .expect("differences");
    let row = differences
        .lines()
        .find(|l| l.starts_with("workload-low"))
        .expect("a row per level");
    assert!(row.contains("1 → 2"), "{row}");
}

#[test]
fn recorded_waits_taken_out_are_said_in_text_only_when_there_were_any_and_always_in_json() {
    let none = report(1);
    let json: serde_json::Value =
        serde_json::from_str(&written(&[("simulated", &none)], Format::Json)).expect("JSON");
    assert_eq!(
        json["recordedWaitsTakenOut"],
        serde_json::json!({"requests": 0, "seconds": 0.0})
    );
    assert!(!written(&[("simulated", &none)], Format::Text).contains("recorded"));
    let mut some = report(1);
    some.recorded_waits_taken_out = WaitsTakenOut {
        requests: 3,
        seconds: 2.25,
    };
    let text = written(&[("simulated", &some)], Format::Text);
    assert!(
        text.starts_with(
            "1 requests over 2.0 s (0 bypassing flow control, 0 arrived late, 0 lines skipped, \
             3 recorded queue waits taken out (2.2 s)); server concurrency limit 600\n"
        ),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&written(&[("simulated", &some)], Format::Json)).expect("JSON");
    assert_eq!(json["recordedWaitsTakenOut"]["requests"], 3);
    assert_eq!(json["recordedWaitsTakenOut"]["seconds"], 2.25);
}
