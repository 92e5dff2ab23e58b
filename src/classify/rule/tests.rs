use super::*;
use crate::classify::tests::support::*;

#[test]
fn subjects_match_as_rule_go_does() {
    let sa = "system:serviceaccount:ns1:builder";
    #[rustfmt::skip]
    let cases: &[(&str, Subject, Identity, bool)] = &[
        ("user exact", user_subject("alice"), user("alice", &[]), true),
        ("user other", user_subject("alice"), user("bob", &[]), false),
        ("user is case-sensitive", user_subject("Alice"), user("alice", &[]), false),
        ("user star", user_subject("*"), raw_user("anyone", &[]), true),
        ("user star, empty name", user_subject("*"), raw_user("", &[]), true),
        ("user named by its groups only", user_subject("dev"), user("alice", &["dev"]), false),
        ("group member", group("dev"), user("alice", &["ops", "dev"]), true),
        ("group non-member", group("dev"), user("alice", &["ops"]), false),
        ("group is case-sensitive", group("Dev"), user("alice", &["dev"]), false),
        ("group star, no groups", group("*"), raw_user("alice", &[]), true),
        ("group added by authentication", group("system:authenticated"), user("a", &[]), true),
        ("sa exact", service_account("ns1", "builder"), user(sa, &[]), true),
        ("sa other name", service_account("ns1", "deployer"), user(sa, &[]), false),
        ("sa name is not a prefix", service_account("ns1", "build"), user(sa, &[]), false),
        ("sa star", service_account("ns1", "*"), user(sa, &[]), true),
        ("sa star, ns prefix", service_account("ns1", "*"), user("system:serviceaccount:ns10:x", &[]), false),
        ("sa star, other ns", service_account("ns2", "*"), user(sa, &[]), false),
        ("sa star, no name part", service_account("ns1", "*"), user("system:serviceaccount:ns1", &[]), false),
        ("sa star, empty name part", service_account("ns1", "*"), user("system:serviceaccount:ns1:", &[]), true),
        ("sa ignores groups", service_account("ns1", "*"), user("alice", &["system:serviceaccounts:ns1"]), false),
        ("sa needs the prefix", service_account("ns1", "builder"), user("ns1:builder", &[]), false),
        ("sa is case-sensitive", service_account("NS1", "*"), user(sa, &[]), false),
        ("sa user subject", user_subject(sa), user(sa, &[]), true),
    ];
    for (name, subject, identity, want) in cases {
        assert_eq!(subject_matches(subject, identity), *want, "{name}");
    }
}

#[test]
fn contains_string_treats_star_as_wildcard_only_alone() {
    #[rustfmt::skip]
    let cases: &[(&[&str], &str, bool)] = &[
        (&["*"], "get", true),
        (&["*"], "", true),
        (&["get"], "get", true),
        (&["get", "list"], "list", true),
        (&["get"], "GET", false),
        (&["get", "*"], "list", false),
        (&["*", "get"], "list", false),
        (&["get", "*"], "*", true),
        (&[], "get", false),
        (&[""], "", true),
    ];
    for (list, x, want) in cases {
        assert_eq!(
            contains_string(&strings(list), x),
            *want,
            "{list:?} ∋ {x:?}"
        );
    }
}

#[test]
fn resource_rules_match_verb_resource_group_and_scope() {
    let pods_in_ns1 = resource_rule(&["get", "list"], &[""], &["pods"], &["ns1"], false);
    let star = resource_rule(&["*"], &["*"], &["*"], &["*"], false);
    let star_cluster = resource_rule(&["*"], &["*"], &["*"], &["*"], true);
    let status = resource_rule(&["*"], &["*"], &["pods/status"], &["*"], true);
    let cluster_only = resource_rule(&["*"], &["*"], &["*"], &[], true);
    let listed_star = resource_rule(&["*"], &["*"], &["pods", "*"], &["*"], true);
    #[rustfmt::skip]
    let cases: &[(&str, &ResourcePolicyRule, RequestInfo, bool)] = &[
        ("all fields", &pods_in_ns1, resource("get", "", "ns1", "pods", ""), true),
        ("second verb", &pods_in_ns1, resource("list", "", "ns1", "pods", ""), true),
        ("verb", &pods_in_ns1, resource("watch", "", "ns1", "pods", ""), false),
        ("api group", &pods_in_ns1, resource("get", "apps", "ns1", "pods", ""), false),
        ("resource", &pods_in_ns1, resource("get", "", "ns1", "secrets", ""), false),
        ("namespace", &pods_in_ns1, resource("get", "", "ns2", "pods", ""), false),
        ("namespace is exact", &pods_in_ns1, resource("get", "", "ns10", "pods", ""), false),
        ("resource is case-sensitive", &pods_in_ns1, resource("get", "", "ns1", "Pods", ""), false),
        ("resource does not cover subresource", &pods_in_ns1, resource("get", "", "ns1", "pods", "status"), false),
        ("subresource listed", &status, resource("update", "", "ns1", "pods", "status"), true),
        ("subresource listed, bare resource", &status, resource("get", "", "ns1", "pods", ""), false),
        ("other subresource", &status, resource("get", "", "ns1", "pods", "log"), false),
        ("star covers subresources", &star, resource("create", "", "ns1", "pods", "exec"), true),
        ("cluster-scoped needs clusterScope", &star, resource("get", "", "", "nodes", ""), false),
        ("all-namespace list needs clusterScope", &star, resource("list", "", "", "pods", ""), false),
        ("clusterScope covers cluster-scoped", &star_cluster, resource("get", "", "", "nodes", ""), true),
        ("clusterScope irrelevant when namespaced", &cluster_only, resource("get", "", "ns1", "pods", ""), false),
        ("clusterScope alone covers cluster-scoped", &cluster_only, resource("get", "", "", "nodes", ""), true),
        ("star inside a longer resource list", &listed_star, resource("get", "", "ns1", "secrets", ""), false),
        ("listed entry beside star", &listed_star, resource("get", "", "ns1", "pods", ""), true),
    ];
    for (name, rule, info, want) in cases {
        assert_eq!(resource_rule_matches(rule, info), *want, "{name}");
    }
}

