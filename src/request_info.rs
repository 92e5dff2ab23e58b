//! Request attributes: method + URL → [`RequestInfo`].
//!
//! Mirrors `k8s.io/apiserver/pkg/endpoints/request/requestinfo.go` with kube-apiserver's resolver
//! settings (`APIPrefixes = {api, apis}`, `GrouplessAPIPrefixes = {api}`), reading the request
//! target the way Go's `net/url` does.
//!
//! Odd paths behave as in the apiserver, which computes request attributes before any routing and
//! never cleans the path:
//! - the path is percent-decoded before it is split, so `%2F` inside a segment splits it
//!   (`/api/v1/namespaces/a%2Fb/pods` is namespace `a`, resource `b`, name `pods`);
//! - `.` and `..` are ordinary segments (`/api/v1/namespaces/../pods` is namespace `..`);
//! - leading and trailing slashes are ignored for parsing (`Path` keeps them), while empty
//!   segments in the middle are kept (`/api//v1/pods` has API version `""`);
//! - `+` is a literal plus in the path, a space in the query;
//! - an invalid escape in the path is an error ([`RequestInfoError::InvalidEscape`], a 400 from
//!   Go's HTTP server); a malformed query pair is silently dropped.

mod label_selector;
mod list_options;
mod options;
mod url;

pub use self::options::{ListOptions, ListOptionsError, RequestOptions, Timeout};
pub use self::url::query_params;

#[cfg(test)]
mod tests;

use compact_str::{CompactString, ToCompactString};
use serde::Serialize;
use smallvec::SmallVec;

use self::url::ListQuery;

/// The attributes of a request that authorization and flow control look at.
///
/// Serialised with the apiserver's JSON names (`isResourceRequest`, `apiGroup`, ...), as the
/// `classify` command prints it. The selectors are kept for authorization-style consumers but not
/// serialised.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestInfo {
    /// Whether the URL names an API resource (as opposed to e.g. `/healthz`).
    pub is_resource_request: bool,
    /// The percent-decoded URL path, trailing slash kept. Decoded bytes that are not UTF-8 (which
    /// Go keeps) become U+FFFD; no valid Kubernetes name can contain either.
    pub path: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, ...) or, for non-resource requests,
    /// the lowercased HTTP method.
    pub verb: CompactString,
    /// `api` or `apis` (set even for some non-resource results, as the apiserver does).
    pub api_prefix: CompactString,
    /// The API group; `""` for the core group.
    pub api_group: CompactString,
    /// The API version, e.g. `v1`.
    pub api_version: CompactString,
    /// The namespace, or `""` for cluster-scoped and all-namespace requests.
    pub namespace: CompactString,
    /// The resource, e.g. `pods`.
    pub resource: CompactString,
    /// The subresource, e.g. `status` or `exec`.
    pub subresource: CompactString,
    /// The object name: the path segment after the resource or, for a collection GET whose query
    /// decodes, the value of its first (in sorted order) `metadata.name=`/`==` field selector
    /// term when that is a valid path segment name (not `.`/`..`, no `/` or `%`).
    pub name: CompactString,
    /// The path segments after the namespace part (`None` for non-resource requests, serialised
    /// as `null` like Go's nil slice).
    pub parts: Option<Vec<CompactString>>,
    /// The raw `fieldSelector` of list, watch and deletecollection requests.
    #[serde(skip)]
    pub field_selector: CompactString,
    /// The raw `labelSelector` of list, watch and deletecollection requests.
    #[serde(skip)]
    pub label_selector: CompactString,
    /// The list options and `?timeout=` of its query, whatever the verb: what flow control
    /// reads of the query, decoded with the attributes.
    #[serde(skip)]
    pub options: RequestOptions,
}

/// Why no [`RequestInfo`] could be derived. The apiserver answers these with an error status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestInfoError {
    /// `/api/v1/watch` or `/api/v1/proxy` with nothing after it. The apiserver's RequestInfo
    /// filter answers this with 500 ("failed to create RequestInfo").
    #[error("unable to determine kind and namespace from url, {0}")]
    NoKindAndNamespace(String),
    /// The path holds an invalid percent escape (the offending text, at most three bytes, as
    /// Go's `url.EscapeError`); Go's HTTP server answers 400 before any handler runs.
    #[error("invalid URL escape {0:?}")]
    InvalidEscape(String),
    /// The request target is neither an absolute path nor `*` (e.g. empty, or an authority), or
    /// holds an ASCII control character, which Go's `net/url` rejects (400).
    #[error("invalid request target {0:?}")]
    InvalidTarget(String),
}

