//! The output of a kubeconfig exec credential plugin (`ExecCredential` JSON).
//!
//! Invariants: parsing never panics and is deterministic.
#![no_main]

use kube_apf_proxy::fuzzing::exec_credential;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    exec_credential(data);
});