#[test]
fn non_resource_urls_match_by_exact_path_or_segment_prefix() {
    #[rustfmt::skip]
    let cases: &[(&str, &str, bool)] = &[
        ("*", "/anything", true),
        ("*", "", true),
        ("/healthz", "/healthz", true),
        ("/healthz", "/healthz/etcd", true),
        ("/healthz", "/healthzx", false),
        ("/healthz", "/healthz/", true),
        ("/healthz", "/health", false),
        ("/healthz/", "/healthz", false),
        ("/healthz/", "/healthz/etcd", true),
        ("/apis/*", "/apis", false),
        ("/apis/*", "/apis/", true),
        ("/apis/*", "/apis/apps/v1", true),
        ("/apis*", "/apis/apps", true),
        ("/apis*", "/apisx", false),
        ("/apis*", "/apis*", true),
        ("/apis*", "/apis", false),
        ("/apis**", "/apis*/x", true),
        ("/apis**", "/apis/x", false),
        ("/", "/", true),
        ("/", "/version", true),
        ("/", "", false),
        ("/Healthz", "/healthz", false),
        ("/metrics", "/metrics", true),
    ];
    for (entry, path, want) in cases {
        assert_eq!(
            non_resource_url_matches(entry, path),
            *want,
            "{entry} vs {path}"
        );
    }
}

#[test]
fn non_resource_star_is_a_wildcard_anywhere_in_the_url_list() {
    let rule = non_resource_rule(&["get"], &["/healthz", "*"]);
    assert!(non_resource_rule_matches(
        &rule,
        &non_resource("get", "/version")
    ));
    assert!(!non_resource_rule_matches(
        &rule,
        &non_resource("post", "/version")
    ));
}

#[test]
fn rule_checks_the_list_of_its_request_kind_only() {
    let both = everything(vec![group("*")]);
    let resource_only = PolicyRulesWithSubjects {
        non_resource_rules: vec![],
        ..both.clone()
    };
    let non_resource_only = PolicyRulesWithSubjects {
        resource_rules: vec![],
        ..both.clone()
    };
    let pod = resource("get", "", "ns", "pods", "");
    let probe = non_resource("get", "/healthz");
    assert!(request_matches(&both, &pod) && request_matches(&both, &probe));
    assert!(request_matches(&resource_only, &pod) && !request_matches(&resource_only, &probe));
    assert!(
        !request_matches(&non_resource_only, &pod) && request_matches(&non_resource_only, &probe)
    );
}

#[test]
fn flow_schema_matches_when_one_rule_matches_subject_and_request_together() {
    // Rule 1 names alice for pods only; rule 2 names bob for everything. Alice's secrets must
    // not match through rule 2's request side.
    let fs = flow_schema(
        "fs",
        100,
        "pl",
        None,
        vec![
            PolicyRulesWithSubjects {
                subjects: vec![user_subject("alice")],
                resource_rules: vec![resource_rule(&["*"], &["*"], &["pods"], &["*"], true)],
                non_resource_rules: vec![],
            },
            everything(vec![user_subject("bob")]),
        ],
    );
    let alice = user("alice", &[]);
    assert!(matches(&fs, &alice, &resource("get", "", "ns", "pods", "")));
    assert!(!matches(
        &fs,
        &alice,
        &resource("get", "", "ns", "secrets", "")
    ));
    assert!(matches(
        &fs,
        &user("bob", &[]),
        &resource("get", "", "ns", "secrets", "")
    ));
    let no_rules = flow_schema("empty", 100, "pl", None, vec![]);
    assert!(!matches(&no_rules, &alice, &non_resource("get", "/")));
}
