//! What else the apiserver reads from a request's query, decoded once with its attributes: the
//! list options the work estimators read and the `?timeout=` of the request deadline.
//!
//! Mirrors `Convert_url_Values_To_v1_ListOptions` (the first value of each parameter; only
//! `limit` and `timeoutSeconds` can fail to convert) and `request_deadline.go: parseTimeout`
//! (`req.URL.Query().Get("timeout")`, a Go duration). The query is read once, by
//! [`url::parse_query`](super::url::parse_query), for these and for the attributes alike.

use std::time::Duration;

use compact_str::CompactString;

use super::url::ListQuery;
use crate::duration::{parse_signed, DurationError};

/// The options a request's query carries, as flow control reads them. Nothing is allocated
/// for a request whose query sets no list option.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// `None`: every list option at its default.
    list: Option<Box<Result<ListOptions, ListOptionsError>>>,
    /// `?timeout=`.
    timeout: Timeout,
}

/// `metav1.ListOptions` as far as work estimation needs it: the first value of each parameter,
/// unescaped, like the apiserver's conversion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: CompactString,
    /// `fieldSelector`.
    pub field_selector: CompactString,
    /// `resourceVersion`.
    pub resource_version: CompactString,
    /// `resourceVersionMatch`.
    pub resource_version_match: CompactString,
    /// `limit` (0 when absent).
    pub limit: i64,
    /// `continue`.
    pub continue_token: CompactString,
    /// `sendInitialEvents`: absent → `None`; `"0"` or any case of `"false"` → false; anything
    /// else, even empty → true.
    pub send_initial_events: Option<bool>,
}

/// The defaults, for a query that sets no list option.
static DEFAULT_LIST_OPTIONS: ListOptions = ListOptions {
    label_selector: CompactString::const_new(""),
    field_selector: CompactString::const_new(""),
    resource_version: CompactString::const_new(""),
    resource_version_match: CompactString::const_new(""),
    limit: 0,
    continue_token: CompactString::const_new(""),
    send_initial_events: None,
};

/// Why a query does not convert to [`ListOptions`]: `limit` or `timeoutSeconds` is not a
/// base-10 64-bit integer (the only conversions that can fail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid integer {value:?} for query parameter {param}")]
pub struct ListOptionsError {
    /// The parameter name.
    pub param: &'static str,
    /// Its (first) value.
    pub value: String,
}

/// A request's `?timeout=` (`parseTimeout`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Timeout {
    /// Absent or empty (Go's `Get` gives "" for both), zero or negative: the server's timeout
    /// applies.
    #[default]
    Unset,
    /// A positive duration.
    Given(Duration),
    /// Not a Go duration: the apiserver answers 400.
    Invalid(DurationError),
}

// === impl RequestOptions ===

impl RequestOptions {
    /// The options of a raw query string (without the `?`), read as the apiserver reads them.
    pub fn from_query(raw_query: &str) -> RequestOptions {
        RequestOptions::of(&super::url::parse_query(raw_query))
    }

    /// The options of a decoded query.
    pub(super) fn of(query: &ListQuery<'_>) -> RequestOptions {
        RequestOptions {
            list: query
                .sets_list_options()
                .then(|| Box::new(list_options(query))),
            timeout: timeout(query.timeout.as_deref()),
        }
    }

    /// The list options, or why the query does not convert to them.
    pub fn list(&self) -> Result<&ListOptions, &ListOptionsError> {
        match self.list.as_deref() {
            None => Ok(&DEFAULT_LIST_OPTIONS),
            Some(list) => list.as_ref(),
        }
    }

    /// The `?timeout=`.
    pub fn timeout(&self) -> &Timeout {
        &self.timeout
    }
}

/// Mirrors `Convert_url_Values_To_v1_ListOptions` over the first values.
fn list_options(query: &ListQuery<'_>) -> Result<ListOptions, ListOptionsError> {
    let int = |param: &'static str, value: Option<&str>| match value {
        None => Ok(0),
        // `strconv.ParseInt(s, 10, 64)` and Rust's `i64::from_str` accept the same strings.
        Some(v) => v.parse::<i64>().map_err(|_| ListOptionsError {
            param,
            value: v.to_owned(),
        }),
    };
    int("timeoutSeconds", query.timeout_seconds.as_deref())?;
    let text = |value: &Option<std::borrow::Cow<'_, str>>| {
        value
            .as_deref()
            .map_or_else(CompactString::default, CompactString::from)
    };
    Ok(ListOptions {
        label_selector: text(&query.label_selector),
        field_selector: text(&query.field_selector),
        resource_version: text(&query.resource_version),
        resource_version_match: text(&query.resource_version_match),
        limit: int("limit", query.limit.as_deref())?,
        continue_token: text(&query.continue_token),
        send_initial_events: query
            .send_initial_events
            .as_deref()
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false"))),
    })
}

/// Mirrors `parseTimeout` over the first `timeout` value.
fn timeout(value: Option<&str>) -> Timeout {
    match value.filter(|v| !v.is_empty()).map(parse_signed) {
        None => Timeout::Unset,
        Some(Ok((false, d))) if !d.is_zero() => Timeout::Given(d),
        Some(Ok(_)) => Timeout::Unset,
        Some(Err(e)) => Timeout::Invalid(e),
    }
}
