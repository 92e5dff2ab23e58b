//! A trace as the replay takes it: the window, the lines skipped by kind, where reading stops,
//! and what the run says when nothing could be replayed.

use std::io::Cursor;
use std::time::Duration;

use super::super::{LineProblem, TraceOptions, TraceReader, EXPECTED_FORMATS};
use super::*;

const AUDIT: &str = include_str!("../../../../tests/fixtures/audit/kube-apiserver-audit.log");

fn line(at: f64) -> String {
    format!(r#"{{"at":{at},"durationMs":10,"method":"GET","url":"/api"}}"#)
}

/// The events and lines seen of `text` within `window`, and what reading found.
fn read(text: &str, window: Window, strict: bool) -> (Vec<TraceEvent>, Vec<u64>, TraceRun) {
    let options = TraceOptions::new(Some(Duration::ZERO), Duration::from_secs(60), strict);
    let reader = TraceReader::new(Cursor::new(text.as_bytes().to_vec()), options);
    let mut seen = Vec::new();
    let mut input = TraceInput::new(reader, window, |e: &TraceLineError| seen.push(e.line));
    let events: Vec<TraceEvent> = input.by_ref().collect();
    let run = input.finish().expect("read");
    (events, seen, run)
}

fn arrivals(events: &[TraceEvent]) -> Vec<f64> {
    events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Request(r) => Some(r.arrival.as_secs_f64()),
            TraceEvent::Ended { .. } => None,
        })
        .collect()
}

#[test]
fn the_window_is_measured_from_the_first_arrival_and_ends_the_reading() {
    let text: Vec<String> = [10.0, 11.0, 12.0, 13.0, 14.0].map(line).to_vec();
    let window = Window {
        from: Some(Duration::from_secs(1)),
        until: Some(Duration::from_secs(3)),
    };
    let (events, _, run) = read(&(text.join("\n") + "\nnot json\n"), window, false);
    assert_eq!(arrivals(&events), [11.0, 12.0, 13.0]);
    // Past `until` nothing more is read: the malformed last line is not met.
    assert_eq!(run.skipped, SkippedLines::default());
    // Trace lines run on a clock of their own: no wall-clock start.
    assert_eq!(run.wall_clock_start, None);
    assert_eq!(run.format, Some(TraceFormat::TraceLines));
}

#[test]
fn an_audit_log_starts_on_the_wall_clock_at_its_first_event_replayed() {
    let window = Window {
        from: Some(Duration::from_millis(5)),
        until: None,
    };
    let (events, _, run) = read(AUDIT, window, false);
    let first = arrivals(&events)[0];
    let start = run.wall_clock_start.expect("wall clock").as_secs_f64();
    assert_eq!(start, first);
    // 2026-11-24, on the UNIX clock.
    assert!(
        (1_795_000_000.0..1_796_000_000.0).contains(&start),
        "{start}"
    );
}

#[test]
fn skipped_lines_are_counted_by_kind_with_the_first_as_example() {
    let text = [
        "{}".to_string(),
        line(0.0),
        r#"{"at":"soon"}"#.to_string(),
        r#"{"at":-1,"durationMs":1,"method":"GET","url":"/"}"#.to_string(),
        r#"{"at":1,"durationMs":-1,"method":"GET","url":"/"}"#.to_string(),
        r#"{"at":-2,"durationMs":1,"method":"GET","url":"/"}"#.to_string(),
        line(1.0),
    ]
    .join("\n");
    let (events, seen, run) = read(&text, Window::default(), false);
    assert_eq!(arrivals(&events), [0.0, 1.0]);
    assert_eq!(seen, [1, 3, 4, 5, 6]);
    let kinds: Vec<(u64, u64, &LineProblem)> = run
        .skipped
        .kinds
        .iter()
        .map(|k| (k.example.line, k.lines, &k.example.problem))
        .collect();
    assert_eq!(run.skipped.lines, 5);
    // "Not a trace line" whether no format was found yet or a trace line does not parse; a bad
    // time per field.
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert_eq!((kinds[0].0, kinds[0].1), (1, 2));
    assert_eq!(kinds[0].2, &LineProblem::NoFormat);
    assert_eq!((kinds[1].0, kinds[1].1), (4, 2));
    assert!(matches!(
        kinds[1].2,
        LineProblem::NotATime { field: "at", .. }
    ));
    assert_eq!((kinds[2].0, kinds[2].1), (5, 1));
    assert!(!run.stopped);
}

