use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::*;
use crate::auth::{AuthMethod, AuthStats, CredentialKind};
use crate::fairqueue::borrowing::{LevelAdjustment, SeatDemandStats};
use crate::fairqueue::limits::LevelLimits;
use crate::server::ServerStats;

const PL: &str = "workload-low";
const FS: &str = "service-accounts";

/// What one family looks like in the exposition.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: String,
    labels: BTreeSet<String>,
    /// `le` values of the first series, in order (histograms only).
    buckets: Vec<String>,
}

/// A small parser of the text format, enough to check names, types, help, label keys and buckets.
fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("help line");
            families.entry(name.to_owned()).or_default().help = help.to_owned();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("type line");
            families.entry(name.to_owned()).or_default().kind = kind.to_owned();
        } else {
            let (series, _value) = line.rsplit_once(' ').expect("sample line");
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .filter_map(|s| name.strip_suffix(s))
                .find(|base| families.get(*base).is_some_and(|f| f.kind == "histogram"))
                .unwrap_or(name);
            let entry = families.get_mut(family).expect("TYPE before samples");
            for pair in labels
                .trim_end_matches('}')
                .split(',')
                .filter(|p| !p.is_empty())
            {
                let (key, value) = pair.split_once('=').expect("label pair");
                if key == "le" {
                    let le = value.trim_matches('"').to_owned();
                    if name.ends_with("_bucket") && !entry.buckets.contains(&le) {
                        entry.buckets.push(le);
                    }
                } else {
                    entry.labels.insert(key.to_owned());
                }
            }
        }
    }
    families
}

