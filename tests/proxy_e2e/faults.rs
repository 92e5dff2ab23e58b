//! Fault injection (RELIABILITY.md): upstreams that answer garbage, break off a watch, fail the
//! TLS handshake or hang a TokenReview; clients that abandon the TLS handshake; a configuration
//! directory deleted or corrupted while serving. Every test ends with the proxy still answering,
//! no seat or queue slot leaked, and every request it received accounted for (answered or
//! abandoned).

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::app::{within, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::pki::TestCa;
use crate::{assert_status, TINY_LEVEL};

/// What a scripted upstream does once it has read a request head.
#[derive(Clone)]
enum Script {
    /// Writes these bytes, then closes the connection.
    Answer(&'static [u8]),
    /// Writes these bytes, waits, then drops the connection without ending the body.
    BreakAfter(&'static [u8], Duration),
    /// Never answers (the connection stays open).
    Hang,
}

/// A raw-TCP upstream that plays `script(request head)` on every connection and records the
/// request heads it saw.
struct ScriptedUpstream {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedUpstream {
    async fn start(script: fn(&str) -> Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                tokio::spawn(play(stream, script, seen));
            }
        });
        ScriptedUpstream { url, heads, task }
    }

    /// How many requests whose head contains `needle` it saw.
    fn seen(&self, needle: &str) -> usize {
        let heads = self.heads.lock();
        heads.iter().filter(|h| h.contains(needle)).count()
    }
}

async fn play(mut stream: TcpStream, script: fn(&str) -> Script, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    seen.lock().push(head.clone());
    match script(&head) {
        Script::Answer(bytes) => {
            let _ = stream.write_all(bytes).await;
        }
        Script::BreakAfter(bytes, wait) => {
            let _ = stream.write_all(bytes).await;
            tokio::time::sleep(wait).await;
        }
        Script::Hang => std::future::pending::<()>().await,
    }
}

/// The proxy still answers: the admin listener's `/livez` and a request of its own (a bad
/// `?timeout=` is answered before anything reaches the upstream).
async fn still_serving(app: &TestApp) {
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods?timeout=x", None)
        .await;
    assert_status(response, 400, "BadRequest").await;
}

/// Every request sent reached a final state the proxy counted.
fn all_accounted(app: &TestApp, sent: u64) {
    let (answered, abandoned) = app.accounted();
    assert_eq!(
        answered + abandoned,
        sent,
        "answered {answered} + abandoned {abandoned}"
    );
}

const GARBAGE: [&[u8]; 3] = [
    b"this is not HTTP at all\r\n\r\n",
    b"HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Huge: ",
];

#[tokio::test]
async fn an_upstream_answering_garbage_gives_502_and_nothing_leaks() {
    for index in 0..GARBAGE.len() {
        // A fn pointer cannot capture: pick the script by the index in the path.
        let upstream = ScriptedUpstream::start(|head| {
            let i = head
                .split("/g/")
                .nth(1)
                .and_then(|r| r.get(..1))
                .unwrap_or("0");
            Script::Answer(GARBAGE[i.parse::<usize>().unwrap_or(0)])
        })
        .await;
        let app = AppBuilder::new(&upstream.url).start().await;
        let response = app.client().get(&format!("/g/{index}"), None).await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let status = crate::body_json(response).await;
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["code"], 502, "{status}");
        still_serving(&app).await;
        app.assert_settled().await;
        all_accounted(&app, 2);
        assert!(upstream.seen("/g/") >= 1);
    }
}

