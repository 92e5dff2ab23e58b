//! A caller's own `Impersonate-*` headers (`kubectl --as`), authorized and applied as the
//! apiserver's impersonation filter does, between authentication and flow control.
//!
//! Mirrors the legacy mode of `k8s.io/apiserver/pkg/endpoints/filters/impersonation`
//! (`WithImpersonation`, and its reimplementation `legacyImpersonationMode` in `mode.go`):
//!
//! - What is asked for: `Impersonate-User` (its first value; empty is none), every
//!   `Impersonate-Group` value, `Impersonate-Uid` (its first value) and every
//!   `Impersonate-Extra-<key>` value, the key lower-cased and then percent-decoded. A group, UID
//!   or extra without a user is `400 BadRequest`.
//! - One SubjectAccessReview per attribute, with the authenticated caller as the subject and verb
//!   `impersonate`, in the apiserver's order: the user (`users` in the core group, name = user;
//!   or, for `system:serviceaccount:NS:NAME`, `serviceaccounts` named NAME in namespace NS), the
//!   UID (`uids` in `authentication.k8s.io`), each group (`groups` in the core group), each extra
//!   value (`userextras` in `authentication.k8s.io`, subresource = key, name = value). The first
//!   denial ends it: `403 Forbidden` with the apiserver's message (`users "alice" is forbidden:
//!   User "bob" cannot impersonate resource "users" in API group "" at the cluster scope`). A
//!   review that fails (no answer, an error) denies too, as an authorizer error does there.
//! - The effective identity: the requested user, UID, groups and extras; a service account
//!   without requested groups gets `system:serviceaccounts` and `system:serviceaccounts:NS`;
//!   then `system:unauthenticated` is added for `system:anonymous`, and `system:authenticated`
//!   for anyone else unless the groups hold `system:unauthenticated`.
//!
//! Reviews go through the [`Authorizer`] (its cache, allowed and denied TTLs, coalescing), so a
//! tool that impersonates the same users over and over sends a review per attribute once per TTL.
//!
//! Differences: kube-apiserver 1.36+ first tries the constrained impersonation modes of KEP-5284
//! (`impersonate:user-info`, `impersonate:serviceaccount`, node modes, with
//! `impersonate-on:<mode>:<verb>` on the request itself) and falls back to this legacy mode; the
//! proxy judges by the legacy `impersonate` verb only, so a caller allowed nothing but a
//! constrained mode is refused by the proxy where the apiserver would serve it. A header value
//! that is not UTF-8 is `400` (the apiserver takes the bytes as they are).

use std::collections::BTreeMap;

use http::HeaderMap;

use super::authorize::{Attributes, Authorizer, Decision, ResourceRequest};
use super::{Identity, ANONYMOUS_USER, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP};

/// `Impersonate-User`.
pub const IMPERSONATE_USER_HEADER: &str = "impersonate-user";
/// `Impersonate-Group` (one value per group).
pub const IMPERSONATE_GROUP_HEADER: &str = "impersonate-group";
/// `Impersonate-Uid`.
pub const IMPERSONATE_UID_HEADER: &str = "impersonate-uid";
/// `Impersonate-Extra-<key>` (the key percent-encoded).
pub const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// What a caller's `Impersonate-*` headers ask for, as read from them (nothing defaulted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// `Impersonate-User` (never empty).
    pub user: String,
    /// `Impersonate-Uid`; empty when not asked for.
    pub uid: String,
    /// Every `Impersonate-Group` value, in order.
    pub groups: Vec<String>,
    /// `Impersonate-Extra-*`: decoded key → values, in order.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why an impersonation is not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImpersonationError {
    /// The headers do not make a request (`400 BadRequest`).
    #[error("{0}")]
    BadRequest(String),
    /// The caller may not impersonate what it asked for (`403 Forbidden`); the apiserver's
    /// message.
    #[error("{0}")]
    Forbidden(String),
}

/// The impersonation the headers ask for; `None` without `Impersonate-*` headers (the apiserver
/// ignores a lone empty `Impersonate-User`).
pub fn requested(headers: &HeaderMap) -> Result<Option<Requested>, ImpersonationError> {
    let first = |name: &str| -> Result<String, ImpersonationError> {
        headers
            .get(name)
            .map_or(Ok(String::new()), |v| utf8(name, v))
    };
    let user = first(IMPERSONATE_USER_HEADER)?;
    let uid = first(IMPERSONATE_UID_HEADER)?;
    let groups = headers
        .get_all(IMPERSONATE_GROUP_HEADER)
        .iter()
        .map(|v| utf8(IMPERSONATE_GROUP_HEADER, v))
        .collect::<Result<Vec<_>, _>>()?;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut has_extra = false;
    for name in headers.keys() {
        let Some(encoded) = name.as_str().strip_prefix(IMPERSONATE_EXTRA_PREFIX) else {
            continue;
        };
        has_extra = true;
        let key = unescape_extra_key(encoded).ok_or_else(|| {
            ImpersonationError::BadRequest(format!(
                "the extra key of header {name:?} is not UTF-8 once decoded"
            ))
        })?;
        let values = extra.entry(key).or_default();
        for value in headers.get_all(name) {
            values.push(utf8(name.as_str(), value)?);
        }
    }
    if user.is_empty() {
        if !uid.is_empty() || !groups.is_empty() || has_extra {
            return Err(ImpersonationError::BadRequest(
                "requested impersonation of groups, a UID or extras without impersonating a user name"
                    .to_string(),
            ));
        }
        return Ok(None);
    }
    Ok(Some(Requested {
        user,
        uid,
        groups,
        extra,
    }))
}

