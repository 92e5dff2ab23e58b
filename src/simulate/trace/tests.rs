//! Trace readers: every field used, every stage, missing fields, malformed lines, reordering.

use std::io::{BufRead, Cursor};
use std::time::Duration;

use super::*;
use crate::classify::MAX_LINE_BYTES;

const FIXTURE: &str = include_str!("../../../tests/fixtures/audit/kube-apiserver-audit.log");

fn reader(text: &str, window: Duration) -> TraceReader<Cursor<Vec<u8>>> {
    let options = TraceOptions {
        reorder_window: window,
        strict: false,
        keep_recorded_waits: false,
    };
    TraceReader::new(Cursor::new(text.as_bytes().to_vec()), options)
}

/// Everything a reader yields, and its counts at the end: read on the caller's thread and read
/// ahead on a thread of its own (its lines decoded there, by the caller, or shared as it goes),
/// which must agree in every respect.
fn read_all(text: &str, window: Duration) -> (Vec<TraceEvent>, Vec<TraceLineError>, TraceStats) {
    let inline = drain(reader(text, window));
    let options = TraceOptions {
        reorder_window: window,
        strict: false,
        keep_recorded_waits: false,
    };
    for sharing in [
        ahead::Sharing::WhenIdle,
        ahead::Sharing::Always,
        ahead::Sharing::Never,
    ] {
        let input = Cursor::new(text.as_bytes().to_vec());
        let ahead = TraceReader::read_ahead_sharing(input, options.clone(), sharing)
            .expect("the reading thread starts");
        assert_eq!(
            drain(ahead),
            inline,
            "read ahead ({sharing:?}), the same trace reads differently"
        );
    }
    inline
}

fn drain<R: BufRead>(mut r: TraceReader<R>) -> (Vec<TraceEvent>, Vec<TraceLineError>, TraceStats) {
    let (mut events, mut errors) = (Vec::new(), Vec::new());
    for item in &mut r {
        match item {
            Ok(e) => events.push(e),
            Err(TraceError::Line(e)) => errors.push(e),
            Err(TraceError::Io(e)) => panic!("{e}"),
        }
    }
    (events, errors, r.stats())
}

fn requests(events: &[TraceEvent]) -> Vec<&TraceRequest> {
    events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Request(r) => Some(r),
            TraceEvent::Ended { .. } => None,
        })
        .collect()
}

/// 2026-11-24T10:00:00Z since the epoch, plus `micros`.
fn at(micros: u64) -> Duration {
    Duration::from_secs(1_795_514_400) + Duration::from_micros(micros)
}

#[test]
fn audit_events_give_requests_in_arrival_order_with_every_field() {
    let (events, errors, stats) = read_all(FIXTURE, Duration::from_secs(65));
    assert!(errors.is_empty(), "{errors:?}");
    let r = requests(&events);
    let keys: Vec<&str> = r.iter().map(|r| r.key.as_str()).collect();
    // a2 (a list) completes after a3 arrived: it comes out first all the same.
    assert_eq!(keys, ["a1", "a2", "a3", "w1", "r1", "i1", "n1"]);
    let a1 = r[0];
    assert_eq!(a1.arrival, at(100));
    assert_eq!(a1.duration, Some(Duration::from_millis(12)));
    assert_eq!(a1.first_byte, None);
    assert_eq!(a1.method, http::Method::GET);
    assert_eq!(a1.uri, "/api/v1/namespaces/default/pods/web-1");
    assert_eq!(a1.identity.user, "system:node:node-1");
    assert_eq!(a1.identity.uid, "uid-node-1");
    assert_eq!(a1.identity.groups, ["system:nodes", "system:authenticated"]);
    assert_eq!(a1.status, Some(200));
    assert_eq!(a1.line, 2);
    assert_eq!(
        r[1].uri,
        "/apis/apps/v1/replicasets?limit=500&resourceVersion=0"
    );
    assert_eq!(r[1].duration, Some(Duration::from_millis(250)));
    // The watch: replayed from ResponseStarted, open ended, then ended by ResponseComplete.
    let w1 = r[3];
    assert_eq!(w1.duration, None);
    assert_eq!(w1.first_byte, Some(Duration::from_micros(1500)));
    assert!(events.contains(&TraceEvent::Ended {
        key: "w1".to_string(),
        at: at(300_300_000),
    }));
    assert_eq!(r[4].status, Some(429));
    assert_eq!(r[4].method, http::Method::POST);
    // Impersonation: the impersonated user is classified, with its groups (and the
    // `system:authenticated` the apiserver's impersonation filter adds) and extra.
    let i1 = r[5];
    assert_eq!(i1.identity.user, "alice");
    assert_eq!(i1.identity.groups, ["dev", "system:authenticated"]);
    assert_eq!(i1.identity.extra["scopes"], ["x"]);
    assert_eq!(i1.method, http::Method::PATCH);
    assert_eq!(r[6].uri, "/healthz");
    assert_eq!(r[6].identity.user, "system:anonymous");
    assert_eq!(stats.requests, 7);
    assert_eq!(stats.ignored, 2, "the RequestReceived stages");
    assert_eq!(stats.late, 0);
}

