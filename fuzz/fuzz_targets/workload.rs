//! `simulate --workload` files: read, validated, and (when small) run through the bootstrap
//! configuration.
//!
//! Invariants: nothing panics; every client is reported; no more calls answered than made.
#![no_main]

use kube_apf_proxy::fuzzing::workload;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        workload(text);
    }
});