fn utf8(name: &str, value: &http::HeaderValue) -> Result<String, ImpersonationError> {
    std::str::from_utf8(value.as_bytes())
        .map(str::to_owned)
        .map_err(|_| ImpersonationError::BadRequest(format!("header {name:?} is not UTF-8")))
}

/// The key of an `Impersonate-Extra-` header name (already lower-case), percent-decoded as Go's
/// `url.PathUnescape`; a malformed escape keeps the key as it is, as the apiserver does. `None`
/// when the decoded bytes are not UTF-8.
fn unescape_extra_key(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = match bytes.get(i + 1..i + 3) {
                Some([hi, lo]) if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
                    std::str::from_utf8(&bytes[i + 1..i + 3])
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                }
                _ => None,
            };
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => return Some(encoded.to_owned()),
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The namespace and name of a service account's user name, as `serviceaccount.SplitUsername`
/// reads them (a DNS-1123 label and a DNS-1123 subdomain).
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let mut parts = rest.split(':');
    let (namespace, name) = (parts.next()?, parts.next()?);
    if parts.next().is_some() || !is_dns_label(namespace) || !is_dns_subdomain(name) {
        return None;
    }
    Some((namespace, name))
}

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

fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_label_syntax(s)
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_syntax)
}

/// The reviews the apiserver makes for `requested`, in its order.
fn reviews(requested: &Requested) -> Vec<ResourceRequest> {
    let impersonate = |group: &str, version: &str, resource: &str, name: &str| ResourceRequest {
        verb: "impersonate".to_string(),
        group: group.to_string(),
        version: version.to_string(),
        resource: resource.to_string(),
        name: name.to_string(),
        ..ResourceRequest::default()
    };
    let mut out = Vec::with_capacity(2 + requested.groups.len() + requested.extra.len());
    out.push(match split_service_account(&requested.user) {
        Some((namespace, name)) => ResourceRequest {
            namespace: namespace.to_string(),
            ..impersonate("", "v1", "serviceaccounts", name)
        },
        None => impersonate("", "v1", "users", &requested.user),
    });
    if !requested.uid.is_empty() {
        out.push(impersonate(
            "authentication.k8s.io",
            "v1",
            "uids",
            &requested.uid,
        ));
    }
    for group in &requested.groups {
        out.push(impersonate("", "v1", "groups", group));
    }
    for (key, values) in &requested.extra {
        for value in values {
            out.push(ResourceRequest {
                subresource: key.clone(),
                ..impersonate("authentication.k8s.io", "v1", "userextras", value)
            });
        }
    }
    out
}

/// The identity the apiserver serves `requested` as, once every review allowed it.
pub fn effective_identity(requested: &Requested) -> Identity {
    let mut groups = requested.groups.clone();
    if groups.is_empty() {
        if let Some((namespace, _)) = split_service_account(&requested.user) {
            groups = vec![
                ALL_SERVICE_ACCOUNTS_GROUP.to_string(),
                format!("{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}"),
            ];
        }
    }
    let ensure = |groups: &mut Vec<String>, group: &str| {
        if !groups.iter().any(|g| g == group) {
            groups.push(group.to_string());
        }
    };
    if requested.user == ANONYMOUS_USER {
        ensure(&mut groups, UNAUTHENTICATED_GROUP);
    } else if !groups.iter().any(|g| g == UNAUTHENTICATED_GROUP) {
        ensure(&mut groups, AUTHENTICATED_GROUP);
    }
    Identity {
        user: requested.user.clone(),
        uid: requested.uid.clone(),
        groups,
        extra: requested.extra.clone(),
    }
}

/// Authorizes `requested` for `requestor`, one review per attribute, and returns the identity
/// the request runs as.
pub async fn impersonate(
    authorizer: &Authorizer,
    requestor: &Identity,
    requested: &Requested,
) -> Result<Identity, ImpersonationError> {
    for review in reviews(requested) {
        let answer = authorizer
            .authorize_attributes(requestor, Attributes::Resource(review.clone()))
            .await;
        let reason = match answer {
            Ok(answer) if answer.decision == Decision::Allowed => continue,
            Ok(answer) => match answer.decision {
                Decision::Denied { reason } => reason,
                Decision::Allowed => String::new(),
            },
            Err(error) => error.to_string(),
        };
        return Err(ImpersonationError::Forbidden(forbidden_message(
            &requestor.user,
            &review,
            &reason,
        )));
    }
    Ok(effective_identity(requested))
}

/// `responsewriters.ForbiddenStatusError` wrapped by `apierrors.NewForbidden`, for a resource
/// request.
pub fn forbidden_message(user: &str, review: &ResourceRequest, reason: &str) -> String {
    let mut resource = review.resource.clone();
    if !review.subresource.is_empty() {
        resource = format!("{resource}/{}", review.subresource);
    }
    let scope = if review.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", review.namespace)
    };
    let mut why = format!(
        "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        review.verb, review.group
    );
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    // `GroupResource.String()`: `resource.group`, or the resource alone in the core group.
    let qualified = if review.group.is_empty() {
        review.resource.clone()
    } else {
        format!("{}.{}", review.resource, review.group)
    };
    if review.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", review.name)
    }
}

#[cfg(test)]
mod tests;
