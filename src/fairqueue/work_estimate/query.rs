//! The parts of a request's query string that the work estimators read.
//!
//! Mirrors Go's `net/url.ParseQuery` (as `r.URL.Query()` uses it), apimachinery's
//! `Convert_url_Values_To_v1_ListOptions` and `fields.ParseSelector(...).RequiresExactMatch`.

use std::borrow::Cow;

/// `metav1.ListOptions` as far as work estimation needs it. Each field holds the first value of its
/// parameter, like the apiserver's conversion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: String,
    /// `fieldSelector`.
    pub field_selector: String,
    /// `resourceVersion`.
    pub resource_version: String,
    /// `resourceVersionMatch`.
    pub resource_version_match: String,
    /// `limit` (0 when absent).
    pub limit: i64,
    /// `continue`.
    pub continue_token: String,
    /// `sendInitialEvents`: absent → `None`; `"0"` or any case of `"false"` → false; anything
    /// else, even empty → true.
    pub send_initial_events: Option<bool>,
}

/// Why a query string does not convert to [`ListOptions`]: `limit` or `timeoutSeconds` is not a
/// base-10 64-bit integer (the only conversions that can fail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid integer {value:?} for query parameter {param}")]
pub struct ListOptionsError {
    /// The parameter name.
    pub param: &'static str,
    /// Its (first) value.
    pub value: String,
}

impl ListOptions {
    /// Converts a raw query string (without the `?`); `None` gives the defaults.
    pub fn from_query(query: Option<&str>) -> Result<ListOptions, ListOptionsError> {
        let params = parse_query_borrowed(query.unwrap_or(""));
        let first = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| &**v);
        let string = |name: &str| first(name).unwrap_or("").to_string();
        let int = |name: &'static str| match first(name) {
            None => Ok(0),
            Some(v) => v.parse::<i64>().map_err(|_| ListOptionsError {
                param: name,
                value: v.to_string(),
            }),
        };
        int("timeoutSeconds")?;
        Ok(ListOptions {
            label_selector: string("labelSelector"),
            field_selector: string("fieldSelector"),
            resource_version: string("resourceVersion"),
            resource_version_match: string("resourceVersionMatch"),
            limit: int("limit")?,
            continue_token: string("continue"),
            send_initial_events: first("sendInitialEvents")
                .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false"))),
        })
    }
}

/// Decodes `k=v&k2=v2` into pairs in order, as Go's `url.ParseQuery`: pieces containing `;` or a
/// bad percent escape are skipped, `+` is a space, a missing `=` gives an empty value.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    parse_query_borrowed(query)
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// [`parse_query`], each key and value borrowed from `query` unless it had to be unescaped.
fn parse_query_borrowed(query: &str) -> Vec<(Cow<'_, str>, Cow<'_, str>)> {
    query
        .split('&')
        .filter(|piece| !piece.is_empty() && !piece.contains(';'))
        .filter_map(|piece| {
            let (key, value) = piece.split_once('=').unwrap_or((piece, ""));
            Some((query_unescape(key)?, query_unescape(value)?))
        })
        .collect()
}

