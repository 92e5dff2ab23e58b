//! The query of collection requests: list vs watch, `metadata.name` field selectors, decode
//! failures, recorded selectors, and label/field selector syntax.

use super::super::label_selector;
use super::*;

/// `(target, verb, name)` for GET requests.
fn check_verb_and_name(rows: &[(&str, &str, &str)]) {
    for &(target, verb, name) in rows {
        let info = parse("GET", target).unwrap_or_else(|e| panic!("{target}: {e}"));
        assert_eq!(
            (info.verb.as_str(), info.name.as_str()),
            (verb, name),
            "{target}"
        );
    }
}

#[test]
fn watch_parameter_is_a_go_boolean_where_first_value_wins() {
    check_verb_and_name(&[
        ("/api/v1/pods", "list", ""),
        ("/api/v1/pods?", "list", ""),
        ("/api/v1/pods?watch=true", "watch", ""),
        ("/api/v1/pods?watch=1", "watch", ""),
        ("/api/v1/pods?watch=", "watch", ""),
        ("/api/v1/pods?watch", "watch", ""),
        ("/api/v1/pods?watch=yes", "watch", ""),
        ("/api/v1/pods?watch=True", "watch", ""),
        ("/api/v1/pods?watch=no", "watch", ""),
        ("/api/v1/pods?watch=0", "list", ""),
        ("/api/v1/pods?watch=false", "list", ""),
        ("/api/v1/pods?watch=FALSE", "list", ""),
        ("/api/v1/pods?watch=fAlSe", "list", ""),
        ("/api/v1/pods?watch=00", "watch", ""),
        ("/api/v1/pods?watch=+0", "watch", ""),
        ("/api/v1/pods?watch=false&watch=true", "list", ""),
        ("/api/v1/pods?watch=true&watch=false", "watch", ""),
        // Go's EqualFold folds ſ (U+017F) to s, so this spelling is false...
        ("/api/v1/pods?watch=fal%C5%BFe", "list", ""),
        // ... but the decode-failure fallback lowercases instead, where it is not.
        ("/api/v1/pods?watch=fal%C5%BFe&limit=x", "watch", ""),
        ("/api/v1/pods?watch=FALSE&limit=x", "list", ""),
        ("/api/v1/pods?watch=0&limit=x", "list", ""),
        ("/api/v1/pods?watch=true&limit=x", "watch", ""),
        ("/api/v1/pods?watch=&limit=x", "watch", ""),
        // A named GET stays a get whatever the query says.
        ("/api/v1/nodes/n1?watch=true", "get", "n1"),
        (
            "/api/v1/namespaces/ns/pods/p/log?follow=true&watch=1",
            "get",
            "p",
        ),
    ]);
}

#[test]
fn query_is_decoded_like_go_url_query() {
    check_verb_and_name(&[
        ("/api/v1/pods?w%61tch=1", "watch", ""),
        ("/api/v1/pods?watch=tr+ue", "watch", ""),
        ("/api/v1/pods?watch=fals%65", "list", ""),
        ("/api/v1/pods?watch+=1", "list", ""),
        ("/api/v1/pods?Watch=1", "list", ""),
        ("/api/v1/pods?x=1&&watch=1&", "watch", ""),
        // A pair with an invalid escape is dropped, so the next one is first.
        ("/api/v1/pods?watch=%zz&watch=false", "list", ""),
        ("/api/v1/pods?watch=%zz", "list", ""),
        ("/api/v1/pods?wat%zzch=1&watch=0", "list", ""),
        // Semicolons are not separators (Go ≥ 1.17): the whole pair is dropped.
        ("/api/v1/pods?watch=1;x=2", "list", ""),
        ("/api/v1/pods?x=1;watch=1", "list", ""),
        ("/api/v1/pods?x=1;y&watch=1", "watch", ""),
        ("/api/v1/pods?watch=%3B1", "watch", ""),
        // An escaped & does not split pairs.
        ("/api/v1/pods?x=%26watch=1", "list", ""),
    ]);
}

#[test]
fn over_ten_thousand_parameters_drop_the_whole_query() {
    let at_limit = format!("/api/v1/pods?{}watch=1", "a=1&".repeat(9_999));
    let over_limit = format!("/api/v1/pods?{}watch=1", "a=1&".repeat(10_000));
    let empty_pairs_count_too = format!("/api/v1/pods?watch=1{}", "&".repeat(10_000));
    check_verb_and_name(&[
        (&at_limit, "watch", ""),
        (&over_limit, "list", ""),
        (&empty_pairs_count_too, "list", ""),
    ]);
}

