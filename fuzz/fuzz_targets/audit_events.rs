//! Trace readers (`simulate --trace`): Kubernetes audit events, the proxy's access log and trace
//! lines, detected by content, then replayed through the bootstrap configuration.
//!
//! Invariants: nothing panics; every request read is yielded and replayed.
#![no_main]

use kube_apf_proxy::fuzzing::trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    trace(data);
});
