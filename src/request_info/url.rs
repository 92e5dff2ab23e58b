//! The parts of Go's `net/url` that kube-apiserver's request attributes depend on: how
//! `url.ParseRequestURI` splits and decodes a request target, and how `URL.Query()` decodes the
//! query.

use std::borrow::Cow;

use super::RequestInfoError;

/// Go's default `urlmaxqueryparams` (Go ≥ 1.24; kube-apiserver builds with Go 1.26): a query with
/// more parameters than this (counted as `&`s + 1) fails to parse as a whole, and `URL.Query()`
/// then yields no parameters at all.
const MAX_QUERY_PARAMS: usize = 10_000;

/// A request target as Go's HTTP server hands it to a handler.
#[derive(Debug)]
pub(super) struct RequestTarget<'a> {
    /// `URL.Path`: the percent-decoded path (`+` stays `+`, `%2F` becomes `/`).
    pub path: String,
    /// `URL.RawQuery`: everything after the first `?`, still encoded.
    pub raw_query: &'a str,
    /// The path as received.
    raw_path: &'a str,
    /// Whether the target had a `?` (Go's `ForceQuery` keeps a lone one).
    has_query: bool,
}

impl RequestTarget<'_> {
    /// Mirrors `URL.String()` for a request URL, which the apiserver puts in some error messages:
    /// `EscapedPath()` (the path as received when that is a valid encoding, else Go's re-escaping
    /// of the decoded path) and the raw query.
    pub fn go_string(&self) -> String {
        let mut out = if self.path == "*" || valid_encoded_path(self.raw_path) {
            self.raw_path.to_owned()
        } else {
            escape_path(&self.path)
        };
        if self.has_query {
            out.push('?');
            out.push_str(self.raw_query);
        }
        out
    }
}

/// Mirrors `url.ParseRequestURI` for the forms hyper hands over as `Uri::path_and_query`: an
/// absolute path with an optional query, or `*`.
///
/// Differs from Go in rejecting absolute-form targets (`http://host/path`): the caller passes the
/// path and query only, so anything else is a caller error. No fragment is split off (Go does not
/// either: a request target has none).
pub(super) fn parse_request_target(target: &str) -> Result<RequestTarget<'_>, RequestInfoError> {
    // Go refuses ASCII control characters anywhere in the raw target (`%00` is fine).
    if target.bytes().any(|b| b < b' ' || b == 0x7f) || target.is_empty() {
        return Err(RequestInfoError::InvalidTarget(target.to_owned()));
    }
    if target == "*" {
        return Ok(RequestTarget {
            path: "*".to_owned(),
            raw_query: "",
            raw_path: target,
            has_query: false,
        });
    }
    if !target.starts_with('/') {
        return Err(RequestInfoError::InvalidTarget(target.to_owned()));
    }
    let (raw_path, raw_query, has_query) = match target.split_once('?') {
        Some((path, query)) => (path, query, true),
        None => (target, "", false),
    };
    let path =
        unescape(raw_path.as_bytes(), Mode::Path).map_err(RequestInfoError::InvalidEscape)?;
    Ok(RequestTarget {
        path: into_string(path),
        raw_query,
        raw_path,
        has_query,
    })
}

/// The first value of each query parameter that the attributes, the list options and the
/// request deadline are read from, decoded as `url.ParseQuery` does (borrowed from the query
/// unless it had to be unescaped).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct ListQuery<'a> {
    /// `watch`
    pub watch: Option<Cow<'a, str>>,
    /// `labelSelector`
    pub label_selector: Option<Cow<'a, str>>,
    /// `fieldSelector`
    pub field_selector: Option<Cow<'a, str>>,
    /// `resourceVersion`
    pub resource_version: Option<Cow<'a, str>>,
    /// `resourceVersionMatch`
    pub resource_version_match: Option<Cow<'a, str>>,
    /// `limit`
    pub limit: Option<Cow<'a, str>>,
    /// `continue`
    pub continue_token: Option<Cow<'a, str>>,
    /// `sendInitialEvents`
    pub send_initial_events: Option<Cow<'a, str>>,
    /// `timeoutSeconds`
    pub timeout_seconds: Option<Cow<'a, str>>,
    /// `timeout` (the request deadline's, not a list option)
    pub timeout: Option<Cow<'a, str>>,
}

