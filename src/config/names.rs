//! DNS-1123 name checks with apimachinery's exact messages.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/validation/validation.go`: `IsDNS1123Subdomain`,
//! `IsDNS1123Label`, `RegexError`, `MaxLenError`.

const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;

/// The message for a name that is not a DNS-1123 subdomain.
pub(in crate::config) const SUBDOMAIN_MSG: &str =
    "a lowercase RFC 1123 subdomain must consist of lower case \
alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. \
'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The message for a name that is not a DNS-1123 label (note Go's double space in the examples).
pub(in crate::config) const LABEL_MSG: &str =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric \
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
pub(in crate::config) fn dns1123_subdomain(s: &str) -> Vec<String> {
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
pub(in crate::config) fn dns1123_label(s: &str) -> Vec<String> {
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

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
'MyValue',  or 'my_value',  or '12345', regex used for validation is \
'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let ext = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && b.iter().all(ext)
        }
        _ => false,
    }
}

/// `IsQualifiedName`: a label or annotation key (`[prefix/]name`).
pub(in crate::config) fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                let msgs = dns1123_subdomain(prefix);
                errs.extend(msgs.into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and \
                 '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_syntax(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

/// `IsValidLabelValue`.
pub(in crate::config) fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !s.is_empty() && !is_qualified_name_syntax(s) {
        errs.push(LABEL_VALUE_MSG.to_string());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_and_annotation_keys_and_values_are_checked_like_apimachinery() {
        assert!(qualified_name("apf.kubernetes.io/autoupdate-spec").is_empty());
        assert!(qualified_name("My_Key.1").is_empty());
        assert_eq!(
            qualified_name("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            qualified_name("Bad/x"),
            vec![format!("prefix part {SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            qualified_name("a/"),
            vec![
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_NAME_MSG}")
            ]
        );
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert!(label_value("").is_empty());
        assert!(label_value("v1.2_x").is_empty());
        assert_eq!(label_value("-x"), vec![LABEL_VALUE_MSG.to_string()]);
    }

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