#[test]
fn problems_of_a_kind_are_the_same_whatever_else_they_say() {
    use LineProblem::*;
    let same = [
        (NoFormat, NotTraceLine("x".into())),
        (NotJson("a".into()), NotJson("b".into())),
        (Timestamp("a".into()), Timestamp("b".into())),
        (
            NotATime {
                field: "at",
                value: -1.0,
            },
            NotATime {
                field: "at",
                value: -2.0,
            },
        ),
        (NotAuditKind("Pod".into()), NotAuditKind("Pod".into())),
    ];
    for (a, b) in &same {
        assert!(a.same_kind(b) && b.same_kind(a), "{a:?} {b:?}");
    }
    let different = [
        (NotAuditKind("Pod".into()), NotAuditKind("Foo".into())),
        (AuditWithout("verb"), AuditWithout("user")),
        (
            NoHttpMethod("impersonate".into()),
            NoHttpMethod("escalate".into()),
        ),
        (NotAuditStage("a".into()), NotAuditKind("a".into())),
        (AccessWithout("uri"), AccessWithoutDuration),
        (Method("a".into()), Groups("a".into())),
    ];
    for (a, b) in &different {
        assert!(!a.same_kind(b) && !b.same_kind(a), "{a:?} {b:?}");
    }
}

#[test]
fn strict_stops_at_the_first_malformed_line_and_says_so() {
    let text = [line(0.0), "nope".to_string(), line(1.0)].join("\n");
    let (events, seen, run) = read(&text, Window::default(), true);
    assert_eq!(arrivals(&events), [0.0]);
    assert_eq!(seen, [2]);
    assert!(run.stopped);
    assert_eq!(run.skipped.lines, 1);
}

#[test]
fn nothing_replayed_says_what_was_read_and_the_formats_once() {
    let (_, _, run) = read("nope\n{}\n", Window::default(), false);
    assert!(run.nothing_replayed());
    let said = run.why_nothing("t.jsonl");
    assert!(
        said.starts_with(
            "t.jsonl: no line could be replayed (2 lines read, 2 malformed, 0 of stages or \
             events that are not requests; first problem: line 1: not a JSON object ("
        ),
        "{said}"
    );
    assert!(said.ends_with(&format!("); {EXPECTED_FORMATS}")), "{said}");
    assert_eq!(said.matches(EXPECTED_FORMATS).count(), 1, "{said}");
    let (_, _, empty) = read("", Window::default(), false);
    assert_eq!(
        empty.why_nothing("-"),
        format!("-: no line could be replayed (it is empty); {EXPECTED_FORMATS}")
    );
}

#[test]
fn the_recorded_waits_of_the_requests_replayed_are_counted_and_said_when_kept() {
    let waited = |id: &str, wait: &str| {
        AUDIT
            .lines()
            .nth(1)
            .expect("a1")
            .replace("\"a1\"", &format!("\"{id}\""))
            .replace(
                "\"annotations\":{",
                &format!(
                    "\"annotations\":{{\"apiserver.latency.k8s.io/apf-queue-wait\":\"{wait}\","
                ),
            )
    };
    let text = [
        waited("x1", "1.5s"),
        waited("x2", "250ms"),
        AUDIT.lines().nth(1).expect("a1").to_string(),
    ]
    .join("\n");
    let (events, _, run) = read(&text, Window::default(), false);
    assert_eq!(events.len(), 3);
    let two = RecordedWaits {
        requests: 2,
        total: Duration::from_millis(1_750),
    };
    assert_eq!((run.recorded_waits, run.waits_kept), (two, false));
    assert_eq!(run.waits_taken_out(), two);
    assert_eq!(run.waits_kept_note(), None);
    let options = TraceOptions {
        keep_recorded_waits: true,
        ..TraceOptions::new(Some(Duration::ZERO), Duration::from_secs(60), false)
    };
    let reader = TraceReader::new(Cursor::new(text.into_bytes()), options);
    let mut input = TraceInput::new(reader, Window::default(), |_: &TraceLineError| {});
    assert_eq!(input.by_ref().count(), 3);
    let run = input.finish().expect("read");
    assert_eq!(run.recorded_waits, two);
    assert_eq!(run.waits_taken_out(), RecordedWaits::default());
    assert_eq!(
        run.waits_kept_note().as_deref(),
        Some(
            "2 requests have a recorded queue wait (1.8 s in all), replayed as part of their \
             execution (--keep-recorded-waits)"
        )
    );
}
