//! The cluster configuration source end to end: a watch body (split at an arbitrary point) →
//! FlowSchema and PriorityLevelConfiguration watch events → the cluster source's objects → the
//! loader: the heavier half of `watch_stream`.
//!
//! Input: as `watch_stream`'s. Invariants: those of `watch_stream`; whatever the events left
//! behind loads or is refused with problems, never a crash.
#![no_main]

use kube_apf_proxy::fuzzing::watch_objects;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    watch_objects(body, usize::from(split));
});
