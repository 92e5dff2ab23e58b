//! The cluster configuration source's watch-stream decoder and object store: bytes as an
//! upstream would stream them (split at an arbitrary point) → FlowSchema and
//! PriorityLevelConfiguration watch events → the objects → the loader.
//!
//! Invariants: nothing panics; where the bytes are split does not change the events decoded;
//! whatever the events left behind loads or is refused with problems, never a crash.
#![no_main]

use kube_apf_proxy::fuzzing::watch_stream;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(body.len());
    watch_stream(body, split);
});
