pub(crate) mod support;

mod golden;
mod properties;

use super::*;
use crate::config::{Config, DistinguisherMethod};
use support::*;

/// A configuration from FlowSchemas, every one on a 64-queue level `pl` unless it names another.
fn config_of(flow_schemas: Vec<crate::config::FlowSchema>) -> Config {
    Config::resolve(
        flow_schemas,
        vec![
            crate::config::mandatory::exempt_priority_level(),
            limited("pl", 10, 0, Some((64, 6))),
            limited("one-queue", 10, 0, Some((1, 1))),
            limited("reject", 10, 0, None),
        ],
    )
}

#[test]
fn flow_hash_is_sha256_of_name_nul_distinguisher_little_endian() {
    // Expected values from `printf 'NAME\0DIST' | sha256sum`, first 8 bytes read little-endian.
    #[rustfmt::skip]
    let cases = [
        ("global-default", "alice", 17644606172554983095u64),
        ("kube-system-service-accounts", "kube-system", 5788695476672829020),
        ("probes", "", 1490246024787818612),
        ("service-accounts", "system:serviceaccount:default:app", 7022872328203437386),
        ("fs", "", 6109992441520452836),
    ];
    for (name, distinguisher, want) in cases {
        assert_eq!(
            flow_hash(name, distinguisher),
            want,
            "{name}/{distinguisher}"
        );
    }
}

#[test]
fn flow_hash_from_the_cache_is_the_computed_one() {
    // Twice round more flows than a thread keeps, so the cache fills, starts over and is hit.
    let flows = FlowHashes::CAPACITY + 100;
    for round in 0..2 {
        for i in 0..flows {
            let (fs, distinguisher) = (format!("fs-{}", i % 7), format!("user-{i}"));
            assert_eq!(
                flow_hash(&fs, &distinguisher),
                sha256_flow_hash(&fs, &distinguisher),
                "round {round}: {fs}/{distinguisher}"
            );
        }
    }
    // The split between the two strings is part of the flow.
    assert_ne!(flow_hash("ab", "c"), flow_hash("a", "bc"));
    assert_eq!(flow_hash("a", "bc"), sha256_flow_hash("a", "bc"));
}

#[test]
fn flow_hashes_whose_keys_collide_take_turns() {
    let mut hashes = FlowHashes::default();
    // Two flows filed under one key, as a collision of the fast hash would.
    let key = hashes.key("fs", "alice");
    hashes.get_or_compute("fs", "alice");
    let stale = hashes.by_key.get_mut(&key).expect("cached");
    stale.distinguisher = "bob".into();
    stale.hash = sha256_flow_hash("fs", "bob");
    assert_eq!(
        hashes.get_or_compute("fs", "alice"),
        sha256_flow_hash("fs", "alice")
    );
    assert_eq!(hashes.by_key.len(), 1);
}

#[test]
fn lower_precedence_wins_then_name_breaks_ties() {
    let fs = |name: &str, precedence| {
        flow_schema(
            name,
            precedence,
            "pl",
            None,
            vec![everything(vec![group("*")])],
        )
    };
    let config = config_of(vec![fs("zeta", 500), fs("beta", 600), fs("alpha", 600)]);
    let got = classify(
        &MatchIndex::of(&config),
        &user("u", &[]),
        &non_resource("get", "/"),
    );
    assert_eq!(got.flow_schema.name, "zeta");
    let config = config_of(vec![fs("beta", 600), fs("alpha", 600)]);
    let got = classify(
        &MatchIndex::of(&config),
        &user("u", &[]),
        &non_resource("get", "/"),
    );
    assert_eq!(got.flow_schema.name, "alpha");
}

#[test]
fn earlier_schema_wins_even_when_its_matching_rule_comes_later() {
    // `first`'s second rule and `second`'s first rule both match; `first` must win.
    let first = flow_schema(
        "first",
        100,
        "pl",
        None,
        vec![
            everything(vec![user_subject("nobody")]),
            everything(vec![group("dev")]),
        ],
    );
    let second = flow_schema(
        "second",
        200,
        "pl",
        None,
        vec![everything(vec![user_subject("u")])],
    );
    let config = config_of(vec![second, first]);
    let got = classify(
        &MatchIndex::of(&config),
        &user("u", &["dev"]),
        &non_resource("get", "/"),
    );
    assert_eq!(got.flow_schema.name, "first");
}

