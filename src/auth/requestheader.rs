//! Front-proxy authentication: identity in request headers, trusted only from a front proxy
//! whose client certificate verifies against the requestheader CA.
//!
//! Mirrors `pkg/authentication/request/headerrequest/requestheader.go` wrapped in
//! `x509.Verifier` (`NewDynamicVerifyOptionsSecure`). Differs: a header value that is not UTF-8
//! is an error (an [`Identity`] holds strings; Go would carry the raw bytes).

use http::{HeaderMap, HeaderName};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::config::{AuthConfigError, RequestHeaderConfig};
use super::error::{CertError, RequestHeaderError};
use super::x509::{CaBundle, VerifiedLeaf};
use super::Identity;

/// The headers the apiserver's authentication filter always clears (`standardRequestHeaderConfig`).
const STANDARD_HEADERS: [&str; 3] = ["x-remote-user", "x-remote-uid", "x-remote-group"];
const STANDARD_EXTRA_PREFIX: &str = "x-remote-extra-";

/// The requestheader authenticator, built from a [`RequestHeaderConfig`].
pub(crate) struct RequestHeaderAuthenticator {
    ca: CaBundle,
    allowed_names: Vec<String>,
    username_headers: Vec<HeaderName>,
    uid_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    // Lower-case, as `HeaderName::as_str` is.
    extra_prefixes: Vec<String>,
}