#[tokio::test]
async fn bad_chunked_encoding_or_a_cut_body_aborts_the_callers_body() {
    let upstream = ScriptedUpstream::start(|head| {
        if head.contains("/chunked") {
            Script::Answer(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk",
            )
        } else {
            Script::Answer(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nshort")
        }
    })
    .await;
    let app = AppBuilder::new(&upstream.url).start().await;
    for path in ["/chunked", "/short"] {
        let get = crate::support::app::request("GET", path, None, bytes::Bytes::new());
        // The head may already be on its way (the body then breaks off) or not (hyper then
        // closes the connection): either way the caller cannot take the body for complete.
        match within("response", app.client().try_send(get)).await {
            Err(_closed) => {}
            Ok(response) => {
                assert_eq!(response.status(), StatusCode::OK, "the head was fine");
                let body = within("body", response.into_body().collect()).await;
                assert!(body.is_err(), "{path}: the caller sees the body break off");
            }
        }
    }
    still_serving(&app).await;
    app.assert_settled().await;
    all_accounted(&app, 3);
}

#[tokio::test]
async fn a_watch_broken_off_upstream_ends_the_callers_stream_and_frees_everything() {
    const WATCH_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1b\r\n{\"type\":\"ADDED\",\"object\":{}}\r\n";
    let upstream = ScriptedUpstream::start(|head| {
        if head.contains("watch=true") {
            Script::BreakAfter(WATCH_HEAD, Duration::from_millis(200))
        } else {
            Script::Answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        }
    })
    .await;
    let app = AppBuilder::new(&upstream.url).start().await;
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods?watch=true", None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = within("first event", body.frame())
        .await
        .expect("a frame")
        .expect("an event");
    assert!(first
        .data_ref()
        .is_some_and(|d| d.starts_with(b"{\"type\":\"ADDED\"")));
    let end = within("the stream ends", async {
        loop {
            match body.frame().await {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok(_)) => continue,
            }
        }
    })
    .await;
    assert!(end.is_err(), "broken off, not a clean end");
    let response = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the next request goes through"
    );
    app.assert_settled().await;
    all_accounted(&app, 2);
}

#[tokio::test]
async fn an_upstream_tls_handshake_that_fails_gives_a_5xx_status_without_credentials() {
    let fake = FakeApiserver::start(crate::support::fake_apiserver::FakeOptions {
        tls: Some(crate::support::fake_apiserver::FakeTls {
            serving: TestCa::new("upstream-ca").server_cert(),
            client_ca: None,
            h2: false,
        }),
        ..Default::default()
    })
    .await;
    let plain = FakeApiserver::start_plain().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let stranger = TestCa::new("some-other-ca").write(dir.path(), "ca.crt");
    let secret = "proxy-secret-token";
    let cases = [
        // The upstream's certificate is not signed by the CA the proxy trusts.
        (
            fake.url.clone(),
            "invalid peer certificate: UnknownIssuer (the upstream's certificate is not trusted",
        ),
        // A plain-HTTP server where https is configured.
        (
            plain.url.replace("http://", "https://"),
            "does not answer in TLS; if it serves plain HTTP, use --upstream http://127.0.0.1:",
        ),
    ];
    for (upstream, says) in cases {
        let app = AppBuilder::new(&upstream)
            .flag(format!("--upstream-ca-file={}", stranger.display()))
            .upstream_token(secret)
            .start()
            .await;
        let response = app.client().get("/api/v1/namespaces/ns/pods", None).await;
        let status = response.status();
        let body = within("body", response.into_body().collect())
            .await
            .expect("a Status body")
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        // Nothing was sent: 503, and the message says why the connection failed.
        assert_eq!(status, 503, "{upstream}: {text}");
        assert!(text.contains(says), "{upstream}: {text}");
        assert!(text.contains("\"kind\":\"Status\""), "{text}");
        assert!(!text.contains(secret), "the token stays secret: {text}");
        still_serving(&app).await;
        app.assert_settled().await;
        all_accounted(&app, 2);
    }
}

