//! HTTP/2 abuse through the whole app: rapid reset (CVE-2023-44487) and streams reset while
//! they hold seats. Server-level limits (pending-accept reset cap, stream cap) are pinned in
//! `tests/server/limits.rs`; here the point is that the fair queues account every stream and
//! no seat leaks.

use http::{Request, Version};

use crate::support::app::{within, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::LEVELS;

async fn h2(
    app: &TestApp,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tls = app.client_with(None, Version::HTTP_2).tls_stream().await;
    let (client, connection) = within("h2 handshake", h2::client::handshake(tls))
        .await
        .expect("h2 handshake");
    (client, tokio::spawn(connection))
}

fn get(path: &str) -> Request<()> {
    Request::get(format!("https://localhost{path}"))
        .body(())
        .expect("request")
}

#[tokio::test]
async fn a_rapid_reset_flood_ends_the_connection_and_leaves_no_seat_behind() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).config(LEVELS).start().await;
    let (client, connection) = h2(&app).await;
    let mut client = within("ready", client.ready()).await.expect("ready");
    let mut opened = 0u64;
    for _ in 0..1000 {
        match client.send_request(get("/hang"), true) {
            Ok((response, _)) => {
                opened += 1;
                drop(response);
                // Dropping the response future of an open stream resets it (CANCEL).
            }
            Err(_) => break,
        }
    }
    let ended = within("the flood ends the connection", connection)
        .await
        .expect("connection task");
    assert!(
        ended.is_err() || opened < 1000,
        "the server must cut the flood: {ended:?}"
    );
    app.wait_level("tiny", "no seat is held after the flood", |l| {
        l.executing == 0 && l.waiting == 0 && l.seats_in_use == 0
    })
    .await;
    let counters = app.level("tiny").counters;
    assert!(
        counters.dispatched <= opened,
        "{counters:?} for {opened} streams"
    );
    // The proxy serves the next caller.
    let ok = app
        .client_with(None, Version::HTTP_2)
        .get("/api/v1/namespaces/ns/pods/web", None)
        .await;
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn streams_reset_while_holding_seats_give_every_seat_back() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).config(LEVELS).start().await;
    let (client, connection) = h2(&app).await;
    let mut client = within("ready", client.ready()).await.expect("ready");
    let mut streams = Vec::new();
    for _ in 0..15 {
        client = within("ready", client.ready()).await.expect("ready");
        let (response, _) = client.send_request(get("/hang"), true).expect("stream");
        streams.push(response);
    }
    app.wait_level("tiny", "all 15 hang upstream holding seats", |l| {
        l.executing == 15
    })
    .await;
    drop(streams);
    app.wait_level("tiny", "the resets give every seat back", |l| {
        l.executing == 0 && l.seats_in_use == 0
    })
    .await;
    assert_eq!(app.level("tiny").counters.dispatched, 15);
    // Fifteen resets after the streams were accepted are no flood: the connection lives on.
    let (response, _) = client
        .send_request(get("/api/v1/namespaces/ns/pods/web"), true)
        .expect("stream");
    let response = within("response", response).await.expect("response");
    assert_eq!(response.status(), 200);
    assert!(!connection.is_finished());
}
