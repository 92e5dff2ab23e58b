//! A small trace (its first 4 KiB) read in line and ahead on a thread of its own, then replayed
//! through the bootstrap configuration fed in line and ahead: the heavier half of
//! `audit_events`.
//!
//! Invariants: nothing panics; reading ahead yields and counts what reading in line does; the
//! replay is the same fed either way and counts every request.
#![no_main]

use kube_apf_proxy::fuzzing::trace_replay;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    trace_replay(data);
});
