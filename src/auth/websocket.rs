//! Bearer tokens carried as a WebSocket subprotocol,
//! `base64url.bearer.authorization.k8s.io.<base64url(token), unpadded>` (how browsers pass a
//! token). Mirrors `pkg/authentication/request/websocket/protocol.go`.

use http::header::{CONNECTION, SEC_WEBSOCKET_PROTOCOL, UPGRADE};
use http::{HeaderMap, HeaderValue};

use super::secret::Secret;

const BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// What the `Sec-WebSocket-Protocol` header offers the token authenticators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProtocolToken {
    /// Not a WebSocket request, or no token subprotocol: no opinion.
    Absent,
    /// A token to authenticate.
    Token(Secret),
    /// A malformed token subprotocol: an error, with the apiserver's text.
    Invalid(&'static str),
}

/// Reads the token subprotocol of a WebSocket upgrade request.
pub(crate) fn protocol_token(headers: &HeaderMap) -> ProtocolToken {
    if !is_websocket_request(headers) {
        return ProtocolToken::Absent;
    }
    let mut token = None;
    let mut others = 0;
    for protocol in protocols(headers) {
        let Some(encoded) = protocol.strip_prefix(BEARER_PROTOCOL_PREFIX) else {
            others += 1;
            continue;
        };
        if token.is_some() {
            return ProtocolToken::Invalid("multiple base64.bearer.authorization tokens specified");
        }
        let Some(decoded) = decode_base64url(encoded) else {
            return ProtocolToken::Invalid("invalid base64.bearer.authorization token encoding");
        };
        let Ok(decoded) = String::from_utf8(decoded) else {
            return ProtocolToken::Invalid("invalid base64.bearer.authorization token");
        };
        token = Some(decoded);
    }
    match token.filter(|t| !t.is_empty()) {
        None => ProtocolToken::Absent,
        Some(_) if others == 0 => ProtocolToken::Invalid("missing additional subprotocol"),
        Some(t) => ProtocolToken::Token(Secret::new(t)),
    }
}

/// Removes the token subprotocol from `Sec-WebSocket-Protocol`, keeping the others, as the
/// apiserver does once the token is authenticated. For the proxy's identity modes that must not
/// forward the client's token.
pub fn strip_websocket_bearer_protocol(headers: &mut HeaderMap) {
    let mut saw_token = false;
    let mut kept = Vec::new();
    for protocol in protocols(headers) {
        if protocol.starts_with(BEARER_PROTOCOL_PREFIX) {
            saw_token = true;
        } else {
            kept.push(protocol.to_string());
        }
    }
    if !saw_token {
        return;
    }
    headers.remove(SEC_WEBSOCKET_PROTOCOL);
    // The kept values came from header values split on commas, so they are valid again.
    if let Ok(value) = HeaderValue::from_str(&kept.join(",")) {
        headers.insert(SEC_WEBSOCKET_PROTOCOL, value);
    }
}

// Every comma-separated, trimmed subprotocol of every `Sec-WebSocket-Protocol` value.
fn protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// Mirrors `wsstream.IsWebSocketRequest`: `Upgrade: websocket` and `upgrade` among the
/// `Connection` tokens (first values only, as Go's `Header.Get`).
fn is_websocket_request(headers: &HeaderMap) -> bool {
    let upgrade = headers.get(UPGRADE).map(HeaderValue::as_bytes);
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case(b"websocket")) {
        return false;
    }
    let connection = headers
        .get(CONNECTION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    connection.split(',').any(|t| {
        t.trim_matches(|c: char| c.is_ascii_whitespace())
            .eq_ignore_ascii_case("upgrade")
    })
}

/// Go's `base64.RawURLEncoding.DecodeString` (unpadded URL alphabet, non-strict).
fn decode_base64url(input: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in input.bytes().filter(|c| *c != b'\r' && *c != b'\n') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover character (6 bits) cannot encode a byte.
    (bits < 6).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(protocols: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        for p in protocols {
            h.append(
                SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_str(p).expect("value"),
            );
        }
        h
    }

    const TOKEN: &str = "base64url.bearer.authorization.k8s.io.bXktdG9rZW4"; // "my-token"

    #[test]
    fn reads_the_token_subprotocol() {
        let cases: Vec<(HeaderMap, ProtocolToken)> = vec![
            (
                ws(&[&format!("v5.channel.k8s.io, {TOKEN}")]),
                ProtocolToken::Token(Secret::new("my-token")),
            ),
            (
                ws(&["v5.channel.k8s.io", TOKEN]),
                ProtocolToken::Token(Secret::new("my-token")),
            ),
            (ws(&["v5.channel.k8s.io"]), ProtocolToken::Absent),
            (
                ws(&[TOKEN]),
                ProtocolToken::Invalid("missing additional subprotocol"),
            ),
            (
                ws(&[&format!("a,{TOKEN},{TOKEN}")]),
                ProtocolToken::Invalid("multiple base64.bearer.authorization tokens specified"),
            ),
            (
                ws(&["a,base64url.bearer.authorization.k8s.io.b!d"]),
                ProtocolToken::Invalid("invalid base64.bearer.authorization token encoding"),
            ),
            (
                ws(&["a,base64url.bearer.authorization.k8s.io.__8"]),
                ProtocolToken::Invalid("invalid base64.bearer.authorization token"),
            ),
            (
                ws(&["a,base64url.bearer.authorization.k8s.io."]),
                ProtocolToken::Absent,
            ),
        ];
        for (headers, want) in cases {
            assert_eq!(protocol_token(&headers), want, "{headers:?}");
        }
    }

    #[test]
    fn only_websocket_upgrades_are_considered() {
        let mut h = ws(&[&format!("a,{TOKEN}")]);
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive"));
        assert_eq!(protocol_token(&h), ProtocolToken::Absent);
        let mut h = ws(&[&format!("a,{TOKEN}")]);
        h.insert(UPGRADE, HeaderValue::from_static("h2c"));
        assert_eq!(protocol_token(&h), ProtocolToken::Absent);
    }

    #[test]
    fn strips_only_the_token_subprotocol() {
        let mut h = ws(&[&format!("v5.channel.k8s.io, {TOKEN}"), "v4.channel.k8s.io"]);
        strip_websocket_bearer_protocol(&mut h);
        let values: Vec<&str> = h
            .get_all(SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .map(|v| v.to_str().expect("ascii"))
            .collect();
        assert_eq!(values, vec!["v5.channel.k8s.io,v4.channel.k8s.io"]);
        let mut untouched = ws(&["a, b"]);
        strip_websocket_bearer_protocol(&mut untouched);
        assert_eq!(untouched.get(SEC_WEBSOCKET_PROTOCOL).expect("kept"), "a, b");
    }

    #[test]
    fn decodes_unpadded_base64url_like_go() {
        let cases: [(&str, Option<&[u8]>); 7] = [
            ("", Some(b"")),
            ("bXktdG9rZW4", Some(b"my-token")),
            ("YQ", Some(b"a")),
            ("YWI", Some(b"ab")),
            ("-_8", Some(&[0xfb, 0xff])),
            ("Y", None),
            ("YQ==", None),
        ];
        for (input, want) in cases {
            assert_eq!(decode_base64url(input).as_deref(), want, "{input}");
        }
    }
}
