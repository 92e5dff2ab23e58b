//! The parts of a request's query string that the work estimators read.
//!
//! Mirrors Go's `net/url.ParseQuery` (as `r.URL.Query()` uses it), apimachinery's
//! `Convert_url_Values_To_v1_ListOptions` and `fields.ParseSelector(...).RequiresExactMatch`.

use std::borrow::Cow;

use crate::request_info::{query_pairs, query_value};

/// `metav1.ListOptions` as far as work estimation needs it. Each field holds the first value of its
/// parameter, like the apiserver's conversion, borrowed from the query unless it had to be
/// unescaped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions<'a> {
    /// `labelSelector`.
    pub label_selector: Cow<'a, str>,
    /// `fieldSelector`.
    pub field_selector: Cow<'a, str>,
    /// `resourceVersion`.
    pub resource_version: Cow<'a, str>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Cow<'a, str>,
    /// `limit` (0 when absent).
    pub limit: i64,
    /// `continue`.
    pub continue_token: Cow<'a, str>,
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

/// The parameters [`ListOptions::from_query`] reads, in the order of its slots.
const PARAMS: [&str; 8] = [
    "labelSelector",
    "fieldSelector",
    "resourceVersion",
    "resourceVersionMatch",
    "limit",
    "continue",
    "sendInitialEvents",
    "timeoutSeconds",
];

impl<'a> ListOptions<'a> {
    /// Converts a raw query string (without the `?`); `None` gives the defaults.
    ///
    /// Keeps the first value of each parameter it reads, as the pairs of [`parse_query`] would
    /// give them (the apiserver's reading, `request_info::query_pairs`): nothing is allocated
    /// unless a value is escaped.
    pub fn from_query(query: Option<&'a str>) -> Result<ListOptions<'a>, ListOptionsError> {
        let mut first: [Option<Cow<'a, str>>; PARAMS.len()] = Default::default();
        for (key, value) in query_pairs(query.unwrap_or("")) {
            keep_first(&key, value, &mut first);
        }
        let [label_selector, field_selector, resource_version, resource_version_match, limit, continue_token, send_initial_events, timeout_seconds] =
            first;
        let int = |name: &'static str, value: Option<Cow<'a, str>>| match value {
            None => Ok(0),
            Some(v) => v.parse::<i64>().map_err(|_| ListOptionsError {
                param: name,
                value: v.into_owned(),
            }),
        };
        int("timeoutSeconds", timeout_seconds)?;
        Ok(ListOptions {
            label_selector: label_selector.unwrap_or_default(),
            field_selector: field_selector.unwrap_or_default(),
            resource_version: resource_version.unwrap_or_default(),
            resource_version_match: resource_version_match.unwrap_or_default(),
            limit: int("limit", limit)?,
            continue_token: continue_token.unwrap_or_default(),
            send_initial_events: send_initial_events
                .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false"))),
        })
    }
}

/// Puts `value` in `first` if `key` is one of [`PARAMS`] not seen yet and the value unescapes.
fn keep_first<'a>(key: &[u8], value: &'a str, first: &mut [Option<Cow<'a, str>>; PARAMS.len()]) {
    let Some(slot) = PARAMS.iter().position(|p| p.as_bytes() == key) else {
        return;
    };
    if first[slot].is_none() {
        first[slot] = query_value(value);
    }
}

/// Decodes `k=v&k2=v2` into pairs in order, as Go's `url.ParseQuery` (see
/// `request_info::query_pairs`): pieces containing `;` or a bad percent escape are skipped, `+` is
/// a space, a missing `=` gives an empty value.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query_pairs(query)
        .filter_map(|(key, value)| {
            let key = String::from_utf8_lossy(&key).into_owned();
            Some((key, query_value(value)?.into_owned()))
        })
        .collect()
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

    /// The conversion as the apiserver states it: every pair decoded, then the first value of
    /// each parameter looked up.
    fn from_pairs(query: &str) -> Result<ListOptions<'static>, ListOptionsError> {
        let params = parse_query(query);
        let first = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let string = |name: &str| Cow::Owned(first(name).unwrap_or("").to_string());
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

    proptest::proptest! {
        #[test]
        fn one_pass_conversion_agrees_with_the_pairs(
            pieces in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "limit", "l%69mit", "limit;", "resourceVersion", "resourceVersionMatch",
                        "continue", "labelSelector", "fieldSelector", "sendInitialEvents",
                        "timeoutSeconds", "watch", "", "%zz", "a+b",
                    ]),
                    proptest::option::of(proptest::sample::select(vec![
                        "", "0", "500", "-3", "x", "1s", "%41+b", "%4", "a%3Db", "FALSE", "1;2",
                        "99999999999999999999",
                    ])),
                ),
                0..8,
            )
        ) {
            let query = pieces
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => format!("{k}={v}"),
                    None => k.to_string(),
                })
                .collect::<Vec<_>>()
                .join("&");
            proptest::prop_assert_eq!(ListOptions::from_query(Some(&query)), from_pairs(&query));
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
