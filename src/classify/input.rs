//! A request described by hand rather than received: what `classify` reads (flags or JSON
//! lines), what the admin listener's explain endpoint is asked, and what `simulate`'s trace
//! lines carry. The caller is authenticated as the apiserver would authenticate it.

use std::collections::BTreeMap;
use std::io::{self, BufRead};

use serde::Deserialize;

use crate::auth::impersonation::{effective_identity, Requested};
use crate::auth::Identity;

/// The longest input line read; a longer one is reported and skipped.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One request to classify: a `classify --requests` input line, or the flags of a single request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifyInput {
    /// The HTTP method.
    pub method: String,
    /// The path and query.
    pub url: String,
    /// The user name; anonymous when absent.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's groups (`system:authenticated` is added for non-anonymous users).
    #[serde(default)]
    pub groups: Vec<String>,
    /// The user's UID.
    #[serde(default)]
    pub uid: String,
    /// Extra attributes.
    #[serde(default)]
    pub extra: BTreeMap<String, Vec<String>>,
    /// What the caller above impersonates (its `Impersonate-*` headers, `kubectl --as`): the
    /// request is classified as the identity the apiserver would run it as, the caller being the
    /// impersonator. Not authorized here (the proxy asks the apiserver with SubjectAccessReviews).
    #[serde(default)]
    pub impersonate: Option<Box<Impersonate>>,
}

/// The `Impersonate-*` headers of a described request, as `kubectl --as`, `--as-group` and
/// `--as-uid` send them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impersonate {
    /// `Impersonate-User`.
    pub user: String,
    /// `Impersonate-Group`, in order.
    #[serde(default)]
    pub groups: Vec<String>,
    /// `Impersonate-Uid`; empty for none.
    #[serde(default)]
    pub uid: String,
    /// `Impersonate-Extra-<key>`.
    #[serde(default)]
    pub extra: BTreeMap<String, Vec<String>>,
}

// === impl ClassifyInput ===

impl ClassifyInput {
    /// The identity the request runs as, and is classified as: the impersonated one
    /// ([`ClassifyInput::impersonate`], with the groups the apiserver adds) when there is one,
    /// else the caller ([`ClassifyInput::caller`]).
    pub fn identity(&self) -> Identity {
        match &self.impersonate {
            Some(impersonate) => effective_identity(&Requested {
                user: impersonate.user.clone(),
                uid: impersonate.uid.clone(),
                groups: impersonate.groups.clone(),
                extra: impersonate.extra.clone(),
            }),
            None => self.caller(),
        }
    }

    /// The impersonator: the caller when the request impersonates someone.
    pub fn impersonator(&self) -> Option<Identity> {
        self.impersonate.as_ref().map(|_| self.caller())
    }

    /// The caller: anonymous without a user name (`system:anonymous` in
    /// `system:unauthenticated`; given groups are ignored), else authenticated as the apiserver
    /// would (adding `system:authenticated`).
    pub fn caller(&self) -> Identity {
        match &self.user {
            None => Identity::anonymous(),
            Some(user) => Identity {
                extra: self.extra.clone(),
                ..Identity::authenticated(user.as_str(), self.uid.as_str(), self.groups.clone())
            },
        }
    }

    /// The request target (path and query) of its URL; see [`request_target`].
    pub fn target(&self) -> &str {
        request_target(&self.url)
    }
}

/// The path and query of `url`: an absolute `http(s)://host/...` URL is reduced to them, as the
/// server sees only the request target.
pub fn request_target(url: &str) -> &str {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return url;
    };
    rest.find(['/', '?']).map_or("/", |i| &rest[i..])
}

/// Reads one line into `buf` without its line ending, reading at most [`MAX_LINE_BYTES`] of it:
/// the reader of every JSON-lines input (`classify --requests`, `simulate` traces). `None` at
/// end of input; `Some(false)` when the line was longer (the rest of it is skipped).
pub fn read_bounded_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<bool>> {
    buf.clear();
    let limit = MAX_LINE_BYTES as u64 + 1;
    let mut limited = io::Read::take(&mut *input, limit);
    if limited.read_until(b'\n', buf)? == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Some(true));
    }
    if buf.len() <= MAX_LINE_BYTES {
        return Ok(Some(true));
    }
    skip_rest_of_line(input)?;
    Ok(Some(false))
}

fn skip_rest_of_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let len = available.len();
                input.consume(len);
            }
        }
    }
}
