//! The admin listener.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kube_apf_proxy::server::{
    full_body, shutdown_channel, AdminGate, AdminRoutes, AdminServer, DenyAll, ReadyFlag,
};

async fn get(addr: SocketAddr, path: &str) -> (StatusCode, String, String) {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (_, status, body) = super::support::read(response).await.expect("body");
    (status, content_type, body)
}

#[tokio::test]
async fn health_endpoints_answer_as_the_apiserver() {
    let ready = ReadyFlag::new(true);
    let admin = AdminServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        AdminRoutes::new(ready.clone()),
    )
    .await
    .expect("bind");
    let addr = admin.local_addr();
    let (trigger, signal) = shutdown_channel();
    let task = tokio::spawn(admin.serve(signal));

    for path in ["/healthz", "/livez", "/readyz"] {
        let (status, content_type, body) = get(addr, path).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"), "{path}");
        assert_eq!(content_type, "text/plain; charset=utf-8");
    }
    let (status, _, body) = get(addr, "/readyz?verbose").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "[+]ping ok\n[+]shutdown ok\nreadyz check passed\n");

    for path in [
        "/healthz/ping",
        "/livez/ping",
        "/readyz/ping",
        "/readyz/shutdown",
    ] {
        assert_eq!(get(addr, path).await.0, StatusCode::OK, "{path}");
    }
    assert_eq!(
        get(addr, "/healthz/shutdown").await.0,
        StatusCode::NOT_FOUND
    );

    ready.set(false);
    let (status, _, body) = get(addr, "/readyz/shutdown").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, "internal server error: shutdown check failed\n");
    let (status, _, body) = get(addr, "/readyz").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "[-]shutdown failed: reason withheld\nreadyz check failed\n"
    );
    let (status, _, _) = get(addr, "/livez").await;
    assert_eq!(status, StatusCode::OK, "liveness does not follow readiness");

    let (status, content_type, body) = get(addr, "/metrics").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(content_type, "application/json");
    let status_json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(status_json["kind"], "Status");
    assert_eq!(status_json["reason"], "NotFound");
    assert_eq!(status_json["code"], 404);

    trigger.trigger();
    task.await.expect("admin task");
}

#[tokio::test]
async fn other_admin_paths_go_to_the_given_routes() {
    let routes = AdminRoutes {
        ready: ReadyFlag::new(true),
        upstream: None,
        config_source: None,
        coordination: None,
        other: Some(Arc::new(|request: Request<Incoming>| async move {
            http::Response::new(full_body(format!("metrics for {}", request.uri().path())))
        })),
        gate: None,
    };
    let admin = AdminServer::bind(SocketAddr::from(([127, 0, 0, 1], 0)), routes)
        .await
        .expect("bind");
    let addr = admin.local_addr();
    let (_trigger, signal) = shutdown_channel();
    tokio::spawn(admin.serve(signal));
    assert_eq!(get(addr, "/metrics").await.2, "metrics for /metrics");
    assert_eq!(get(addr, "/healthz").await.2, "ok");
}

/// Starts an admin listener whose upstream check fails with a reason, behind `gate`.
async fn not_ready_upstream(gate: Option<Arc<dyn AdminGate>>) -> SocketAddr {
    let upstream = ReadyFlag::new(true);
    upstream.set_not_ready("connecting to http://127.0.0.1:1: connection refused".to_owned());
    let routes = AdminRoutes {
        upstream: Some(upstream),
        gate,
        ..AdminRoutes::new(ReadyFlag::new(true))
    };
    let admin = AdminServer::bind(SocketAddr::from(([127, 0, 0, 1], 0)), routes)
        .await
        .expect("bind");
    let addr = admin.local_addr();
    let (trigger, signal) = shutdown_channel();
    tokio::spawn(async move {
        let _keep = trigger;
        admin.serve(signal).await
    });
    addr
}

#[tokio::test]
async fn readyz_verbose_says_why_to_a_caller_allowed_to_see_it() {
    let open = not_ready_upstream(None).await;
    let (status, _, body) = get(open, "/readyz?verbose").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "[+]ping ok\n\
         [-]upstream failed: connecting to http://127.0.0.1:1: connection refused\n\
         [+]shutdown ok\nreadyz check failed\n"
    );
    let (_, _, terse) = get(open, "/readyz").await;
    assert_eq!(
        terse, "[-]upstream failed: reason withheld\nreadyz check failed\n",
        "the reason only with ?verbose"
    );

    // A caller the gate would not let read /metrics gets the apiserver's answer.
    let gated = not_ready_upstream(Some(Arc::new(DenyAll))).await;
    let (status, _, body) = get(gated, "/readyz?verbose").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "[+]ping ok\n[-]upstream failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
    );
}