#[test]
fn the_format_is_detected_from_the_first_line() {
    let mut audit = reader(FIXTURE, Duration::ZERO);
    let _ = audit.next();
    assert_eq!(audit.format(), Some(TraceFormat::AuditEvents));
    let line = r#"{"at":0.5,"durationMs":20,"method":"GET","url":"/api/v1/pods","user":"alice"}"#;
    let mut lines = reader(line, Duration::ZERO);
    let _ = lines.next();
    assert_eq!(lines.format(), Some(TraceFormat::TraceLines));
    let access = r#"{"timestamp":"2026-11-24T10:00:00.100Z","level":"DEBUG","message":"Request","method":"GET","user":"alice","groups":"[\"dev\",\"system:authenticated\"]","uri":"/api/v1/namespaces/ns/pods?limit=5","received":"2026-11-24T10:00:00.050000000Z","verb":"list","flow_schema":"global-default","priority_level":"global-default","queue_wait_ms":20.0,"status":200,"duration_ms":50.0,"target":"kube_apf_proxy::access"}"#;
    let mut log = reader(access, Duration::ZERO);
    let Some(Ok(TraceEvent::Request(r))) = log.next() else {
        panic!("one request");
    };
    assert_eq!(log.format(), Some(TraceFormat::AccessLog));
    assert_eq!(r.arrival, at(50_000));
    // The access log knows the queue wait: what is replayed is the execution alone.
    assert_eq!(r.duration, Some(Duration::from_millis(30)));
    assert_eq!(r.uri, "/api/v1/namespaces/ns/pods?limit=5");
    assert_eq!(r.identity.groups, ["dev", "system:authenticated"]);
    // A line with `execution_ms` (from the seats' grant) replays that.
    let newer = access.replace(
        "\"duration_ms\":50.0",
        "\"duration_ms\":50.0,\"execution_ms\":12.5",
    );
    let Some(Ok(TraceEvent::Request(r))) = reader(&newer, Duration::ZERO).next() else {
        panic!("one request");
    };
    assert_eq!(r.duration, Some(Duration::from_micros(12_500)));
}

#[test]
fn access_log_lines_that_never_reached_flow_control_and_other_events_are_skipped() {
    let text = concat!(
        r#"{"timestamp":"2026-11-24T10:00:00Z","level":"INFO","message":"Serving","target":"kube_apf_proxy::app"}"#,
        "\n",
        r#"{"target":"kube_apf_proxy::access","method":"GET","user":"","uri":"/api","received":"2026-11-24T10:00:00Z","flow_schema":"","status":401,"duration_ms":1.0}"#,
        "\n",
    );
    let (events, errors, stats) = read_all(text, Duration::ZERO);
    assert!(events.is_empty() && errors.is_empty());
    assert_eq!(stats.ignored, 2);
}

