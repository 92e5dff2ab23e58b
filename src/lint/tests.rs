//! Table tests: each code with a configuration that triggers it and one that does not.

use super::*;
use crate::config::load::{load_sources, SourceFile};
use crate::config::parse::Format;

fn load(yaml: &str) -> Loaded {
    let file = SourceFile {
        name: "t.yaml".to_string(),
        bytes: yaml.as_bytes().to_vec(),
        format: Format::Yaml,
    };
    match load_sources(&[file]) {
        Ok(loaded) => loaded,
        Err(e) => panic!("{e:?}"),
    }
}

fn codes(yaml: &str) -> Vec<(Code, String)> {
    lint(&load(yaml), &LintOptions::default())
        .into_iter()
        .map(|f| (f.code, f.name))
        .collect()
}

/// A Limited level with queuing.
fn level(name: &str, shares: u32, queues: u32, hand: u32, len: u32) -> String {
    format!(
        "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {{name: {name}}}\nspec:\n  type: Limited\n  limited:\n    \
         nominalConcurrencyShares: {shares}\n    limitResponse:\n      type: Queue\n      \
         queuing: {{queues: {queues}, handSize: {hand}, queueLengthLimit: {len}}}\n"
    )
}

fn limited(name: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {{name: {name}}}\nspec:\n  type: Limited\n  limited:\n    \
         nominalConcurrencyShares: 30\n{extra}    limitResponse: {{type: Reject}}\n"
    )
}

/// A FlowSchema with one rule: `subjects` and `rules` are YAML flow sequences.
fn schema(name: &str, precedence: u32, level: &str, subjects: &str, resource: &str) -> String {
    format!(
        "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\n\
         metadata: {{name: {name}}}\nspec:\n  matchingPrecedence: {precedence}\n  \
         priorityLevelConfiguration: {{name: {level}}}\n  rules:\n  - subjects: {subjects}\n    \
         resourceRules: {resource}\n"
    )
}

const ALICE: &str = "[{kind: User, user: {name: alice}}]";
const DEVS: &str = "[{kind: Group, group: {name: devs}}]";
const AUTHENTICATED: &str = "[{kind: Group, group: {name: 'system:authenticated'}}]";
const PODS: &str = "[{verbs: [get, list], apiGroups: [''], resources: [pods], namespaces: ['*']}]";
const EVERYTHING: &str =
    "[{verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}]";
const GET_PODS: &str = "[{verbs: [get], apiGroups: [''], resources: [pods], namespaces: [a]}]";
const CONFIGMAPS: &str =
    "[{verbs: [get], apiGroups: [''], resources: [configmaps], namespaces: ['*']}]";

const VIP: &str = "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\n\
    kind: PriorityLevelConfiguration\nmetadata: {name: exempt}\nspec:\n  type: Exempt\n  \
    exempt: {nominalConcurrencyShares: 0, lendablePercent: 0}\n";

fn has(yaml: &str, code: Code, name: &str) -> bool {
    codes(yaml).contains(&(code, name.to_string()))
}