#[tokio::test]
async fn callers_of_a_hanging_token_review_share_one_review_and_fail_closed() {
    let upstream = ScriptedUpstream::start(|head| {
        if head.contains("tokenreviews") {
            Script::Hang
        } else {
            Script::Answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        }
    })
    .await;
    let app = Arc::new(
        AppBuilder::new(&upstream.url)
            .flag("--authentication-token-webhook")
            .start()
            .await,
    );
    const CALLERS: u64 = 20;
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let app = Arc::clone(&app);
            tokio::spawn(async move {
                let get = crate::support::app::request(
                    "GET",
                    "/api/v1/namespaces/ns/pods",
                    Some("unknown-token"),
                    bytes::Bytes::new(),
                );
                app.client().try_send(get).await.map(|r| r.status())
            })
        })
        .collect();
    // The review times out after 10 s: every caller gets 401 then, none waits longer.
    let statuses = tokio::time::timeout(Duration::from_secs(30), async {
        let mut statuses = Vec::new();
        for caller in callers {
            statuses.push(caller.await.expect("caller"));
        }
        statuses
    })
    .await
    .expect("every caller answered within the review timeout");
    assert!(
        statuses
            .iter()
            .all(|s| s.as_ref().ok() == Some(&StatusCode::UNAUTHORIZED)),
        "{statuses:?}"
    );
    let reviews = upstream.seen("tokenreviews");
    assert!(
        reviews <= 2,
        "{reviews} TokenReviews for one token: not coalesced"
    );
    still_serving(&app).await;
    app.assert_settled().await;
    all_accounted(&app, CALLERS + 1);
}

#[tokio::test]
async fn clients_that_abandon_the_tls_handshake_cost_nothing_lasting() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let addr = app.app.running().secure_addr();
    for _ in 0..50 {
        let mut tcp = TcpStream::connect(addr).await.expect("connect");
        // A TLS record header announcing a ClientHello, and half of one.
        tcp.write_all(&[
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
        ])
        .await
        .expect("write");
        drop(tcp);
    }
    let open = || {
        crate::support::app::metric_sum(&app.app.metrics().encode(), "apf_proxy_open_connections")
    };
    crate::support::app::eventually("abandoned handshakes are closed", || open() == 0.0).await;
    let response = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    app.assert_settled().await;
    all_accounted(&app, 1);
}

#[tokio::test]
async fn a_deleted_or_corrupted_configuration_keeps_the_last_good_one_serving() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .config(TINY_LEVEL)
        .flag("--max-requests-inflight=1")
        .flag("--max-mutating-requests-inflight=0")
        .start()
        .await;
    let dir = app.path("flowcontrol");
    let reloader = app.app.reloader();
    let tenants_served = || async {
        let response = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            crate::pf_headers(&response).0.as_deref(),
            Some("tenants-fs-uid"),
            "still classified by the last good configuration"
        );
    };
    let file = dir.join("flowcontrol.yaml");
    type Breakage<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let breakages: [Breakage; 4] = [
        (
            "truncated",
            Box::new(|| std::fs::write(&file, &TINY_LEVEL[..200]).expect("truncate")),
        ),
        (
            "not YAML",
            Box::new(|| std::fs::write(&file, "{{{: [").expect("garbage")),
        ),
        (
            "deleted",
            Box::new(|| std::fs::remove_dir_all(&dir).expect("delete")),
        ),
        (
            "replaced by a directory",
            Box::new(|| {
                std::fs::remove_file(&file).expect("remove");
                std::fs::create_dir(&file).expect("a directory named like the file");
            }),
        ),
    ];
    let mut sent = 0;
    for (what, breakage) in breakages {
        breakage();
        assert!(
            reloader.reload_config(tokio::time::Instant::now()).is_err(),
            "{what}: refused"
        );
        tenants_served().await;
        sent += 1;
        std::fs::create_dir_all(&dir).expect("dir");
        let _ = std::fs::remove_dir(&file);
        std::fs::write(&file, TINY_LEVEL).expect("restore");
        reloader
            .reload_config(tokio::time::Instant::now())
            .expect("the restored file loads");
    }
    let text = app.app.metrics().encode();
    let failures = crate::support::app::metric_sum(
        &text,
        "apf_proxy_config_reloads_total{result=\"failure\"}",
    );
    // The 2 s poll may have seen a breakage too before it was restored.
    assert!(failures >= 4.0, "{failures}");
    app.assert_settled().await;
    all_accounted(&app, sent);
}
