//! Shared by the integration tests: an in-process fake apiserver that records what it receives
//! ([`fake_apiserver`]), test PKI made at run time ([`pki`]), and a tiny HTTP front that drives
//! [`Forwarder`] the way the proxy pipeline does ([`TestProxy`]).

// Each test crate uses a different part of this module.
#![allow(dead_code)]

pub mod app;
pub mod fake_apiserver;
pub mod fake_flowcontrol;
pub mod kube_apiserver;
pub mod pki;
pub mod tls_world;
pub mod tools;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::fairqueue::timeout::effective_timeout;
use kube_apf_proxy::proxy::{
    error_response, ForgeableHeaders, ForwardRequest, Forwarder, ForwarderConfig,
    IdentityForwarding, ProxyError,
};
use kube_apf_proxy::request_info::{RequestOptions, Timeout};
use kube_apf_proxy::upstream::{UpstreamClient, UpstreamConfig};
use tokio::net::TcpListener;

/// A boxed error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A request body for test clients.
pub type TestBody = UnsyncBoxBody<Bytes, BoxError>;

/// A body of one chunk.
pub fn body(bytes: impl Into<Bytes>) -> TestBody {
    Full::new(bytes.into())
        .map_err(|n| match n {})
        .boxed_unsync()
}

/// A body of the chunks sent on the returned sender, each its own frame; no length is known, so
/// HTTP/1.1 sends it chunked. It ends only when the sender is dropped.
pub fn channel_body() -> (tokio::sync::mpsc::Sender<Bytes>, TestBody) {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(1);
    let frames = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let chunk = receiver.recv().await?;
        Some((Ok::<_, BoxError>(http_body::Frame::data(chunk)), receiver))
    });
    (
        sender,
        http_body_util::StreamBody::new(frames).boxed_unsync(),
    )
}

/// The `--request-timeout` of tests that do not test timeouts.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The caller every test front forwards as: `alice` (`alice-uid`) in `dev`, with an extra
/// `example.org/team: [blue]`.
pub fn alice() -> Identity {
    let mut identity = Identity::authenticated("alice", "alice-uid", vec!["dev".into()]);
    identity.extra = BTreeMap::from([("example.org/team".into(), vec!["blue".into()])]);
    identity
}

/// Forwarding settings; `X-Forwarded-User` is a configured requestheader name.
pub fn forwarder_config(mode: IdentityForwarding, request_timeout: Duration) -> ForwarderConfig {
    ForwarderConfig {
        mode,
        request_timeout,
        forgeable: ForgeableHeaders::new(&["X-Forwarded-User".into()], &[]),
    }
}

/// A passthrough forwarder to a plain-HTTP upstream.
pub fn plain_forwarder(url: &str, request_timeout: Duration) -> Forwarder {
    let upstream = UpstreamConfig {
        upstream: Some(url.to_string()),
        ..UpstreamConfig::default()
    };
    let client = UpstreamClient::new(upstream.resolve().expect("resolve")).expect("client");
    Forwarder::new(
        client,
        forwarder_config(IdentityForwarding::Passthrough, request_timeout),
    )
    .expect("forwarder")
}

/// A GET with the caller's bearer token `caller-token`.
pub fn get(url: &str) -> Request<TestBody> {
    Request::get(url)
        .header("authorization", "Bearer caller-token")
        .body(body(Bytes::new()))
        .expect("request")
}

/// A plain-HTTP or TLS front on `127.0.0.1:0` that forwards every request with a fixed identity.
/// Watches (`watch=true`) and upgrades are long-running, as the pipeline's RequestInfo says.
pub struct TestProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    tls: bool,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestProxy {
    /// Starts a plain-HTTP front.
    pub async fn start(forwarder: Forwarder, identity: Identity) -> Self {
        Self::start_with(forwarder, identity, None).await
    }

    /// Starts a TLS front serving `serving` (HTTP/1.1 and HTTP/2 by ALPN).
    pub async fn start_tls(
        forwarder: Forwarder,
        identity: Identity,
        serving: &pki::Issued,
    ) -> Self {
        let config = pki::server_config(serving, None, &[b"h2", b"http/1.1"]);
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        Self::start_with(forwarder, identity, Some(acceptor)).await
    }

    async fn start_with(
        forwarder: Forwarder,
        identity: Identity,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let tls = acceptor.is_some();
        let shared = Arc::new((forwarder, identity));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(&shared, request, peer).await) }
                    });
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = match acceptor {
                        None => {
                            builder
                                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                                .await
                        }
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else {
                                return;
                            };
                            builder
                                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                                .await
                        }
                    };
                });
            }
        });
        TestProxy { addr, tls, task }
    }

    /// `http(s)://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }
}

async fn handle(
    shared: &(Forwarder, Identity),
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<kube_apf_proxy::proxy::ProxyBody> {
    let (forwarder, identity) = shared;
    let identity = match forwarder.forwardable(identity.clone()) {
        Ok(identity) => identity,
        Err(refused) => return error_response(&refused.into()),
    };
    let query = request.uri().query().unwrap_or_default();
    let long_running = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1")
        || request.headers().contains_key(http::header::UPGRADE);
    // The request's own `?timeout=`, read as the pipeline's description of it reads it.
    let timeout = match RequestOptions::from_query(query).timeout() {
        Timeout::Given(timeout) => Some(*timeout),
        Timeout::Unset => None,
        invalid @ Timeout::Invalid(_) => match effective_timeout(invalid, Duration::MAX) {
            Err(error) => return error_response(&ProxyError::from(error)),
            Ok(_) => None,
        },
    };
    let ctx = ForwardRequest {
        identity: &identity,
        long_running,
        peer: Some(peer),
        received_at: None,
        timeout,
    };
    match forwarder.forward(request, ctx).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    }
}

/// An HTTP/1.1 client for the test front.
pub fn http1_client() -> Client<HttpConnector, TestBody> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// An HTTP/2 (prior knowledge) client for the test front.
pub fn h2c_client() -> Client<HttpConnector, TestBody> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(HttpConnector::new())
}

/// Collects a response body into bytes.
pub async fn read_body(response: Response<Incoming>) -> Result<Bytes, hyper::Error> {
    Ok(response.into_body().collect().await?.to_bytes())
}

/// Collects a response body as JSON.
pub async fn read_json(response: Response<Incoming>) -> serde_json::Value {
    let bytes = read_body(response).await.expect("body");
    serde_json::from_slice(&bytes).expect("json body")
}