#[test]
fn trace_lines_carry_at_duration_and_the_classify_identity() {
    let text = concat!(
        r#"{"at":1.5,"durationMs":40,"method":"GET","url":"https://kube:6443/api/v1/pods?watch=1","user":"bob","groups":["dev"],"firstByteMs":3}"#,
        "\n",
        r#"{"at":0.25,"durationMs":10,"method":"POST","url":"/api/v1/namespaces/a/pods"}"#,
        "\n",
    );
    let (events, errors, _) = read_all(text, Duration::from_secs(5));
    assert!(errors.is_empty(), "{errors:?}");
    let r = requests(&events);
    // Reordered: 0.25 s comes before 1.5 s.
    assert_eq!(r[0].arrival, Duration::from_millis(250));
    assert_eq!(r[0].identity.user, "system:anonymous");
    assert_eq!(r[1].uri, "/api/v1/pods?watch=1");
    assert_eq!(r[1].first_byte, Some(Duration::from_millis(3)));
    assert_eq!(r[1].duration, Some(Duration::from_millis(40)));
    assert_eq!(r[1].identity.groups, ["dev", "system:authenticated"]);
}

#[test]
fn a_trace_line_that_impersonates_is_replayed_as_the_impersonated_user() {
    let text = r#"{"at":0,"durationMs":5,"method":"GET","url":"/api/v1/pods","user":"admin","groups":["system:masters"],"impersonate":{"user":"alice","groups":["dev"]}}"#;
    let (events, errors, _) = read_all(text, Duration::ZERO);
    assert!(errors.is_empty(), "{errors:?}");
    let r = requests(&events);
    assert_eq!(r[0].identity.user, "alice");
    assert_eq!(r[0].identity.groups, ["dev", "system:authenticated"]);
}

#[test]
fn malformed_lines_are_reported_with_their_number_and_skipped() {
    let good = r#"{"at":0,"durationMs":1,"method":"GET","url":"/api"}"#;
    let text = format!(
        "{good}\nnot json\n\n{{\"at\":-1,\"durationMs\":1,\"method\":\"GET\",\"url\":\"/\"}}\n{}\n{good}\n",
        "x".repeat(MAX_LINE_BYTES + 10)
    );
    let (events, errors, stats) = read_all(&text, Duration::ZERO);
    assert_eq!(events.len(), 2);
    let lines: Vec<u64> = errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 4, 5]);
    assert_eq!(
        errors[1].problem,
        LineProblem::NotATime {
            field: "at",
            value: -1.0
        }
    );
    assert_eq!(errors[1].to_string(), "line 4: at: -1 is not a time");
    assert_eq!(errors[2].problem, LineProblem::TooLong);
    assert_eq!(stats.malformed, 3);
}

#[test]
fn audit_events_without_a_field_name_it() {
    let cases = [
        ("stage", "stage"),
        ("auditID", "auditID"),
        (
            "requestReceivedTimestamp",
            "requestReceivedTimestamp or timestamp",
        ),
        ("requestURI", "requestURI"),
        ("verb", "verb"),
        ("user", "user"),
    ];
    let line = FIXTURE.lines().nth(1).expect("a line");
    for (field, named) in cases {
        let mut event: serde_json::Value = serde_json::from_str(line).expect("json");
        event.as_object_mut().expect("object").remove(field);
        let (events, errors, _) = read_all(&event.to_string(), Duration::ZERO);
        assert!(events.is_empty(), "{field}");
        assert_eq!(
            errors[0].problem,
            LineProblem::AuditWithout(named),
            "{field}"
        );
    }
    let bad_time = line.replace("2026-11-24T10:00:00.012100Z", "yesterday");
    let (_, errors, _) = read_all(&bad_time, Duration::ZERO);
    assert!(
        matches!(&errors[0].problem, LineProblem::Timestamp(why) if why.contains("yesterday")),
        "{}",
        errors[0].problem
    );
    let bad_stage = line.replace("ResponseComplete", "Sometime");
    let (_, errors, _) = read_all(&bad_stage, Duration::ZERO);
    assert_eq!(
        errors[0].problem,
        LineProblem::NotAuditStage("Sometime".to_string())
    );
    let wrong_kind = FIXTURE
        .lines()
        .next()
        .expect("line")
        .replacen("\"Event\"", "\"Pod\"", 1);
    // The first line decides the format: after an audit event, a Pod is a bad audit line.
    let (_, errors, _) = read_all(&format!("{line}\n{wrong_kind}\n"), Duration::ZERO);
    assert_eq!(
        errors[0].problem,
        LineProblem::NotAuditKind("Pod".to_string())
    );
}

