use std::collections::BTreeMap;

use http::HeaderMap;

use super::*;
use crate::proxy::headers::prepare_request_headers;
use crate::proxy::ForgeableHeaders;

const MODES: [IdentityForwarding; 2] = [
    IdentityForwarding::Impersonate,
    IdentityForwarding::Requestheader,
];

fn user(name: &str) -> Identity {
    Identity::authenticated(name, "", Vec::new())
}

fn with_group(group: &str) -> Identity {
    Identity::authenticated("alice", "", vec![group.to_string()])
}

fn with_extra(key: &str, value: &str) -> Identity {
    let mut identity = user("alice");
    identity.extra = BTreeMap::from([(key.to_string(), vec![value.to_string()])]);
    identity
}

fn with_uid(uid: &str) -> Identity {
    Identity::authenticated("alice", uid, Vec::new())
}

#[test]
fn refuses_every_identity_that_cannot_travel_unchanged() {
    let cases: Vec<(&str, Identity, &str, RefusalReason)> = vec![
        (
            "DEL in the user",
            user("eve\u{7f}"),
            "user",
            RefusalReason::ControlCharacter,
        ),
        (
            "newline in the user",
            user("x\nINFO forged"),
            "user",
            RefusalReason::ControlCharacter,
        ),
        (
            "C1 control in the user",
            user("eve\u{85}"),
            "user",
            RefusalReason::ControlCharacter,
        ),
        (
            "tab inside the user",
            user("a\tb"),
            "user",
            RefusalReason::ControlCharacter,
        ),
        ("empty user", user(""), "user", RefusalReason::Empty),
        (
            "leading space",
            user(" alice"),
            "user",
            RefusalReason::SurroundingWhitespace,
        ),
        (
            "trailing no-break space",
            user("alice\u{a0}"),
            "user",
            RefusalReason::SurroundingWhitespace,
        ),
        (
            "trailing space in a group",
            with_group("system:monitoring "),
            "groups[0]",
            RefusalReason::SurroundingWhitespace,
        ),
        (
            "empty group",
            with_group(""),
            "groups[0]",
            RefusalReason::Empty,
        ),
        (
            "DEL in a group",
            with_group("dev\u{7f}"),
            "groups[0]",
            RefusalReason::ControlCharacter,
        ),
        (
            "NUL in the UID",
            with_uid("u\0"),
            "uid",
            RefusalReason::ControlCharacter,
        ),
        (
            "spaces around the UID",
            with_uid(" u "),
            "uid",
            RefusalReason::SurroundingWhitespace,
        ),
        (
            "empty extra value",
            with_extra("scopes", ""),
            "extra[\"scopes\"][0]",
            RefusalReason::Empty,
        ),
        (
            "CR in an extra value",
            with_extra("scopes", "a\rb"),
            "extra[\"scopes\"][0]",
            RefusalReason::ControlCharacter,
        ),
        (
            "empty extra key",
            with_extra("", "v"),
            "extra key \"\"",
            RefusalReason::Empty,
        ),
        (
            "newline in an extra key",
            with_extra("a\nb", "v"),
            "extra key \"a\\nb\"",
            RefusalReason::ControlCharacter,
        ),
        (
            "upper-case extra key",
            with_extra("Example.org/Team", "v"),
            "extra key \"Example.org/Team\"",
            RefusalReason::UppercaseExtraKey,
        ),
        (
            "huge extra key",
            with_extra(&"/".repeat(30_000), "v"),
            "extra key",
            RefusalReason::Unencodable,
        ),
    ];
    for (what, identity, field, reason) in cases {
        for mode in MODES {
            let refused = ForwardableIdentity::check(identity.clone(), mode).expect_err(what);
            assert_eq!(refused.reason, reason, "{what} ({mode:?})");
            assert!(
                refused.field.starts_with(field),
                "{what}: {}",
                refused.field
            );
        }
    }
}

#[test]
fn passthrough_forwards_no_identity_and_refuses_none() {
    let checked = ForwardableIdentity::check(user("eve\u{7f}"), IdentityForwarding::Passthrough)
        .expect("passthrough");
    let mut headers = HeaderMap::new();
    prepare_request_headers(
        &mut headers,
        &checked,
        &ForgeableHeaders::default(),
        None,
        false,
    )
    .expect("prepared");
    assert!(headers.is_empty(), "{headers:?}");
}

/// Odd but valid identities reach the upstream byte for byte: UTF-8 as its bytes, inner spaces,
/// punctuation, percent signs, non-ASCII upper-case letters in extra keys.
#[test]
fn odd_but_valid_identities_travel_unchanged() {
    let mut identity = Identity::authenticated(
        "jürgen ü@example.org",
        "uid with space",
        vec![
            "team a,b".to_string(),
            "グループ".to_string(),
            "100%".to_string(),
        ],
    );
    identity.extra = BTreeMap::from([(
        "example.org/Ünï key%".to_string(),
        vec!["värde".to_string(), "x y".to_string()],
    )]);
    for (mode, prefix) in [
        (IdentityForwarding::Impersonate, "impersonate-"),
        (IdentityForwarding::Requestheader, "x-remote-"),
    ] {
        let checked = ForwardableIdentity::check(identity.clone(), mode).expect("valid");
        let mut headers = HeaderMap::new();
        prepare_request_headers(
            &mut headers,
            &checked,
            &ForgeableHeaders::default(),
            None,
            false,
        )
        .expect("prepared");
        let bytes = |name: &str| -> Vec<Vec<u8>> {
            headers
                .get_all(format!("{prefix}{name}"))
                .iter()
                .map(|v| v.as_bytes().to_vec())
                .collect()
        };
        assert_eq!(bytes("user"), [identity.user.as_bytes()]);
        assert_eq!(bytes("uid"), [identity.uid.as_bytes()]);
        let groups: Vec<&[u8]> = identity.groups[..3].iter().map(|g| g.as_bytes()).collect();
        assert_eq!(bytes("group"), groups, "{mode:?}");
        assert_eq!(
            bytes("extra-example.org%2f%c3%9cn%c3%af%20key%25"),
            [b"v\xc3\xa4rde".to_vec(), b"x y".to_vec()]
        );
    }
}

#[test]
fn every_reason_has_a_distinct_label() {
    let labels: std::collections::BTreeSet<&str> =
        RefusalReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(labels.len(), RefusalReason::ALL.len());
}
