//! The upstream pool's HTTP/2 frame watcher: bytes as a server (kube-apiserver) sends them, read
//! for `SETTINGS_MAX_CONCURRENT_STREAMS` and `GOAWAY`.
//!
//! Invariants: nothing panics; where the bytes are split does not change the events read.
#![no_main]

use kube_apf_proxy::fuzzing::h2_frames;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    h2_frames(bytes, usize::from(split));
});
