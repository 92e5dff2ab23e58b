use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use http::HeaderMap;

use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("test header name"),
            HeaderValue::from_str(value).expect("test header value"),
        );
    }
    map
}

fn values<'a>(map: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    map.get_all(name)
        .iter()
        .map(|v| v.to_str().expect("ascii"))
        .collect()
}

fn alice() -> Identity {
    let mut identity = Identity::authenticated("alice", "uid-1", vec!["dev".into(), "ops".into()]);
    identity.extra = BTreeMap::from([
        ("scopes".to_string(), vec!["a".to_string(), "b".to_string()]),
        ("example.org/team".to_string(), vec!["x".to_string()]),
    ]);
    identity
}

/// [`prepare_request_headers`] for an identity checked for `mode` (both must succeed).
fn prepare(
    map: &mut HeaderMap,
    mode: IdentityForwarding,
    identity: &Identity,
    forgeable: &ForgeableHeaders,
    peer: Option<IpAddr>,
    upgrade: bool,
) {
    let identity = ForwardableIdentity::check(identity.clone(), mode).expect("forwardable");
    prepare_request_headers(map, &identity, forgeable, peer, upgrade).expect("prepared");
}

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));

fn forged_request() -> HeaderMap {
    headers(&[
        ("authorization", "Bearer caller"),
        ("host", "proxy.example"),
        ("x-remote-user", "root"),
        ("x-remote-group", "system:masters"),
        ("x-remote-extra-scopes", "all"),
        ("x-forwarded-user", "root"),
        ("x-custom-extra-foo", "bar"),
        ("accept", "application/json"),
    ])
}

fn configured() -> ForgeableHeaders {
    ForgeableHeaders::new(&["X-Forwarded-User".into()], &["X-Custom-Extra-".into()])
}

#[test]
fn escapes_extra_keys_as_client_go() {
    let cases = [
        ("scopes", "scopes"),
        ("example.org/team", "example.org%2Fteam"),
        ("with space", "with%20space"),
        ("100%", "100%25"),
        ("ünï", "%C3%BCn%C3%AF"),
        ("a:b=c", "a%3Ab%3Dc"),
        ("tilde~ok_|", "tilde~ok_|"),
    ];
    for (key, want) in cases {
        assert_eq!(escape_extra_key(key), want, "{key}");
    }
}

#[test]
fn passthrough_keeps_caller_authorization_and_strips_forged_identity() {
    let mut map = forged_request();
    prepare(
        &mut map,
        IdentityForwarding::Passthrough,
        &alice(),
        &configured(),
        Some(PEER),
        false,
    );
    assert_eq!(values(&map, "authorization"), ["Bearer caller"]);
    for gone in [
        "host",
        "x-remote-user",
        "x-remote-group",
        "x-remote-extra-scopes",
        "x-forwarded-user",
        "x-custom-extra-foo",
    ] {
        assert!(!map.contains_key(gone), "{gone} must be stripped");
    }
    assert_eq!(values(&map, "accept"), ["application/json"]);
    assert_eq!(values(&map, "x-forwarded-for"), ["10.0.0.7"]);
}

#[test]
fn passthrough_forwards_callers_impersonation_untouched() {
    let mut map = headers(&[
        ("impersonate-user", "bob"),
        ("impersonate-group", "g1"),
        ("impersonate-extra-scopes", "s"),
    ]);
    prepare(
        &mut map,
        IdentityForwarding::Passthrough,
        &alice(),
        &ForgeableHeaders::default(),
        None,
        false,
    );
    assert_eq!(values(&map, "impersonate-user"), ["bob"]);
    assert_eq!(values(&map, "impersonate-group"), ["g1"]);
    assert_eq!(values(&map, "impersonate-extra-scopes"), ["s"]);
}

