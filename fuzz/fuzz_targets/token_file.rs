//! The `--token-auth-file` CSV parser.
//!
//! Invariants: parsing never panics and is deterministic; every record has a non-empty token
//! and groups without empty-string surprises beyond what the CSV said.
#![no_main]

use kube_apf_proxy::fuzzing::token_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = token_file(text);
    let second = token_file(text);
    assert_eq!(first, second, "deterministic");
    if let Ok(records) = first {
        for (token, _identity) in &records {
            assert!(!token.is_empty(), "an empty token is never a credential");
        }
    }
});
