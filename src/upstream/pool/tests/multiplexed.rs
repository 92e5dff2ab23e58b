//! The pool over HTTP/2: stream limits, separate sets for watches, GOAWAY, the connection bound
//! and requests the server refused. The upstreams speak TLS with ALPN `h2` on 127.0.0.1:0.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full, StreamBody};
use hyper::service::service_fn;
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::*;
use crate::upstream::limits::UpstreamLimits;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A TLS listener offering `h2` whose connections `serve` handles; counts connections.
struct TlsUpstream {
    addr: std::net::SocketAddr,
    ca: CertificateDer<'static>,
    accepted: Arc<AtomicUsize>,
}

impl TlsUpstream {
    async fn start<F, Fut>(serve: F) -> Self
    where
        F: Fn(TlsStream<TcpStream>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let generated =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("cert");
        let ca = CertificateDer::from(generated.cert.der().to_vec());
        let key =
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.key_pair.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![ca.clone()], key)
        .expect("server config");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let serve = Arc::new(serve);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let (acceptor, serve) = (acceptor.clone(), serve.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(stream).await {
                        serve(tls).await;
                    }
                });
            }
        });
        TlsUpstream { addr, ca, accepted }
    }

    fn pool(&self, limits: UpstreamLimits) -> Arc<Pool> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).expect("root");
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let server = format!("https://{}", self.addr).parse().expect("uri");
        Arc::new(Pool::new(
            connector,
            server,
            true,
            ConnectionBudget::new(limits),
        ))
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// hyper's HTTP/2 server with `max_streams`: `/hang` answers its head at once and its body when
/// released (a watch), anything else `ok`. `goaway` makes every connection close gracefully.
struct Hyper {
    upstream: TlsUpstream,
    release: tokio::sync::watch::Sender<bool>,
    goaway: tokio::sync::watch::Sender<u32>,
}

impl Hyper {
    async fn start(max_streams: u32) -> Self {
        let (release, released) = tokio::sync::watch::channel(false);
        let (goaway, goaways) = tokio::sync::watch::channel(0u32);
        let upstream = TlsUpstream::start(move |tls| {
            let released = released.clone();
            let mut goaways = goaways.clone();
            // Only a GOAWAY asked for after this connection opened closes it.
            goaways.borrow_and_update();
            async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let mut released = released.clone();
                    async move {
                        let body: Body = if request.uri().path() == "/hang" {
                            let end = futures_util::stream::once(async move {
                                let _ = released.wait_for(|r| *r).await;
                                Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from_static(
                                    b"done",
                                )))
                            });
                            StreamBody::new(end).boxed()
                        } else {
                            Full::new(Bytes::from_static(b"ok")).boxed()
                        };
                        Ok::<_, Infallible>(Response::new(body))
                    }
                });
                let conn =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .max_concurrent_streams(max_streams)
                        .serve_connection(TokioIo::new(tls), service);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    _ = goaways.changed() => conn.as_mut().graceful_shutdown(),
                }
                let _ = conn.await;
            }
        })
        .await;
        Hyper {
            upstream,
            release,
            goaway,
        }
    }

    fn release(&self) {
        self.release.send_replace(true);
    }

    fn goaway(&self) {
        self.goaway.send_modify(|n| *n += 1);
    }
}

fn get(path: &str) -> Request<ProxyBody> {
    Request::get(path).body(empty_body()).expect("request")
}

/// Sends `n` requests for `/hang` by `route` at once; their heads within a generous bound (a
/// request queued behind the stream limit would never get one while the others hang).
async fn hang(pool: &Arc<Pool>, route: Route, n: usize) -> Vec<Response<PooledBody>> {
    let sent = futures_util::future::join_all((0..n).map(|_| pool.send(get("/hang"), route)));
    tokio::time::timeout(Duration::from_secs(20), sent)
        .await
        .expect("every request got its response head")
        .into_iter()
        .map(|r| r.expect("response"))
        .collect()
}

async fn ok(pool: &Arc<Pool>, route: Route) {
    let response = pool.send(get("/"), route).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.expect("body");
    assert_eq!(body.to_bytes(), "ok");
}

fn streams(pool: &Pool, route: Route) -> usize {
    pool.budget
        .stats()
        .streams_in_use()
        .find(|(r, _)| *r == route)
        .map_or(0, |(_, n)| n)
}

#[tokio::test]
async fn requests_beyond_the_stream_limit_open_another_connection_instead_of_queueing() {
    let upstream = Hyper::start(5).await;
    let pool = upstream.upstream.pool(UpstreamLimits::default());
    let hanging = hang(&pool, Route::Short, 12).await;
    assert_eq!(upstream.upstream.accepted(), 3, "5 + 5 + 2 streams");
    assert_eq!(streams(&pool, Route::Short), 12);
    {
        let state = pool.state.lock();
        let in_use: Vec<u32> = state.h2[0].iter().map(|c| c.in_use()).collect();
        assert_eq!(in_use, [5, 5, 2]);
    }
    ok(&pool, Route::Short).await;
    assert_eq!(
        upstream.upstream.accepted(),
        3,
        "the GET found a free stream"
    );
    upstream.release();
    for response in hanging {
        let body = response.into_body().collect().await.expect("body");
        assert_eq!(body.to_bytes(), "done");
    }
    assert_eq!(streams(&pool, Route::Short), 0, "every slot returned");
}