#[test]
fn the_format_comes_from_the_first_line_that_is_one() {
    let audit = FIXTURE.lines().nth(1).expect("a line");
    let trace = r#"{"at":0,"durationMs":1,"method":"GET","url":"/api"}"#;
    let core_event = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"}}"#;
    // (text, requests read, malformed lines, the format)
    let cases = [
        // A rotated log read from mid-line: the fragment is skipped, the rest is read.
        (
            format!("{}\n{audit}\n", &audit[40..]),
            1,
            1,
            Some(TraceFormat::AuditEvents),
        ),
        (
            format!("{}\n\n{trace}\n", &trace[..10]),
            1,
            1,
            Some(TraceFormat::TraceLines),
        ),
        // A core v1 Event is not an audit event, nor anything else.
        (
            format!("{core_event}\n{audit}\n"),
            1,
            1,
            Some(TraceFormat::AuditEvents),
        ),
        ("{\"x\":1}\nnot json\n".to_string(), 0, 2, None),
        (
            format!("{audit}\n{}\n", &audit[..30]),
            1,
            1,
            Some(TraceFormat::AuditEvents),
        ),
    ];
    for (text, want_requests, want_malformed, want_format) in cases {
        let mut r = reader(&text, Duration::ZERO);
        let items: Vec<_> = (&mut r).collect();
        let stats = r.stats();
        assert_eq!(stats.requests, want_requests, "{text}: {items:?}");
        assert_eq!(stats.malformed, want_malformed, "{text}");
        assert_eq!(r.format(), want_format, "{text}");
    }
}

#[test]
fn audit_events_without_api_version_or_with_only_the_old_timestamp_are_read() {
    let line = FIXTURE.lines().nth(1).expect("a line");
    let event: serde_json::Value = serde_json::from_str(line).expect("json");
    let received = event["requestReceivedTimestamp"].clone();
    let edit = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut e = event.clone();
        f(e.as_object_mut().expect("object"));
        e.to_string()
    };
    // (what, line, arrival is the fixture's, duration, counted without duration)
    let cases = [
        (
            "as written",
            edit(&|_| {}),
            Some(Duration::from_millis(12)),
            0,
        ),
        (
            "falco: no apiVersion",
            edit(&|e| {
                e.remove("apiVersion");
            }),
            Some(Duration::from_millis(12)),
            0,
        ),
        (
            "falco: no apiVersion, an extra timestamp",
            edit(&|e| {
                e.remove("apiVersion");
                e.insert("timestamp".into(), "2026-11-24T10:00:00Z".into());
            }),
            Some(Duration::from_millis(12)),
            0,
        ),
        (
            "audit2rbac: v1beta1 with only timestamp",
            edit(&|e| {
                e.insert("apiVersion".into(), "audit.k8s.io/v1beta1".into());
                let t = e.remove("requestReceivedTimestamp").expect("field");
                e.remove("stageTimestamp");
                e.insert("timestamp".into(), t);
            }),
            Some(Duration::ZERO),
            1,
        ),
    ];
    for (what, text, duration, without) in cases {
        let (events, errors, stats) = read_all(&text, Duration::ZERO);
        assert!(errors.is_empty(), "{what}: {errors:?}");
        let r = requests(&events);
        assert_eq!(r.len(), 1, "{what}");
        let want_arrival = parse_timestamp(received.as_str().expect("a string")).expect("time");
        assert_eq!(r[0].arrival, want_arrival, "{what}");
        assert_eq!(r[0].duration, duration, "{what}");
        assert_eq!(stats.without_duration, without, "{what}");
    }
}