#[test]
fn each_code_triggers_on_its_configuration_and_not_on_its_fix() {
    let pl = level("pl", 30, 64, 8, 50);
    let cases: Vec<(Code, &str, String, String)> = vec![
        (
            Code::FlowSchemaShadowed,
            "narrow",
            format!(
                "{pl}{}{}",
                schema("broad", 100, "pl", DEVS, PODS),
                schema("narrow", 200, "pl", DEVS, GET_PODS)
            ),
            format!(
                "{pl}{}{}",
                schema("broad", 300, "pl", DEVS, PODS),
                schema("narrow", 200, "pl", DEVS, GET_PODS)
            ),
        ),
        (
            Code::FlowSchemaShadowed,
            "b",
            // A user is always in system:authenticated: the group covers her.
            format!(
                "{pl}{}{}",
                schema("a", 100, "pl", AUTHENTICATED, EVERYTHING),
                schema("b", 100, "pl", ALICE, PODS)
            ),
            format!(
                "{pl}{}{}",
                schema("a", 100, "pl", DEVS, EVERYTHING),
                schema("b", 100, "pl", ALICE, PODS)
            ),
        ),
        (
            Code::PrecedenceTie,
            "b",
            format!(
                "{pl}{}{}",
                schema("a", 500, "pl", DEVS, PODS),
                schema("b", 500, "pl", ALICE, GET_PODS)
            ),
            format!(
                "{pl}{}{}",
                schema("a", 500, "pl", DEVS, PODS),
                schema("b", 500, "pl", ALICE, CONFIGMAPS)
            ),
        ),
        (
            Code::BroadSubjectPrivilegedLevel,
            "everyone",
            format!(
                "{VIP}{}",
                schema("everyone", 500, "exempt", AUTHENTICATED, PODS)
            ),
            format!("{VIP}{}", schema("everyone", 500, "exempt", DEVS, PODS)),
        ),
        (
            Code::BroadSubjectPrivilegedLevel,
            "everyone",
            format!(
                "{}{}{}",
                level("big", 100, 64, 8, 50),
                level("global-default", 20, 64, 8, 50),
                schema("everyone", 500, "big", AUTHENTICATED, PODS)
            ),
            format!(
                "{}{}{}",
                level("big", 10, 64, 8, 50),
                level("global-default", 20, 64, 8, 50),
                schema("everyone", 500, "big", AUTHENTICATED, PODS)
            ),
        ),
        (
            Code::BorrowingContradiction,
            "exempt",
            VIP.replace("lendablePercent: 0", "lendablePercent: 10"),
            VIP.to_string(),
        ),
        (
            Code::PriorityLevelUnused,
            "pl",
            pl.clone(),
            format!("{pl}{}", schema("s", 500, "pl", DEVS, PODS)),
        ),
        (
            Code::FlowSchemaDangling,
            "s",
            schema("s", 500, "missing", DEVS, PODS),
            format!("{pl}{}", schema("s", 500, "pl", DEVS, PODS)),
        ),
        (
            Code::NominalConcurrencyTiny,
            "small",
            // 600 × 1 / (1 + 5 + 2000) rounds up to 1 seat.
            format!(
                "{}{}",
                limited("small", "").replace("30", "1"),
                limited("huge", "").replace("30", "2000")
            ),
            format!(
                "{}{}",
                limited("small", "").replace("30", "10"),
                limited("huge", "").replace("30", "200")
            ),
        ),
        (
            Code::QueuesCannotDrain,
            "pl",
            // 128 × 1000 queued vs 23 seats × 15 s / 100 ms.
            level("pl", 1, 128, 6, 1000),
            level("pl", 1, 16, 4, 50),
        ),
        (
            Code::ShuffleShardingWeak,
            "pl",
            level("pl", 30, 8, 2, 50),
            level("pl", 30, 64, 8, 50),
        ),
        (
            Code::BorrowingContradiction,
            "pl",
            limited(
                "pl",
                "    lendablePercent: 100\n    borrowingLimitPercent: 0\n",
            ),
            limited("pl", "    lendablePercent: 100\n"),
        ),
        (
            Code::BorrowingContradiction,
            "pl",
            limited("pl", "    borrowingLimitPercent: 50\n"),
            format!(
                "{}{}",
                limited("pl", "    borrowingLimitPercent: 50\n"),
                limited("lender", "    lendablePercent: 50\n")
            ),
        ),
        (
            Code::ApiVersionRemoved,
            "pl",
            limited("pl", "")
                .replace("/v1\n", "/v1beta2\n")
                .replace("nominalConcurrencyShares", "assuredConcurrencyShares"),
            limited("pl", ""),
        ),
    ];
    for (code, name, triggers, clean) in &cases {
        assert!(
            has(triggers, *code, name),
            "{code} should fire for {name}:\n{triggers}\n{:#?}",
            codes(triggers)
        );
        assert!(
            !has(clean, *code, name),
            "{code} should not fire for {name}:\n{clean}\n{:#?}",
            codes(clean)
        );
    }
    let tested: std::collections::BTreeSet<Code> = cases.iter().map(|c| c.0).collect();
    assert_eq!(tested.len(), Code::ALL.len(), "every code has a case");
}

