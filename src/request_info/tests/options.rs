//! The options read from a query: the list options, and the query decoded as Go does.

use super::*;

#[test]
fn parses_query_like_go() {
    let pairs = query_params("a=1&&b&c=%41+x&bad=%zz&semi=1;x=2&a=2");
    let want = [("a", "1"), ("b", ""), ("c", "A x"), ("a", "2")];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(pairs, want);
}

#[test]
fn list_options_table() {
    let cases: &[(&str, Result<ListOptions, &str>)] = &[
        ("", Ok(ListOptions::default())),
        (
            "limit=500&resourceVersion=0&continue=abc&labelSelector=a%3Db&fieldSelector=x%3Dy",
            Ok(ListOptions {
                limit: 500,
                resource_version: "0".into(),
                continue_token: "abc".into(),
                label_selector: "a=b".into(),
                field_selector: "x=y".into(),
                ..ListOptions::default()
            }),
        ),
        (
            "limit=-3&limit=x",
            Ok(ListOptions {
                limit: -3,
                ..ListOptions::default()
            }),
        ),
        ("limit=x", Err("limit")),
        ("limit=", Err("limit")),
        ("limit=99999999999999999999", Err("limit")),
        ("timeoutSeconds=1s", Err("timeoutSeconds")),
        (
            "sendInitialEvents=",
            Ok(ListOptions {
                send_initial_events: Some(true),
                ..ListOptions::default()
            }),
        ),
        (
            "sendInitialEvents=FALSE",
            Ok(ListOptions {
                send_initial_events: Some(false),
                ..ListOptions::default()
            }),
        ),
        (
            "sendInitialEvents=0",
            Ok(ListOptions {
                send_initial_events: Some(false),
                ..ListOptions::default()
            }),
        ),
        (
            "sendInitialEvents=yes",
            Ok(ListOptions {
                send_initial_events: Some(true),
                ..ListOptions::default()
            }),
        ),
        (
            "resourceVersionMatch=Exact",
            Ok(ListOptions {
                resource_version_match: "Exact".into(),
                ..ListOptions::default()
            }),
        ),
    ];
    for (query, want) in cases {
        let options = RequestOptions::from_query(query);
        let got = options.list().cloned().map_err(|e| e.param);
        assert_eq!(&got, want, "{query}");
    }
}

/// The conversion as the apiserver states it: every pair decoded, then the first value of
/// each parameter looked up.
fn from_pairs(query: &str) -> Result<ListOptions, ListOptionsError> {
    let params = query_params(query);
    let first = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let string = |name: &str| CompactString::from(first(name).unwrap_or(""));
    let int = |name: &'static str| match first(name) {
        None => Ok(0),
        Some(v) => v.parse::<i64>().map_err(|_| ListOptionsError {
            param: name,
            value: v.to_string(),
        }),
    };
    int("timeoutSeconds")?;
    Ok(ListOptions {
        label_selector: string("labelSelector"),
        field_selector: string("fieldSelector"),
        resource_version: string("resourceVersion"),
        resource_version_match: string("resourceVersionMatch"),
        limit: int("limit")?,
        continue_token: string("continue"),
        send_initial_events: first("sendInitialEvents")
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false"))),
    })
}

proptest::proptest! {
    #[test]
    fn one_pass_conversion_agrees_with_the_pairs(
        pieces in proptest::collection::vec(
            (
                proptest::sample::select(vec![
                    "limit", "l%69mit", "limit;", "resourceVersion", "resourceVersionMatch",
                    "continue", "labelSelector", "fieldSelector", "sendInitialEvents",
                    "timeoutSeconds", "watch", "", "%zz", "a+b",
                ]),
                proptest::option::of(proptest::sample::select(vec![
                    "", "0", "500", "-3", "x", "1s", "%41+b", "%4", "a%3Db", "FALSE", "1;2",
                    "99999999999999999999",
                ])),
            ),
            0..8,
        )
    ) {
        let query = pieces
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={v}"),
                None => k.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&");
        let options = RequestOptions::from_query(&query);
            proptest::prop_assert_eq!(options.list().cloned().map_err(Clone::clone), from_pairs(&query));
    }
}

#[test]
fn field_selector_exact_match_table() {
    let cases = [
        ("spec.nodeName=n1", Some("n1")),
        ("spec.nodeName==n1", Some("n1")),
        ("spec.nodeName!=n1", None),
        ("spec.nodeName=", Some("")),
        ("metadata.name=a,spec.nodeName=n\\,1", Some("n,1")),
        ("spec.nodeName=a,spec.nodeName=b", Some("a")),
        ("status.phase=Running", None),
        ("spec.nodeName=n1,garbage", None),
        ("spec.nodeName=a=b", None),
        ("spec.nodeName=a\\", None),
        ("", None),
    ];
    for (selector, want) in cases {
        assert_eq!(
            field_requires_exact_match(selector, "spec.nodeName").as_deref(),
            want,
            "{selector}"
        );
    }
}
