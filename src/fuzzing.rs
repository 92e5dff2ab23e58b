//! Entry points for the fuzz targets in `fuzz/` that the public API does not reach without
//! touching the file system. Not part of the product's interface.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent;

use crate::auth::Identity;
use crate::config::load::SourceFile;
use crate::config::parse::Format;
use crate::config_source::objects::{ClusterObjects, Kind as WatchKind};
use crate::config_source::watch_stream::{WatchDecoder, WatchStreamError};
use crate::coordination::lease::{decode_record, encode_record};
use crate::simulate::queueset_scenario::{run as run_scenario, Behaviour, Scenario};
use crate::simulate::trace::{TraceEvent, TraceOptions, TraceReader, TraceStats};
use crate::simulate::workload::Workload;

/// The configuration file the `config_load` and `config_roundtrip` inputs stand for: the first
/// byte picks the format (even: YAML, odd: JSON), the rest is the file. `None` for no byte.
pub fn config_file(data: &[u8]) -> Option<SourceFile> {
    let (&selector, bytes) = data.split_first()?;
    let (name, format) = if selector % 2 == 0 {
        ("fuzz.yaml", Format::Yaml)
    } else {
        ("fuzz.json", Format::Json)
    };
    Some(SourceFile {
        name: name.to_string(),
        bytes: bytes.to_vec(),
        format,
    })
}

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

/// Decodes `body` as a watch stream of PriorityLevelConfigurations and, separately, of
/// FlowSchemas, whole and in two pushes split at `split`, each then finished (the last event of a
/// body without a final newline); asserts both give the same events, or the same refusal. The
/// events of each stream (none for a refused one), for [`watch_objects`].
pub fn watch_stream(body: &[u8], split: usize) -> WatchEvents {
    (decode_watch(body, split), decode_watch(body, split))
}

/// The events of a body read as both watch streams: PriorityLevelConfigurations, FlowSchemas.
pub type WatchEvents = (
    Vec<WatchEvent<PriorityLevelConfiguration>>,
    Vec<WatchEvent<FlowSchema>>,
);

/// The events of `body` as one watch stream of `K`, whole and split at `split` (at most the
/// body's length).
fn decode_watch<K: WatchKind + PartialEq + std::fmt::Debug>(
    body: &[u8],
    split: usize,
) -> Vec<WatchEvent<K>> {
    type Read<K> = Result<(Vec<WatchEvent<K>>, Option<WatchEvent<K>>), WatchStreamError>;
    fn read<K: WatchKind>(parts: &[&[u8]]) -> Read<K> {
        let mut decoder = WatchDecoder::new();
        let mut events = Vec::new();
        for part in parts {
            events.extend(decoder.push::<K>(part)?);
        }
        Ok((events, decoder.finish::<K>()?))
    }
    let split = split.min(body.len());
    let whole = read::<K>(&[body]);
    let parts = read::<K>(&[&body[..split], &body[split..]]);
    assert_eq!(whole, parts, "the split point changes nothing");
    whole.map(|(events, _)| events).unwrap_or_default()
}

