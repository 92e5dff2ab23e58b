//! Entry points for the fuzz targets in `fuzz/` that the public API does not reach without
//! touching the file system. Not part of the product's interface.

use std::path::Path;

use crate::auth::Identity;

/// Parses token-file text (`--token-auth-file`'s CSV) into its `(token, identity)` records, in
/// token order; a malformed file is an error message naming the line.
pub fn token_file(text: &str) -> Result<Vec<(String, Identity)>, String> {
    crate::auth::tokenfile_records(Path::new("fuzz.csv"), text)
}

/// Whether `labels.Parse` accepts the label selector.
pub fn label_selector_is_valid(selector: &str) -> bool {
    crate::request_info::label_selector_is_valid(selector)
}

/// The value of the field selector's exact `field` term (`field=v` or `field==v`, unescaped), or
/// `None` when the selector does not parse.
pub fn field_selector_exact_match(selector: &str, field: &str) -> Option<Option<String>> {
    crate::request_info::field_selector_exact_match(selector, field)
}

/// Decodes `body` as a watch stream of FlowSchemas and, separately, of
/// PriorityLevelConfigurations, in two pushes split at `split` and in one; asserts both give the
/// same events; applies them to the cluster source's objects and loads the result.
pub fn watch_stream(body: &[u8], split: usize) {
    use crate::config_source::objects::{ClusterObjects, Kind};
    use crate::config_source::watch_stream::WatchDecoder;
    use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};

    fn decode<K: Kind + PartialEq + std::fmt::Debug>(
        body: &[u8],
        split: usize,
        objects: &mut ClusterObjects,
    ) {
        let whole = WatchDecoder::new().push::<K>(body);
        let mut decoder = WatchDecoder::new();
        let parts = decoder.push::<K>(&body[..split]).and_then(|mut first| {
            first.extend(decoder.push::<K>(&body[split..])?);
            Ok(first)
        });
        if let (Ok(whole), Ok(parts)) = (&whole, &parts) {
            assert_eq!(whole, parts, "the split point changes nothing");
        }
        let mut rv = String::new();
        for event in whole.unwrap_or_default() {
            objects.apply(event, &mut rv);
        }
    }

    let mut objects = ClusterObjects::default();
    decode::<PriorityLevelConfiguration>(body, split, &mut objects);
    decode::<FlowSchema>(body, split, &mut objects);
    let _ = objects.load();
}

/// Parses `stdout` as an exec credential plugin's output (v1 asked for); a refusal never
/// repeats the token it was given.
pub fn exec_credential(stdout: &[u8]) {
    use crate::upstream::exec_credential::parse_output;
    let parse = || {
        parse_output("plugin", "client.authentication.k8s.io/v1", stdout)
            .map(|c| (c.token, c.client_key.is_some(), c.expires))
    };
    assert_eq!(parse(), parse(), "deterministic");
}

/// Reads `bytes` as HTTP/2 frames from a server, whole and split at `split`; asserts both give
/// the same `SETTINGS_MAX_CONCURRENT_STREAMS` and `GOAWAY` events.
pub fn h2_frames(bytes: &[u8], split: usize) {
    use crate::upstream::frames::FrameWatcher;
    let mut whole = Vec::new();
    FrameWatcher::new().feed(bytes, |e| whole.push(e));
    let mut parts = Vec::new();
    let mut watcher = FrameWatcher::new();
    let split = split.min(bytes.len());
    watcher.feed(&bytes[..split], |e| parts.push(e));
    watcher.feed(&bytes[split..], |e| parts.push(e));
    assert_eq!(
        whole, parts,
        "the events depend on where the bytes were split"
    );
}

