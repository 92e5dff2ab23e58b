//! How the request target is read: odd paths, escapes, rejected targets.

use super::*;

#[test]
fn odd_paths_are_not_cleaned() {
    check(&[
        // Trailing and repeated leading slashes are trimmed for parsing only.
        ("GET", "/api/v1/pods/", "R list api//v1 ns= pods// [pods]"),
        ("GET", "//api/v1/pods//", "R list api//v1 ns= pods// [pods]"),
        // Empty segments in the middle survive.
        ("GET", "/api//v1", "R list api// ns= v1// [v1]"),
        ("GET", "/api/v1//pods", "R get api//v1 ns= /pods/ [,pods]"),
        // An empty name segment is no name: the GET is a list, whose name a `metadata.name`
        // field selector gives (`%2F` makes the empty segment after decoding).
        (
            "GET",
            "/api/api/%2F/api?fieldSelector=metadata.name%3Dn",
            "R list api//api ns= /n/api [,,api]",
        ),
        (
            "GET",
            "/api/v1/namespaces//pods",
            "R list api//v1 ns= pods// [pods]",
        ),
        // Dot segments are names like any other.
        (
            "GET",
            "/api/v1/namespaces/../pods",
            "R list api//v1 ns=.. pods// [pods]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/.",
            "R get api//v1 ns=ns pods/./ [pods,.]",
        ),
        (
            "GET",
            "/api/./v1/pods",
            "R get api//. ns= v1/pods/ [v1,pods]",
        ),
        // Escapes are decoded before splitting: %2F splits a segment.
        (
            "GET",
            "/api/v1/namespaces/a%2Fb/pods",
            "R get api//v1 ns=a b/pods/ [b,pods]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/a%2fb%2Fexec",
            "R get api//v1 ns=ns pods/a/b [pods,a,b,exec]",
        ),
        (
            "GET",
            "/%61pi/v1/n%61mespaces/ns/pods/p",
            "R get api//v1 ns=ns pods/p/ [pods,p]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/a%20b",
            "R get api//v1 ns=ns pods/a b/ [pods,a b]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/a%25b",
            "R get api//v1 ns=ns pods/a%b/ [pods,a%b]",
        ),
        // `+` is literal in a path; `#` is not a fragment in a request target.
        (
            "GET",
            "/api/v1/namespaces/ns/pods/a+b",
            "R get api//v1 ns=ns pods/a+b/ [pods,a+b]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/a#b",
            "R get api//v1 ns=ns pods/a#b/ [pods,a#b]",
        ),
        // Escaped `?` is part of the path, not the query.
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p%3Fwatch=1",
            "R get api//v1 ns=ns pods/p?watch=1/ [pods,p?watch=1]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods%3Fwatch=1",
            "R list api//v1 ns=ns pods?watch=1// [pods?watch=1]",
        ),
    ]);
}

#[test]
fn path_is_the_decoded_path_with_its_trailing_slash() {
    let cases = [
        ("/api/v1/pods/", "/api/v1/pods/"),
        ("/api/v1/pods?watch=1", "/api/v1/pods"),
        (
            "/api/v1/namespaces/a%2Fb/pods?x",
            "/api/v1/namespaces/a/b/pods",
        ),
        ("/api/v1/pods?", "/api/v1/pods"),
        ("/healthz%3F?verbose", "/healthz?"),
        ("/a%FFb", "/a\u{FFFD}b"),
        ("/api/v1/namespaces/%00/pods", "/api/v1/namespaces/\0/pods"),
    ];
    for (target, want) in cases {
        assert_eq!(parse("GET", target).expect(target).path, want, "{target}");
    }
}

#[test]
fn invalid_targets_are_errors() {
    let escape = |s: &str| Err(RequestInfoError::InvalidEscape(s.to_owned()));
    let target = |s: &str| Err(RequestInfoError::InvalidTarget(s.to_owned()));
    let cases = [
        ("/api/v1/pods/%zz", escape("%zz")),
        ("/api/v1/pods/%2", escape("%2")),
        ("/api/v1/pods/%", escape("%")),
        ("/api/v1/pods/%g0abc", escape("%g0")),
        ("/api/v1/%2Fpods%x?ok=1", escape("%x")),
        ("", target("")),
        ("api/v1/pods", target("api/v1/pods")),
        ("http://host/api/v1/pods", target("http://host/api/v1/pods")),
        ("?watch=1", target("?watch=1")),
        ("/api/v1/pods\u{1}", target("/api/v1/pods\u{1}")),
        ("/api/v1/pods?x=\u{7f}", target("/api/v1/pods?x=\u{7f}")),
        ("/api/v1/pods\t", target("/api/v1/pods\t")),
    ];
    for (input, want) in cases {
        assert_eq!(parse("GET", input), want, "{input:?}");
    }
    // Bad escapes in the query never fail the request.
    assert!(parse("GET", "/api/v1/pods?watch=%zz&x=%").is_ok());
}