#[test]
fn an_event_list_line_is_read_item_by_item() {
    let items: Vec<serde_json::Value> = FIXTURE
        .lines()
        .take(4)
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let list =
        serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items});
    let (events, errors, _) = read_all(&list.to_string(), Duration::ZERO);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(requests(&events).len(), 3);
    // The webhook backend's items carry neither kind nor apiVersion.
    let bare: Vec<serde_json::Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let mut item = item.clone();
            let object = item.as_object_mut().expect("object");
            object.remove("kind");
            object.remove("apiVersion");
            item
        })
        .collect();
    let bare =
        serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": bare});
    let (events, errors, _) = read_all(&bare.to_string(), Duration::ZERO);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(requests(&events).len(), 3);
}

#[test]
fn an_arrival_further_out_of_order_than_the_window_is_yielded_and_counted_late() {
    let text = concat!(
        r#"{"at":10,"durationMs":1,"method":"GET","url":"/api"}"#,
        "\n",
        r#"{"at":20,"durationMs":1,"method":"GET","url":"/api"}"#,
        "\n",
        r#"{"at":5,"durationMs":1,"method":"GET","url":"/api"}"#,
        "\n",
    );
    let (events, _, stats) = read_all(text, Duration::from_secs(1));
    assert_eq!(requests(&events).len(), 3);
    assert_eq!(stats.late, 1);
}

#[test]
fn strict_stops_at_the_first_malformed_line() {
    let text = "{\"at\":0,\"durationMs\":1,\"method\":\"GET\",\"url\":\"/api\"}\nbad\n{\"at\":1,\"durationMs\":1,\"method\":\"GET\",\"url\":\"/api\"}\n";
    let options = TraceOptions {
        reorder_window: Duration::from_secs(60),
        strict: true,
        keep_recorded_waits: false,
    };
    let items: Vec<_> = TraceReader::new(Cursor::new(text.as_bytes().to_vec()), options).collect();
    assert_eq!(items.len(), 1);
    assert!(matches!(
        items[0],
        Err(TraceError::Line(TraceLineError { line: 2, .. }))
    ));
}

#[test]
fn micro_time_takes_the_fast_path_and_agrees_with_the_full_parser() {
    let full = |v: &str| {
        let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
            .expect("parses");
        Duration::from_nanos(u64::try_from(t.unix_timestamp_nanos()).expect("after 1970"))
    };
    for v in [
        "2026-11-24T10:00:00.000100Z",
        "2024-02-29T23:59:59.999999Z",
        "1970-01-01T00:00:00.000000Z",
        "2099-12-31T00:00:01.500000Z",
    ] {
        assert!(micro_time(v.as_bytes()).is_some(), "{v}");
        assert_eq!(parse_timestamp(v), Ok(full(v)), "{v}");
    }
    // Other RFC 3339 forms take the full parser; impossible dates are errors either way.
    assert_eq!(
        parse_timestamp("2026-11-24T11:00:00.1+01:00"),
        Ok(full("2026-11-24T10:00:00.1Z"))
    );
    assert!(micro_time(b"2026-11-24T10:00:00Z").is_none());
    assert!(parse_timestamp("2023-02-29T00:00:00.000000Z").is_err());
    assert!(parse_timestamp("2026-13-01T00:00:00.000000Z").is_err());
    assert!(parse_timestamp("2026-11-24T25:00:00.000000Z").is_err());
    assert!(parse_timestamp("1969-12-31T23:59:59.000000Z").is_err());
}

