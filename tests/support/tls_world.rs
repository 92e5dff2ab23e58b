//! A TLS fake apiserver that verifies (optional) client certificates, and the upstream
//! configuration a proxy needs for it: CA file, front-proxy client certificate and token file.

use std::collections::{BTreeMap, HashMap};

use kube_apf_proxy::proxy::{Forwarder, IdentityForwarding};
use kube_apf_proxy::upstream::{UpstreamClient, UpstreamConfig};

use super::fake_apiserver::{FakeApiserver, FakeOptions, FakeTls, ReviewedUser};
use super::pki::TestCa;
use super::{alice, forwarder_config, TestProxy, REQUEST_TIMEOUT};

/// The proxy's token in [`TlsWorld`].
pub const PROXY_TOKEN: &str = "proxy-token";
/// The token the fake's TokenReview accepts: user `bob`, UID `bob-uid`, group `team`, extra
/// `example.org/scopes: [read, list]`.
pub const GOOD_TOKEN: &str = "good";

/// A token the fake's TokenReview answers with user `eve<DEL>` in `system:authenticated` only, as
/// an OIDC user without a groups claim comes back: an identity no header can carry.
pub const EVE_TOKEN: &str = "eve-token";
/// A token the fake's TokenReview answers with user `mon` in group `"system:monitoring "` (its
/// trailing space would be trimmed by an HTTP/1.1 parser upstream).
pub const MONITOR_TOKEN: &str = "monitor-token";

/// The fake, its files and the matching upstream configuration.
pub struct TlsWorld {
    /// The fake apiserver (TLS; client certificates verified against a separate client CA).
    pub fake: FakeApiserver,
    /// Holds the CA, certificate, key and token files.
    pub dir: tempfile::TempDir,
    /// `--upstream` and friends pointing at the fake.
    pub config: UpstreamConfig,
}

impl TlsWorld {
    /// Starts the fake; `h2` offers HTTP/2 by ALPN.
    pub async fn start(h2: bool) -> Self {
        Self::start_with(h2, None).await
    }

    /// Starts the fake offering HTTP/2 with `max_streams` per connection.
    pub async fn start_h2_with_max_streams(max_streams: u32) -> Self {
        Self::start_with(true, Some(max_streams)).await
    }

    async fn start_with(h2: bool, h2_max_streams: Option<u32>) -> Self {
        let ca = TestCa::new("upstream-ca");
        let client_ca = TestCa::new("client-ca");
        let dir = tempfile::tempdir().expect("tempdir");
        let proxy_cert = client_ca.client_cert("front-proxy", Some("proxies"));
        let (cert_file, key_file) = proxy_cert.write(dir.path(), "proxy");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, format!("{PROXY_TOKEN}\n")).expect("write token");
        let reviewed = |user: &str, groups: &[&str]| ReviewedUser {
            username: user.into(),
            uid: String::new(),
            groups: groups.iter().map(ToString::to_string).collect(),
            extra: BTreeMap::new(),
        };
        let mut tokens = HashMap::from([
            (
                EVE_TOKEN.to_string(),
                reviewed("eve\u{7f}", &["system:authenticated"]),
            ),
            (
                MONITOR_TOKEN.to_string(),
                reviewed("mon", &["system:monitoring "]),
            ),
        ]);
        tokens.insert(
            GOOD_TOKEN.to_string(),
            ReviewedUser {
                username: "bob".into(),
                uid: "bob-uid".into(),
                groups: vec!["team".into()],
                extra: BTreeMap::from([(
                    "example.org/scopes".into(),
                    vec!["read".into(), "list".into()],
                )]),
            },
        );
        let fake = FakeApiserver::start(FakeOptions {
            tls: Some(FakeTls {
                serving: ca.server_cert(),
                client_ca: Some(client_ca),
                h2,
            }),
            tokens,
            h2_max_streams,
        })
        .await;
        let config = UpstreamConfig {
            upstream: Some(fake.url.clone()),
            ca_file: Some(ca.write(dir.path(), "ca.crt")),
            client_cert_file: Some(cert_file),
            client_key_file: Some(key_file),
            token_file: Some(token_file),
            kubeconfig: None,
        };
        TlsWorld { fake, dir, config }
    }

    /// An upstream client for the fake.
    pub fn client(&self) -> UpstreamClient {
        UpstreamClient::new(self.config.resolve().expect("resolve")).expect("client")
    }

    /// A test front forwarding as [`alice`] in `mode`.
    pub async fn proxy(&self, mode: IdentityForwarding) -> TestProxy {
        let forwarder = Forwarder::new(self.client(), forwarder_config(mode, REQUEST_TIMEOUT))
            .expect("forwarder");
        TestProxy::start(forwarder, alice()).await
    }
}
