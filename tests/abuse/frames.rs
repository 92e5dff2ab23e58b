//! Raw HTTP/2 frame floods through the whole app: a header block that never ends (HEADERS plus
//! endless CONTINUATION, CVE-2024-27316 style), and SETTINGS/PING floods. The header flood is cut
//! with the connection; the control floods leave the proxy serving other connections.

use http::Version;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::app::{within, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::LEVELS;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// One frame: 24-bit length, type, flags, stream id.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("frame length");
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// An HPACK literal header field without indexing, new name (lengths < 127, or 2-byte for value).
fn literal(name: &str, value_len: usize) -> Vec<u8> {
    let mut out = vec![0x00, u8::try_from(name.len()).expect("short name")];
    out.extend(name.as_bytes());
    // Value length with a 7-bit prefix integer.
    let mut n = value_len;
    if n < 127 {
        out.push(u8::try_from(n).expect("small"));
    } else {
        out.push(127);
        n -= 127;
        while n >= 128 {
            out.push(u8::try_from(n % 128 + 128).expect("byte"));
            n /= 128;
        }
        out.push(u8::try_from(n).expect("byte"));
    }
    out.resize(out.len() + value_len, b'a');
    out
}

async fn app() -> (FakeApiserver, TestApp) {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).config(LEVELS).start().await;
    (fake, app)
}

async fn still_serves(app: &TestApp) {
    let ok = app
        .client_with(None, Version::HTTP_2)
        .get("/api/v1/namespaces/ns/pods/web", None)
        .await;
    assert_eq!(ok.status(), 200);
}

/// Up to 64 MiB of header block on one stream.
const FLOOD_LIMIT: usize = 64 << 20;

#[tokio::test]
async fn an_endless_header_block_is_cut_with_the_connection() {
    let (_fake, app) = app().await;
    let mut tls = app.client_with(None, Version::HTTP_2).tls_stream().await;
    let mut start = PREFACE.to_vec();
    start.extend(frame(4, 0, 0, &[]));
    // HEADERS with END_STREAM but without END_HEADERS: a block that CONTINUATION must finish.
    let mut block = vec![0x82, 0x87, 0x84]; // :method GET, :scheme https, :path /
    block.extend(
        literal(":authority", 9)
            .iter()
            .map(|b| if *b == b'a' { b'l' } else { *b }),
    );
    start.extend(frame(1, 0x1, 1, &block));
    tls.write_all(&start).await.expect("preface");
    let continuation = frame(9, 0, 1, &literal("x-flood", 16_000));
    let mut written = 0usize;
    let outcome = within("the server cuts the header flood", async {
        while written < FLOOD_LIMIT {
            tls.write_all(&continuation).await?;
            written += continuation.len();
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    // Either the writes fail, or the server has stopped reading and answers EOF/GOAWAY.
    eprintln!("header flood: {written} bytes written before {outcome:?}");
    assert!(outcome.is_err(), "the connection must be cut");
    assert!(
        written < FLOOD_LIMIT,
        "accepted {written} bytes of one header block"
    );
    still_serves(&app).await;
}

#[tokio::test]
async fn settings_and_ping_floods_leave_the_proxy_serving() {
    let (_fake, app) = app().await;
    let tls = app.client_with(None, Version::HTTP_2).tls_stream().await;
    let mut flood = PREFACE.to_vec();
    flood.extend(frame(4, 0, 0, &[]));
    for i in 0u64..20_000 {
        flood.extend(frame(6, 0, 0, &i.to_be_bytes()));
        flood.extend(frame(4, 0, 0, &[0, 3, 0, 0, 0, 100]));
    }
    let (mut read, mut write) = tokio::io::split(tls);
    // Drain what the server sends so that only the server's own limits can end this.
    let drain = tokio::spawn(async move {
        let mut sink = vec![0u8; 64 << 10];
        let mut total = 0usize;
        while let Ok(n) = read.read(&mut sink).await {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    // 40k control frames (~700 KB): the server either reads them all or closes the connection;
    // either way the write finishes.
    let _ = within("the flood is written or refused", write.write_all(&flood)).await;
    // And, on another connection, the proxy serves.
    still_serves(&app).await;
    drain.abort();
}
