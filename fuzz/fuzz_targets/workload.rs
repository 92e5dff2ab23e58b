//! `simulate --workload` files: YAML read and validated (the run is `workload_run`'s).
//!
//! Invariants: nothing panics; a workload read is one the reader's rules allow.
#![no_main]

use kube_apf_proxy::fuzzing::workload_parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        workload_parse(text);
    }
});
