use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use bytes::Bytes;
use http::StatusCode;
use hyper::body::Incoming;

use super::*;
use crate::body::empty_body;
use crate::upstream::limits::UpstreamLimits;

/// A plain-HTTP upstream on port 0 that counts the connections it accepts.
struct Upstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl Upstream {
    /// hyper with keep-alive: `/big` answers 256 KiB, anything else `ok`.
    async fn keep_alive() -> Self {
        Self::start(|stream| async move {
            let service = service_fn(|request: Request<Incoming>| async move {
                let body = if request.uri().path() == "/big" {
                    Bytes::from(vec![b'x'; 256 * 1024])
                } else {
                    Bytes::from_static(b"ok")
                };
                Ok::<_, Infallible>(Response::new(Full::new(body)))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        })
        .await
    }

    /// Answers one request per connection (without `Connection: close`), then closes it: a
    /// keep-alive connection that the upstream drops while the proxy holds it idle.
    async fn one_request_per_connection() -> Self {
        Self::start(|mut stream| async move {
            let mut buf = [0u8; 4096];
            let mut read = 0;
            while !buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf[read..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => read += n,
                }
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await;
        })
        .await
    }

    async fn start<F, Fut>(serve: F) -> Self
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream));
            }
        });
        Upstream { addr, accepted }
    }

    fn pool(&self) -> Arc<Pool> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let server = format!("http://{}", self.addr).parse().expect("uri");
        Arc::new(Pool::new(
            connector,
            server,
            true,
            ConnectionBudget::new(UpstreamLimits::default()),
        ))
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn request(method: http::Method, path: &str) -> Request<ProxyBody> {
    Request::builder()
        .method(method)
        .uri(path)
        .body(empty_body())
        .expect("request")
}

async fn get(pool: &Arc<Pool>, path: &str) -> Bytes {
    let response = pool
        .send(request(http::Method::GET, path), Route::Short)
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::OK);
    response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
}

#[tokio::test]
async fn sequential_requests_share_one_connection() {
    let upstream = Upstream::keep_alive().await;
    let pool = upstream.pool();
    for _ in 0..5 {
        assert_eq!(get(&pool, "/").await, "ok");
        assert_eq!(get(&pool, "/big").await.len(), 256 * 1024);
    }
    assert_eq!(upstream.accepted(), 1);
}

#[tokio::test]
async fn a_body_dropped_half_read_takes_its_connection_with_it() {
    let upstream = Upstream::keep_alive().await;
    let pool = upstream.pool();
    let response = pool
        .send(request(http::Method::GET, "/big"), Route::Short)
        .await
        .expect("send");
    let mut body = response.into_body();
    let first = body.frame().await.expect("a frame").expect("data");
    assert!(first.data_ref().is_some_and(|d| d.len() < 256 * 1024));
    drop(body);
    assert_eq!(get(&pool, "/").await, "ok");
    assert_eq!(
        upstream.accepted(),
        2,
        "the half-read connection was not reused"
    );
    assert_eq!(get(&pool, "/").await, "ok");
    assert_eq!(upstream.accepted(), 2);
}

#[tokio::test]
async fn bodiless_responses_return_their_connection_unread() {
    let upstream = Upstream::keep_alive().await;
    let pool = upstream.pool();
    for _ in 0..3 {
        // hyper sends no body for HEAD; nobody polls this one.
        let response = pool
            .send(request(http::Method::HEAD, "/"), Route::Short)
            .await
            .expect("send");
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(get(&pool, "/").await, "ok");
    assert_eq!(upstream.accepted(), 1);
}

#[tokio::test]
async fn a_connection_closed_while_idle_is_replaced_without_an_error() {
    let upstream = Upstream::one_request_per_connection().await;
    let pool = upstream.pool();
    for n in 1..=4 {
        assert_eq!(get(&pool, "/").await, "ok", "request {n}");
        // Let the connection task see the close, as happens between real requests.
        tokio::task::yield_now().await;
    }
    assert_eq!(upstream.accepted(), 4);
}

#[tokio::test(start_paused = true)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let upstream = Upstream::keep_alive().await;
    let pool = upstream.pool();
    assert_eq!(get(&pool, "/").await, "ok");
    tokio::task::yield_now().await;
    assert_eq!(pool.state.lock().idle.len(), 1);
    tokio::time::sleep(IDLE_TIMEOUT + IDLE_TIMEOUT / 2).await;
    assert_eq!(pool.state.lock().idle.len(), 0, "the reaper closed it");
    assert_eq!(get(&pool, "/").await, "ok");
    assert_eq!(upstream.accepted(), 2);
}

#[tokio::test]
async fn at_most_max_idle_connections_are_kept() {
    let upstream = Upstream::keep_alive().await;
    let pool = upstream.pool();
    let responses = futures_util::future::join_all(
        (0..MAX_IDLE + 8).map(|_| pool.send(request(http::Method::GET, "/big"), Route::Short)),
    )
    .await;
    for response in responses {
        let body = response
            .expect("send")
            .into_body()
            .collect()
            .await
            .expect("body");
        assert_eq!(body.to_bytes().len(), 256 * 1024);
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(upstream.accepted(), MAX_IDLE + 8);
    assert!(pool.state.lock().idle.len() <= MAX_IDLE);
}

#[test]
fn host_header_leaves_out_default_ports() {
    let cases = [
        ("http", "10.0.0.1:80", "10.0.0.1"),
        ("http", "10.0.0.1:8080", "10.0.0.1:8080"),
        ("https", "api.example:443", "api.example"),
        ("https", "api.example:6443", "api.example:6443"),
        ("https", "api.example", "api.example"),
        ("https", "[::1]:6443", "[::1]:6443"),
    ];
    for (scheme, authority, want) in cases {
        let scheme: Scheme = scheme.parse().unwrap();
        let authority: Authority = authority.parse().unwrap();
        assert_eq!(
            host_header(&scheme, &authority),
            want,
            "{scheme}://{authority}"
        );
    }
}

#[test]
fn origin_form_keeps_path_and_query() {
    let path = |s: &str| Some(s.parse::<PathAndQuery>().expect("path"));
    assert_eq!(
        origin_form(path("/api/v1/pods?watch=1")),
        "/api/v1/pods?watch=1"
    );
    assert_eq!(origin_form(path("/")), "/");
    assert_eq!(origin_form(None), "/");
}
mod multiplexed;