#[test]
fn metadata_name_field_selector_names_the_object() {
    check_verb_and_name(&[
        (
            "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo",
            "list",
            "foo",
        ),
        (
            "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name==foo",
            "list",
            "foo",
        ),
        (
            "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&watch=1",
            "watch",
            "foo",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.name!%3Dfoo",
            "list",
            "",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.namespace%3Dfoo",
            "list",
            "",
        ),
        (
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dn,metadata.name%3Dfoo",
            "list",
            "foo",
        ),
        // Terms are sorted before the first exact match wins.
        (
            "/api/v1/pods?fieldSelector=metadata.name%3Db,metadata.name%3Da",
            "list",
            "a",
        ),
        // `==` sorts before `=a` ('=' < 'a').
        (
            "/api/v1/pods?fieldSelector=metadata.name%3D%3Db,metadata.name%3Da",
            "list",
            "b",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.name!%3Da,metadata.name%3Db",
            "list",
            "b",
        ),
        // Escaped values are unescaped.
        (
            "/api/v1/pods?fieldSelector=metadata.name%3Da%5C,b",
            "list",
            "a,b",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.name%3Da%5C%3Db",
            "list",
            "a=b",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.name%3Da%5C%5Cb",
            "list",
            "a\\b",
        ),
        // Names that are not valid path segments are ignored.
        ("/api/v1/pods?fieldSelector=metadata.name%3D.", "list", ""),
        ("/api/v1/pods?fieldSelector=metadata.name%3D..", "list", ""),
        ("/api/v1/pods?fieldSelector=metadata.name%3Da/b", "list", ""),
        (
            "/api/v1/pods?fieldSelector=metadata.name%3Da%25b",
            "list",
            "",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.name%3D...",
            "list",
            "...",
        ),
        ("/api/v1/pods?fieldSelector=metadata.name%3D", "list", ""),
        // No trimming: the field must match exactly.
        (
            "/api/v1/pods?fieldSelector=+metadata.name%3Dfoo",
            "list",
            "",
        ),
        (
            "/api/v1/pods?fieldSelector=metadata.name%3D+foo",
            "list",
            " foo",
        ),
        // First fieldSelector parameter wins.
        (
            "/api/v1/pods?fieldSelector=metadata.name%3Da&fieldSelector=metadata.name%3Db",
            "list",
            "a",
        ),
        // Only a collection GET consults the selector.
        (
            "/api/v1/pods/p?fieldSelector=metadata.name%3Dfoo",
            "get",
            "p",
        ),
    ]);
    let info = parse(
        "DELETE",
        "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo",
    )
    .expect("delete");
    assert_eq!(
        (info.verb.as_str(), info.name.as_str()),
        ("deletecollection", "")
    );
}

#[test]
fn decode_failure_keeps_watch_but_drops_the_selected_name() {
    let named = "fieldSelector=metadata.name%3Dfoo";
    let rows: Vec<(String, &str)> = [
        ("labelSelector=a%3D%3D%3Db", "list"),
        ("labelSelector=!", "list"),
        ("labelSelector=a%3Db,", "list"),
        ("fieldSelector=metadata.name%3Dfoo,bar", "list"),
        ("fieldSelector=metadata.name%3Dfoo,x%3Da%3Db", "list"),
        ("fieldSelector=metadata.name%3Dfoo,x%3Da%5C", "list"),
        ("fieldSelector=metadata.name%3Dfoo,x%3Da%5Cb", "list"),
        ("limit=abc", "list"),
        ("limit=", "list"),
        ("limit=1.0", "list"),
        ("limit=9223372036854775808", "list"),
        ("timeoutSeconds=x&watch=true", "watch"),
        ("timeoutSeconds=&watch=1", "watch"),
        ("limit=1e3&watch=false", "list"),
    ]
    .iter()
    .map(|(q, verb)| match q.starts_with("fieldSelector") {
        // The first fieldSelector wins, so the broken one stands alone.
        true => (format!("/api/v1/pods?{q}"), *verb),
        false => (format!("/api/v1/pods?{named}&{q}"), *verb),
    })
    .collect();
    for (target, verb) in &rows {
        let info = parse("GET", target).expect(target);
        assert_eq!(
            (info.verb.as_str(), info.name.as_str()),
            (*verb, ""),
            "{target}"
        );
    }
    // The same selector with well-formed companions does name the object.
    check_verb_and_name(&[
        ("/api/v1/pods?fieldSelector=metadata.name%3Dfoo&limit=500&timeoutSeconds=30", "list", "foo"),
        ("/api/v1/pods?fieldSelector=metadata.name%3Dfoo&limit=-1&timeoutSeconds=%2B5", "list", "foo"),
        ("/api/v1/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=app%3Dweb", "list", "foo"),
        ("/api/v1/pods?fieldSelector=metadata.name%3Dfoo&resourceVersion=x&sendInitialEvents=maybe", "list", "foo"),
        ("/api/v1/pods?fieldSelector=metadata.name%3Dfoo&limit=x&limit=5", "list", ""),
        ("/api/v1/pods?fieldSelector=metadata.name%3Dfoo&limit=5&limit=x", "list", "foo"),
    ]);
}