/// Decodes `body` as [`watch_stream`] does, applies the events to the cluster source's objects
/// and loads what they leave behind (loaded, or refused with problems).
pub fn watch_objects(body: &[u8], split: usize) {
    let (levels, flow_schemas) = watch_stream(body, split);
    let mut objects = ClusterObjects::default();
    let mut rv = String::new();
    for event in levels {
        objects.apply(event, &mut rv);
    }
    for event in flow_schemas {
        objects.apply(event, &mut rv);
    }
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

/// The trace reader's options in the fuzz targets: the default window (65 s).
fn trace_options(strict: bool) -> TraceOptions {
    TraceOptions {
        reorder_window: Duration::from_secs(65),
        strict,
        keep_recorded_waits: false,
    }
}

/// What a reader yields (errors as their messages) and counts.
type Read = (Vec<Result<TraceEvent, String>>, TraceStats);

fn read_all<R: std::io::BufRead>(mut reader: TraceReader<R>) -> Read {
    let items = (&mut reader)
        .map(|item| item.map_err(|e| e.to_string()))
        .collect();
    (items, reader.stats())
}

/// The time an event has in the reader's order: a request's arrival, an end's time.
fn event_time(event: &TraceEvent) -> Duration {
    match event {
        TraceEvent::Request(r) => r.arrival,
        TraceEvent::Ended { at, .. } => *at,
    }
}

/// Reads `bytes` as a trace (audit events, access log or trace lines, detected by content), on
/// the caller's thread, and returns the events yielded. Invariants: nothing panics; the counts
/// are those of what was yielded (requests, malformed lines, events out of arrival order); under
/// `--strict` the reader yields the same up to and including the first malformed line, and
/// nothing after it; keeping the recorded queue waits yields the same but for the waits taken
/// out.
pub fn trace_read(bytes: &[u8]) -> Vec<TraceEvent> {
    let (items, stats) = read_all(TraceReader::new(bytes, trace_options(false)));
    let malformed = items.iter().filter(|item| item.is_err()).count() as u64;
    assert_eq!(
        malformed, stats.malformed,
        "every malformed line is reported"
    );
    let events: Vec<TraceEvent> = items.iter().flatten().cloned().collect();
    let requests = events
        .iter()
        .filter(|e| matches!(e, TraceEvent::Request(_)))
        .count() as u64;
    assert_eq!(requests, stats.requests, "every request read is yielded");
    let mut latest = Duration::ZERO;
    let mut late = 0;
    for time in events.iter().map(event_time) {
        late += u64::from(time < latest);
        latest = latest.max(time);
    }
    assert_eq!(late, stats.late, "late counts the events out of order");
    let (strict, _) = read_all(TraceReader::new(bytes, trace_options(true)));
    let through_first_error = items
        .iter()
        .position(Result::is_err)
        .map_or(items.len(), |i| i + 1);
    assert_eq!(
        strict,
        items[..through_first_error],
        "--strict yields the same up to the first malformed line"
    );
    let keeping = TraceOptions {
        keep_recorded_waits: true,
        ..trace_options(false)
    };
    let (mut kept, _) = read_all(TraceReader::new(bytes, keeping));
    for item in &mut kept {
        if let Ok(TraceEvent::Request(r)) = item {
            r.take_out_recorded_wait();
        }
    }
    assert_eq!(
        kept, items,
        "kept or taken out, the recorded waits are all that differs"
    );
    events
}

/// The longest trace [`trace_ahead`] and [`trace_replay`] read: the rest is cut off.
pub const REPLAY_MAX_BYTES: usize = 4096;

/// Reads the first [`REPLAY_MAX_BYTES`] of `bytes` as a trace, in line and ahead (on a thread of
/// its own), and feeds what was read in line and ahead (on a thread of its own). Invariants:
/// nothing panics; reading ahead yields the events, errors and counts of reading in line; feeding
/// ahead feeds the same events, attributes and classes as feeding in line (so a replay is the
/// same either way, since it takes nothing else from its feed). The replay itself is
/// [`trace_replay`]'s: together, two threads and a replay per input ran at about 400 exec/s;
/// apart, each half runs at several times that.
pub fn trace_ahead(bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(REPLAY_MAX_BYTES)];
    let (items, stats) = read_all(TraceReader::new(bytes, trace_options(false)));
    let ahead = TraceReader::read_ahead(std::io::Cursor::new(bytes.to_vec()), trace_options(false))
        .expect("the reading thread starts");
    assert_eq!(
        read_all(ahead),
        (items.clone(), stats),
        "reading ahead yields and counts what reading in line does"
    );
    let events: Vec<TraceEvent> = items.into_iter().flatten().collect();
    assert!(
        crate::simulate::fed_alike(&events),
        "fed ahead, the replay is fed otherwise"
    );
}

/// Reads the first [`REPLAY_MAX_BYTES`] of `bytes` as a trace, in line, and replays it through
/// the bootstrap configuration, in line, when it is small (at most 64 requests within an hour).
/// Invariants: nothing panics; the replay counts every request. That reading and feeding ahead
/// change nothing is [`trace_ahead`]'s.
pub fn trace_replay(bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(REPLAY_MAX_BYTES)];
    let (items, stats) = read_all(TraceReader::new(bytes, trace_options(false)));
    let events: Vec<TraceEvent> = items.into_iter().flatten().collect();
    // Replays only small traces within an hour: virtual time still visits every 10 s borrowing
    // tick between two arrivals, so a fuzzed gap of centuries would only measure patience.
    let times = events.iter().map(event_time);
    let span = times
        .clone()
        .max()
        .zip(times.min())
        .map_or(Duration::ZERO, |(max, min)| max - min);
    let long = events.iter().any(|e| {
        matches!(e, TraceEvent::Request(r) if r.duration.or(r.first_byte).unwrap_or_default() > Duration::from_secs(3600))
    });
    if stats.requests > 64 || span > Duration::from_secs(3600) || long {
        return;
    }
    let config = crate::config::bootstrap();
    let options = crate::simulate::SimOptions::default();
    let report = crate::simulate::simulate_on_this_thread(events.into_iter(), &[&config], &options)
        .expect("the bootstrap configuration simulates");
    assert_eq!(
        report[0].requests, stats.requests,
        "every request is replayed"
    );
}

