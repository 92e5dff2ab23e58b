//! An identity that cannot travel upstream unchanged is refused with 401 and a `Status` saying
//! why, counted by reason, and nothing reaches the upstream: every authenticator as the source,
//! `impersonate` and `requestheader` modes, HTTP/1.1 and HTTP/2 callers, plain requests and
//! upgrades (exec goes upstream over HTTP/1.1 even to an HTTP/2 apiserver, where Go's parser
//! would trim a group's trailing space into another subject). Passthrough forwards no identity
//! and refuses none; odd but valid identities travel byte for byte.

use bytes::Bytes;
use http::{Request, Version};

use crate::exec_upgrade;
use crate::support::app::{assert_status, metric_sum, request, AppBuilder, TestApp};
use crate::support::pki::Issued;
use crate::support::tls_world::{TlsWorld, EVE_TOKEN, MONITOR_TOKEN};
use crate::support::TestBody;

const POD: &str = "/api/v1/namespaces/ns/pods/web";

/// Token-file users: `mallory<DEL>` with no UID or groups, and a group with a trailing space.
const BAD_TOKEN_FILE: &str =
    "mallory-token,mallory\u{7f},,\nspace-token,sam,sam-uid,\"system:monitoring \"\nodd-token,jürgen ü,uid 1,\"team a,グループ\"\n";

/// Every authenticator on, in `mode`, forwarding to the TLS fake of `world`.
async fn app_for(world: &TlsWorld, mode: &str) -> TestApp {
    AppBuilder::for_world(world)
        .client_ca()
        .token_file_with(BAD_TOKEN_FILE)
        .requestheader()
        .flag("--authentication-token-webhook")
        .flag(format!("--identity-forwarding={mode}"))
        .start()
        .await
}

/// Who sends the bad identity.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A client certificate with CN `x<LF>INFO forged line`.
    X509,
    /// `--token-auth-file` user `mallory<DEL>`.
    TokenFileControl,
    /// `--token-auth-file` group `"system:monitoring "`.
    TokenFileSpace,
    /// TokenReview user `eve<DEL>` in `system:authenticated` only.
    WebhookControl,
    /// TokenReview group `"system:monitoring "`.
    WebhookSpace,
    /// A front proxy's extra key `a<LF>b` (`X-Remote-Extra-A%0Ab`).
    Requestheader,
}

const SOURCES: [Source; 6] = [
    Source::X509,
    Source::TokenFileControl,
    Source::TokenFileSpace,
    Source::WebhookControl,
    Source::WebhookSpace,
    Source::Requestheader,
];

impl Source {
    fn reason(self) -> &'static str {
        match self {
            Source::TokenFileSpace | Source::WebhookSpace => "surrounding_whitespace",
            Source::X509
            | Source::TokenFileControl
            | Source::WebhookControl
            | Source::Requestheader => "control_character",
        }
    }

    /// The part of the identity the Status names.
    fn field(self) -> &'static str {
        match self {
            Source::X509 | Source::TokenFileControl | Source::WebhookControl => "user",
            Source::TokenFileSpace | Source::WebhookSpace => "groups[0]",
            Source::Requestheader => "extra key",
        }
    }

    fn token(self) -> Option<&'static str> {
        match self {
            Source::TokenFileControl => Some("mallory-token"),
            Source::TokenFileSpace => Some("space-token"),
            Source::WebhookControl => Some(EVE_TOKEN),
            Source::WebhookSpace => Some(MONITOR_TOKEN),
            Source::X509 | Source::Requestheader => None,
        }
    }

    fn cert(self, app: &TestApp) -> Option<Issued> {
        match self {
            Source::X509 => Some(app.user_cert("x\nINFO forged line", Some("dev"))),
            Source::Requestheader => Some(app.front_proxy_cert()),
            Source::TokenFileControl
            | Source::TokenFileSpace
            | Source::WebhookControl
            | Source::WebhookSpace => None,
        }
    }

    fn dress(self, mut request: Request<TestBody>) -> Request<TestBody> {
        if let Source::Requestheader = self {
            let headers = request.headers_mut();
            headers.insert("x-remote-user", "fred".parse().expect("value"));
            headers.insert("x-remote-extra-a%0ab", "v".parse().expect("value"));
        }
        if let Some(token) = self.token() {
            let value = format!("Bearer {token}").parse().expect("value");
            request.headers_mut().insert("authorization", value);
        }
        request
    }
}

fn refused_count(app: &TestApp, reason: &str) -> f64 {
    let text = app.app.metrics().encode();
    metric_sum(
        &text,
        &format!("apf_proxy_identity_refused_total{{reason=\"{reason}\"}} "),
    )
}