/// `specialVerbs` other than `proxy`, which also never has a subresource.
const VERB_WATCH: &str = "watch";
/// `specialVerbsNoSubresources`.
const VERB_PROXY: &str = "proxy";
/// `namespaceSubresources`: after `/namespaces/{name}/`, these are subresources of the namespace
/// rather than a namespaced resource.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];
/// `verbsWithSelectors`.
const VERBS_WITH_SELECTORS: [&str; 3] = ["list", "watch", "deletecollection"];
/// kube-apiserver's long-running verbs (`pkg/controlplane/apiserver/config.go`).
const LONG_RUNNING_VERBS: [&str; 2] = ["watch", "proxy"];
/// kube-apiserver's long-running subresources.
const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];

/// Derives the request attributes of `method` on the HTTP request target `target` (path and
/// optional `?query`, as `Uri::path_and_query` gives it).
///
/// Mirrors `RequestInfoFactory.NewRequestInfo`, step for step:
/// 1. non-resource by default: `path`, lowercased method as verb;
/// 2. resource requests are `/api/{version}/...` and `/apis/{group}/{version}/...` with at least
///    one segment after the version; `/apis/{x}/{y}` is non-resource but keeps `api_prefix`, as
///    in Go;
/// 3. a `watch` or `proxy` segment right after the version is the verb (error if nothing
///    follows); otherwise POST/GET/HEAD/PUT/PATCH/DELETE map to create/get/get/update/patch/delete
///    (case-sensitive, as Go compares methods) and any other method to `""`;
/// 4. `namespaces/{ns}/...` sets the namespace; `{resource}/{name}/{subresource}/...` follow;
/// 5. a `get` without a name is `list` or `watch` per the query (see [`RequestInfo::name`] for the
///    `metadata.name` field selector); a `delete` without a name is `deletecollection`;
/// 6. list/watch/deletecollection not named by a path prefix record the raw selectors.
///
/// Never panics. Differences from Go: see [`RequestInfoError`] for rejected targets, and
/// [`RequestInfo::path`] for bytes that are not UTF-8.
pub fn parse(method: &str, target: &str) -> Result<RequestInfo, RequestInfoError> {
    let target = url::parse_request_target(target)?;
    // The query is decoded once, for the attributes and the options alike.
    let query = url::parse_query(target.raw_query);
    let attributes = resolve(method, &target.path, &query)
        .map_err(|NoKindAndNamespace| RequestInfoError::NoKindAndNamespace(target.go_string()))?;
    Ok(RequestInfo {
        path: target.path,
        options: RequestOptions::of(&query),
        ..attributes
    })
}

/// The value a field selector requires `field` to equal exactly (`field=v` or `field==v`), or
/// `None` when it does not (including when the selector does not parse): the one reading of
/// field selectors, shared with the attributes' `metadata.name`.
pub fn field_requires_exact_match(selector: &str, field: &str) -> Option<String> {
    list_options::exact_match(selector, field)
        .ok()
        .flatten()
        .map(std::borrow::Cow::into_owned)
}

/// Whether `labels.Parse` accepts `selector` (for the fuzz targets).
#[cfg(feature = "fuzzing")]
pub(crate) fn label_selector_is_valid(selector: &str) -> bool {
    label_selector::is_valid(selector)
}

/// The value of `selector`'s exact `field` term as `fields.ParseSelector(selector)
/// .RequiresExactMatch(field)` finds it, or `None` when the selector does not parse (for the fuzz
/// targets).
#[cfg(feature = "fuzzing")]
pub(crate) fn field_selector_exact_match(selector: &str, field: &str) -> Option<Option<String>> {
    list_options::exact_match(selector, field)
        .ok()
        .map(|found| found.map(std::borrow::Cow::into_owned))
}

/// Whether kube-apiserver treats the request as long-running: verb `watch` or `proxy`, a resource
/// request for the `attach`, `exec`, `proxy`, `log` or `portforward` subresource, or a
/// non-resource request under `/debug/pprof/`.
///
/// Mirrors `pkg/server/filters/longrunning.go` (`BasicLongRunningRequestCheck`) with the sets
/// kube-apiserver configures; the generic server's default is only `watch`.
pub fn is_long_running(info: &RequestInfo) -> bool {
    LONG_RUNNING_VERBS.contains(&info.verb.as_str())
        || (info.is_resource_request
            && LONG_RUNNING_SUBRESOURCES.contains(&info.subresource.as_str()))
        || (!info.is_resource_request && info.path.starts_with("/debug/pprof/"))
}