#[test]
fn bootstrap_configuration_is_clean() {
    let loaded = crate::config::load_bootstrap().expect("bootstrap loads");
    let findings = lint(&loaded, &LintOptions::default());
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn the_shadowing_schema_and_the_field_are_named() {
    let yaml = format!(
        "{}{}{}",
        level("pl", 30, 64, 8, 50),
        schema("broad", 100, "pl", DEVS, PODS),
        schema("narrow", 200, "pl", DEVS, GET_PODS)
    );
    let findings = lint(&load(&yaml), &LintOptions::default());
    let f = findings
        .iter()
        .find(|f| f.code == Code::FlowSchemaShadowed)
        .expect("shadowed");
    assert_eq!(
        f.to_string(),
        "t.yaml: FlowSchema/narrow: spec.rules: [flowschema-shadowed] never matches: every request \
         it accepts is taken first by broad (lower matchingPrecedence, or equal and a smaller \
         name); lower its matchingPrecedence"
    );
}

#[test]
fn non_resource_subtrees_are_covered_by_their_prefixes() {
    use super::coverage::url_covered;
    let by = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases = [
        ("/healthz/etcd", &["/healthz"][..], true),
        ("/healthz", &["/healthz/*"][..], false),
        ("/apis/*", &["/apis/*"][..], true),
        ("/apis/*", &["/apis"][..], true),
        ("*", &["/"][..], false),
        ("/x", &["*"][..], true),
        ("/healthzx", &["/healthz"][..], false),
    ];
    for (entry, list, want) in cases {
        assert_eq!(url_covered(entry, &by(list)), want, "{entry} by {list:?}");
    }
}

#[test]
fn squash_probability_matches_the_closed_form() {
    // One elephant, hand of 1 among Q queues: the mouse's queue is the elephant's with 1/Q.
    assert!((mouse_squash_probability(16, 1, 1) - 1.0 / 16.0).abs() < 1e-12);
    // Hand of 2 among 4, one elephant: it must hold exactly the mouse's pair: 1 / C(4,2).
    assert!((mouse_squash_probability(4, 2, 1) - 1.0 / 6.0).abs() < 1e-12);
    // A hand of every queue is always squashed by one elephant.
    assert!((mouse_squash_probability(8, 8, 1) - 1.0).abs() < 1e-12);
    // Inclusion-exclusion values (checked against an independent enumeration in Python).
    let cases = [(16, 4, 4, 0.1936), (8, 2, 4, 0.4496), (64, 6, 8, 0.0227)];
    for (q, h, e, want) in cases {
        let got = mouse_squash_probability(q, h, e);
        assert!((got - want).abs() < 5e-5, "{q}/{h}/{e}: {got}");
    }
}

#[test]
fn squash_probability_agrees_with_enumerating_every_deal() {
    // Q = 6, H = 2, E = 2: every elephant hand pair, against the mouse hand {0, 1}.
    let hands: Vec<[usize; 2]> = (0..6)
        .flat_map(|a| (a + 1..6).map(move |b| [a, b]))
        .collect();
    let mut squashed = 0;
    for e1 in &hands {
        for e2 in &hands {
            if [0, 1].iter().all(|q| e1.contains(q) || e2.contains(q)) {
                squashed += 1;
            }
        }
    }
    let want = f64::from(squashed) / (hands.len() * hands.len()) as f64;
    assert!((mouse_squash_probability(6, 2, 2) - want).abs() < 1e-12);
}

#[test]
fn a_dangling_reference_to_a_suggested_level_says_where_to_get_it() {
    let subjects = "[{kind: Group, group: {name: dev}}]";
    let resource = "[{verbs: [get], apiGroups: [''], resources: [pods], namespaces: ['*']}]";
    // (the level named, a finding, the hint about suggested levels)
    let cases = [
        ("workload-high", true, true),
        ("system", true, true),
        ("nowhere", true, false),
        ("exempt", false, false),
        ("catch-all", false, false),
    ];
    for (level, dangling, hint) in cases {
        let text = schema("s", 500, level, subjects, resource);
        let findings = lint(&load(&text), &LintOptions::default());
        let found = findings.iter().find(|f| f.code == Code::FlowSchemaDangling);
        assert_eq!(found.is_some(), dangling, "{level}: {findings:?}");
        if let Some(f) = found {
            assert_eq!(
                f.message.contains("suggested levels"),
                hint,
                "{level}: {}",
                f.message
            );
        }
    }
}