impl ListQuery<'_> {
    /// Whether any list option is set (else they are all at their defaults).
    pub fn sets_list_options(&self) -> bool {
        [
            &self.label_selector,
            &self.field_selector,
            &self.resource_version,
            &self.resource_version_match,
            &self.limit,
            &self.continue_token,
            &self.send_initial_events,
            &self.timeout_seconds,
        ]
        .iter()
        .any(|value| value.is_some())
    }
}

/// Mirrors `URL.Query()` (Go ≥ 1.17), keeping only the first value of the parameters in
/// [`ListQuery`] (see [`query_pairs`]).
pub(super) fn parse_query(raw_query: &str) -> ListQuery<'_> {
    let mut query = ListQuery::default();
    if raw_query.is_empty() {
        return query;
    }
    for (key, value) in query_pairs(raw_query) {
        let slot = match &*key {
            b"watch" => &mut query.watch,
            b"labelSelector" => &mut query.label_selector,
            b"fieldSelector" => &mut query.field_selector,
            b"resourceVersion" => &mut query.resource_version,
            b"resourceVersionMatch" => &mut query.resource_version_match,
            b"limit" => &mut query.limit,
            b"continue" => &mut query.continue_token,
            b"sendInitialEvents" => &mut query.send_initial_events,
            b"timeoutSeconds" => &mut query.timeout_seconds,
            b"timeout" => &mut query.timeout,
            _ => continue,
        };
        if slot.is_none() {
            *slot = query_value(value);
        }
    }
    query
}

/// Every parameter of a raw query string, in order, as Go's `url.ParseQuery` decodes them
/// (the pieces it keeps, each value unescaped; a piece whose value does not unescape is left out).
pub fn query_params(raw_query: &str) -> Vec<(String, String)> {
    query_pairs(raw_query)
        .filter_map(|(key, value)| {
            let key = String::from_utf8_lossy(&key).into_owned();
            Some((key, query_value(value)?.into_owned()))
        })
        .collect()
}

/// The pieces of a raw query string (without the `?`) whose keys Go's `url.ParseQuery` (Go ≥
/// 1.17, as `URL.Query()` uses it) keeps, in order: each key unescaped, its value still escaped
/// (unescape it with [`query_value`]; a value that does not unescape drops its piece, so a later
/// piece with the same key becomes the "first").
///
/// Pieces are split on `&` only; an empty piece, one containing `;` and one whose key holds an
/// invalid escape are dropped. `+` decodes to a space. Over [`MAX_QUERY_PARAMS`] parameters,
/// there are none at all.
///
/// The pieces are found by scanning bytes (`&`, `=` and `;` are ASCII), not with `str`'s character
/// patterns, whose set-up outweighs a query of a few dozen bytes.
pub(crate) fn query_pairs(raw_query: &str) -> impl Iterator<Item = (Cow<'_, [u8]>, &str)> {
    let too_many = raw_query.bytes().filter(|&b| b == b'&').count() + 1 > MAX_QUERY_PARAMS;
    let mut rest = (!too_many).then_some(raw_query);
    std::iter::from_fn(move || loop {
        let query = rest?;
        let piece = match query.bytes().position(|b| b == b'&') {
            Some(amp) => {
                rest = Some(&query[amp + 1..]);
                &query[..amp]
            }
            None => {
                rest = None;
                query
            }
        };
        if let Some(pair) = query_pair(piece) {
            return Some(pair);
        }
    })
}

