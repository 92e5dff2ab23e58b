//! `simulate --workload` files read and, when small (at most 60 s, 16 threads, 512 calls), run
//! through the bootstrap configuration: the heavier half of `workload`.
//!
//! Invariants: nothing panics; every client is reported; no more calls answered than made.
#![no_main]

use kube_apf_proxy::fuzzing::workload_run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        workload_run(text);
    }
});