/// Audit lines of every kind, over several of the reading thread's batches: gets, a watch that
/// starts and ends, a malformed line, an old-form event, a list; out of order within the window.
fn long_trace(lines: usize) -> String {
    let stamp = |micros: u64| {
        let t = at(micros);
        let secs = t.as_secs() - 1_795_514_400;
        format!(
            "2026-11-24T10:{:02}:{:02}.{:06}Z",
            secs / 60,
            secs % 60,
            t.subsec_micros()
        )
    };
    let mut text = String::new();
    for i in 0..lines as u64 {
        let received = i * 1_000;
        let line = match i % 7 {
            0 => "{not json".to_string(),
            1 => format!(
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"w{i}","stage":"ResponseStarted","requestURI":"/api/v1/pods?watch=true","verb":"watch","user":{{"username":"u{i}","groups":["g"]}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}"}}"#,
                stamp(received),
                stamp(received + 3_000)
            ),
            2 => format!(
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"w{}","stage":"ResponseComplete","requestURI":"/api/v1/pods?watch=true","verb":"watch","user":{{"username":"u"}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}"}}"#,
                i - 1,
                stamp(received - 1_000),
                stamp(received + 9_000)
            ),
            3 => format!(
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1beta1","auditID":"o{i}","stage":"ResponseComplete","requestURI":"/api/v1/nodes","verb":"list","user":{{"username":"old"}},"timestamp":"{}"}}"#,
                stamp(received)
            ),
            4 => format!(
                r#"{{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{{"auditID":"l{i}","stage":"ResponseComplete","requestURI":"/apis/apps/v1/deployments","verb":"list","user":{{"username":"l"}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}"}},{{"auditID":"m{i}","stage":"RequestReceived"}}]}}"#,
                stamp(received),
                stamp(received + 40_000)
            ),
            5 => String::new(),
            _ => format!(
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"g{i}","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/pods/p{i}","verb":"get","user":{{"username":"system:node:n{i}"}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}","responseStatus":{{"code":200}}}}"#,
                stamp(received),
                stamp(received + 500 + (i * 7919) % 20_000)
            ),
        };
        text.push_str(&line);
        text.push('\n');
    }
    text
}

#[test]
fn reading_ahead_lines_of_whole_objects_and_lines_over_the_limit_read_as_the_caller_would() {
    // RequestResponse-level events carry whole objects: raw batches end by their bytes, and a
    // line over the limit is reported, not held.
    let mut text = long_trace(40);
    for i in 0..30u64 {
        let size = if i % 10 == 9 {
            MAX_LINE_BYTES + 1
        } else {
            300_000
        };
        let object = "x".repeat(size);
        text.push_str(&format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"b{i}","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/configmaps/c{i}","verb":"update","user":{{"username":"big"}},"requestObject":{{"data":"{object}"}},"requestReceivedTimestamp":"2026-11-24T10:01:{:02}.000000Z","stageTimestamp":"2026-11-24T10:01:{:02}.100000Z"}}"#,
            i, i
        ));
        text.push('\n');
    }
    let (events, errors, _) = read_all(&text, Duration::from_secs(1));
    let big = requests(&events)
        .iter()
        .filter(|r| r.key.starts_with('b'))
        .count();
    assert_eq!(big, 27);
    let over = errors
        .iter()
        .filter(|e| matches!(e.problem, LineProblem::TooLong))
        .count();
    assert_eq!(over, 3);
}

#[test]
fn reading_ahead_reads_a_long_trace_as_the_caller_would() {
    let (events, errors, stats) = read_all(&long_trace(3_000), Duration::from_secs(1));
    assert_eq!(
        errors.len(),
        429,
        "every seventh line, the first one included"
    );
    assert_eq!(stats.without_duration, 429);
    assert!(events.iter().any(|e| matches!(e, TraceEvent::Ended { .. })));
    assert_eq!(stats.requests as usize, requests(&events).len());
}

#[test]
fn reading_ahead_under_strict_stops_at_the_same_line_and_a_dropped_reader_stops_the_thread() {
    let options = TraceOptions {
        reorder_window: Duration::from_secs(1),
        strict: true,
        keep_recorded_waits: false,
    };
    let text = long_trace(3_000);
    let collect = |r: &mut dyn Iterator<Item = Result<TraceEvent, TraceError>>| {
        r.map(|item| item.map_err(|e| e.to_string()))
            .collect::<Vec<_>>()
    };
    let mut inline = TraceReader::new(Cursor::new(text.clone().into_bytes()), options.clone());
    let expected = collect(&mut inline);
    for sharing in [
        ahead::Sharing::WhenIdle,
        ahead::Sharing::Always,
        ahead::Sharing::Never,
    ] {
        let input = Cursor::new(text.clone().into_bytes());
        let mut ahead = TraceReader::read_ahead_sharing(input, options.clone(), sharing).unwrap();
        assert_eq!(collect(&mut ahead), expected, "{sharing:?}");
        assert_eq!(ahead.stats(), inline.stats(), "{sharing:?}");
        // The thread may be blocked on a full channel: dropping the reader lets it end.
        drop(ahead);
    }
}