/// One piece of a query (no `&`) as [`query_pairs`] keeps it: `None` when it is empty, holds a
/// `;` or its key does not unescape; else its key unescaped and its value (after the first `=`,
/// empty without one) as it is.
fn query_pair(piece: &str) -> Option<(Cow<'_, [u8]>, &str)> {
    let mut eq = None;
    for (i, b) in piece.bytes().enumerate() {
        match b {
            b';' => return None,
            b'=' if eq.is_none() => eq = Some(i),
            _ => {}
        }
    }
    if piece.is_empty() {
        return None;
    }
    let (key, value) = match eq {
        Some(i) => (&piece[..i], &piece[i + 1..]),
        None => (piece, ""),
    };
    Some((unescape(key.as_bytes(), Mode::QueryComponent).ok()?, value))
}

/// A query value from [`query_pairs`], unescaped (`+` is a space); `None` when it holds an
/// invalid escape. Bytes that are not UTF-8 are replaced (Go keeps them; nothing read from a
/// query here is compared with such bytes).
pub(crate) fn query_value(value: &str) -> Option<Cow<'_, str>> {
    Some(
        match unescape(value.as_bytes(), Mode::QueryComponent).ok()? {
            // Borrowed bytes are a slice of the `&str`, valid as they are.
            Cow::Borrowed(_) => Cow::Borrowed(value),
            Cow::Owned(bytes) => Cow::Owned(
                String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        },
    )
}

/// Which of Go's `unescape` modes applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `encodePath`: `+` is a literal plus.
    Path,
    /// `encodeQueryComponent`: `+` is a space.
    QueryComponent,
}

/// Mirrors Go's `unescape`: every `%` must start a two-digit hex escape, else the error names the
/// offending text (at most three bytes, as `url.EscapeError` does).
fn unescape(s: &[u8], mode: Mode) -> Result<Cow<'_, [u8]>, String> {
    // Most targets have nothing to decode: say so without walking them byte by byte.
    let decodes = s.contains(&b'%') || (mode == Mode::QueryComponent && s.contains(&b'+'));
    if !decodes {
        return Ok(Cow::Borrowed(s));
    }
    let mut needs_decoding = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let valid =
                    s.len() > i + 2 && s[i + 1].is_ascii_hexdigit() && s[i + 2].is_ascii_hexdigit();
                if !valid {
                    let end = s.len().min(i + 3);
                    return Err(String::from_utf8_lossy(&s[i..end]).into_owned());
                }
                needs_decoding = true;
                i += 3;
            }
            b'+' => {
                needs_decoding |= mode == Mode::QueryComponent;
                i += 1;
            }
            _ => i += 1,
        }
    }
    if !needs_decoding {
        return Ok(Cow::Borrowed(s));
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                out.push(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// Mirrors `shouldEscape(c, encodePath)`: everything but unreserved characters and the reserved
/// ones a path may hold (`$&+,/:;=@`).
fn path_byte_needs_escape(b: u8) -> bool {
    !(b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b))
}

/// Mirrors `validEncoded(s, encodePath)`.
fn valid_encoded_path(raw: &str) -> bool {
    raw.bytes()
        .all(|b| b"!$&'()*+,;=:@[]%".contains(&b) || !path_byte_needs_escape(b))
}

/// Mirrors `escape(s, encodePath)`.
fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if path_byte_needs_escape(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

/// The value of an ASCII hex digit (validated by the caller).
fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit.wrapping_sub(b'A').wrapping_add(10),
    }
}

/// Turns decoded bytes into a `String`.
///
/// Go strings may hold invalid UTF-8 after `%`-decoding; ours cannot, so such bytes become
/// U+FFFD. No Kubernetes name, namespace, resource or selector term is valid with them, so
/// classification is unaffected; only the echoed `path` shows the replacement.
fn into_string(bytes: Cow<'_, [u8]>) -> String {
    match bytes {
        // Borrowed bytes are mostly a slice of the `&str` target, valid as they are.
        Cow::Borrowed(b) => match std::str::from_utf8(b) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        },
        Cow::Owned(v) => String::from_utf8(v)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

#[cfg(test)]
mod tests;
