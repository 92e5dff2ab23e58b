//! The label and field selector parsers that decide `list` vs `watch` and the `metadata.name`
//! selector (reached through `request_info::parse` only behind URL decoding; here directly).
//!
//! Input: the first byte picks the parser (even: label, odd: field), the rest is the selector.
//! Invariants: nothing panics; both are deterministic; whitespace around a label selector does
//! not change whether it parses; the exact `metadata.name` value a field selector yields, escaped
//! again (`fields.EscapeValue`), is found again.
#![no_main]

use kube_apf_proxy::fuzzing::{field_selector_exact_match, label_selector_is_valid};
use libfuzzer_sys::fuzz_target;

const FIELD: &str = "metadata.name";

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if selector % 2 == 0 {
        let valid = label_selector_is_valid(text);
        assert_eq!(valid, label_selector_is_valid(text), "deterministic");
        assert_eq!(
            valid,
            label_selector_is_valid(&format!(" {text}\t")),
            "surrounding whitespace changed validity"
        );
    } else {
        let found = field_selector_exact_match(text, FIELD);
        assert_eq!(
            found,
            field_selector_exact_match(text, FIELD),
            "deterministic"
        );
        if let Some(Some(name)) = found {
            let again = format!("{FIELD}={}", escape(&name));
            assert_eq!(
                field_selector_exact_match(&again, FIELD),
                Some(Some(name)),
                "escaped value not found again in {again:?}"
            );
        }
    }
});