impl RequestHeaderAuthenticator {
    /// Loads the CA and validates the header names (`trimHeaders`, `checkForWhiteSpaceOnly`).
    pub(crate) fn new(cfg: &RequestHeaderConfig) -> Result<Self, AuthConfigError> {
        let ca = CaBundle::load("--requestheader-client-ca-file", &cfg.client_ca_file)?;
        let allowed_names = cfg
            .allowed_names
            .iter()
            .map(|n| {
                if n.trim().is_empty() {
                    Err(header_error(
                        "--requestheader-allowed-names",
                        n,
                        "empty value",
                    ))
                } else {
                    Ok(n.clone())
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(RequestHeaderAuthenticator {
            ca,
            allowed_names,
            username_headers: header_names(
                "--requestheader-username-headers",
                &cfg.username_headers,
            )?,
            uid_headers: header_names("--requestheader-uid-headers", &cfg.uid_headers)?,
            group_headers: header_names("--requestheader-group-headers", &cfg.group_headers)?,
            extra_prefixes: header_names(
                "--requestheader-extra-headers-prefix",
                &cfg.extra_headers_prefixes,
            )?
            .iter()
            .map(|h| h.as_str().to_string())
            .collect(),
        })
    }

    /// The requestheader CA bundle.
    pub(crate) fn ca(&self) -> &CaBundle {
        &self.ca
    }

    /// `Ok(None)` without a client certificate, or when no username header has a value; an
    /// error when the certificate does not verify against the requestheader CA or its CN is not
    /// allowed. Only then are the headers read.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
        chain: Option<&[CertificateDer<'static>]>,
        now: UnixTime,
    ) -> Result<Option<Identity>, RequestHeaderError> {
        let Some(chain) = chain.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let leaf = self.ca.verify(chain, now)?;
        self.verify_subject(&leaf)?;
        self.read_identity(headers)
    }

    fn verify_subject(&self, leaf: &VerifiedLeaf) -> Result<(), CertError> {
        if self.allowed_names.is_empty() {
            return Ok(());
        }
        let cn = &leaf.subject.as_ref().map_err(Clone::clone)?.common_name;
        if self.allowed_names.contains(cn) {
            Ok(())
        } else {
            Err(CertError::NotAllowed(cn.clone()))
        }
    }

    fn read_identity(&self, headers: &HeaderMap) -> Result<Option<Identity>, RequestHeaderError> {
        let user = first_value(headers, &self.username_headers)?;
        if user.is_empty() {
            return Ok(None);
        }
        Ok(Some(Identity {
            user,
            uid: first_value(headers, &self.uid_headers)?,
            groups: all_values(headers, &self.group_headers)?,
            extra: extra(headers, &self.extra_prefixes)?,
        }))
    }

    /// Whether `name` carries front-proxy identity: a configured username, UID or group
    /// header, a header under a configured extra prefix, or one of the standard `X-Remote-*`
    /// headers the apiserver's filter always clears.
    pub(crate) fn is_identity_header(&self, name: &HeaderName) -> bool {
        self.username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
            .any(|h| h == name)
            || self
                .extra_prefixes
                .iter()
                .any(|p| name.as_str().starts_with(p.as_str()))
            || is_standard_identity_header(name)
    }
}

/// Whether `name` is one of the standard front-proxy headers (`X-Remote-User`, `X-Remote-Uid`,
/// `X-Remote-Group`, `X-Remote-Extra-*`).
pub(crate) fn is_standard_identity_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    STANDARD_HEADERS.contains(&name) || name.starts_with(STANDARD_EXTRA_PREFIX)
}

fn header_error(flag: &'static str, value: &str, message: &'static str) -> AuthConfigError {
    AuthConfigError::Header {
        flag,
        value: value.to_string(),
        message,
    }
}

fn header_names(flag: &'static str, names: &[String]) -> Result<Vec<HeaderName>, AuthConfigError> {
    names
        .iter()
        .map(|raw| {
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                return Err(header_error(flag, raw, "empty header"));
            }
            HeaderName::from_bytes(trimmed.as_bytes())
                .map_err(|_| header_error(flag, raw, "not a valid HTTP header name"))
        })
        .collect()
}

fn utf8(name: &HeaderName, value: &http::HeaderValue) -> Result<String, RequestHeaderError> {
    std::str::from_utf8(value.as_bytes())
        .map(str::to_string)
        .map_err(|_| RequestHeaderError::InvalidHeaderValue(name.as_str().to_string()))
}

// `headerValue`: the first value of the first header (in configured order) whose first value
// is non-empty.
fn first_value(headers: &HeaderMap, names: &[HeaderName]) -> Result<String, RequestHeaderError> {
    for name in names {
        if let Some(value) = headers.get(name).filter(|v| !v.is_empty()) {
            return utf8(name, value);
        }
    }
    Ok(String::new())
}

// `allHeaderValues`: every non-empty value of every header, in configured order.
fn all_values(
    headers: &HeaderMap,
    names: &[HeaderName],
) -> Result<Vec<String>, RequestHeaderError> {
    let mut out = Vec::new();
    for name in names {
        for value in headers.get_all(name).iter().filter(|v| !v.is_empty()) {
            out.push(utf8(name, value)?);
        }
    }
    Ok(out)
}

// `newExtra`: prefixes first, then headers; the key is the lower-cased rest of the name,
// percent-unescaped; every value is kept, empty ones too.
fn extra(
    headers: &HeaderMap,
    prefixes: &[String],
) -> Result<std::collections::BTreeMap<String, Vec<String>>, RequestHeaderError> {
    let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for prefix in prefixes {
        for name in headers.keys() {
            let Some(rest) = name.as_str().strip_prefix(prefix.as_str()) else {
                continue;
            };
            let key = unescape_extra_key(rest);
            for value in headers.get_all(name) {
                let value = utf8(name, value)?;
                out.entry(key.clone()).or_default().push(value);
            }
        }
    }
    Ok(out)
}

/// Mirrors `unescapeExtraKey`: `url.PathUnescape`, keeping the key as sent when it is
/// malformed (or, our addition, when it decodes to bytes that are not UTF-8).
pub(crate) fn unescape_extra_key(encoded: &str) -> String {
    percent_decode(encoded.as_bytes())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| encoded.to_string())
}

fn percent_decode(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' {
            let hi = hex_digit(*input.get(i + 1)?)?;
            let lo = hex_digit(*input.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