fn reached_upstream(world: &TlsWorld) -> usize {
    let requests = world.fake.requests();
    requests
        .iter()
        .filter(|r| r.path.starts_with("/api/v1/namespaces/ns/"))
        .count()
}

/// One refused request: 401, a Status naming the field and the reason, the metric, and nothing
/// upstream.
async fn assert_refused(
    world: &TlsWorld,
    app: &TestApp,
    source: Source,
    version: Version,
    request: Request<TestBody>,
) {
    let what = format!(
        "{source:?} over {version:?}, {} {}",
        request.method(),
        request.uri()
    );
    let before = refused_count(app, source.reason());
    let cert = source.cert(app);
    let response = app
        .client_with(cert.as_ref(), version)
        .send(source.dress(request))
        .await;
    let status = assert_status(response, 401, "Unauthorized").await;
    let message = status["message"].as_str().expect("message");
    assert!(
        message.contains("cannot be forwarded to the upstream unchanged")
            && message.contains(source.field()),
        "{what}: {message}"
    );
    assert_eq!(
        refused_count(app, source.reason()),
        before + 1.0,
        "{what}: counted"
    );
    assert_eq!(
        reached_upstream(world),
        0,
        "{what}: nothing reaches the upstream"
    );
}

async fn refuses_from_every_source(mode: &str) {
    let world = TlsWorld::start(true).await;
    let app = app_for(&world, mode).await;
    for source in SOURCES {
        for version in [Version::HTTP_11, Version::HTTP_2] {
            let get = request("GET", POD, None, Bytes::new());
            assert_refused(&world, &app, source, version, get).await;
        }
        // Upgrades bypass flow control and go over HTTP/1.1 upstream: refused all the same.
        for (method, protocol) in [("POST", "SPDY/3.1"), ("GET", "websocket")] {
            let exec = exec_upgrade(method, protocol);
            assert_refused(&world, &app, source, Version::HTTP_11, exec).await;
        }
    }
}

#[tokio::test]
async fn impersonate_mode_refuses_identities_that_cannot_travel_unchanged() {
    refuses_from_every_source("impersonate").await;
}

#[tokio::test]
async fn requestheader_mode_refuses_identities_that_cannot_travel_unchanged() {
    refuses_from_every_source("requestheader").await;
}

/// In passthrough the caller's own credential goes upstream, which authenticates it itself:
/// nothing is refused, and no identity header is invented.
#[tokio::test]
async fn passthrough_forwards_the_callers_credential_whatever_its_identity() {
    let world = TlsWorld::start(true).await;
    let app = app_for(&world, "passthrough").await;
    for token in [EVE_TOKEN, MONITOR_TOKEN, "mallory-token"] {
        let response = app.client().get(POD, Some(token)).await;
        assert_eq!(response.status(), 200, "{token}");
        let seen = world.fake.last_request_to(POD);
        assert_eq!(
            seen.header_values("authorization"),
            [format!("Bearer {token}")]
        );
        assert!(seen.header_values("impersonate-user").is_empty());
        assert!(seen.header_values("x-remote-user").is_empty());
    }
    assert_eq!(refused_count(&app, "control_character"), 0.0);
}

/// UTF-8 names, inner spaces and commas reach the upstream byte for byte, in both modes and on
/// both protocols (as client-go sends them: the UTF-8 bytes, which Go reads back unchanged).
#[tokio::test]
async fn odd_but_valid_identities_travel_unchanged() {
    let world = TlsWorld::start(true).await;
    for (mode, prefix) in [
        ("impersonate", "impersonate-"),
        ("requestheader", "x-remote-"),
    ] {
        let app = app_for(&world, mode).await;
        for version in [Version::HTTP_11, Version::HTTP_2] {
            let response = app
                .client_with(None, version)
                .get(POD, Some("odd-token"))
                .await;
            assert_eq!(response.status(), 200, "{mode} {version:?}");
            let seen = world.fake.last_request_to(POD);
            let bytes = |name: &str| -> Vec<Vec<u8>> {
                seen.headers
                    .get_all(format!("{prefix}{name}"))
                    .iter()
                    .map(|v| v.as_bytes().to_vec())
                    .collect()
            };
            assert_eq!(bytes("user"), ["jürgen ü".as_bytes()], "{mode} {version:?}");
            assert_eq!(bytes("uid"), [b"uid 1"]);
            assert_eq!(bytes("group"), ["team a".as_bytes(), "グループ".as_bytes()]);
        }
    }
}
