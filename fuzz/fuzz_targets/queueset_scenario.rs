//! Queue-set scenario files (`queueset-run`, the queue-set differential's JSON): read, and
//! written back (the run is `queueset_scenario_run`'s).
//!
//! Invariants: nothing panics; a scenario read writes itself back as JSON that reads into the
//! same scenario.
#![no_main]

use kube_apf_proxy::fuzzing::queueset_scenario;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        queueset_scenario(text);
    }
});
