//! Header hygiene: hop-by-hop headers, identity headers a caller could forge, the identity
//! headers the proxy adds, and `X-Forwarded-For`.
//!
//! # A caller's own `Impersonate-*` headers (`kubectl --as`)
//!
//! The pipeline has authorized them already, as the apiserver does (`auth::impersonation`), and
//! the identity it hands over is the effective one (the impersonated user). So:
//!
//! - `passthrough`: forwarded untouched. The upstream authenticates the caller's own token and
//!   authorizes the impersonation again, exactly as without the proxy.
//! - `impersonate` and `requestheader`: removed; the effective identity travels in the mode's
//!   own headers (`Impersonate-*` with the proxy's credentials, or `X-Remote-*`). Forwarding the
//!   caller's as well would ask the upstream to impersonate twice (it has no chained
//!   impersonation) or, in `requestheader` mode, to let the impersonated user impersonate itself.
//!
//! `X-Remote-*` (and the configured requestheader names) are always stripped: only the proxy
//! speaks for a caller's identity.

use std::net::IpAddr;

use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, HOST, PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use http::HeaderMap;

use super::identity::{
    escape_extra_key, ForwardableIdentity, IdentityForwarding, IdentityRefused, RefusalReason,
};
use crate::auth::{
    strip_websocket_bearer_protocol, Identity, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP,
};

/// The `Impersonate-*` header prefix (`authenticationv1.ImpersonateUserHeader` and friends).
const IMPERSONATE_PREFIX: &str = "impersonate-";
/// The `X-Remote-*` prefix of the conventional requestheader names.
const X_REMOTE_PREFIX: &str = "x-remote-";

static IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");
static IMPERSONATE_GROUP: HeaderName = HeaderName::from_static("impersonate-group");
static IMPERSONATE_UID: HeaderName = HeaderName::from_static("impersonate-uid");
static X_REMOTE_USER: HeaderName = HeaderName::from_static("x-remote-user");
static X_REMOTE_GROUP: HeaderName = HeaderName::from_static("x-remote-group");
static X_REMOTE_UID: HeaderName = HeaderName::from_static("x-remote-uid");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
static PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// Identity header names a caller must never send through: the configured requestheader names
/// (`--requestheader-username-headers`, `-uid-headers`, `-group-headers`,
/// `-extra-headers-prefix`) on top of `X-Remote-*`, which is always stripped.
#[derive(Debug, Clone, Default)]
pub struct ForgeableHeaders {
    names: Vec<HeaderName>,
    prefixes: Vec<String>,
}

impl ForgeableHeaders {
    /// Names are matched exactly (case-insensitively), prefixes by prefix; invalid header names
    /// are skipped (no request can carry them).
    pub fn new(names: &[String], prefixes: &[String]) -> Self {
        ForgeableHeaders {
            names: names
                .iter()
                .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
                .collect(),
            prefixes: prefixes.iter().map(|p| p.to_ascii_lowercase()).collect(),
        }
    }

    fn matches(&self, name: &HeaderName) -> bool {
        let name_str = name.as_str();
        name_str.starts_with(X_REMOTE_PREFIX)
            || self.names.contains(name)
            || self.prefixes.iter().any(|p| name_str.starts_with(p))
    }
}

/// Whether the request asks for a protocol upgrade (`Connection: Upgrade` plus `Upgrade`), as
/// `httpstream.IsUpgradeRequest` decides.
pub fn is_upgrade_request(headers: &HeaderMap) -> bool {
    headers.contains_key(UPGRADE) && connection_tokens(headers).any(|t| t == "upgrade")
}

fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = String> + '_ {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
}

/// Removes hop-by-hop headers (RFC 9110 §7.6.1): `Connection` and every header it names,
/// `Keep-Alive`, `Proxy-*`, `TE`, `Trailer`, `Transfer-Encoding`, and `Upgrade` unless
/// `keep_upgrade` (then `Connection: Upgrade` is kept too).
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    strip_hop_by_hop_and(headers, keep_upgrade, |_| false);
}

