//! Properties over generated requests: no panics, consistent fields, decoding before splitting.

use proptest::prelude::*;

use super::super::label_selector;
use super::*;

const SEGMENTS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "apps",
    "namespaces",
    "ns",
    "pods",
    "p",
    "watch",
    "proxy",
    "status",
    "finalize",
    "exec",
    "log",
    "",
    ".",
    "..",
    "a%2Fb",
    "%2F",
    "x+y",
    "%C5%BF",
    "%zz",
    "%",
    "a%20b",
    "%3F",
    "ſ",
];
const QUERY_PAIRS: &[&str] = &[
    "watch=1",
    "watch=false",
    "watch",
    "watch=",
    "labelSelector=a%3Db",
    "labelSelector=!!",
    "fieldSelector=metadata.name%3Dn",
    "fieldSelector=metadata.name%3D..",
    "fieldSelector=junk",
    "limit=5",
    "limit=x",
    "timeoutSeconds=1",
    "a=%zz",
    "x;y",
    "",
];
const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "get", "BREW",
];

/// A request target assembled from path segments and query pairs that exercise the rules.
fn target() -> impl Strategy<Value = String> {
    let segments = prop::collection::vec(prop::sample::select(SEGMENTS), 0..9);
    let query = prop::option::of(prop::collection::vec(
        prop::sample::select(QUERY_PAIRS),
        0..4,
    ));
    (segments, any::<bool>(), query).prop_map(|(segments, trailing_slash, query)| {
        let mut target = format!("/{}", segments.join("/"));
        if trailing_slash {
            target.push('/');
        }
        if let Some(pairs) = query {
            target.push('?');
            target.push_str(&pairs.join("&"));
        }
        target
    })
}

/// One requirement of the label selector grammar, built from valid keys and values.
fn label_requirement() -> impl Strategy<Value = String> {
    let name = "[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?";
    let key = (
        prop::option::of("[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z0-9]{1,5}){0,2}"),
        name,
    )
        .prop_map(|(prefix, name)| prefix.map_or(name.clone(), |p| format!("{p}/{name}")));
    let value = prop_oneof![Just(String::new()), name];
    let values = prop::collection::vec(value.clone(), 1..4).prop_map(|v| v.join(","));
    let ws = prop::sample::select(vec!["", " ", "\t", "  "]);
    (key, 0..8usize, value, values, "[0-9]{1,18}", ws).prop_map(
        |(key, form, value, values, number, ws)| match form {
            0 => key,
            1 => format!("!{ws}{key}"),
            2 => format!("{key}{ws}={ws}{value}"),
            3 => format!("{key}{ws}=={value}"),
            4 => format!("{key}!={ws}{value}"),
            5 => format!("{key} in{ws}({values})"),
            6 => format!("{key} notin ({values}){ws}"),
            _ => format!("{key}{ws}>{ws}{number}"),
        },
    )
}

/// Percent-encodes every byte after the leading `/`.
fn encode_fully(path: &str) -> String {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let encoded: String = rest.bytes().map(|b| format!("%{b:02X}")).collect();
    format!("/{encoded}")
}

fn check_consistent(method: &str, info: &RequestInfo) {
    let selectors_recorded = !info.field_selector.is_empty() || !info.label_selector.is_empty();
    let collection_verb = ["list", "watch", "deletecollection"].contains(&info.verb.as_str());
    assert!(!selectors_recorded || collection_verb, "{info:?}");
    if !info.is_resource_request {
        assert_eq!(info.parts, None);
        assert_eq!(info.verb, method.to_lowercase());
        assert!(
            info.api_prefix.is_empty() || info.api_prefix == "apis",
            "{info:?}"
        );
        let empty = [
            &info.api_group,
            &info.api_version,
            &info.namespace,
            &info.resource,
            &info.name,
        ];
        assert!(
            empty.iter().all(|s| s.is_empty()) && info.subresource.is_empty(),
            "{info:?}"
        );
        assert!(!selectors_recorded);
        return;
    }
    let parts = info.parts.as_deref().expect("resource requests have parts");
    assert!(!parts.is_empty(), "{info:?}");
    assert_eq!(info.resource, parts[0]);
    match parts.get(1) {
        Some(name) if !name.is_empty() => assert_eq!(&info.name, name),
        // No name in the path (or an empty segment): a GET became a list or a watch, whose name
        // may come from a `metadata.name` field selector.
        _ => assert!(
            info.name.is_empty() || ["list", "watch"].contains(&info.verb.as_str()),
            "{info:?}"
        ),
    }
    match parts.get(2) {
        Some(sub) if info.verb != "proxy" => assert_eq!(&info.subresource, sub),
        _ => assert!(info.subresource.is_empty(), "{info:?}"),
    }
    assert!(
        (info.api_prefix == "api" && info.api_group.is_empty()) || info.api_prefix == "apis",
        "{info:?}"
    );
    let verbs = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
        "proxy",
        "",
    ];
    assert!(verbs.contains(&info.verb.as_str()), "{info:?}");
    if info.verb == "deletecollection" {
        assert!(info.name.is_empty());
    }
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_input(method in any::<String>(), target in any::<String>()) {
        let _ = parse(&method, &target);
        let _ = parse(&method, &format!("/{target}"));
    }

    #[test]
    fn never_panics_on_arbitrary_queries(path in target(), query in "[a-zA-Z%=&;+!(),\\\\ 0-9.]{0,40}") {
        for method in METHODS {
            let _ = parse(method, &format!("{path}?labelSelector={query}&fieldSelector={query}&watch={query}"));
        }
    }

    #[test]
    fn fields_are_consistent(method in prop::sample::select(METHODS), target in target()) {
        if let Ok(info) = parse(method, &target) {
            check_consistent(method, &info);
            prop_assert!(!is_long_running(&info) || info.verb == "watch" || info.verb == "proxy"
                || !info.subresource.is_empty() || info.path.starts_with("/debug/pprof/"));
        }
    }

    #[test]
    fn label_selectors_from_the_grammar_parse(requirements in prop::collection::vec(label_requirement(), 1..5)) {
        let selector = requirements.join(",");
        prop_assert!(label_selector::is_valid(&selector), "{:?}", selector);
        let with_trailing_comma = format!("{selector},");
        prop_assert!(!label_selector::is_valid(&with_trailing_comma));
    }

    #[test]
    fn escapes_are_decoded_before_splitting(method in prop::sample::select(METHODS), target in target()) {
        let Ok(info) = parse(method, &target) else { return Ok(()) };
        let query = target.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
        let reencoded = format!("{}{query}", encode_fully(&info.path));
        let again = parse(method, &reencoded).expect("a fully encoded decoded path parses");
        prop_assert_eq!(again, info);
    }
}

proptest! {
    #[test]
    fn segments_split_as_str_split_does(path in "[a-zé/]{0,24}") {
        let trimmed = path.trim_matches('/');
        let expected: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        prop_assert_eq!(split_segments(trimmed).to_vec(), expected);
    }
}
