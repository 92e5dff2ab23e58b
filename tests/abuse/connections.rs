//! Very many connections through the whole app: silent TCP connections and idle TLS connections
//! are held (each within the listener's connection cap, `ConnectionLimits::max_connections`,
//! 10 000; past the cap new ones wait, see `tests/server/limits.rs`), callers keep being served,
//! and the open-connections count follows them back down.

use http::Version;

use crate::support::app::{eventually, AppBuilder};
use crate::support::fake_apiserver::FakeApiserver;
use crate::LEVELS;

const SILENT: usize = 200;
const IDLE_TLS: usize = 200;

#[tokio::test]
async fn hundreds_of_silent_and_idle_connections_do_not_stop_service_and_are_counted() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).config(LEVELS).start().await;
    let stats = app.app.running().stats();
    let addr = app.app.running().secure_addr();
    let mut silent = Vec::new();
    for _ in 0..SILENT {
        silent.push(
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("tcp connect"),
        );
    }
    let client = app.client_with(None, Version::HTTP_11);
    let mut idle = Vec::new();
    for _ in 0..IDLE_TLS {
        idle.push(client.tls_stream().await);
    }
    eventually("every connection is open on the server", || {
        stats.active() == SILENT + IDLE_TLS
    })
    .await;
    // A caller among them is served, on h1 and h2.
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let ok = app
            .client_with(None, version)
            .get("/api/v1/namespaces/ns/pods/web", None)
            .await;
        assert_eq!(ok.status(), 200, "{version:?}");
    }
    // None of them holds a seat.
    let tiny = app.level("tiny");
    assert_eq!((tiny.executing, tiny.seats_in_use), (0, 0));
    drop(silent);
    drop(idle);
    eventually("the count follows the connections down", || {
        stats.active() == 0
    })
    .await;
}