/// [`strip_hop_by_hop`], plus every header for which `also` holds, in one pass over the names (a
/// `remove` per name that is not there costs a hash each, on every request).
fn strip_hop_by_hop_and(
    headers: &mut HeaderMap,
    keep_upgrade: bool,
    also: impl Fn(&HeaderName) -> bool,
) {
    let listed: Vec<HeaderName> = connection_tokens(headers)
        .filter(|token| !(keep_upgrade && token == "upgrade"))
        .filter_map(|token| HeaderName::from_bytes(token.as_bytes()).ok())
        .collect();
    let doomed: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            HOP_BY_HOP.contains(name)
                || (!keep_upgrade && *name == UPGRADE)
                || listed.contains(name)
                || also(name)
        })
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
    if keep_upgrade {
        headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    }
}

/// Always hop-by-hop (RFC 9110 §7.6.1, and the `Proxy-*`/`Keep-Alive` of RFC 2616's list).
static HOP_BY_HOP: [&HeaderName; 8] = [
    &CONNECTION,
    &KEEP_ALIVE,
    &PROXY_CONNECTION,
    &PROXY_AUTHENTICATE,
    &PROXY_AUTHORIZATION,
    &TE,
    &TRAILER,
    &TRANSFER_ENCODING,
];

/// Prepares a caller's request headers for the upstream in the identity's mode: strips hop-by-hop
/// headers, forged identity headers, `Host` (the client sets the upstream's), and in `impersonate`
/// and `requestheader` modes the caller's `Authorization` and WebSocket token subprotocol; then
/// adds the identity headers of the mode and appends `peer` to `X-Forwarded-For`.
///
/// A caller's own `Impersonate-*` headers stay in `passthrough` mode only (see the module
/// documentation): in the others the identity, already the effective one, replaces them.
///
/// Fails, leaving no identity header added, only when the identity cannot be encoded, which
/// [`ForwardableIdentity::check`] has ruled out already.
pub fn prepare_request_headers(
    headers: &mut HeaderMap,
    identity: &ForwardableIdentity,
    forgeable: &ForgeableHeaders,
    peer: Option<IpAddr>,
    upgrade: bool,
) -> Result<(), IdentityRefused> {
    let mode = identity.mode();
    let speaks_for_caller = mode != IdentityForwarding::Passthrough;
    strip_hop_by_hop_and(headers, upgrade, |name| {
        *name == HOST
            || forgeable.matches(name)
            || (speaks_for_caller && name.as_str().starts_with(IMPERSONATE_PREFIX))
    });
    match mode {
        IdentityForwarding::Passthrough => {}
        IdentityForwarding::Impersonate => {
            remove_caller_credentials(headers);
            add_identity(headers, identity.identity(), &IMPERSONATE_NAMES)?;
        }
        IdentityForwarding::Requestheader => {
            remove_caller_credentials(headers);
            add_identity(headers, identity.identity(), &REQUESTHEADER_NAMES)?;
        }
    }
    if let Some(ip) = peer {
        append_forwarded_for(headers, ip);
    }
    Ok(())
}

/// Removes the caller's bearer token, from `Authorization` and from a WebSocket's
/// `Sec-WebSocket-Protocol` (where kubectl ≥ 1.30 puts it for exec and attach); it stays with the
/// proxy when the proxy speaks for the caller.
fn remove_caller_credentials(headers: &mut HeaderMap) {
    headers.remove(AUTHORIZATION);
    strip_websocket_bearer_protocol(headers);
}

struct IdentityHeaderNames {
    user: &'static HeaderName,
    group: &'static HeaderName,
    uid: &'static HeaderName,
    extra_prefix: &'static str,
    /// Groups the upstream adds itself, left out so that the proxy needs no right to them.
    implied_groups: &'static [&'static str],
}

static IMPERSONATE_NAMES: IdentityHeaderNames = IdentityHeaderNames {
    user: &IMPERSONATE_USER,
    group: &IMPERSONATE_GROUP,
    uid: &IMPERSONATE_UID,
    extra_prefix: "impersonate-extra-",
    // Impersonation adds `system:authenticated` to every user but `system:anonymous`, and
    // `system:unauthenticated` to `system:anonymous` (`impersonation.go`).
    implied_groups: &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP],
};

