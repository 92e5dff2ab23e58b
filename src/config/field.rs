//! Field paths and field errors, formatted as apimachinery formats them.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/validation/field/{path.go,errors.go}`: a path renders as
//! `spec.rules[0].subjects[1].kind`, an error as `PATH: TYPE[: VALUE][: DETAIL]`.

use std::fmt;

/// A field path such as `spec.rules[0].subjects`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct FieldPath(String);

impl FieldPath {
    /// A path of one top-level field (`metadata`, `spec`, `status`).
    pub fn new(root: &str) -> FieldPath {
        FieldPath(root.to_string())
    }

    /// The path of a child field.
    pub fn child(&self, name: &str) -> FieldPath {
        if self.0.is_empty() {
            FieldPath(name.to_string())
        } else {
            FieldPath(format!("{}.{name}", self.0))
        }
    }

    /// The path of a list element.
    pub fn index(&self, i: usize) -> FieldPath {
        FieldPath(format!("{}[{i}]", self.0))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The offending value of an `Invalid`, `NotSupported` or `Duplicate` error, rendered as Go's
/// `fmt` renders it in `field.Error.ErrorBody`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) enum BadValue {
    /// An integer (`%v`).
    Int(i64),
    /// A string or a named string type (`%q`).
    Str(String),
    /// A `[]string` (`%#v`: `[]string{"a", "b"}`).
    Strings(Vec<String>),
    /// Text already rendered as Go would render it (a struct in `%#v`).
    Go(String),
    /// No value shown (apimachinery's `field.OmitValueType`).
    Omitted,
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Str(s) => f.write_str(&go_quote(s)),
            BadValue::Strings(list) => {
                let items: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
                write!(f, "[]string{{{}}}", items.join(", "))
            }
            BadValue::Go(text) => f.write_str(text),
            BadValue::Omitted => Ok(()),
        }
    }
}

/// Quotes a string as Go's `%q` / `strconv.Quote` does for printable text.
pub(in crate::config) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let code = u32::from(c);
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02x}"));
                } else {
                    out.push_str(&format!("\\u{code:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The kind of a field error (apimachinery's `field.ErrorType`), plus the two decoding errors of
/// our strict decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) enum ErrorType {
    /// `Required value`.
    Required,
    /// `Invalid value: VALUE`.
    Invalid(BadValue),
    /// `Unsupported value: VALUE` with `supported values: ...` as detail.
    NotSupported(BadValue),
    /// `Forbidden`.
    Forbidden,
    /// `Duplicate value: VALUE`.
    Duplicate(BadValue),
    /// A field that the object's kind and version do not have (strict decoding).
    UnknownField,
    /// A value of the wrong type, e.g. a string where an integer belongs (strict decoding).
    WrongType,
}

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) struct FieldError {
    /// Where.
    pub path: FieldPath,
    /// What kind of problem, with the offending value.
    pub kind: ErrorType,
    /// The explanation; may be empty.
    pub detail: String,
}

impl FieldError {
    /// `field.Required`.
    pub fn required(path: &FieldPath, detail: &str) -> FieldError {
        Self::new(path, ErrorType::Required, detail)
    }

    /// `field.Invalid`.
    pub fn invalid(path: &FieldPath, value: BadValue, detail: &str) -> FieldError {
        Self::new(path, ErrorType::Invalid(value), detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(path: &FieldPath, detail: &str) -> FieldError {
        Self::new(path, ErrorType::Forbidden, detail)
    }

    /// `field.Duplicate`.
    pub fn duplicate(path: &FieldPath, value: BadValue) -> FieldError {
        Self::new(path, ErrorType::Duplicate(value), "")
    }

    /// `field.NotSupported`: the detail lists the supported values quoted, in the order given
    /// (callers pass them sorted, as `sets.List` does).
    pub fn not_supported(path: &FieldPath, value: BadValue, supported: &[&str]) -> FieldError {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(path, ErrorType::NotSupported(value), &detail)
    }

    /// A field the schema does not have; `hint` may be empty.
    pub fn unknown_field(path: &FieldPath, hint: &str) -> FieldError {
        Self::new(path, ErrorType::UnknownField, hint)
    }

    /// A value of the wrong type.
    pub fn wrong_type(path: &FieldPath, expected: &str, got: &str) -> FieldError {
        Self::new(
            path,
            ErrorType::WrongType,
            &format!("expected {expected}, got {got}"),
        )
    }

    fn new(path: &FieldPath, kind: ErrorType, detail: &str) -> FieldError {
        FieldError {
            path: path.clone(),
            kind,
            detail: detail.to_string(),
        }
    }

    /// The message without the path (apimachinery's `ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = match &self.kind {
            ErrorType::Required => "Required value".to_string(),
            ErrorType::Forbidden => "Forbidden".to_string(),
            ErrorType::UnknownField => "Unknown field".to_string(),
            ErrorType::WrongType => "Invalid type".to_string(),
            ErrorType::Invalid(BadValue::Omitted) => "Invalid value".to_string(),
            ErrorType::Invalid(v) => format!("Invalid value: {v}"),
            ErrorType::NotSupported(v) => format!("Unsupported value: {v}"),
            ErrorType::Duplicate(v) => format!("Duplicate value: {v}"),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_render_like_apimachinery() {
        let p = FieldPath::new("spec")
            .child("rules")
            .index(0)
            .child("verbs");
        let cases = [
            (
                FieldError::required(&p, "verbs must contain at least one value"),
                "spec.rules[0].verbs: Required value: verbs must contain at least one value",
            ),
            (
                FieldError::required(&p, ""),
                "spec.rules[0].verbs: Required value",
            ),
            (
                FieldError::invalid(&p, BadValue::Int(0), "must be a positive value"),
                "spec.rules[0].verbs: Invalid value: 0: must be a positive value",
            ),
            (
                FieldError::invalid(&p, BadValue::Strings(vec!["*".into(), "get".into()]), "x"),
                "spec.rules[0].verbs: Invalid value: []string{\"*\", \"get\"}: x",
            ),
            (
                FieldError::not_supported(&p, BadValue::Str("Foo".into()), &["A", "B"]),
                "spec.rules[0].verbs: Unsupported value: \"Foo\": supported values: \"A\", \"B\"",
            ),
            (
                FieldError::forbidden(&p, "nope"),
                "spec.rules[0].verbs: Forbidden: nope",
            ),
            (
                FieldError::duplicate(&p, BadValue::Str("1".into())),
                "spec.rules[0].verbs: Duplicate value: \"1\"",
            ),
            (
                FieldError::invalid(&p, BadValue::Omitted, "must equal"),
                "spec.rules[0].verbs: Invalid value: must equal",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn strings_are_quoted_like_go() {
        assert_eq!(go_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(go_quote("\u{1}"), "\"\\x01\"");
    }
}
