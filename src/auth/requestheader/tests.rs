use http::{HeaderMap, HeaderValue};

use super::*;
use crate::auth::test_pki::{ClientSpec, TestCa};

struct Fixture {
    _dir: tempfile::TempDir,
    ca: TestCa,
    cfg: RequestHeaderConfig,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("front-proxy-ca");
    let cfg = RequestHeaderConfig::new(ca.write(dir.path(), "front-proxy-ca.pem"));
    Fixture { _dir: dir, ca, cfg }
}

fn proxy_cert(ca: &TestCa, cn: &str) -> Vec<CertificateDer<'static>> {
    ca.client(ClientSpec {
        cn: Some(cn),
        ..ClientSpec::default()
    })
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("name"),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    map
}

#[test]
fn reads_user_groups_and_extra_from_headers() {
    let f = fixture();
    let mut cfg = f.cfg.clone();
    cfg.uid_headers = vec!["X-Remote-Uid".to_string()];
    let auth = RequestHeaderAuthenticator::new(&cfg).expect("config");
    let h = headers(&[
        ("X-Remote-User", "alice"),
        ("X-Remote-Uid", "u-1"),
        ("X-Remote-Group", "dev"),
        ("X-Remote-Group", ""),
        ("X-Remote-Group", "ops"),
        ("X-Remote-Extra-Scopes", "read"),
        ("X-Remote-Extra-Scopes", "write"),
        ("X-Remote-Extra-Acme.com%2Fproject", "p1"),
        ("X-Remote-Extra-Bad%zzKey", "v"),
        ("X-Remote-Extra-Empty", ""),
    ]);
    let id = auth
        .authenticate(&h, Some(&proxy_cert(&f.ca, "front-proxy")), UnixTime::now())
        .expect("trusted")
        .expect("has a user");
    assert_eq!(id.user, "alice");
    assert_eq!(id.uid, "u-1");
    assert_eq!(id.groups, vec!["dev", "ops"]);
    let extra: Vec<(&str, Vec<&str>)> = id
        .extra
        .iter()
        .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        extra,
        vec![
            ("acme.com/project", vec!["p1"]),
            ("bad%zzkey", vec!["v"]),
            ("empty", vec![""]),
            ("scopes", vec!["read", "write"]),
        ]
    );
}

#[test]
fn first_non_empty_username_header_wins() {
    let f = fixture();
    let mut cfg = f.cfg.clone();
    cfg.username_headers = vec!["X-First".to_string(), " X-Second ".to_string()];
    let auth = RequestHeaderAuthenticator::new(&cfg).expect("config");
    let cert = proxy_cert(&f.ca, "front-proxy");
    let cases = [
        (headers(&[("X-First", "a"), ("X-Second", "b")]), Some("a")),
        (headers(&[("X-First", ""), ("X-Second", "b")]), Some("b")),
        (headers(&[("X-Second", "b")]), Some("b")),
        (headers(&[("X-Remote-User", "c")]), None),
        (headers(&[]), None),
    ];
    for (h, want) in cases {
        let got = auth
            .authenticate(&h, Some(&cert), UnixTime::now())
            .expect("trusted");
        assert_eq!(got.map(|id| id.user).as_deref(), want, "{h:?}");
    }
}

#[test]
fn headers_are_ignored_without_a_client_certificate() {
    let f = fixture();
    let auth = RequestHeaderAuthenticator::new(&f.cfg).expect("config");
    let h = headers(&[("X-Remote-User", "admin")]);
    assert_eq!(auth.authenticate(&h, None, UnixTime::now()), Ok(None));
}

#[test]
fn certificate_from_another_ca_is_an_error() {
    let f = fixture();
    let other = TestCa::new("client-ca");
    let auth = RequestHeaderAuthenticator::new(&f.cfg).expect("config");
    let h = headers(&[("X-Remote-User", "admin")]);
    let err = auth
        .authenticate(
            &h,
            Some(&proxy_cert(&other, "front-proxy")),
            UnixTime::now(),
        )
        .expect_err("untrusted CA");
    assert!(
        matches!(
            err,
            RequestHeaderError::Certificate(CertError::Verify { .. })
        ),
        "{err}"
    );
}

