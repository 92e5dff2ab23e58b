//! Readiness: `/readyz` passes once the configuration is loaded (before [`App::start`] returns)
//! and the upstream has answered a health check with the proxy's own credentials.
//!
//! [`App::start`]: super::App::start

use std::time::Duration;

use http::{Method, Request, StatusCode};

use crate::proxy::{empty_body, UpstreamAuth, UpstreamClient};
use crate::server::ReadyFlag;

/// How long one health check may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between failed health checks.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Asks the upstream's `/readyz` (then `/healthz` if that is not found) until it answers, then
/// sets `ready`. A 401 or 403 counts as an answer: the upstream is up, only the proxy's
/// credentials may not read health endpoints (logged once). Ends after setting `ready`.
pub async fn wait_for_upstream(upstream: UpstreamClient, ready: ReadyFlag) {
    let mut attempts: u64 = 0;
    loop {
        attempts += 1;
        match probe(&upstream).await {
            Ok(status) => {
                if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                    tracing::warn!(%status, "The upstream refuses the proxy's health checks; taking the answer as up");
                }
                tracing::info!(%status, attempts, "Upstream answered; ready");
                ready.set(true);
                return;
            }
            Err(error) if attempts == 1 || attempts % 30 == 0 => {
                tracing::warn!(%error, attempts, "Upstream not ready; not ready either");
            }
            Err(error) => tracing::debug!(%error, attempts, "Upstream not ready"),
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// The status of the first health endpoint that exists, if it counts as an answer.
async fn probe(upstream: &UpstreamClient) -> Result<StatusCode, crate::proxy::BoxError> {
    let mut last = StatusCode::NOT_FOUND;
    for path in ["/readyz", "/healthz"] {
        let request = Request::builder()
            .method(Method::GET)
            .uri(upstream.uri_for(path)?)
            .body(empty_body())?;
        let sent = upstream.send(request, UpstreamAuth::Proxy, false);
        let response = tokio::time::timeout(PROBE_TIMEOUT, sent)
            .await
            .map_err(|_| format!("{path}: no answer within {PROBE_TIMEOUT:?}"))??;
        last = response.status();
        if last.is_success() || last == StatusCode::UNAUTHORIZED || last == StatusCode::FORBIDDEN {
            return Ok(last);
        }
        if last != StatusCode::NOT_FOUND {
            break;
        }
    }
    Err(format!("upstream health check answered {last}").into())
}
