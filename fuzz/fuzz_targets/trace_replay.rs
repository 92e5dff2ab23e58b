//! A small trace (its first 4 KiB) read in line and, when small, replayed in line through the
//! bootstrap configuration: the replaying half of `audit_events`' property (`trace_ahead` checks
//! that reading and feeding ahead change nothing).
//!
//! Invariants: nothing panics; the replay counts every request.
#![no_main]

use kube_apf_proxy::fuzzing::trace_replay;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    trace_replay(data);
});