/// Gives `data`, then fails.
struct FailingAfter {
    data: Cursor<Vec<u8>>,
}

impl std::io::Read for FailingAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.data.read(buf)? {
            0 => Err(std::io::Error::other("disk on fire")),
            n => Ok(n),
        }
    }
}

#[test]
fn a_read_error_ends_both_readers_after_the_same_events() {
    let text = long_trace(1_000);
    let options = TraceOptions {
        reorder_window: Duration::from_secs(1),
        strict: false,
        keep_recorded_waits: false,
    };
    let run = |ahead: Option<ahead::Sharing>| {
        let input = std::io::BufReader::new(FailingAfter {
            data: Cursor::new(text.clone().into_bytes()),
        });
        let reader = match ahead {
            Some(sharing) => TraceReader::read_ahead_sharing(input, options.clone(), sharing)
                .expect("the reading thread starts"),
            None => TraceReader::new(input, options.clone()),
        };
        let items: Vec<Result<TraceEvent, String>> =
            reader.map(|item| item.map_err(|e| e.to_string())).collect();
        items
    };
    let inline = run(None);
    assert_eq!(
        inline.last(),
        Some(&Err("reading the trace: disk on fire".to_string()))
    );
    for sharing in [
        ahead::Sharing::WhenIdle,
        ahead::Sharing::Always,
        ahead::Sharing::Never,
    ] {
        assert_eq!(run(Some(sharing)), inline, "{sharing:?}");
    }
}

/// Gives `data`, then panics.
struct PanickingAfter {
    data: Cursor<Vec<u8>>,
}

impl std::io::Read for PanickingAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.data.read(buf)? {
            0 => panic!("the input blew up"),
            n => Ok(n),
        }
    }
}

#[test]
#[should_panic(expected = "the input blew up")]
fn a_panic_on_the_reading_thread_is_the_callers_not_a_short_trace() {
    let options = TraceOptions {
        reorder_window: Duration::from_secs(1),
        strict: false,
        keep_recorded_waits: false,
    };
    let input = std::io::BufReader::new(PanickingAfter {
        data: Cursor::new(long_trace(300).into_bytes()),
    });
    let reader = TraceReader::read_ahead(input, options).unwrap();
    // Before, the thread's end read as the input's: 300 requests, and no sign of trouble.
    let _ = reader.count();
}

/// FIXTURE's request `a1` (12 ms as written) with its annotations replaced by `annotations`.
fn a1_annotated(annotations: &str) -> String {
    let line = FIXTURE.lines().nth(1).expect("a1");
    let from = line.find("\"annotations\":").expect("annotations");
    format!("{}\"annotations\":{annotations}}}", &line[..from])
}

fn keeping(text: &str, keep_recorded_waits: bool) -> (Vec<TraceEvent>, Vec<TraceLineError>) {
    let options = TraceOptions {
        keep_recorded_waits,
        ..TraceOptions::new(Some(Duration::ZERO), Duration::from_secs(60), false)
    };
    let (events, errors, _) = drain(TraceReader::new(
        Cursor::new(text.as_bytes().to_vec()),
        options,
    ));
    (events, errors)
}