/// Reads `text` as a `simulate --workload` file. Invariants: nothing panics; a workload read is
/// one the reader's rules allow (a duration, clients with unique names, users, at least one
/// thread and call, a negative think shorter than the execution, a time per call or a count).
pub fn workload_parse(text: &str) -> Option<Workload> {
    let workload = crate::simulate::workload::parse_workload(text).ok()?;
    assert!(!workload.duration.is_zero(), "a workload lasts");
    assert!(!workload.clients.is_empty(), "a workload has clients");
    for (i, client) in workload.clients.iter().enumerate() {
        assert!(!client.name.is_empty(), "{client:?}");
        assert!(
            workload.clients[..i].iter().all(|c| c.name != client.name),
            "two clients named {:?}",
            client.name
        );
        assert!(!client.identity.user.is_empty(), "{client:?}");
        assert!(client.url.starts_with('/'), "{client:?}");
        assert!(client.threads >= 1 && client.calls != Some(0), "{client:?}");
        assert!(client.seats != Some(0), "{client:?}");
        assert!(
            client.overlap.is_zero() || client.overlap < client.execution,
            "{client:?}"
        );
        assert!(
            client.calls.is_some() || !(client.execution + client.think).is_zero(),
            "{client:?}"
        );
    }
    Some(workload)
}

/// Reads `text` as [`workload_parse`] does and, when it is small (at most 60 s, 16 threads and
/// 512 calls), runs it through the bootstrap configuration. Invariants: nothing panics; every
/// client is reported, with no more calls answered than made.
pub fn workload_run(text: &str) {
    let Some(workload) = workload_parse(text) else {
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
    if workload.duration > Duration::from_secs(60) || threads > 16 || calls > 512 {
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

/// Reads `text` as a queue-set scenario (`queueset-run`'s JSON), and a scenario read writes
/// itself back as JSON that reads into the same scenario. Invariants: nothing panics; the
/// round trip is exact. The scenario, for [`queueset_scenario_run`].
pub fn queueset_scenario(text: &str) -> Option<Scenario> {
    let scenario = Scenario::parse(text).ok()?;
    let json = scenario.to_json();
    match Scenario::parse(&json) {
        Ok(again) => assert_eq!(again, scenario, "written back as {json}"),
        Err(error) => panic!("a scenario read does not read back: {error}\n{json}"),
    }
    Some(scenario)
}

/// The most requests a scenario [`queueset_scenario_run`] runs may have.
pub const SCENARIO_RUN_MAX_REQUESTS: usize = 64;

/// Reads `text` as [`queueset_scenario`] does and, when it has at most
/// [`SCENARIO_RUN_MAX_REQUESTS`] requests, runs it through our queue set as the apiserver's
/// behaves and as shipped. Invariants: nothing panics; each request has one outcome, dispatched
/// (at or after its arrival, finishing its execution later, in dispatch order) or rejected (at
/// or after its arrival, for a reason the differential knows).
pub fn queueset_scenario_run(text: &str) {
    let Some(scenario) = queueset_scenario(text) else {
        return;
    };
    if scenario.requests.len() > SCENARIO_RUN_MAX_REQUESTS {
        return;
    }
    for behaviour in [Behaviour::Apiserver, Behaviour::AsShipped] {
        let Ok(outcomes) = run_scenario(&scenario, behaviour) else {
            continue;
        };
        assert_eq!(outcomes.len(), scenario.requests.len(), "one outcome each");
        let mut dispatches = Vec::new();
        for (request, outcome) in scenario.requests.iter().zip(&outcomes) {
            let arrival = request.arrival_ns;
            match outcome.outcome.as_str() {
                "dispatched" => {
                    let at = outcome.dispatched_at_ns.expect("a dispatch has a time");
                    assert!(at >= arrival, "dispatched before arriving: {outcome:?}");
                    assert_eq!(
                        outcome.finished_at_ns,
                        at.checked_add(request.execution_ns),
                        "{outcome:?}"
                    );
                    let seq = outcome.dispatch_seq.expect("a dispatch has a position");
                    dispatches.push((seq, at));
                }
                "rejected" => {
                    let at = outcome.rejected_at_ns.expect("a rejection has a time");
                    assert!(at >= arrival, "rejected before arriving: {outcome:?}");
                    assert!(
                        matches!(
                            outcome.reason.as_deref(),
                            Some("queue-full" | "time-out" | "cancelled")
                        ),
                        "{outcome:?}"
                    );
                }
                other => panic!("outcome {other:?}"),
            }
        }
        dispatches.sort_unstable();
        for (i, (seq, _)) in dispatches.iter().enumerate() {
            assert_eq!(*seq, i as u64, "dispatch positions are 0, 1, 2, ...");
        }
        assert!(
            dispatches.windows(2).all(|w| w[0].1 <= w[1].1),
            "dispatched in the order of their positions"
        );
    }
}

/// Reads `value` as a peer's coordination record (the Lease annotation's JSON, written by another
/// replica: outside input). Invariants: nothing panics; a record read has a claim of at least its
/// share and a finite, non-negative demand, and writes itself back as a value that reads into the
/// same record.
pub fn coordination_record(value: &str) {
    let Some(record) = decode_record(value) else {
        return;
    };
    assert!(record.claim >= record.share, "{record:?}");
    assert!(
        record.demand.is_finite() && record.demand >= 0.0,
        "{record:?}"
    );
    let written = encode_record(&record);
    assert_eq!(
        decode_record(&written),
        Some(record),
        "written back as {written}"
    );
}
