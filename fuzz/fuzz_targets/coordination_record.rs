//! The coordination record a replica reads from a peer's Lease annotation
//! (`apf.kube-apf-proxy.io/coordination`): decoded, checked, written back and decoded again.
//!
//! Invariants: nothing panics; a record read has claim ≥ share and a finite, non-negative demand,
//! and reads back unchanged from what it writes.
#![no_main]

use kube_apf_proxy::fuzzing::coordination_record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        coordination_record(text);
    }
});
