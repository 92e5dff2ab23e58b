//! The app's admin listener and its lifecycle: health endpoints beside the proxy, the metrics
//! and APF debug endpoints the design promises, and shutdown.

use http::StatusCode;

use bytes::Bytes;

use crate::support::app::{eventually, request, within, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::{http1_client, read_body};

pub(crate) async fn admin_get(addr: std::net::SocketAddr, path: &str) -> (StatusCode, String) {
    let request = http::Request::get(format!("http://{addr}{path}"))
        .body(crate::support::body(bytes::Bytes::new()))
        .expect("request");
    let response = within("admin response", http1_client().request(request))
        .await
        .expect("admin answers");
    let status = response.status();
    let body = within("admin body", read_body(response))
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn health_endpoints_answer_on_the_admin_listener() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let admin = app.app.running().admin_addr();
    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(
            admin_get(admin, path).await,
            (StatusCode::OK, "ok".into()),
            "{path}"
        );
    }
}

#[tokio::test]
async fn metrics_and_apf_dumps_are_served_on_the_admin_listener() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods/web", None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let admin = app.app.running().admin_addr();
    let (status, metrics) = admin_get(admin, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        metrics.contains("apiserver_flowcontrol_dispatched_requests_total"),
        "{metrics}"
    );
    let (status, levels) = admin_get(
        admin,
        "/debug/api_priority_and_fairness/dump_priority_levels",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(levels.contains("global-default"), "{levels}");
}

#[tokio::test]
async fn shutdown_stops_both_listeners() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .flag("--shutdown-grace-period=1s")
        .start()
        .await;
    let secure = app.app.running().secure_addr();
    let admin = app.app.running().admin_addr();
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods/web", None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    within("shutdown", app.app.shutdown()).await;
    for addr in [secure, admin] {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "{addr} no longer accepts"
        );
    }
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .flag("--shutdown-grace-period=3s")
        .start()
        .await;
    let secure = app.app.running().secure_addr();
    let client = app.client();
    let held = tokio::spawn(async move {
        let mut conn = client.connect().await;
        let response = conn
            .send_unbounded(request("GET", "/hang", None, Bytes::new()))
            .await;
        (response.status(), crate::body_bytes(response).await)
    });
    eventually("the /hang request reaches the fake", || {
        fake.requests().iter().any(|r| r.path == "/hang")
    })
    .await;
    let TestApp { app, .. } = app;
    let shutdown = tokio::spawn(app.shutdown());
    within("the listener closes", async {
        while tokio::net::TcpStream::connect(secure).await.is_ok() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    fake.release_hanging();
    let (status, body) = within("the in-flight request ends", held)
        .await
        .expect("join");
    assert_eq!((status, body.as_ref()), (StatusCode::OK, &b"released"[..]));
    within("shutdown completes", shutdown).await.expect("join");
}
