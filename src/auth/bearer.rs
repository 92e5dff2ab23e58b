//! `Authorization: Bearer <token>`. Mirrors `pkg/authentication/request/bearertoken/bearertoken.go`.

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName};

use super::secret::Secret;

/// What the `Authorization` header offers the token authenticators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BearerToken {
    /// No header, another scheme, or an empty token: no opinion, the next authenticator runs.
    Absent,
    /// A token to authenticate.
    Token(Secret),
    /// A bearer token that is not UTF-8: rejected like a token no authenticator accepts.
    Malformed,
}

/// Reads the first `Authorization` value: trimmed, split on single spaces into at most three
/// parts, scheme compared case-insensitively, the second part the token (a third part is
/// ignored). `Bearer  tok` (two spaces) has an empty token and is ignored, as in the apiserver
/// (which adds a warning).
pub(crate) fn bearer_token(headers: &HeaderMap) -> BearerToken {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return BearerToken::Absent;
    };
    let bytes = trim_ascii(value.as_bytes());
    let mut parts = bytes.splitn(3, |b| *b == b' ');
    let (Some(scheme), Some(token)) = (parts.next(), parts.next()) else {
        return BearerToken::Absent;
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") || token.is_empty() {
        return BearerToken::Absent;
    }
    match std::str::from_utf8(token) {
        Ok(token) => BearerToken::Token(Secret::new(token)),
        Err(_) => BearerToken::Malformed,
    }
}

// Header values cannot hold non-ASCII whitespace that Go's TrimSpace would also strip in a
// way that matters here: the scheme and the separator are ASCII.
fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// Whether `name` carries a bearer credential (`Authorization`). The apiserver removes it once
/// a request is authenticated; the proxy forwards it only in `passthrough` identity mode.
pub fn is_credential_header(name: &HeaderName) -> bool {
    name == AUTHORIZATION
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn parse(values: &[&[u8]]) -> BearerToken {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(
                AUTHORIZATION,
                HeaderValue::from_bytes(v).expect("test value"),
            );
        }
        bearer_token(&headers)
    }

    fn token(t: &str) -> BearerToken {
        BearerToken::Token(Secret::new(t))
    }

    #[test]
    fn parses_authorization_like_the_apiserver() {
        let cases: &[(&[&[u8]], BearerToken)] = &[
            (&[], BearerToken::Absent),
            (&[b"Bearer abc"], token("abc")),
            (&[b"bearer abc"], token("abc")),
            (&[b"BEARER abc"], token("abc")),
            (&[b"  Bearer abc  "], token("abc")),
            (&[b"Bearer abc def"], token("abc")),
            (&[b"Bearer  abc"], BearerToken::Absent),
            (&[b"Bearer "], BearerToken::Absent),
            (&[b"Bearer"], BearerToken::Absent),
            (&[b"Basic YWxpY2U6cHc="], BearerToken::Absent),
            (&[b"Bearer\tabc"], BearerToken::Absent),
            (&[b""], BearerToken::Absent),
            (&[b"Basic x", b"Bearer abc"], BearerToken::Absent),
            (&[b"Bearer first", b"Bearer second"], token("first")),
            (&[b"Bearer \xff\xfe"], BearerToken::Malformed),
        ];
        for (values, want) in cases {
            assert_eq!(&parse(values), want, "{values:?}");
        }
    }

    #[test]
    fn only_authorization_is_a_credential_header() {
        assert!(is_credential_header(&AUTHORIZATION));
        assert!(!is_credential_header(&HeaderName::from_static(
            "x-remote-user"
        )));
    }
}
