//! The cluster configuration source's watch-stream decoder: bytes as an upstream would stream
//! them (split at an arbitrary point) → FlowSchema and PriorityLevelConfiguration watch events
//! (what the events leave behind is loaded by `watch_objects`).
//!
//! Input: the first byte is the split point, the rest the body. Invariants: nothing panics;
//! where the bytes are split does not change the events decoded, the last event of a body
//! without a final newline, or the refusal of a stream that does not decode.
#![no_main]

use kube_apf_proxy::fuzzing::watch_stream;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    watch_stream(body, usize::from(split));
});
