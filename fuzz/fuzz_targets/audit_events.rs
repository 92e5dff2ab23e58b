//! Trace readers (`simulate --trace`): Kubernetes audit events, the proxy's access log and trace
//! lines, detected by content, read on the fuzzing thread (the replay is `trace_replay`'s).
//!
//! Invariants: nothing panics; the reader's counts are those of what it yielded (requests,
//! malformed lines, events out of arrival order); `--strict` yields the same up to and including
//! the first malformed line, and nothing after it.
#![no_main]

use kube_apf_proxy::fuzzing::trace_read;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    trace_read(data);
});
