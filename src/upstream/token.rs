//! The proxy's bearer token: fixed, or read from a file that is re-read periodically, as
//! client-go's `CachedFileTokenSource` does (bound service account tokens rotate hourly).

use parking_lot::Mutex;
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::upstream_config::{read_bounded, Credential};
use super::UpstreamError;

/// How long a token read from a file is used before the file is read again (client-go: 1 minute).
const TOKEN_FILE_REFRESH: Duration = Duration::from_secs(60);

pub(super) struct TokenSource {
    credential: Credential,
    cached: Mutex<Option<Cached>>,
}

struct Cached {
    token: String,
    read_at: Instant,
}

impl TokenSource {
    pub(super) fn new(credential: Credential) -> Self {
        TokenSource {
            credential,
            cached: Mutex::new(None),
        }
    }

    /// The upstream answered 401 to `token`: an exec plugin's credential is fetched again.
    pub(super) async fn refused(&self, token: &str) {
        if let Credential::Exec(plugin) = &self.credential {
            plugin.invalidate(token).await;
        }
    }

    pub(super) fn exec_plugin(&self) -> Option<std::sync::Arc<super::exec_credential::ExecPlugin>> {
        match &self.credential {
            Credential::Exec(plugin) => Some(std::sync::Arc::clone(plugin)),
            _ => None,
        }
    }

    pub(super) fn is_configured(&self) -> bool {
        !matches!(self.credential, Credential::None)
    }

    /// The current token, `None` without one. A file that cannot be read keeps the last good
    /// token; with none yet, the request fails as upstream-unavailable.
    pub(super) async fn current(&self) -> Result<Option<String>, UpstreamError> {
        let path = match &self.credential {
            Credential::None => return Ok(None),
            Credential::Token(token) => return Ok(Some(token.clone())),
            Credential::TokenFile(path) => path,
            Credential::Exec(plugin) => {
                return plugin
                    .token()
                    .await
                    .map_err(|e| UpstreamError::Unavailable(e.into()))
            }
        };
        let now = Instant::now();
        if let Some(token) = self.fresh(now) {
            return Ok(Some(token));
        }
        match read_token(path.clone()).await {
            Ok(token) => {
                *self.cached.lock() = Some(Cached {
                    token: token.clone(),
                    read_at: now,
                });
                Ok(Some(token))
            }
            Err(error) => match self.cached.lock().as_ref() {
                Some(stale) => {
                    tracing::warn!(path = %path.display(), %error, "Keeping the last token; re-reading the token file failed");
                    Ok(Some(stale.token.clone()))
                }
                None => Err(UpstreamError::Unavailable(error.into())),
            },
        }
    }

    fn fresh(&self, now: Instant) -> Option<String> {
        self.cached
            .lock()
            .as_ref()
            .filter(|c| now.duration_since(c.read_at) < TOKEN_FILE_REFRESH)
            .map(|c| c.token.clone())
    }
}

async fn read_token(path: PathBuf) -> Result<String, String> {
    let bytes = tokio::task::spawn_blocking(move || read_bounded(&path))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let token = String::from_utf8(bytes).map_err(|_| "the token file is not UTF-8".to_string())?;
    let token = token.trim();
    if token.is_empty() {
        return Err("the token file is empty".to_string());
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests;
