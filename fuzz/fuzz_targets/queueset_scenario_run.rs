//! Queue-set scenarios of at most 64 requests run through our queue set on its virtual clock, as
//! the apiserver's behaves and as shipped: the heavier half of `queueset_scenario`.
//!
//! Invariants: nothing panics; each request has one outcome: dispatched at or after its arrival,
//! finished one execution later, in the order of the dispatch positions 0, 1, 2, ...; or rejected
//! at or after its arrival as `queue-full`, `time-out` or `cancelled`.
#![no_main]

use kube_apf_proxy::fuzzing::queueset_scenario_run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        queueset_scenario_run(text);
    }
});
