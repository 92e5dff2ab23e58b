//! What the apiserver takes from a collection GET's query: decoding it as `ListOptions` decides
//! between `list` and `watch`, and a `metadata.name` field selector may name the object.
//!
//! Mirrors `ParameterCodec.DecodeParameters(query, meta/v1, &internalversion.ListOptions{})`:
//! `url.Values` → `metav1.ListOptions` (`runtime.Convert_Slice_string_To_*`) → internal
//! `ListOptions`, where the selectors are parsed by `labels.Parse` and `fields.ParseSelector`.
//! Only `labelSelector`, `fieldSelector`, `limit` and `timeoutSeconds` can make that fail.

use std::borrow::Cow;

use super::label_selector;
use super::url::ListQuery;

/// The outcome of decoding a collection GET's query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ListDecision {
    /// `watch` rather than `list`.
    pub watch: bool,
    /// The value of an exact `metadata.name` field selector term, when decoding succeeded.
    pub selected_name: Option<String>,
}

/// Decodes the query as the apiserver does; on a decode failure the options are discarded and
/// only the raw `watch` value is consulted.
pub(super) fn decide(query: &ListQuery<'_>) -> ListDecision {
    decode(query).unwrap_or_else(|Invalid| ListDecision {
        // requestinfo.go's fallback: `strings.ToLower(values[0])` is neither "false" nor "0".
        watch: query
            .watch
            .as_deref()
            .is_some_and(|w| !w.eq_ignore_ascii_case("false") && w != "0"),
        selected_name: None,
    })
}

/// A query that `ListOptions` decoding rejects.
pub(super) struct Invalid;

fn decode(query: &ListQuery<'_>) -> Result<ListDecision, Invalid> {
    let watch = query.watch.as_deref().is_some_and(go_bool);
    if let Some(selector) = &query.label_selector {
        if !label_selector::is_valid(selector) {
            return Err(Invalid);
        }
    }
    let selected_name = match &query.field_selector {
        Some(selector) => exact_match(selector, "metadata.name")?.map(Cow::into_owned),
        None => None,
    };
    for number in [&query.limit, &query.timeout_seconds].into_iter().flatten() {
        // `strconv.ParseInt(s, 10, 64)` and Rust's `i64::from_str` accept the same strings.
        number.parse::<i64>().map_err(|_| Invalid)?;
    }
    Ok(ListDecision {
        watch,
        selected_name,
    })
}

/// Mirrors `runtime.Convert_Slice_string_To_bool`: only `0` and `false` (Go's `EqualFold`, which
/// also folds `ſ` U+017F to `s`) are false; anything else, the empty string included, is true.
fn go_bool(value: &str) -> bool {
    let mut chars = value.chars();
    let is_false_spelling = "false".chars().all(|want| {
        chars
            .next()
            .is_some_and(|c| c.eq_ignore_ascii_case(&want) || (want == 's' && c == '\u{17F}'))
    }) && chars.next().is_none();
    !(value == "0" || is_false_spelling)
}

/// Mirrors `fields.ParseSelector(selector).RequiresExactMatch(field)`: parses every term (any
/// malformed one fails the whole selector), then returns the unescaped value of the first term,
/// in sorted order of the raw terms, that is `field=value` or `field==value`.
pub(super) fn exact_match<'a>(
    selector: &'a str,
    field: &str,
) -> Result<Option<Cow<'a, str>>, Invalid> {
    let mut terms = split_terms(selector);
    terms.sort_unstable();
    let mut found = None;
    for term in terms.into_iter().filter(|t| !t.is_empty()) {
        let (lhs, op, rhs) = split_term(term).ok_or(Invalid)?;
        let value = unescape_value(rhs)?;
        if found.is_none() && op != Op::NotEquals && lhs == field {
            found = Some(value);
        }
    }
    Ok(found)
}

/// Splits on commas not escaped by a backslash; the escapes stay in the terms.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, b) in selector.bytes().enumerate() {
        match b {
            _ if in_slash => in_slash = false,
            b'\\' => in_slash = true,
            b',' => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// A field selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    NotEquals,
}

/// Splits at the first operator (`!=`, `==` or `=`, tried in that order at each position).
fn split_term(term: &str) -> Option<(&str, Op, &str)> {
    let bytes = term.as_bytes();
    let i = (0..bytes.len()).find(|&i| bytes[i] == b'=' || bytes[i..].starts_with(b"!="))?;
    let (op, len) = match (bytes[i], bytes.get(i + 1)) {
        (b'!', _) => (Op::NotEquals, 2),
        (_, Some(b'=')) => (Op::Equals, 2),
        _ => (Op::Equals, 1),
    };
    Some((&term[..i], op, &term[i + len..]))
}

/// Mirrors `fields.UnescapeValue`: `\\`, `\,` and `\=` are the only escapes; a bare `,` or `=`,
/// any other escape and a trailing backslash are errors.
fn unescape_value(value: &str) -> Result<Cow<'_, str>, Invalid> {
    if !value.contains(['\\', ',', '=']) {
        return Ok(Cow::Borrowed(value));
    }
    let mut out = String::with_capacity(value.len());
    let mut in_slash = false;
    for c in value.chars() {
        match c {
            '\\' | ',' | '=' if in_slash => {
                out.push(c);
                in_slash = false;
            }
            _ if in_slash => return Err(Invalid),
            '\\' => in_slash = true,
            ',' | '=' => return Err(Invalid),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err(Invalid);
    }
    Ok(Cow::Owned(out))
}