/// Whether a request with this verb only reads (`get`, `list`, `watch`); every other verb is
/// mutating. Mirrors `pkg/endpoints/metrics` (`readOnlyKind` / `mutatingKind`) and the
/// `isMutatingRequest` split of the max-in-flight filter.
pub fn is_read_only_verb(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

/// `/{prefix}/.../{version}/watch` or `.../proxy` with nothing after it.
struct NoKindAndNamespace;

/// A non-resource result; `api_prefix` is set only for `/apis/{x}/{y}`, as in Go.
fn non_resource(method: &str, api_prefix: &str) -> RequestInfo {
    RequestInfo {
        verb: method.to_lowercase().into(),
        api_prefix: api_prefix.into(),
        ..RequestInfo::default()
    }
}

/// Steps 2–6 of [`parse`] over the decoded `path`; the result's `path` is left empty.
fn resolve(
    method: &str,
    path: &str,
    query: &ListQuery<'_>,
) -> Result<RequestInfo, NoKindAndNamespace> {
    let trimmed = path.trim_matches('/');
    let segments = split_segments(trimmed);
    let (api_prefix, api_group, api_version, rest) = match segments.as_slice() {
        [prefix @ "api", version, rest @ ..] if !rest.is_empty() => (*prefix, "", *version, rest),
        [prefix @ "apis", group, version, rest @ ..] if !rest.is_empty() => {
            (*prefix, *group, *version, rest)
        }
        // `/apis/{group}/{version}` and `/apis/{version}/{resource}`: Go has set the prefix by now.
        [prefix @ "apis", _, _] => return Ok(non_resource(method, prefix)),
        _ => return Ok(non_resource(method, "")),
    };
    let (verb, verb_via_path_prefix, rest) = match rest {
        [VERB_WATCH | VERB_PROXY] => return Err(NoKindAndNamespace),
        [special @ (VERB_WATCH | VERB_PROXY), rest @ ..] => ((*special).into(), true, rest),
        _ => (
            CompactString::const_new(verb_for_method(method)),
            false,
            rest,
        ),
    };
    let (namespace, parts) = match rest {
        ["namespaces", namespace, next, ..] if !NAMESPACE_SUBRESOURCES.contains(next) => {
            (*namespace, &rest[2..])
        }
        ["namespaces", namespace, ..] => (*namespace, rest),
        _ => ("", rest),
    };
    let part = |i: usize| {
        parts
            .get(i)
            .map_or_else(CompactString::default, |s| (*s).into())
    };
    let subresource = if verb == VERB_PROXY {
        CompactString::default()
    } else {
        part(2)
    };
    let mut info = RequestInfo {
        is_resource_request: true,
        api_prefix: api_prefix.into(),
        api_group: api_group.into(),
        api_version: api_version.into(),
        namespace: namespace.into(),
        resource: part(0),
        name: part(1),
        subresource,
        parts: Some(parts.iter().map(|s| (*s).into()).collect()),
        verb,
        ..RequestInfo::default()
    };
    apply_query(&mut info, verb_via_path_prefix, query);
    Ok(info)
}

/// `trimmed.split('/')` (nothing for an empty path), on the stack for all but the deepest paths.
///
/// A byte scan: `str::split` with a `char` pattern sets up a `memchr` search per segment, which
/// for segments of a few bytes cost ~700 instructions per request (callgrind); `/` is ASCII, so
/// every split point is a char boundary.
fn split_segments(trimmed: &str) -> SmallVec<[&str; 16]> {
    let mut segments = SmallVec::new();
    if trimmed.is_empty() {
        return segments;
    }
    let mut start = 0;
    for (i, byte) in trimmed.bytes().enumerate() {
        if byte == b'/' {
            segments.push(&trimmed[start..i]);
            start = i + 1;
        }
    }
    segments.push(&trimmed[start..]);
    segments
}

/// The verb of a resource request by HTTP method (Go compares methods case-sensitively).
fn verb_for_method(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Steps 5 and 6 of [`parse`]: collection verbs and the selectors recorded for them.
fn apply_query(info: &mut RequestInfo, verb_via_path_prefix: bool, query: &ListQuery<'_>) {
    if info.name.is_empty() && info.verb == "get" {
        let decision = list_options::decide(query);
        info.verb = CompactString::const_new(if decision.watch { "watch" } else { "list" });
        if let Some(name) = decision.selected_name.filter(|n| is_path_segment_name(n)) {
            info.name = name.to_compact_string();
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = CompactString::const_new("deletecollection");
    }
    if !verb_via_path_prefix && VERBS_WITH_SELECTORS.contains(&info.verb.as_str()) {
        info.field_selector = query.field_selector.as_deref().unwrap_or_default().into();
        info.label_selector = query.label_selector.as_deref().unwrap_or_default().into();
    }
}

/// Mirrors `content.IsPathSegmentName`: not `.` or `..`, no `/` and no `%` (empty is allowed).
fn is_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains(['/', '%'])
}
