//! Readiness: `/readyz` passes once the configuration is loaded (before [`App::start`] returns)
//! and the upstream has answered a health check with the proxy's own credentials.
//!
//! [`App::start`]: super::App::start

use std::time::Duration;

use http::{Method, Request, StatusCode};

use crate::body::empty_body;
use crate::server::ReadyFlag;
use crate::upstream::Route;
use crate::upstream::{UpstreamAuth, UpstreamClient};

/// How long one health check may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between failed health checks.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Asks the upstream's `/readyz` with the proxy's credentials every [`PROBE_INTERVAL`] until it
/// answers (see `probe`), then sets `ready` and ends.
pub async fn wait_for_upstream(upstream: UpstreamClient, ready: ReadyFlag) {
    let mut attempts: u64 = 0;
    loop {
        attempts += 1;
        match probe(&upstream).await {
            Ok(status) => {
                if !status.is_success() {
                    tracing::warn!(%status, "The upstream's /readyz did not say ok; taking the answer as up");
                }
                tracing::info!(%status, attempts, "Upstream answered; ready");
                ready.set(true);
                return;
            }
            Err(error) => {
                let reason = crate::causes::render(error.as_ref());
                if attempts == 1 || attempts % 30 == 0 {
                    tracing::warn!(error = %reason, attempts, "Upstream not ready; probing again");
                } else {
                    tracing::debug!(error = %reason, attempts, "Upstream not ready");
                }
                ready.set_not_ready(format!("{reason} (attempt {attempts})"));
            }
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// The upstream's answer to `GET /readyz`, if it counts as up: anything but a 5xx (an
/// apiserver that is starting answers 500; one that does not let the proxy read health endpoints
/// answers 401 or 403, and a fake or an older server may answer 404: all of them are up).
async fn probe(upstream: &UpstreamClient) -> Result<StatusCode, crate::body::BoxError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(upstream.uri_for("/readyz")?)
        .body(empty_body())?;
    let sent = upstream.send(request, UpstreamAuth::Proxy, Route::Short);
    let response = tokio::time::timeout(PROBE_TIMEOUT, sent)
        .await
        .map_err(|_| format!("/readyz: no answer within {PROBE_TIMEOUT:?}"))??;
    let status = response.status();
    if status.is_server_error() {
        return Err(format!("upstream /readyz answered {status}").into());
    }
    Ok(status)
}

/// The two checks behind `/readyz`, each reported under its own name: `upstream` (false until the
/// upstream has answered) and `shutdown` (false from the moment shutdown starts).
#[derive(Debug, Clone)]
pub struct Readiness {
    /// Set by [`wait_for_upstream`].
    pub upstream: ReadyFlag,
    /// Cleared by the server when shutdown starts.
    pub serving: ReadyFlag,
    /// `--config-source cluster`: set once the first list of the cluster's objects is applied.
    pub config_source: Option<ReadyFlag>,
    /// `--coordination-namespace`: false while the replica waits for its first share.
    pub coordination: Option<ReadyFlag>,
}

impl Readiness {
    /// Not ready until the upstream answers; serving.
    pub fn new() -> Self {
        Readiness {
            upstream: ReadyFlag::new(false),
            serving: ReadyFlag::new(true),
            config_source: None,
            coordination: None,
        }
    }

    /// Not ready until the upstream answers and the cluster's configuration is applied.
    pub fn with_config_source() -> Self {
        Readiness {
            config_source: Some(ReadyFlag::new(false)),
            ..Readiness::new()
        }
    }

    /// Whether `/readyz` passes: every check does.
    pub fn is_ready(&self) -> bool {
        self.upstream.is_ready()
            && self.serving.is_ready()
            && self.config_source.as_ref().is_none_or(ReadyFlag::is_ready)
            && self.coordination.as_ref().is_none_or(ReadyFlag::is_ready)
    }
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new()
    }
}
