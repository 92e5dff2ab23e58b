//! Properties of the matcher and of the index against a linear scan.

use proptest::prelude::*;
use proptest::sample::select;

use super::*;
use crate::config::{
    FlowSchema, NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};

fn list(items: &'static [&'static str], max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(select(items).prop_map(String::from), 0..=max)
}

fn subject() -> impl Strategy<Value = Subject> {
    let names = select(&["alice", "bob", "*", "g1", "system:authenticated"][..]);
    let namespaces = select(&["ns1", "ns10", "x", "x:y", ""][..]);
    let sa_names = select(&["a", "*", "y:z", "z"][..]);
    prop_oneof![
        names.clone().prop_map(user_subject),
        names.prop_map(group),
        (namespaces, sa_names).prop_map(|(ns, name)| service_account(ns, name)),
    ]
}

fn resource_policy() -> impl Strategy<Value = ResourcePolicyRule> {
    (
        list(&["get", "list", "*"], 2),
        list(&["", "apps", "*"], 2),
        list(&["pods", "pods/status", "nodes", "*"], 2),
        list(&["ns1", "ns10", "*"], 2),
        any::<bool>(),
    )
        .prop_map(
            |(verbs, api_groups, resources, namespaces, cluster_scope)| ResourcePolicyRule {
                verbs,
                api_groups,
                resources,
                cluster_scope,
                namespaces,
            },
        )
}

fn non_resource_policy() -> impl Strategy<Value = NonResourcePolicyRule> {
    (
        list(&["get", "post", "*"], 2),
        list(
            &[
                "*",
                "/healthz",
                "/healthz/",
                "/apis/*",
                "/",
                "/apis",
                "/apis*",
                "/ap*",
                "//",
                "healthz",
                "",
                "/healthz/etcd",
            ],
            2,
        ),
    )
        .prop_map(|(verbs, non_resource_urls)| NonResourcePolicyRule {
            verbs,
            non_resource_urls,
        })
}

fn policy() -> impl Strategy<Value = PolicyRulesWithSubjects> {
    (
        prop::collection::vec(subject(), 1..=3),
        prop::collection::vec(resource_policy(), 0..=2),
        prop::collection::vec(non_resource_policy(), 0..=2),
    )
        .prop_map(
            |(subjects, resource_rules, non_resource_rules)| PolicyRulesWithSubjects {
                subjects,
                resource_rules,
                non_resource_rules,
            },
        )
}

fn flow_schemas() -> impl Strategy<Value = Vec<FlowSchema>> {
    prop::collection::vec((1..5i32, prop::collection::vec(policy(), 0..=2)), 0..=12).prop_map(
        |specs| {
            specs
                .into_iter()
                .enumerate()
                .map(|(i, (precedence, rules))| {
                    flow_schema(&format!("fs{i:02}"), precedence, "pl", None, rules)
                })
                .collect()
        },
    )
}

fn identity() -> impl Strategy<Value = Identity> {
    let users = select(
        &[
            "alice",
            "bob",
            "*",
            "system:serviceaccount:ns1:a",
            "system:serviceaccount:ns10:a",
            "system:serviceaccount:x:y:z",
            "system:serviceaccount:ns1",
        ][..],
    );
    (users, list(&["g1", "g2", "system:authenticated"], 3)).prop_map(|(user, groups)| Identity {
        user: user.into(),
        groups,
        ..Identity::default()
    })
}

fn request() -> impl Strategy<Value = RequestInfo> {
    let verbs = select(&["get", "list", "post"][..]);
    prop_oneof![
        (
            verbs.clone(),
            select(&["", "apps"][..]),
            select(&["", "ns1", "ns10"][..]),
            select(&["pods", "nodes"][..]),
            select(&["", "status"][..]),
        )
            .prop_map(|(v, g, ns, r, s)| resource(v, g, ns, r, s)),
        (
            verbs,
            select(
                &[
                    "/healthz",
                    "/healthzx",
                    "/healthz/etcd",
                    "/apis",
                    "/apis/x",
                    "/",
                    "//x",
                    "",
                    "healthz/x",
                    "/ap/x",
                    "/apis*",
                ][..]
            )
        )
            .prop_map(|(v, p)| non_resource(v, p)),
    ]
}

/// Rotates then reverses every list of a FlowSchema: a reordering of each list.
fn reordered(fs: &FlowSchema, k: usize) -> FlowSchema {
    fn reorder<T: Clone>(items: &[T], k: usize) -> Vec<T> {
        let mut items = items.to_vec();
        if !items.is_empty() {
            let len = items.len();
            items.rotate_left(k % len);
        }
        items.reverse();
        items
    }
    let rules = fs.rules.iter().map(|rule| PolicyRulesWithSubjects {
        subjects: reorder(&rule.subjects, k),
        resource_rules: reorder(&rule.resource_rules, k)
            .into_iter()
            .map(|r| ResourcePolicyRule {
                verbs: reorder(&r.verbs, k),
                api_groups: reorder(&r.api_groups, k),
                resources: reorder(&r.resources, k),
                namespaces: reorder(&r.namespaces, k),
                ..r
            })
            .collect(),
        non_resource_rules: reorder(&rule.non_resource_rules, k)
            .into_iter()
            .map(|r| NonResourcePolicyRule {
                verbs: reorder(&r.verbs, k),
                non_resource_urls: reorder(&r.non_resource_urls, k),
            })
            .collect(),
    });
    FlowSchema {
        rules: reorder(&rules.collect::<Vec<_>>(), k),
        ..fs.clone()
    }
}

proptest! {
    #[test]
    fn all_wildcard_schema_matches_every_request(identity in identity(), info in request()) {
        let fs = flow_schema("all", 1, "pl", None, vec![everything(vec![group("*")])]);
        prop_assert!(matches(&fs, &identity, &info));
        let fs = flow_schema("all", 1, "pl", None, vec![everything(vec![user_subject("*")])]);
        prop_assert!(matches(&fs, &identity, &info));
    }

    #[test]
    fn matching_ignores_the_order_of_list_entries(
        schemas in flow_schemas(),
        k in 0usize..4,
        identity in identity(),
        info in request(),
    ) {
        for fs in &schemas {
            prop_assert_eq!(
                matches(fs, &identity, &info),
                matches(&reordered(fs, k), &identity, &info),
                "{:?}", fs
            );
        }
    }
}

proptest! {
    // The index has many paths (wildcards, users, groups, service-account namespaces); more
    // cases make each of them meet a configuration where it decides the result.
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn index_finds_the_first_match_of_a_linear_scan(
        schemas in flow_schemas(),
        identity in identity(),
        info in request(),
    ) {
        let config = config_of(schemas);
        let got = classify(&MatchIndex::of(&config), &identity, &info);
        let want = config
            .flow_schemas()
            .iter()
            .find(|fs| matches(fs, &identity, &info))
            .unwrap_or(config.catch_all());
        prop_assert_eq!(&got.flow_schema.name, &want.name);
    }
}