/// Reads `bytes` as a trace (audit events, access log or trace lines, detected by content) and
/// replays what it yields through the bootstrap configuration. Invariants: nothing panics, every
/// line is either yielded, reported as malformed or ignored, reading ahead on a thread of its own
/// yields the same events, errors and counts, and the replay counts every request.
pub fn trace(bytes: &[u8]) {
    use crate::simulate::trace::{TraceEvent, TraceOptions, TraceReader};
    let options = TraceOptions {
        reorder_window: std::time::Duration::from_secs(65),
        strict: false,
    };
    let mut reader = TraceReader::new(std::io::Cursor::new(bytes), options.clone());
    let items: Vec<Result<TraceEvent, String>> = (&mut reader)
        .map(|item| item.map_err(|e| e.to_string()))
        .collect();
    let stats = reader.stats();
    let mut ahead = TraceReader::read_ahead(std::io::Cursor::new(bytes.to_vec()), options)
        .expect("the reading thread starts");
    let ahead_items: Vec<Result<TraceEvent, String>> = (&mut ahead)
        .map(|item| item.map_err(|e| e.to_string()))
        .collect();
    assert_eq!(
        ahead_items, items,
        "reading ahead yields what reading in line does"
    );
    assert_eq!(
        ahead.stats(),
        stats,
        "reading ahead counts what reading in line does"
    );
    let events: Vec<TraceEvent> = items.into_iter().flatten().collect();
    let requests = events
        .iter()
        .filter(|e| matches!(e, TraceEvent::Request(_)))
        .count() as u64;
    assert_eq!(requests, stats.requests, "every request read is yielded");
    // Replays only small traces within an hour: virtual time still visits every 10 s borrowing
    // tick between two arrivals, so a fuzzed gap of centuries would only measure patience.
    let times = events.iter().map(|e| match e {
        TraceEvent::Request(r) => r.arrival,
        TraceEvent::Ended { at, .. } => *at,
    });
    let span = times
        .clone()
        .max()
        .zip(times.min())
        .map_or(std::time::Duration::ZERO, |(max, min)| max - min);
    let long = events.iter().any(|e| {
        matches!(e, TraceEvent::Request(r) if r.duration.or(r.first_byte).unwrap_or_default() > std::time::Duration::from_secs(3600))
    });
    if requests <= 64 && span <= std::time::Duration::from_secs(3600) && !long {
        let config = crate::config::bootstrap();
        let options = crate::simulate::SimOptions::default();
        let one = crate::simulate::simulate_on_this_thread(
            events.clone().into_iter(),
            &[&config],
            &options,
        )
        .expect("the bootstrap configuration simulates");
        // With a second CPU the events are fed from a thread of their own: the same replay.
        let report = crate::simulate::simulate(events.into_iter(), &[&config], &options)
            .expect("the bootstrap configuration simulates");
        let json = |r: &[crate::simulate::SimReport]| serde_json::to_string(r).ok();
        assert_eq!(json(&report), json(&one), "fed ahead, the replay differs");
        assert_eq!(report[0].requests, requests, "every request is replayed");
    }
}

/// Reads `text` as a `simulate --workload` file and, when it is valid and small, runs it through
/// the bootstrap configuration. Invariants: nothing panics; every client is reported, with no more
/// calls answered than made.
pub fn workload(text: &str) {
    let Ok(workload) = crate::simulate::workload::parse_workload(text) else {
        return;
    };
    // Small runs only: a fuzzed workload of a million threads for a year, or of a call every
    // nanosecond, would only measure patience. A thread calls at most once per execution and
    // think (less a negative think's overlap), and once more at the start.
    let threads: u64 = workload.clients.iter().map(|c| u64::from(c.threads)).sum();
    let calls: u128 = workload
        .clients
        .iter()
        .map(|c| {
            let cycle = (c.execution + c.think).saturating_sub(c.overlap).as_nanos();
            let fit = workload.duration.as_nanos() / cycle.max(1) + 1;
            u128::from(c.threads) * c.calls.map_or(fit, |n| fit.min(u128::from(n)))
        })
        .sum();
    if workload.duration > std::time::Duration::from_secs(60) || threads > 64 || calls > 20_000 {
        return;
    }
    let config = crate::config::bootstrap();
    let Ok(reports) = crate::simulate::simulate_workload(
        &workload,
        &[&config],
        &crate::simulate::SimOptions::default(),
    ) else {
        return;
    };
    for report in &reports {
        assert_eq!(
            report.clients.len(),
            workload.clients.len(),
            "every client is reported"
        );
        for client in &report.clients {
            assert!(
                client.dispatched + client.rejected <= client.calls,
                "more answered than called: {client:?}"
            );
        }
    }
}