static REQUESTHEADER_NAMES: IdentityHeaderNames = IdentityHeaderNames {
    user: &X_REMOTE_USER,
    group: &X_REMOTE_GROUP,
    uid: &X_REMOTE_UID,
    extra_prefix: "x-remote-extra-",
    // `AuthenticatedGroupAdder` adds `system:authenticated` after the requestheader
    // authenticator, but nothing for `system:anonymous`: its `system:unauthenticated` is sent.
    implied_groups: &[AUTHENTICATED_GROUP],
};

/// Adds the identity headers, all or none. Groups the apiserver adds itself (`implied_groups`)
/// are left out: sending them would need the right to impersonate those groups.
///
/// Values go as their UTF-8 bytes (see [`super::identity`] for why that is what the apiserver
/// reads back); one that is not a header value, or an extra key that makes no header name, fails
/// the whole identity: a partial one would run the request as someone else.
fn add_identity(
    headers: &mut HeaderMap,
    identity: &Identity,
    names: &IdentityHeaderNames,
) -> Result<(), IdentityRefused> {
    let mut encoded = Vec::with_capacity(2 + identity.groups.len() + identity.extra.len());
    encoded.push((names.user.clone(), header_value(&identity.user, "user")?));
    if !identity.uid.is_empty() {
        encoded.push((names.uid.clone(), header_value(&identity.uid, "uid")?));
    }
    let groups = identity
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| !names.implied_groups.contains(&g.as_str()));
    for (i, group) in groups {
        encoded.push((
            names.group.clone(),
            header_value(group, &format!("groups[{i}]"))?,
        ));
    }
    for (key, values) in &identity.extra {
        let name = format!("{}{}", names.extra_prefix, escape_extra_key(key));
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| IdentityRefused {
            field: format!("extra key {key:?}"),
            reason: RefusalReason::Unencodable,
        })?;
        for (i, value) in values.iter().enumerate() {
            let field = format!("extra[{key:?}][{i}]");
            encoded.push((name.clone(), header_value(value, &field)?));
        }
    }
    for (name, value) in encoded {
        headers.append(name, value);
    }
    Ok(())
}

/// `value` as a header value (never empty).
fn header_value(value: &str, field: &str) -> Result<HeaderValue, IdentityRefused> {
    if value.is_empty() {
        return Err(IdentityRefused {
            field: field.to_string(),
            reason: RefusalReason::Empty,
        });
    }
    HeaderValue::from_bytes(value.as_bytes()).map_err(|_| IdentityRefused {
        field: field.to_string(),
        reason: RefusalReason::ControlCharacter,
    })
}

/// Appends the peer to `X-Forwarded-For` (joining existing values with `, ` as Go's
/// `httputil.ReverseProxy` does).
fn append_forwarded_for(headers: &mut HeaderMap, peer: IpAddr) {
    let mut previous = headers
        .get_all(&X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    let value = if previous.peek().is_none() {
        ip_header_value(peer)
    } else {
        let joined = format!("{}, {peer}", previous.collect::<Vec<_>>().join(", "));
        HeaderValue::from_str(&joined).ok()
    };
    if let Some(value) = value {
        headers.insert(X_FORWARDED_FOR.clone(), value);
    }
}

/// `peer` as a header value; IPv4 without `fmt` (its `Display` pads, and costs as much as the
/// rest of the header preparation).
fn ip_header_value(peer: IpAddr) -> Option<HeaderValue> {
    let IpAddr::V4(v4) = peer else {
        return HeaderValue::from_str(&peer.to_string()).ok();
    };
    let mut text = [0u8; 15];
    let mut len = 0;
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            text[len] = b'.';
            len += 1;
        }
        let digits = [octet / 100, octet / 10 % 10, octet % 10];
        let skip = if octet >= 100 {
            0
        } else if octet >= 10 {
            1
        } else {
            2
        };
        for digit in &digits[skip..] {
            text[len] = b'0' + digit;
            len += 1;
        }
    }
    HeaderValue::from_bytes(&text[..len]).ok()
}

/// Prepares upstream response headers for the caller: hop-by-hop headers go, except the
/// `Connection`/`Upgrade` pair of a `101 Switching Protocols`.
pub fn prepare_response_headers(headers: &mut HeaderMap, switching_protocols: bool) {
    strip_hop_by_hop(headers, switching_protocols);
}

#[cfg(test)]
mod tests;