#[test]
fn impersonate_mode_replaces_credentials_with_impersonation_headers() {
    let mut map = forged_request();
    map.append("impersonate-user", HeaderValue::from_static("mallory"));
    map.append("impersonate-extra-evil", HeaderValue::from_static("1"));
    prepare(
        &mut map,
        IdentityForwarding::Impersonate,
        &alice(),
        &configured(),
        Some(PEER),
        false,
    );
    assert!(!map.contains_key("authorization"));
    assert!(!map.contains_key("impersonate-extra-evil"));
    assert!(!map.contains_key("x-remote-user"));
    assert_eq!(values(&map, "impersonate-user"), ["alice"]);
    assert_eq!(values(&map, "impersonate-uid"), ["uid-1"]);
    // system:authenticated is added by the apiserver, never impersonated.
    assert_eq!(values(&map, "impersonate-group"), ["dev", "ops"]);
    assert_eq!(values(&map, "impersonate-extra-scopes"), ["a", "b"]);
    assert_eq!(values(&map, "impersonate-extra-example.org%2fteam"), ["x"]);
}

#[test]
fn requestheader_mode_sends_x_remote_headers() {
    let mut map = forged_request();
    // The pipeline authorized these already; the effective identity replaces them.
    map.append("impersonate-user", HeaderValue::from_static("alice"));
    map.append("impersonate-group", HeaderValue::from_static("dev"));
    prepare(
        &mut map,
        IdentityForwarding::Requestheader,
        &alice(),
        &configured(),
        None,
        false,
    );
    assert!(!map.contains_key("authorization"));
    assert_eq!(values(&map, "x-remote-user"), ["alice"]);
    assert_eq!(values(&map, "x-remote-uid"), ["uid-1"]);
    assert_eq!(values(&map, "x-remote-group"), ["dev", "ops"]);
    assert_eq!(values(&map, "x-remote-extra-scopes"), ["a", "b"]);
    assert_eq!(values(&map, "x-remote-extra-example.org%2fteam"), ["x"]);
    assert!(!map.contains_key("x-forwarded-user"));
    assert!(!map.contains_key("impersonate-user"));
    assert!(!map.contains_key("impersonate-group"));
}

#[test]
fn anonymous_identity_sends_no_groups_and_no_uid() {
    let mut map = HeaderMap::new();
    prepare(
        &mut map,
        IdentityForwarding::Impersonate,
        &Identity::anonymous(),
        &ForgeableHeaders::default(),
        None,
        false,
    );
    assert_eq!(values(&map, "impersonate-user"), ["system:anonymous"]);
    assert!(!map.contains_key("impersonate-group"));
    assert!(!map.contains_key("impersonate-uid"));
}

#[test]
fn anonymous_identity_keeps_system_unauthenticated_in_requestheader_mode() {
    let mut map = HeaderMap::new();
    prepare(
        &mut map,
        IdentityForwarding::Requestheader,
        &Identity::anonymous(),
        &ForgeableHeaders::default(),
        None,
        false,
    );
    assert_eq!(values(&map, "x-remote-user"), ["system:anonymous"]);
    assert_eq!(values(&map, "x-remote-group"), ["system:unauthenticated"]);
    assert!(!map.contains_key("x-remote-uid"));
}

#[test]
fn identity_modes_strip_the_websocket_token_subprotocol_and_passthrough_keeps_it() {
    let token_protocol = "base64url.bearer.authorization.k8s.io.dG9rZW4";
    let cases = [
        (
            IdentityForwarding::Passthrough,
            format!("{token_protocol}, v5.channel.k8s.io"),
        ),
        (
            IdentityForwarding::Impersonate,
            "v5.channel.k8s.io".to_string(),
        ),
        (
            IdentityForwarding::Requestheader,
            "v5.channel.k8s.io".to_string(),
        ),
    ];
    for (mode, expected) in cases {
        let protocols = format!("{token_protocol}, v5.channel.k8s.io");
        let mut map = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-protocol", &protocols),
        ]);
        prepare(
            &mut map,
            mode,
            &alice(),
            &ForgeableHeaders::default(),
            None,
            true,
        );
        assert_eq!(
            values(&map, "sec-websocket-protocol"),
            [expected.as_str()],
            "{mode:?}"
        );
    }
}