#[test]
fn caller_outside_both_auth_groups_falls_back_to_catch_all() {
    let config = bootstrap_config();
    for identity in [raw_user("ghost", &[]), raw_user("ghost", &["dev"])] {
        let got = classify(
            &MatchIndex::of(&config),
            &identity,
            &resource("get", "", "ns", "pods", ""),
        );
        assert_eq!(got.flow_schema.name, "catch-all");
        assert_eq!(got.priority_level.name, "catch-all");
        // catch-all rejects (no queues): no distinguisher, no hash, no hand.
        assert_eq!((&*got.flow_distinguisher, got.flow_hash), ("", 0));
        assert!(got.hand().is_none());
    }
}

#[test]
fn catch_all_defined_in_files_still_is_the_fallback() {
    let narrowed = flow_schema(
        "catch-all",
        50,
        "pl",
        Some(DistinguisherMethod::ByUser),
        vec![everything(vec![group("nobody")])],
    );
    let config = config_of(vec![narrowed]);
    let got = classify(
        &MatchIndex::of(&config),
        &raw_user("ghost", &[]),
        &non_resource("get", "/"),
    );
    assert_eq!(got.flow_schema.name, "catch-all");
    assert_eq!(&*got.flow_distinguisher, "ghost");
}

#[test]
fn distinguisher_and_hash_only_when_the_level_shards_over_queues() {
    use DistinguisherMethod::{ByNamespace, ByUser};
    let who = user("alice", &[]);
    #[rustfmt::skip]
    let cases: &[(&str, Option<DistinguisherMethod>, RequestInfo, &str, bool)] = &[
        ("pl", Some(ByUser), resource("get", "", "ns1", "pods", ""), "alice", true),
        ("pl", Some(ByNamespace), resource("get", "", "ns1", "pods", ""), "ns1", true),
        ("pl", Some(ByNamespace), resource("get", "", "", "nodes", ""), "", true),
        ("pl", Some(ByNamespace), non_resource("get", "/version"), "", true),
        ("pl", None, resource("get", "", "ns1", "pods", ""), "", true),
        ("one-queue", Some(ByUser), resource("get", "", "ns1", "pods", ""), "", false),
        ("reject", Some(ByUser), resource("get", "", "ns1", "pods", ""), "", false),
        ("exempt", Some(ByUser), resource("get", "", "ns1", "pods", ""), "", false),
    ];
    for (level, method, info, want_distinguisher, hashed) in cases {
        let fs = flow_schema(
            "fs",
            100,
            level,
            *method,
            vec![everything(vec![group("*")])],
        );
        let got = classify(&MatchIndex::of(&config_of(vec![fs])), &who, info);
        let case = format!("{level} {method:?} {info:?}");
        assert_eq!(got.flow_schema.name, "fs", "{case}");
        assert_eq!(&*got.flow_distinguisher, *want_distinguisher, "{case}");
        let want_hash = if *hashed {
            flow_hash("fs", want_distinguisher)
        } else {
            0
        };
        assert_eq!(got.flow_hash, want_hash, "{case}");
        assert_eq!(got.hand().is_some(), *hashed, "{case}");
    }
}

#[test]
fn hand_deals_the_levels_queues_from_the_flow_hash() {
    let config = bootstrap_config();
    // Expected hands from an independent transcription of shufflesharding.go's Deal.
    let got = classify(
        &MatchIndex::of(&config),
        &user("alice", &[]),
        &resource("get", "", "ns", "pods", ""),
    );
    assert_eq!(got.flow_schema.name, "global-default");
    assert_eq!(got.flow_hash, 17644606172554983095);
    let hand = got.hand().expect("global-default queues over 128 queues");
    assert_eq!(hand.as_slice(), [55, 62, 126, 125, 105, 1]);
    let sa = user(
        "system:serviceaccount:kube-system:deployment-controller",
        &[],
    );
    let got = classify(
        &MatchIndex::of(&config),
        &sa,
        &resource("list", "apps", "kube-system", "deployments", ""),
    );
    assert_eq!(got.flow_schema.name, "kube-system-service-accounts");
    assert_eq!(&*got.flow_distinguisher, "kube-system");
    let hand = got.hand().expect("workload-high queues over 128 queues");
    assert_eq!(hand.as_slice(), [92, 95, 124, 69, 84, 46]);
}
