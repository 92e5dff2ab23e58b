//! DNS-1123 name checks with apimachinery's exact messages.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/validation/validation.go`: `IsDNS1123Subdomain`,
//! `IsDNS1123Label`, `RegexError`, `MaxLenError`.

const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;

/// The message for a name that is not a DNS-1123 subdomain.
pub const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. \
'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The message for a name that is not a DNS-1123 label (note Go's double space in the examples).
pub const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

fn is_subdomain_syntax(s: &str) -> bool {
    s.split('.').all(is_label_syntax)
}

/// `IsDNS1123Subdomain`: the problems with `s` as a DNS-1123 subdomain (empty when valid).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !is_subdomain_syntax(s) {
        errs.push(SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// `IsDNS1123Label`: the problems with `s` as a DNS-1123 label (empty when valid).
pub fn dns1123_label(s: &str) -> Vec<String> {
    if s.len() > LABEL_MAX {
        return vec![max_len_error(LABEL_MAX)];
    }
    if is_label_syntax(s) {
        Vec::new()
    } else if is_subdomain_syntax(s) {
        // A valid subdomain of valid length that is not a label can only be one with dots.
        vec!["must not contain dots".to_string()]
    } else {
        vec![LABEL_MSG.to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_and_labels_are_checked_like_apimachinery() {
        let long_label = "a".repeat(64);
        let long_sub = format!("{0}.{0}.{0}.{0}", "a".repeat(63));
        let cases: &[(&str, Vec<String>, Vec<String>)] = &[
            ("abc", vec![], vec![]),
            ("a-b.c", vec![], vec!["must not contain dots".into()]),
            ("A", vec![SUBDOMAIN_MSG.into()], vec![LABEL_MSG.into()]),
            ("-a", vec![SUBDOMAIN_MSG.into()], vec![LABEL_MSG.into()]),
            ("a..b", vec![SUBDOMAIN_MSG.into()], vec![LABEL_MSG.into()]),
            ("", vec![SUBDOMAIN_MSG.into()], vec![LABEL_MSG.into()]),
            (
                &long_label,
                vec![],
                vec!["must be no more than 63 bytes".into()],
            ),
            (
                &long_sub,
                vec!["must be no more than 253 bytes".into()],
                vec!["must be no more than 63 bytes".into()],
            ),
        ];
        for (name, sub, label) in cases {
            assert_eq!(&dns1123_subdomain(name), sub, "subdomain {name}");
            assert_eq!(&dns1123_label(name), label, "label {name}");
        }
    }
}