#[test]
fn allowed_names_restrict_the_proxy_cn() {
    let f = fixture();
    let h = headers(&[("X-Remote-User", "alice")]);
    let cases: [(&[&str], &str, bool); 4] = [
        (&[], "anything", true),
        (&["front-proxy"], "front-proxy", true),
        (&["aggregator", "front-proxy"], "front-proxy", true),
        (&["front-proxy"], "intruder", false),
    ];
    for (allowed, cn, ok) in cases {
        let mut cfg = f.cfg.clone();
        cfg.allowed_names = allowed.iter().map(|s| s.to_string()).collect();
        let auth = RequestHeaderAuthenticator::new(&cfg).expect("config");
        let got = auth.authenticate(&h, Some(&proxy_cert(&f.ca, cn)), UnixTime::now());
        match ok {
            true => assert_eq!(
                got.expect("allowed").map(|i| i.user).as_deref(),
                Some("alice")
            ),
            false => assert_eq!(
                got,
                Err(RequestHeaderError::Certificate(CertError::NotAllowed(
                    cn.to_string()
                )))
            ),
        }
    }
}

#[test]
fn non_utf8_identity_header_is_an_error() {
    let f = fixture();
    let auth = RequestHeaderAuthenticator::new(&f.cfg).expect("config");
    let mut h = HeaderMap::new();
    h.insert(
        "x-remote-user",
        HeaderValue::from_bytes(b"al\xffce").expect("obs-text"),
    );
    let err = auth
        .authenticate(&h, Some(&proxy_cert(&f.ca, "p")), UnixTime::now())
        .expect_err("not UTF-8");
    assert_eq!(
        err,
        RequestHeaderError::InvalidHeaderValue("x-remote-user".to_string())
    );
}

#[test]
fn empty_or_invalid_header_names_are_config_errors() {
    let f = fixture();
    let cases: [fn(&mut RequestHeaderConfig); 4] = [
        |c| c.username_headers = vec!["  ".to_string()],
        |c| c.group_headers = vec!["bad header".to_string()],
        |c| c.extra_headers_prefixes = vec![String::new()],
        |c| c.allowed_names = vec![" ".to_string()],
    ];
    for mutate in cases {
        let mut cfg = f.cfg.clone();
        mutate(&mut cfg);
        let err = RequestHeaderAuthenticator::new(&cfg)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| e.starts_with("invalid value")),
            "{cfg:?}"
        );
    }
}

#[test]
fn identity_headers_cover_configured_and_standard_names() {
    let f = fixture();
    let mut cfg = f.cfg.clone();
    cfg.username_headers = vec!["X-Proxy-User".to_string()];
    cfg.extra_headers_prefixes = vec!["X-Proxy-Extra-".to_string()];
    let auth = RequestHeaderAuthenticator::new(&cfg).expect("config");
    let cases = [
        ("x-proxy-user", true),
        ("x-proxy-extra-scopes", true),
        ("x-remote-user", true),
        ("x-remote-uid", true),
        ("x-remote-group", true),
        ("x-remote-extra-foo", true),
        ("x-remote-users", false),
        ("authorization", false),
        ("impersonate-user", false),
        ("content-type", false),
    ];
    for (name, want) in cases {
        let name = HeaderName::from_static(name);
        assert_eq!(auth.is_identity_header(&name), want, "{name}");
    }
}

#[test]
fn extra_keys_are_percent_unescaped_like_path_unescape() {
    let cases = [
        ("scopes", "scopes"),
        ("acme.com%2fproject", "acme.com/project"),
        ("a%20b", "a b"),
        ("plus+stays", "plus+stays"),
        ("bad%zz", "bad%zz"),
        ("trailing%2", "trailing%2"),
        ("not-utf8%ff", "not-utf8%ff"),
        ("utf8%c3%a9", "utf8é"),
    ];
    for (encoded, want) in cases {
        assert_eq!(unescape_extra_key(encoded), want, "{encoded}");
    }
}