/// Go's `url.QueryUnescape`: `+` → space, `%XX` → byte; `None` on a malformed escape. Bytes that
/// are not UTF-8 are replaced (Go keeps them; no selector or version we compare contains them).
fn query_unescape(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains(['%', '+']) {
        return Some(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = hex(*bytes.get(i + 1)?)?;
                let lo = hex(*bytes.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(Cow::Owned(String::from_utf8(out).unwrap_or_else(|e| {
        String::from_utf8_lossy(e.as_bytes()).into_owned()
    })))
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The value a field selector requires `field` to equal exactly (`field=v` or `field==v`), or
/// `None` when it does not (including when the selector does not parse).
///
/// Mirrors `fields.ParseSelector` + `RequiresExactMatch`: terms split on unescaped commas and are
/// sorted; the first `=`/`==` term on `field` wins; values are unescaped (`\\`, `\,`, `\=`).
pub fn field_requires_exact_match(selector: &str, field: &str) -> Option<String> {
    let mut terms = split_terms(selector);
    terms.sort_unstable();
    let mut found = None;
    for term in terms.into_iter().filter(|t| !t.is_empty()) {
        // A term that does not parse makes the whole selector invalid.
        let (lhs, op, rhs) = split_term(term)?;
        let value = unescape_value(rhs)?;
        if found.is_none() && lhs == field && op != "!=" {
            found = Some(value);
        }
    }
    found
}

/// Splits on commas not preceded by a backslash escape, keeping the escapes.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut in_slash) = (0, false);
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at the first operator (`!=`, then `==`, then `=` at each position).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        ["!=", "==", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .map(|op| (&term[..i], op, &rest[op.len()..]))
    })
}

/// `fields.UnescapeValue`: `\\`, `\,`, `\=` are escapes; any other escape or a bare `,` or `=`
/// is an error.
fn unescape_value(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return None;
            }
            out.push(c);
            in_slash = false;
        } else {
            match c {
                '\\' => in_slash = true,
                ',' | '=' => return None,
                c => out.push(c),
            }
        }
    }
    (!in_slash).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_query_like_go() {
        let pairs = parse_query("a=1&&b&c=%41+x&bad=%zz&semi=1;x=2&a=2");
        let want = [("a", "1"), ("b", ""), ("c", "A x"), ("a", "2")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(pairs, want);
    }

    #[test]
    fn list_options_table() {
        let cases: &[(&str, Result<ListOptions, &str>)] = &[
            ("", Ok(ListOptions::default())),
            (
                "limit=500&resourceVersion=0&continue=abc&labelSelector=a%3Db&fieldSelector=x%3Dy",
                Ok(ListOptions {
                    limit: 500,
                    resource_version: "0".into(),
                    continue_token: "abc".into(),
                    label_selector: "a=b".into(),
                    field_selector: "x=y".into(),
                    ..ListOptions::default()
                }),
            ),
            (
                "limit=-3&limit=x",
                Ok(ListOptions {
                    limit: -3,
                    ..ListOptions::default()
                }),
            ),
            ("limit=x", Err("limit")),
            ("limit=", Err("limit")),
            ("limit=99999999999999999999", Err("limit")),
            ("timeoutSeconds=1s", Err("timeoutSeconds")),
            (
                "sendInitialEvents=",
                Ok(ListOptions {
                    send_initial_events: Some(true),
                    ..ListOptions::default()
                }),
            ),
            (
                "sendInitialEvents=FALSE",
                Ok(ListOptions {
                    send_initial_events: Some(false),
                    ..ListOptions::default()
                }),
            ),
            (
                "sendInitialEvents=0",
                Ok(ListOptions {
                    send_initial_events: Some(false),
                    ..ListOptions::default()
                }),
            ),
            (
                "sendInitialEvents=yes",
                Ok(ListOptions {
                    send_initial_events: Some(true),
                    ..ListOptions::default()
                }),
            ),
            (
                "resourceVersionMatch=Exact",
                Ok(ListOptions {
                    resource_version_match: "Exact".into(),
                    ..ListOptions::default()
                }),
            ),
        ];
        for (query, want) in cases {
            let got = ListOptions::from_query(Some(query)).map_err(|e| e.param);
            assert_eq!(&got, want, "{query}");
        }
    }

    #[test]
    fn field_selector_exact_match_table() {
        let cases = [
            ("spec.nodeName=n1", Some("n1")),
            ("spec.nodeName==n1", Some("n1")),
            ("spec.nodeName!=n1", None),
            ("spec.nodeName=", Some("")),
            ("metadata.name=a,spec.nodeName=n\\,1", Some("n,1")),
            ("spec.nodeName=a,spec.nodeName=b", Some("a")),
            ("status.phase=Running", None),
            ("spec.nodeName=n1,garbage", None),
            ("spec.nodeName=a=b", None),
            ("spec.nodeName=a\\", None),
            ("", None),
        ];
        for (selector, want) in cases {
            assert_eq!(
                field_requires_exact_match(selector, "spec.nodeName").as_deref(),
                want,
                "{selector}"
            );
        }
    }
}