/// Reports one of every event, so every family has a member.
fn exercise(m: &Metrics, t0: Instant) {
    m.inc_rejected(PL, FS, RejectReason::QueueFull);
    let flow = m.flow(PL, FS);
    flow.dispatched().inc();
    flow.inqueue_requests().add(1.0);
    flow.inqueue_seats().add(2.0);
    flow.executing_requests().add(1.0);
    flow.executing_seats().add(2.0);
    flow.queue_length().observe(3.0);
    m.observe_wait(PL, FS, true, Duration::from_millis(7));
    flow.execution_seconds(ExecutionType::Watch).observe(0.03);
    flow.observe_watch_count(12);
    flow.observe_work_estimated_seats(2);
    m.inc_dispatch_no_accommodation(PL, FS);
    m.inc_epoch_advance(PL, true);
    m.set_current_r(PL, 1.5);
    m.set_dispatch_metrics(PL, &DispatchR::default());
    m.set_limits(PL, 245, 25, 845, 135);
    let stats = SeatDemandStats::default();
    let adjustment = LevelAdjustment {
        current_cl: 140,
        concurrency_denominator: 140,
        target: 30.0,
    };
    m.note_concurrency_adjustment(PL, &stats, &adjustment);
    m.set_fair_frac(0.5);
    let gauges = m.priority_level_gauges(t0, PL);
    gauges.requests_waiting.add(t0, 1.0);
    m.set_read_vs_write_denominators(t0, 100, 600);
    m.add_read_vs_write(t0, Phase::Waiting, RequestKind::Mutating, 1);
    m.record_dropped(RequestKind::ReadOnly);
    m.register_auth_stats(Arc::new(AuthStats::default()))
        .expect("auth stats");
    m.register_server_stats(Arc::new(ServerStats::default()))
        .expect("server stats");
    m.observe_upstream(UpstreamOutcome::Status(200), Duration::from_millis(3));
    m.record_config_reload(true, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    m.record_certificate_reload(CertificateKind::ClientCa, false);
    m.set_certificate_expiry(CertificateKind::Serving, Some(1_700_000_000));
    m.inc_requests(200);
}

const BUCKETS_DURATION: &str = "0,0.005,0.02,0.05,0.1,0.2,0.5,1,2,5,10,15,30";
const PL_FS: &str = "flow_schema,priority_level";

/// (name, type, label keys, buckets) of every family, as the apiserver exposes them.
#[rustfmt::skip]
const EXPECTED: &[(&str, &str, &str, &str)] = &[
    ("apf_proxy_authentications_total", "counter", "method,result", ""),
    ("apf_proxy_certificate_expiration_timestamp_seconds", "gauge", "kind", ""),
    ("apf_proxy_certificate_reloads_total", "counter", "kind,result", ""),
    ("apf_proxy_config_last_reload_success_timestamp_seconds", "gauge", "", ""),
    ("apf_proxy_config_reloads_total", "counter", "result", ""),
    ("apf_proxy_connections_accepted_total", "counter", "", ""),
    ("apf_proxy_open_connections", "gauge", "", ""),
    ("apf_proxy_requests_abandoned_total", "counter", "", ""),
    ("apf_proxy_requests_total", "counter", "code", ""),
    ("apf_proxy_tls_handshakes_total", "counter", "protocol,tls_version", ""),
    ("apf_proxy_token_review_cache_lookups_total", "counter", "result", ""),
    ("apf_proxy_token_reviews_total", "counter", "result", ""),
    ("apf_proxy_upstream_request_duration_seconds", "histogram",
        "code", "0.005,0.025,0.05,0.1,0.2,0.4,0.6,0.8,1,1.25,1.5,2,3,4,5,6,8,10,15,20,30,45,60"),
    ("apf_proxy_upstream_requests_total", "counter", "code", ""),
    ("apiserver_dropped_requests_total", "counter", "request_kind", ""),
    ("apiserver_flowcontrol_current_executing_requests", "gauge", PL_FS, ""),
    ("apiserver_flowcontrol_current_executing_seats", "gauge", PL_FS, ""),
    ("apiserver_flowcontrol_current_inqueue_requests", "gauge", PL_FS, ""),
    ("apiserver_flowcontrol_current_inqueue_seats", "gauge", PL_FS, ""),
    ("apiserver_flowcontrol_current_limit_seats", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_current_r", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_demand_seats", "histogram",
        "priority_level", "0.2,0.4,0.6,0.8,1,1.2,1.4,1.7,2,2.8,4,6"),
    ("apiserver_flowcontrol_demand_seats_average", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_demand_seats_high_watermark", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_demand_seats_smoothed", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_demand_seats_stdev", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_dispatch_r", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_dispatched_requests_total", "counter", PL_FS, ""),
    ("apiserver_flowcontrol_epoch_advance_total", "counter", "priority_level,success", ""),
    ("apiserver_flowcontrol_latest_s", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_lower_limit_seats", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_next_discounted_s_bounds", "gauge", "bound,priority_level", ""),
    ("apiserver_flowcontrol_next_s_bounds", "gauge", "bound,priority_level", ""),
    ("apiserver_flowcontrol_nominal_limit_seats", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_priority_level_request_utilization", "histogram",
        "phase,priority_level", "0,0.001,0.003,0.01,0.03,0.1,0.25,0.5,0.75,1"),
    ("apiserver_flowcontrol_priority_level_seat_utilization", "histogram",
        "phase,priority_level", "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95,0.99,1"),
    ("apiserver_flowcontrol_read_vs_write_current_requests", "histogram",
        "phase,request_kind", "0,0.001,0.01,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95,0.99,1"),
    ("apiserver_flowcontrol_rejected_requests_total", "counter",
        "flow_schema,priority_level,reason", ""),
    ("apiserver_flowcontrol_request_dispatch_no_accommodation_total", "counter", PL_FS, ""),
    ("apiserver_flowcontrol_request_execution_seconds", "histogram",
        "flow_schema,priority_level,type", BUCKETS_DURATION),
    ("apiserver_flowcontrol_request_queue_length_after_enqueue", "histogram",
        PL_FS, "0,10,25,50,100,250,500,1000"),
    ("apiserver_flowcontrol_request_wait_duration_seconds", "histogram",
        "execute,flow_schema,priority_level", BUCKETS_DURATION),
    ("apiserver_flowcontrol_seat_fair_frac", "gauge", "", ""),
    ("apiserver_flowcontrol_target_seats", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_upper_limit_seats", "gauge", "priority_level", ""),
    ("apiserver_flowcontrol_watch_count_samples", "histogram", PL_FS, "0,1,10,100,1000,10000"),
    ("apiserver_flowcontrol_work_estimated_seats", "histogram", PL_FS, "1,2,4,8,16,32,64,100"),
    ("apiserver_request_terminations_total", "counter", "code,request_kind", ""),
    ("apiserver_tls_handshake_errors_total", "counter", "", ""),
];

fn split(list: &str) -> Vec<String> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_family_has_the_apiserver_name_type_labels_and_buckets() {
    let m = Metrics::new();
    let t0 = Instant::now();
    exercise(&m, t0);
    let families = parse(&m.encode_at(t0 + Duration::from_secs(1)));

    let names: Vec<&str> = families.keys().map(String::as_str).collect();
    let want: Vec<&str> = EXPECTED.iter().map(|e| e.0).collect();
    assert_eq!(names, want);
    for &(name, kind, labels, buckets) in EXPECTED {
        let family = &families[name];
        assert_eq!(family.kind, kind, "{name}");
        let got: Vec<String> = family.labels.iter().cloned().collect();
        assert_eq!(got, split(labels), "{name}");
        if kind == "histogram" {
            let mut want = split(buckets);
            want.push("+Inf".to_owned());
            assert_eq!(family.buckets, want, "{name}");
        }
    }
    assert_eq!(
        families
            .keys()
            .filter(|n| n.starts_with("apiserver_flowcontrol_"))
            .count(),
        32,
        "28 plain and 4 timing-ratio families, as metrics.go registers"
    );
}

#[test]
fn help_texts_carry_the_stability_prefixes_of_the_apiserver() {
    let m = Metrics::new();
    let t0 = Instant::now();
    exercise(&m, t0);
    let families = parse(&m.encode_at(t0));
    let cases = [
        ("apiserver_flowcontrol_rejected_requests_total",
            "[BETA] Number of requests rejected by API Priority and Fairness subsystem"),
        ("apiserver_flowcontrol_request_wait_duration_seconds",
            "[BETA] Length of time a request spent waiting in its queue"),
        ("apiserver_flowcontrol_current_r", "[ALPHA] R(time of last change)"),
        ("apiserver_flowcontrol_demand_seats",
            "EXPERIMENTAL: [ALPHA] Observations, at the end of every nanosecond, of (the number of seats each priority level could use) / (nominal number of seats for that level)"),
        ("apiserver_request_terminations_total",
            "[ALPHA] Number of requests which apiserver terminated in self-defense."),
    ];
    for (name, help) in cases {
        assert_eq!(families[name].help, help, "{name}");
    }
    assert!(families.values().all(|f| !f.help.is_empty()));
}

#[test]
fn rejection_and_wait_are_encoded_exactly() {
    let m = Metrics::new();
    m.inc_rejected(PL, FS, RejectReason::TimeOut);
    m.inc_rejected(PL, FS, RejectReason::TimeOut);
    m.inc_rejected("catch-all", "catch-all", RejectReason::ConcurrencyLimit);
    m.observe_wait(PL, FS, false, Duration::from_millis(5));
    let text = m.encode();
    let rejected = "\
# HELP apiserver_flowcontrol_rejected_requests_total [BETA] Number of requests rejected by API Priority and Fairness subsystem
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema=\"catch-all\",priority_level=\"catch-all\",reason=\"concurrency-limit\"} 1
apiserver_flowcontrol_rejected_requests_total{flow_schema=\"service-accounts\",priority_level=\"workload-low\",reason=\"time-out\"} 2
";
    assert!(text.contains(rejected), "{text}");
    let labels = r#"execute="false",flow_schema="service-accounts",priority_level="workload-low""#;
    let name = "apiserver_flowcontrol_request_wait_duration_seconds";
    for (le, count) in [("0", 0), ("0.005", 1), ("30", 1), ("+Inf", 1)] {
        let line = format!("{name}_bucket{{{labels},le=\"{le}\"}} {count}\n");
        assert!(text.contains(&line), "{line}");
    }
    assert!(text.contains(&format!("{name}_sum{{{labels}}} 0.005\n")));
    assert!(text.contains(&format!("{name}_count{{{labels}}} 1\n")));
}

#[test]
fn gauges_move_by_deltas_and_limits_by_level() {
    let m = Metrics::new();
    let flow = m.flow(PL, FS);
    for (requests, seats) in [(3.0, 6.0), (-1.0, -2.0)] {
        flow.inqueue_requests().add(requests);
        flow.inqueue_seats().add(seats);
    }
    let limits = LevelLimits {
        nominal_cl: 245,
        lendable_cl: 220,
        borrowing_cl: 600,
        min_cl: 25,
        max_cl: 845,
        max_seats: Some(10),
    };
    m.set_limits(
        PL,
        limits.nominal_cl,
        limits.min_cl,
        limits.max_cl,
        limits.initial_current_cl(),
    );
    let text = m.encode();
    let l = r#"{flow_schema="service-accounts",priority_level="workload-low"}"#;
    for line in [
        format!("apiserver_flowcontrol_current_inqueue_requests{l} 2\n"),
        format!("apiserver_flowcontrol_current_inqueue_seats{l} 4\n"),
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"workload-low\"} 245\n".into(),
        "apiserver_flowcontrol_lower_limit_seats{priority_level=\"workload-low\"} 25\n".into(),
        "apiserver_flowcontrol_upper_limit_seats{priority_level=\"workload-low\"} 845\n".into(),
        "apiserver_flowcontrol_current_limit_seats{priority_level=\"workload-low\"} 135\n".into(),
    ] {
        assert!(text.contains(&line), "missing {line}");
    }
}

#[test]
fn priority_level_gauges_are_weighted_by_time_in_the_exposition() {
    let m = Metrics::new();
    let t0 = Instant::now();
    let g = m.priority_level_gauges(t0, PL);
    g.set_denominators(t0, 10, 4);
    g.seats_executing.add(t0, 2.0); // 0.5 of the limit ...
    g.seats_executing.add(t0 + Duration::from_secs(3), 2.0); // ... for 3 s, then 1.0
    let text = m.encode_at(t0 + Duration::from_secs(4));
    let name = "apiserver_flowcontrol_priority_level_seat_utilization";
    let labels = r#"phase="executing",priority_level="workload-low""#;
    for (le, nanos) in [
        ("0.4", 0u64),
        ("0.5", 3_000_000_000),
        ("0.99", 3_000_000_000),
        ("1", 4_000_000_000),
    ] {
        let line = format!("{name}_bucket{{{labels},le=\"{le}\"}} {nanos}\n");
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    assert!(text.contains(&format!("{name}_sum{{{labels}}} 2500000000\n")));
    assert!(text.contains(&format!("{name}_count{{{labels}}} 4000000000\n")));
}

#[test]
fn read_vs_write_members_appear_on_first_use() {
    let m = Metrics::new();
    assert!(!m.encode().contains("read_vs_write"));
    let t0 = Instant::now();
    m.add_read_vs_write(t0, Phase::Executing, RequestKind::ReadOnly, 1);
    let text = m.encode_at(t0);
    assert!(text.contains(
        r#"read_vs_write_current_requests_count{phase="executing",request_kind="readOnly"} 0"#
    ));
    assert!(!text.contains(r#"request_kind="mutating""#));
}

#[test]
fn a_429_counts_as_dropped_and_terminated() {
    let m = Metrics::new();
    m.record_dropped(RequestKind::Mutating);
    m.record_termination(RequestKind::ReadOnly, 504);
    let text = m.encode();
    assert!(text.contains("apiserver_dropped_requests_total{request_kind=\"mutating\"} 1\n"));
    assert!(text.contains(
        "apiserver_request_terminations_total{code=\"429\",request_kind=\"mutating\"} 1\n"
    ));
    assert!(text.contains(
        "apiserver_request_terminations_total{code=\"504\",request_kind=\"readOnly\"} 1\n"
    ));
}

#[test]
fn status_code_labels_stay_bounded() {
    let m = Metrics::new();
    for code in [200, 404, 999, 42] {
        m.inc_requests(code);
    }
    m.observe_upstream(UpstreamOutcome::Status(503), Duration::from_millis(1));
    m.observe_upstream(UpstreamOutcome::Error, Duration::from_millis(1));
    m.observe_upstream(UpstreamOutcome::Timeout, Duration::from_secs(60));
    let families = parse(&m.encode());
    let text = m.encode();
    for line in [
        "apf_proxy_requests_total{code=\"other\"} 2\n",
        "apf_proxy_requests_total{code=\"404\"} 1\n",
        "apf_proxy_upstream_requests_total{code=\"5xx\"} 1\n",
        "apf_proxy_upstream_requests_total{code=\"error\"} 1\n",
        "apf_proxy_upstream_requests_total{code=\"timeout\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line}");
    }
    assert_eq!(families["apf_proxy_requests_total"].labels.len(), 1);
}

#[test]
fn config_reload_sets_the_timestamp_only_on_success() {
    let m = Metrics::new();
    let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
    m.record_config_reload(true, at);
    m.record_config_reload(false, SystemTime::now());
    let text = m.encode();
    assert!(text.contains("apf_proxy_config_last_reload_success_timestamp_seconds 1700000000.5\n"));
    assert!(text.contains("apf_proxy_config_reloads_total{result=\"failure\"} 1\n"));
    assert!(text.contains("apf_proxy_config_reloads_total{result=\"success\"} 1\n"));
}

#[test]
fn registries_are_independent() {
    let a = Metrics::new();
    let b = Metrics::new();
    a.flow(PL, FS).dispatched().inc();
    assert!(a.encode().contains("dispatched_requests_total"));
    assert!(!b.encode().contains("dispatched_requests_total"));
}

#[test]
fn a_pair_looked_up_last_belongs_to_its_own_registry() {
    let a = Metrics::new();
    let b = Metrics::new();
    // Alternating lookups of the same names on one thread: each registry keeps its own members.
    a.flow(PL, FS).dispatched().inc();
    b.flow(PL, FS).dispatched().inc();
    b.flow(PL, FS).dispatched().inc();
    a.flow(PL, "other").dispatched().inc();
    assert!(Arc::ptr_eq(&a.flow(PL, FS), &a.flow(PL, FS)));
    assert!(!Arc::ptr_eq(&a.flow(PL, FS), &b.flow(PL, FS)));
    let line = |m: &Metrics, fs: &str| {
        let prefix = format!(
            "apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"{fs}\",priority_level=\"{PL}\"}} "
        );
        m.encode()
            .lines()
            .find(|l| l.starts_with(&prefix))
            .map(str::to_owned)
    };
    assert_eq!(
        line(&a, FS).as_deref().map(|l| l.ends_with(" 1")),
        Some(true)
    );
    assert_eq!(
        line(&b, FS).as_deref().map(|l| l.ends_with(" 2")),
        Some(true)
    );
    assert_eq!(
        line(&a, "other").as_deref().map(|l| l.ends_with(" 1")),
        Some(true)
    );
    assert_eq!(line(&b, "other"), None);
}

#[test]
fn label_values_match_the_apiserver_vocabulary() {
    let cases = [
        (RejectReason::QueueFull.as_str(), "queue-full"),
        (RejectReason::ConcurrencyLimit.as_str(), "concurrency-limit"),
        (RejectReason::TimeOut.as_str(), "time-out"),
        (RequestKind::of_verb("watch").as_str(), "readOnly"),
        (RequestKind::of_verb("list").as_str(), "readOnly"),
        (RequestKind::of_verb("get").as_str(), "readOnly"),
        (RequestKind::of_verb("patch").as_str(), "mutating"),
        (ExecutionType::of_verb("watch").as_str(), "watch"),
        (ExecutionType::of_verb("list").as_str(), "regular"),
        (Phase::Waiting.as_str(), "waiting"),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn auth_stats_are_read_at_scrape_time() {
    let m = Metrics::new();
    let stats = Arc::new(AuthStats::default());
    m.register_auth_stats(Arc::clone(&stats)).expect("register");
    stats.record_success(AuthMethod::TokenReview);
    stats.record_success(AuthMethod::TokenReview);
    stats.record_rejection([CredentialKind::BearerToken].into_iter());
    stats.record_unauthenticated();
    stats
        .token_cache
        .hits
        .fetch_add(3, std::sync::atomic::Ordering::Relaxed);
    let text = m.encode();
    for line in [
        "apf_proxy_authentications_total{method=\"token_review\",result=\"success\"} 2\n",
        "apf_proxy_authentications_total{method=\"anonymous\",result=\"success\"} 0\n",
        "apf_proxy_authentications_total{method=\"bearer_token\",result=\"error\"} 1\n",
        "apf_proxy_authentications_total{method=\"none\",result=\"failure\"} 1\n",
        "apf_proxy_token_review_cache_lookups_total{result=\"hit\"} 3\n",
        "apf_proxy_token_reviews_total{result=\"ok\"} 0\n",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(
        m.register_auth_stats(stats).is_err(),
        "a second registration is refused"
    );
}

#[test]
fn server_stats_are_read_at_scrape_time() {
    let m = Metrics::new();
    m.register_server_stats(Arc::new(ServerStats::default()))
        .expect("register");
    let text = m.encode();
    assert!(text.contains("# TYPE apiserver_tls_handshake_errors_total counter\napiserver_tls_handshake_errors_total 0\n"));
    assert!(
        text.contains("# TYPE apf_proxy_open_connections gauge\napf_proxy_open_connections 0\n")
    );
    // Every combination is listed from the start, so rate() works on the first handshake.
    for (protocol, version) in [("h2", "1.3"), ("http/1.1", "1.2"), ("none", "1.3")] {
        let line = format!(
            "apf_proxy_tls_handshakes_total{{protocol=\"{protocol}\",tls_version=\"{version}\"}} 0\n"
        );
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
}

#[test]
fn label_indexes_are_dense_and_agree_with_the_labels() {
    use labels::{status_code_index, status_code_label, STATUS_CODE_LABELS, UPSTREAM_CODE_CLASSES};
    // One slot per label value: every slot used, and codes sharing a slot share the label.
    let mut codes: Vec<Option<String>> = vec![None; STATUS_CODE_LABELS];
    let mut classes: Vec<Option<&str>> = vec![None; UPSTREAM_CODE_CLASSES];
    let outcomes = (0..=1000)
        .map(UpstreamOutcome::Status)
        .chain([UpstreamOutcome::Error, UpstreamOutcome::Timeout]);
    for code in 0..=1000u16 {
        let slot = &mut codes[status_code_index(code)];
        let label = status_code_label(code);
        assert_eq!(slot.get_or_insert_with(|| label.clone()), &label, "{code}");
    }
    for outcome in outcomes {
        let slot = &mut classes[outcome.code_class_index()];
        assert_eq!(
            *slot.get_or_insert(outcome.code_class()),
            outcome.code_class()
        );
    }
    assert!(codes.iter().all(Option::is_some));
    assert!(classes.iter().all(Option::is_some));
}