#[tokio::test]
async fn watches_use_connections_of_their_own_and_never_take_ordinary_streams() {
    let upstream = Hyper::start(5).await;
    let pool = upstream.upstream.pool(UpstreamLimits::default());
    let mut watches = hang(&pool, Route::LongRunning, 5).await;
    assert_eq!(upstream.upstream.accepted(), 1);
    ok(&pool, Route::Short).await;
    assert_eq!(
        upstream.upstream.accepted(),
        2,
        "ordinary requests get their own"
    );
    watches.extend(hang(&pool, Route::LongRunning, 3).await);
    assert_eq!(upstream.upstream.accepted(), 3, "a second watch connection");
    assert_eq!(streams(&pool, Route::LongRunning), 8);
    for _ in 0..3 {
        ok(&pool, Route::Short).await;
    }
    assert_eq!(upstream.upstream.accepted(), 3);
    drop(watches);
    assert_eq!(
        streams(&pool, Route::LongRunning),
        0,
        "dropped watches free their slots"
    );
}

#[tokio::test]
async fn after_goaway_new_requests_go_to_a_new_connection_and_open_streams_finish() {
    let upstream = Hyper::start(100).await;
    let pool = upstream.upstream.pool(UpstreamLimits::default());
    let mut hanging = hang(&pool, Route::Short, 1).await;
    upstream.goaway();
    // Wait (bounded) for the GOAWAY to reach the client.
    for _ in 0..500 {
        if pool.budget.stats().goaways() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(pool.budget.stats().goaways() > 0, "the GOAWAY was read");
    for _ in 0..3 {
        ok(&pool, Route::Short).await;
    }
    assert_eq!(upstream.upstream.accepted(), 2, "one new connection");
    upstream.release();
    let body = hanging
        .pop()
        .expect("one")
        .into_body()
        .collect()
        .await
        .expect("the stream open at the GOAWAY finishes");
    assert_eq!(body.to_bytes(), "done");
}

#[tokio::test]
async fn the_connection_bound_refuses_watches_first_with_a_clear_error() {
    let upstream = Hyper::start(2).await;
    let pool = upstream.upstream.pool(UpstreamLimits {
        max_connections: 2,
        reserved_for_short: 1,
    });
    let _watches = hang(&pool, Route::LongRunning, 2).await;
    let refused = pool
        .send(get("/hang"), Route::LongRunning)
        .await
        .expect_err("no connection left for watches");
    assert!(
        matches!(
            refused,
            UpstreamError::ConnectionLimit {
                max: 2,
                reserved: 1
            }
        ),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("connection limit"),
        "{refused}"
    );
    ok(&pool, Route::Short).await;
    let _short = hang(&pool, Route::Short, 2).await;
    assert!(matches!(
        pool.send(get("/hang"), Route::Short).await,
        Err(UpstreamError::ConnectionLimit { max: 2, .. })
    ));
    let refusals: Vec<_> = pool.budget.stats().limit_refusals().collect();
    assert_eq!(
        refusals,
        [
            (Route::Short, 1),
            (Route::LongRunning, 1),
            (Route::Upgrade, 0)
        ]
    );
}

/// A raw h2 server that resets the first `refuse` streams with `reason`, then answers `ok`.
async fn refusing(refuse: usize, reason: ::h2::Reason) -> TlsUpstream {
    let count = Arc::new(AtomicUsize::new(0));
    TlsUpstream::start(move |tls| {
        let count = count.clone();
        async move {
            let Ok(mut conn) = ::h2::server::handshake(tls).await else {
                return;
            };
            while let Some(Ok((_request, mut respond))) = conn.accept().await {
                if count.fetch_add(1, Ordering::SeqCst) < refuse {
                    respond.send_reset(reason);
                    continue;
                }
                if let Ok(mut body) = respond.send_response(Response::new(()), false) {
                    let _ = body.send_data(Bytes::from_static(b"ok"), true);
                }
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_refused_read_is_sent_again_and_a_refused_body_is_a_503() {
    let upstream = refusing(1, ::h2::Reason::REFUSED_STREAM).await;
    let pool = upstream.pool(UpstreamLimits::default());
    ok(&pool, Route::Short).await;
    assert_eq!(pool.budget.stats().retries(), 1);

    let upstream = refusing(1, ::h2::Reason::REFUSED_STREAM).await;
    let pool = upstream.pool(UpstreamLimits::default());
    let post = Request::post("/api/v1/namespaces/ns/pods")
        .body(crate::body::full_body("{}"))
        .expect("request");
    let error = pool.send(post, Route::Short).await.expect_err("refused");
    assert!(matches!(error, UpstreamError::Unavailable(_)), "{error:?}");
    assert_eq!(
        pool.budget.stats().retries(),
        0,
        "a streamed body is not replayed"
    );
}

#[tokio::test]
async fn a_stream_reset_for_another_reason_is_never_sent_again() {
    let upstream = refusing(1, ::h2::Reason::INTERNAL_ERROR).await;
    let pool = upstream.pool(UpstreamLimits::default());
    let error = pool.send(get("/"), Route::Short).await.expect_err("reset");
    assert!(matches!(error, UpstreamError::BadGateway(_)), "{error:?}");
    assert_eq!(pool.budget.stats().retries(), 0);
    ok(&pool, Route::Short).await;
}