#[test]
fn selectors_are_recorded_raw_for_list_watch_and_deletecollection_only() {
    // (method, target, verb, fieldSelector, labelSelector)
    let cases = [
        (
            "GET",
            "/api/v1/pods?fieldSelector=a%3Db&labelSelector=c+in+(d)",
            "list",
            "a=b",
            "c in (d)",
        ),
        (
            "GET",
            "/api/v1/pods?watch=1&labelSelector=x",
            "watch",
            "",
            "x",
        ),
        // Recorded even when they fail to parse.
        (
            "GET",
            "/api/v1/pods?labelSelector=!!&fieldSelector=junk",
            "list",
            "junk",
            "!!",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb",
            "deletecollection",
            "",
            "app=web",
        ),
        (
            "GET",
            "/api/v1/pods?labelSelector=first&labelSelector=second",
            "list",
            "",
            "first",
        ),
        ("GET", "/api/v1/pods?labelSelector=", "list", "", ""),
        // A selected name keeps the collection verb, so selectors are still recorded.
        (
            "GET",
            "/api/v1/pods?fieldSelector=metadata.name%3Dp",
            "list",
            "metadata.name=p",
            "",
        ),
        // Named requests, other verbs and path-prefix watches record none.
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p?labelSelector=x",
            "get",
            "",
            "",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods/p?labelSelector=x",
            "delete",
            "",
            "",
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods?labelSelector=x",
            "create",
            "",
            "",
        ),
        (
            "GET",
            "/api/v1/watch/pods?labelSelector=x&fieldSelector=y",
            "watch",
            "",
            "",
        ),
        ("GET", "/healthz?labelSelector=x", "get", "", ""),
    ];
    for (method, target, verb, field, label) in cases {
        let info = parse(method, target).expect(target);
        assert_eq!(
            (
                info.verb.as_str(),
                info.field_selector.as_str(),
                info.label_selector.as_str()
            ),
            (verb, field, label),
            "{method} {target}"
        );
    }
}

#[test]
fn label_selector_syntax_follows_labels_parse() {
    let long_name = "a".repeat(63);
    let too_long = "a".repeat(64);
    let long_prefix = format!("{}/k", ["a"; 127].join("."));
    let too_long_prefix = format!("{}/k", ["a"; 128].join("."));
    let valid = [
        "",
        "   ",
        "a",
        "a=b",
        "a==b",
        "a!=b",
        "a=",
        "a==",
        "a in (b,c)",
        "a notin (b)",
        "a in ()",
        "a in (,)",
        "a in (b,)",
        "a in (,b)",
        "a in (b,,c)",
        "a\tin\t(b)",
        "a in(b)",
        "!a",
        "! a",
        "a,b,!c",
        "a>1",
        "a<10",
        "a>007",
        "x in (foo,,baz),y,z notin ()",
        "example.com/key=v",
        "k8s.io/a-b_c.d=E_f-1.2",
        "  a  =  b  ",
        "in=b",
        "notin",
        "a in (in,notin)",
        "a=in",
        "A=B",
        &long_name,
        &format!("a={long_name}"),
        &long_prefix,
        // A NUL byte reads as the end of input, as in Go's lexer.
        "a\0",
        "\0!!",
        "a=b\0",
    ];
    for selector in valid {
        assert!(
            label_selector::is_valid(selector),
            "should parse: {selector:?}"
        );
    }
    let invalid = [
        "=",
        "!",
        ",",
        "a,",
        ",a",
        "a b",
        "a=b c",
        "a=b=c",
        "a===b",
        "a!b",
        "!a=b",
        "!a in (b)",
        "a in b",
        "a in (b",
        "a in (b c)",
        "a in (b))",
        "a in",
        "a notin",
        "a (b)",
        "a>b",
        "a>",
        "a>-1",
        "a>+1",
        "a<99999999999999999999",
        "a>1,",
        "-a",
        "a-",
        "a/b/c",
        "/a",
        "a/",
        "A.com/b",
        "a_b.com/c",
        "a=b_",
        "a=-b",
        "a=\u{fc}",
        "\u{fc}",
        "a=b\0c",
        "a\0b",
        &too_long,
        &format!("a={too_long}"),
        &too_long_prefix,
        "a=(b)",
        "a in (b,c",
        "a in ((b))",
        "a=b,,c",
    ];
    for selector in invalid {
        assert!(
            !label_selector::is_valid(selector),
            "should fail: {selector:?}"
        );
    }
}