#[test]
fn an_audit_events_recorded_queue_wait_is_taken_out_of_its_execution_unless_kept() {
    const WAIT: &str = "apiserver.latency.k8s.io/apf-queue-wait";
    // (annotations, recorded wait, replayed by default, replayed when kept)
    let cases = [
        (
            format!(r#"{{"{WAIT}":"4.5ms","apiserver.latency.k8s.io/total":"12ms"}}"#),
            Duration::from_micros(4_500),
            Duration::from_micros(7_500),
        ),
        // Longer than the time recorded (measured apart from the timestamps): down to zero.
        (
            format!(r#"{{"{WAIT}":"1.234567891s"}}"#),
            Duration::from_nanos(1_234_567_891),
            Duration::ZERO,
        ),
        (
            format!(r#"{{"{WAIT}":"0s"}}"#),
            Duration::ZERO,
            Duration::from_millis(12),
        ),
        // Without the annotation (the apiserver writes it only over 500 ms), or with none.
        (
            r#"{"authorization.k8s.io/decision":"allow"}"#.to_string(),
            Duration::ZERO,
            Duration::from_millis(12),
        ),
        (
            "null".to_string(),
            Duration::ZERO,
            Duration::from_millis(12),
        ),
    ];
    for (annotations, wait, replayed) in cases {
        let line = a1_annotated(&annotations);
        let (events, errors) = keeping(&line, false);
        assert!(errors.is_empty(), "{annotations}: {errors:?}");
        let r = requests(&events)[0];
        assert_eq!(r.recorded_wait, wait, "{annotations}");
        assert_eq!(r.duration, Some(replayed), "{annotations}");
        assert_eq!(r.first_byte, None, "{annotations}");
        let (kept, _) = keeping(&line, true);
        let r = requests(&kept)[0];
        assert_eq!(r.duration, Some(Duration::from_millis(12)), "{annotations}");
        assert_eq!(r.recorded_wait, wait, "{annotations}");
    }
}

#[test]
fn a_recorded_queue_wait_that_is_no_duration_makes_the_line_malformed_naming_the_field() {
    for value in ["soon", "-1s", "5", "1.5 s"] {
        let line = a1_annotated(&format!(
            r#"{{"apiserver.latency.k8s.io/apf-queue-wait":"{value}"}}"#
        ));
        let (events, errors) = keeping(
            &format!("{line}\n{}\n", FIXTURE.lines().nth(1).expect("a1")),
            false,
        );
        assert_eq!(requests(&events).len(), 1, "{value}: the next line is read");
        assert_eq!(errors.len(), 1, "{value}");
        assert_eq!(errors[0].line, 1);
        assert!(
            matches!(&errors[0].problem, LineProblem::RecordedWait(why) if why.contains(value)),
            "{value}: {}",
            errors[0].problem
        );
        assert!(
            errors[0]
                .to_string()
                .starts_with("line 1: annotations[\"apiserver.latency.k8s.io/apf-queue-wait\"]: "),
            "{}",
            errors[0]
        );
        // One kind of problem, whatever the value.
        assert!(errors[0]
            .problem
            .same_kind(&LineProblem::RecordedWait(String::new())));
    }
    // On the stage that ends an open watch, only the end is read: a bad wait there is no
    // problem (it could not be taken out of what was already replayed).
    let watch: Vec<&str> = FIXTURE.lines().filter(|l| l.contains("\"w1\"")).collect();
    let end = watch[2].replace(
        "\"annotations\":{",
        "\"annotations\":{\"apiserver.latency.k8s.io/apf-queue-wait\":\"soon\",",
    );
    assert_ne!(end, watch[2]);
    let (events, errors) = keeping(&format!("{}\n{end}\n", watch[1]), false);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(matches!(
        events[..],
        [TraceEvent::Request(_), TraceEvent::Ended { .. }]
    ));
}

#[test]
fn an_access_logs_queue_wait_is_taken_out_unless_kept_as_an_audit_events_is() {
    let access = r#"{"target":"kube_apf_proxy::access","method":"GET","user":"alice","groups":"[]","uri":"/api/v1/pods?watch=true","received":"2026-11-24T10:00:00.050000000Z","verb":"watch","flow_schema":"global-default","queue_wait_ms":20.0,"status":200,"duration_ms":50.0,"execution_ms":12.5}"#;
    let (events, _) = keeping(access, false);
    let r = requests(&events)[0];
    assert_eq!(r.recorded_wait, Duration::from_millis(20));
    assert_eq!(r.duration, Some(Duration::from_micros(12_500)));
    assert_eq!(r.first_byte, Some(Duration::from_micros(12_500)));
    // As written, from the arrival at flow control: the wait, then the execution.
    let (kept, _) = keeping(access, true);
    let r = requests(&kept)[0];
    assert_eq!(r.duration, Some(Duration::from_micros(32_500)));
    assert_eq!(r.first_byte, Some(Duration::from_micros(32_500)));
}
