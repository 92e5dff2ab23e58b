//! Upgraded connections (SPDY/3.1 and WebSocket for exec, attach, port-forward): once both the
//! caller's and the upstream's connections have switched protocols, their bytes are copied both
//! ways until either side closes.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go` (`tryUpgrade`): the upgrade
//! request goes upstream over HTTP/1.1, a `101` is relayed to the caller with the upstream's
//! headers, then the two connections are joined. A non-101 answer is relayed as an ordinary
//! response.
//!
//! Upgrades exist on HTTP/1.1 only: an HTTP/2 caller cannot send `Connection: Upgrade` (and
//! WebSocket over HTTP/2's extended CONNECT is not supported, as by the apiserver), so kubectl
//! and client-go use HTTP/1.1 for exec, attach and port-forward. Upgraded connections have no
//! deadline and are not tracked for graceful shutdown: they end when either side closes.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

/// Joins the caller's and the upstream's upgraded connections in a background task. It ends when
/// both directions are closed or either fails.
pub(super) fn splice_upgrades(caller: OnUpgrade, upstream: OnUpgrade) {
    tokio::spawn(async move {
        let (caller, upstream) = match tokio::try_join!(caller, upstream) {
            Ok(pair) => pair,
            Err(error) => {
                tracing::debug!(%error, "Upgrade did not complete");
                return;
            }
        };
        let mut caller = TokioIo::new(caller);
        let mut upstream = TokioIo::new(upstream);
        match tokio::io::copy_bidirectional(&mut caller, &mut upstream).await {
            Ok((to_upstream, to_caller)) => {
                tracing::debug!(to_upstream, to_caller, "Upgraded connection closed");
            }
            Err(error) => tracing::debug!(%error, "Upgraded connection failed"),
        }
    });
}