#[test]
fn strips_hop_by_hop_headers_and_those_connection_names() {
    let mut map = headers(&[
        ("connection", "keep-alive, x-private"),
        ("x-private", "1"),
        ("keep-alive", "timeout=5"),
        ("proxy-authorization", "Basic x"),
        ("proxy-connection", "keep-alive"),
        ("te", "trailers"),
        ("trailer", "x-checksum"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "websocket"),
        ("content-type", "application/json"),
    ]);
    strip_hop_by_hop(&mut map, false);
    let left: Vec<&str> = map.keys().map(|k| k.as_str()).collect();
    assert_eq!(left, ["content-type"]);
}

#[test]
fn upgrade_keeps_connection_upgrade_pair() {
    let mut map = headers(&[
        ("connection", "Upgrade"),
        ("upgrade", "SPDY/3.1"),
        ("x-stream-protocol-version", "v4.channel.k8s.io"),
    ]);
    assert!(is_upgrade_request(&map));
    strip_hop_by_hop(&mut map, true);
    assert_eq!(values(&map, "connection"), ["Upgrade"]);
    assert_eq!(values(&map, "upgrade"), ["SPDY/3.1"]);
    assert_eq!(
        values(&map, "x-stream-protocol-version"),
        ["v4.channel.k8s.io"]
    );
}

#[test]
fn detects_upgrade_requests() {
    let cases: &[(&[(&str, &str)], bool)] = &[
        (&[("connection", "Upgrade"), ("upgrade", "websocket")], true),
        (
            &[
                ("connection", "keep-alive, upgrade"),
                ("upgrade", "SPDY/3.1"),
            ],
            true,
        ),
        (&[("upgrade", "websocket")], false),
        (&[("connection", "upgrade")], false),
        (&[("connection", "close"), ("upgrade", "websocket")], false),
    ];
    for (pairs, want) in cases {
        assert_eq!(is_upgrade_request(&headers(pairs)), *want, "{pairs:?}");
    }
}

#[test]
fn appends_peer_to_existing_forwarded_for() {
    let mut map = headers(&[
        ("x-forwarded-for", "192.0.2.1"),
        ("x-forwarded-for", "192.0.2.2"),
    ]);
    prepare(
        &mut map,
        IdentityForwarding::Passthrough,
        &alice(),
        &ForgeableHeaders::default(),
        Some(PEER),
        false,
    );
    assert_eq!(
        values(&map, "x-forwarded-for"),
        ["192.0.2.1, 192.0.2.2, 10.0.0.7"]
    );
}

#[test]
fn forwarded_for_writes_addresses_as_display_does() {
    let mut addresses: Vec<IpAddr> = [0u8, 7, 9, 10, 99, 100, 199, 255]
        .iter()
        .flat_map(|&a| {
            [0u8, 1, 42, 250]
                .iter()
                .map(move |&b| IpAddr::V4(Ipv4Addr::new(a, b, 255 - b, b / 3)))
        })
        .collect();
    addresses.push("2001:db8::7".parse().expect("v6"));
    addresses.push("::ffff:10.0.0.1".parse().expect("mapped"));
    for peer in addresses {
        let mut map = HeaderMap::new();
        append_forwarded_for(&mut map, peer);
        assert_eq!(values(&map, "x-forwarded-for"), [peer.to_string()]);
    }
}

/// Go's `url.PathUnescape`, enough for the escaped keys (`%XX` with hex digits).
fn path_unescape(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

proptest::proptest! {
    /// The apiserver lowercases the header name, then `url.PathUnescape`s the key: every key
    /// comes back, ASCII-lowercased (the same limit client-go has).
    #[test]
    fn escaped_extra_keys_round_trip_through_the_apiserver(key in "\\PC{0,24}") {
        let escaped = escape_extra_key(&key);
        let name = format!("impersonate-extra-{escaped}");
        let header = HeaderName::from_bytes(name.as_bytes());
        proptest::prop_assert!(header.is_ok(), "{name:?} is not a header name");
        let lowered = header.expect("checked").as_str()["impersonate-extra-".len()..].to_string();
        let decoded = path_unescape(&lowered);
        proptest::prop_assert_eq!(decoded, key.to_ascii_lowercase().into_bytes());
    }
}
