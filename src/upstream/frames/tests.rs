use proptest::prelude::*;

use super::*;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn settings(entries: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = entries
        .iter()
        .flat_map(|(id, value)| {
            let mut e = id.to_be_bytes().to_vec();
            e.extend_from_slice(&value.to_be_bytes());
            e
        })
        .collect();
    frame(SETTINGS, 0, 0, &payload)
}

fn goaway(last: u32, code: u32, debug: &[u8]) -> Vec<u8> {
    let mut payload = last.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(debug);
    frame(GOAWAY, 0, 0, &payload)
}

fn events(chunks: &[&[u8]]) -> Vec<Event> {
    let mut watcher = FrameWatcher::new();
    let mut out = Vec::new();
    for chunk in chunks {
        watcher.feed(chunk, |e| out.push(e));
    }
    out
}

/// What a Go server (kube-apiserver) sends first, then a window update, a response's frames and
/// a graceful GOAWAY.
fn conversation() -> Vec<u8> {
    let mut bytes = settings(&[(0x5, 1 << 20), (0x3, 250), (0x6, 1 << 20), (0x4, 1 << 20)]);
    bytes.extend(frame(0x8, 0, 0, &[0, 0x0e, 0, 0x01]));
    bytes.extend(frame(SETTINGS, ACK, 0, &[]));
    bytes.extend(frame(0x1, 0x4, 1, &[0x88]));
    bytes.extend(frame(0x0, 0x1, 1, b"{\"kind\":\"Pod\"}"));
    bytes.extend(settings(&[(0x3, 100)]));
    bytes.extend(goaway(7, 0, b"server shutting down"));
    bytes
}

#[test]
fn reads_the_stream_limit_and_goaway_of_a_whole_conversation() {
    assert_eq!(
        events(&[&conversation()]),
        vec![
            Event::MaxConcurrentStreams(250),
            Event::MaxConcurrentStreams(100),
            Event::GoAway {
                last_stream_id: 7,
                error_code: 0
            },
        ]
    );
}

#[test]
fn ignores_settings_acks_stream_frames_and_settings_on_streams() {
    let mut bytes = frame(SETTINGS, ACK, 0, &[]);
    // A SETTINGS on a stream is a protocol error for hyper; the watcher takes nothing from it.
    let mut on_stream = settings(&[(0x3, 5)]);
    on_stream[8] = 3;
    bytes.extend(on_stream);
    // A DATA frame whose payload looks like a SETTINGS frame.
    bytes.extend(frame(0x0, 0, 1, &settings(&[(0x3, 7)])));
    assert_eq!(events(&[&bytes]), vec![]);
}

#[test]
fn a_truncated_settings_entry_or_goaway_reports_nothing() {
    // A SETTINGS payload of 8 bytes: one entry and 2 stray bytes.
    let mut payload = vec![0, 0x3, 0, 0, 0, 9];
    payload.extend([1, 2]);
    let mut bytes = frame(SETTINGS, 0, 0, &payload);
    // A GOAWAY too short to carry its fields.
    bytes.extend(frame(GOAWAY, 0, 0, &[0, 0, 0, 1]));
    bytes.extend(settings(&[(0x3, 11)]));
    assert_eq!(
        events(&[&bytes]),
        vec![
            Event::MaxConcurrentStreams(9),
            Event::MaxConcurrentStreams(11)
        ]
    );
}

#[test]
fn counts_frames_read_to_their_end() {
    let bytes = conversation();
    let mut watcher = FrameWatcher::new();
    watcher.feed(&bytes[..5], |_| {});
    assert_eq!(watcher.frames_read(), 0, "inside the first header");
    watcher.feed(&bytes[5..20], |_| {});
    assert_eq!(watcher.frames_read(), 0, "inside the first SETTINGS");
    watcher.feed(&bytes[20..], |_| {});
    assert_eq!(watcher.frames_read(), 7);
}

#[tokio::test]
async fn watched_io_publishes_what_the_server_says() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut server, client) = tokio::io::duplex(64);
    let stats = Arc::new(UpstreamStats::default());
    let peer = Arc::new(PeerSettings::new(Some(stats.clone())));
    let mut watched = WatchedFrames::watch(client, peer.clone());
    assert_eq!(peer.max_concurrent_streams(), u32::MAX);
    let bytes = conversation();
    let writer = tokio::spawn(async move {
        server.write_all(&bytes).await.expect("write");
        server
    });
    let mut read = Vec::new();
    let mut buf = [0u8; 7];
    while read.len() < conversation().len() {
        let n = watched.read(&mut buf).await.expect("read");
        read.extend_from_slice(&buf[..n]);
        if read.len() >= 54 {
            // Past the first SETTINGS frame (9 + 24 bytes) and more.
            tokio::time::timeout(std::time::Duration::from_secs(5), peer.settled())
                .await
                .expect("settled");
        }
    }
    drop(writer.await);
    assert_eq!(read, conversation(), "the bytes pass unchanged");
    assert_eq!(peer.max_concurrent_streams(), 100);
    assert!(peer.going_away());
    assert_eq!(stats.goaways(), 1);
}

proptest! {
    /// However the bytes are cut into reads, the watcher reports the same events.
    #[test]
    fn the_events_do_not_depend_on_how_reads_split_the_bytes(
        cuts in proptest::collection::vec(0usize..200, 0..12),
        limit in any::<u32>(),
        last in 0u32..0x7fff_ffff,
    ) {
        let mut bytes = settings(&[(0x4, 65535), (0x3, limit)]);
        bytes.extend(frame(0x0, 0, 1, &[7u8; 40]));
        bytes.extend(goaway(last, 2, b"debug"));
        let whole = events(&[&bytes]);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts {
            chunks.push(&bytes[start..cut]);
            start = cut;
        }
        chunks.push(&bytes[start..]);
        prop_assert_eq!(events(&chunks), whole.clone());
        prop_assert_eq!(whole, vec![
            Event::MaxConcurrentStreams(limit),
            Event::GoAway { last_stream_id: last, error_code: 2 },
        ]);
    }

    /// Arbitrary bytes never panic the watcher.
    #[test]
    fn arbitrary_bytes_are_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut watcher = FrameWatcher::new();
        watcher.feed(&bytes, |_| {});
    }
}
