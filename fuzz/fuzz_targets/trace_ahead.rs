//! A small trace (its first 4 KiB) read in line and ahead on a thread of its own, then fed in
//! line and ahead on a thread of its own: the threaded half of `audit_events`' property.
//!
//! Invariants: nothing panics; reading ahead yields and counts what reading in line does; feeding
//! ahead feeds the same events, attributes and classes as feeding in line.
#![no_main]

use kube_apf_proxy::fuzzing::trace_ahead;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    trace_ahead(data);
});
