//! `--config-source cluster`: the upstream's own `flowcontrol.apiserver.k8s.io/v1` FlowSchemas and
//! PriorityLevelConfigurations, listed and then watched, as client-go's reflector does
//! (`tools/cache/reflector.go`):
//!
//! - list both kinds, apply them as one configuration, then watch each kind from its list's
//!   `resourceVersion` with `allowWatchBookmarks=true` and a server-side `timeoutSeconds`
//!   between 5 and 10 minutes;
//! - every change goes through the same path as a file reload (the [`ApplyConfig`] the caller
//!   gives: the app's reloader):
//!   validated as a whole, applied in place (queued and executing requests survive), refused
//!   whole and counted when invalid, the last good configuration kept;
//! - `410 Gone` (an expired resource version, as a status or an `ERROR` event) lists that kind
//!   again; any other failure, and a watch the upstream ends early, reconnects after an
//!   exponential backoff with jitter (800 ms doubling to 30 s, as the reflector's backoff
//!   manager), so a failing upstream is never spun on.
//!
//! Read with the proxy's own credentials; nothing is ever written to the cluster. Where we
//! differ: no paginated lists (`limit`/`continue`; a cluster holds tens of these objects), and
//! the two kinds are applied together, never one without the other's current state.

mod metrics;
pub mod objects;
pub mod watch_stream;

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::List;
use tokio::time::Instant;

use crate::backoff::{jittered, Backoff};
use crate::body::empty_body;
use crate::server::ReadyFlag;
use crate::upstream::Route;
use crate::upstream::{UpstreamAuth, UpstreamClient};
pub use metrics::SourceMetrics;
use objects::{collection_path, Applied, ClusterObjects, Kind};
use watch_stream::WatchDecoder;

/// The first pause after a failure.
const BACKOFF_INITIAL: Duration = Duration::from_millis(800);
/// The longest pause between attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A watch that lasted at least this long resets the backoff.
const HEALTHY_WATCH: Duration = Duration::from_secs(10);
/// The server-side watch timeout ranges over [MIN, 2 × MIN), as the reflector's does.
const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);
/// Beyond the server-side timeout, how long a silent watch is given before it is abandoned.
const WATCH_GRACE: Duration = Duration::from_secs(60);
/// How long a list may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest list body read.
const MAX_LIST_BYTES: usize = 64 << 20;

/// Why a list or watch failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The request could not be sent or its body read.
    #[error("{0}")]
    Transport(String),
    /// The upstream answered with an error status.
    #[error("the upstream answered {0}")]
    Status(StatusCode),
    /// The body is not what the API serves.
    #[error("decoding: {0}")]
    Decode(String),
}

/// How a watch ended.
#[derive(Debug)]
enum WatchEnd {
    /// The upstream closed it (its timeout, a restart): watch again.
    Closed,
    /// The resource version is too old: list again.
    Expired,
    /// A failure: back off, then watch again.
    Failed(SourceError),
}

/// Where a source hands each configuration it reads: applied in place or refused whole, as a
/// file reload is (queued and executing requests survive; the last good configuration stays on
/// refusal, which the applier logs and counts).
pub trait ApplyConfig: Send + Sync + 'static {
    /// Applies `loaded`, read from `source_name`, at `now`; `Err` with the reason when refused.
    fn apply_loaded(
        &self,
        source_name: &str,
        loaded: Result<crate::config::Loaded, crate::config::ConfigError>,
        now: Instant,
    ) -> Result<(), crate::body::BoxError>;
}

/// The cluster configuration source. Start it with [`ClusterSource::run`].
pub struct ClusterSource {
    upstream: UpstreamClient,
    reloader: Arc<dyn ApplyConfig>,
    objects: Mutex<ClusterObjects>,
    ready: ReadyFlag,
    metrics: SourceMetrics,
}

impl std::fmt::Debug for ClusterSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSource")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

// === impl ClusterSource ===

impl ClusterSource {
    /// A source that reads through `upstream`, applies through `reloader` and sets `ready` once
    /// the first list has been applied.
    pub fn new(
        upstream: UpstreamClient,
        reloader: Arc<dyn ApplyConfig>,
        ready: ReadyFlag,
        metrics: SourceMetrics,
    ) -> Arc<Self> {
        Arc::new(ClusterSource {
            upstream,
            reloader,
            objects: Mutex::new(ClusterObjects::default()),
            ready,
            metrics,
        })
    }

    /// Lists both kinds until both lists succeed, applies them, then watches each kind forever
    /// (until the task is aborted).
    pub async fn run(self: Arc<Self>) {
        let mut backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
        let (levels_rv, schemas_rv) = loop {
            let levels = self.list::<PriorityLevelConfiguration>().await;
            let schemas = match &levels {
                Ok(_) => self.list::<FlowSchema>().await,
                Err(_) => Err(SourceError::Transport("not listed".into())),
            };
            match (levels, schemas) {
                (Ok(levels_rv), Ok(schemas_rv)) => break (levels_rv, schemas_rv),
                (Err(error), _) | (_, Err(error)) => {
                    tracing::warn!(%error, "Listing the cluster's flow-control objects failed");
                    tokio::time::sleep(backoff.pause()).await;
                }
            }
        };
        self.apply();
        tokio::join!(
            Arc::clone(&self).watch_loop::<PriorityLevelConfiguration>(levels_rv),
            Arc::clone(&self).watch_loop::<FlowSchema>(schemas_rv),
        );
    }

    /// Watches `K` from `rv`, listing again on 410 and reconnecting with backoff on failure.
    async fn watch_loop<K: Kind>(self: Arc<Self>, mut rv: String) {
        let mut backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
        loop {
            let started = Instant::now();
            let end = self.watch::<K>(&mut rv).await;
            if started.elapsed() >= HEALTHY_WATCH {
                backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
            }
            self.metrics.watch_restarted(K::URL_PATH_SEGMENT);
            match end {
                WatchEnd::Closed if started.elapsed() >= HEALTHY_WATCH => continue,
                WatchEnd::Closed => tracing::debug!(kind = K::KIND, "Watch ended early"),
                WatchEnd::Failed(error) => {
                    tracing::warn!(%error, kind = K::KIND, "Watch failed")
                }
                WatchEnd::Expired => loop {
                    tracing::info!(kind = K::KIND, "Resource version expired; listing again");
                    match self.list::<K>().await {
                        Ok(new_rv) => {
                            rv = new_rv;
                            self.apply();
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(%error, kind = K::KIND, "Listing failed");
                            tokio::time::sleep(backoff.pause()).await;
                        }
                    }
                },
            }
            tokio::time::sleep(backoff.pause()).await;
        }
    }

    /// Lists `K`, replaces its objects and returns the list's resource version.
    async fn list<K: Kind>(&self) -> Result<String, SourceError> {
        let response = tokio::time::timeout(LIST_TIMEOUT, self.get(&collection_path::<K>(), false))
            .await
            .map_err(|_| SourceError::Transport(format!("no list within {LIST_TIMEOUT:?}")))??;
        if !response.status().is_success() {
            return Err(SourceError::Status(response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_LIST_BYTES)
            .collect()
            .await
            .map_err(|e| SourceError::Transport(format!("reading the list: {e}")))?
            .to_bytes();
        let list: List<K> =
            serde_json::from_slice(&body).map_err(|e| SourceError::Decode(e.to_string()))?;
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        self.objects.lock().replace(list.items);
        self.metrics.listed(K::URL_PATH_SEGMENT);
        Ok(rv)
    }

    /// One watch of `K` from `rv`, applying events as they come.
    async fn watch<K: Kind>(&self, rv: &mut String) -> WatchEnd {
        let timeout = watch_timeout();
        let query = format!(
            "{}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={}",
            collection_path::<K>(),
            timeout.as_secs()
        );
        let deadline = Instant::now() + timeout + WATCH_GRACE;
        let response = match tokio::time::timeout_at(deadline, self.get(&query, true)).await {
            Err(_) => return WatchEnd::Failed(SourceError::Transport("no watch response".into())),
            Ok(Err(error)) => return WatchEnd::Failed(error),
            Ok(Ok(response)) => response,
        };
        match response.status() {
            StatusCode::GONE => return WatchEnd::Expired,
            status if !status.is_success() => return WatchEnd::Failed(SourceError::Status(status)),
            _ => {}
        }
        let mut body = response.into_body();
        let mut decoder = WatchDecoder::new();
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => {
                    return WatchEnd::Failed(SourceError::Transport("watch went silent".into()))
                }
                Ok(None) => {
                    // A last event without its newline still counts.
                    if let Ok(Some(event)) = decoder.finish::<K>() {
                        if self.objects.lock().apply(event, rv) == Applied::Changed {
                            self.apply();
                        }
                    }
                    return WatchEnd::Closed;
                }
                Ok(Some(Err(error))) => {
                    return WatchEnd::Failed(SourceError::Transport(error.to_string()))
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let events = match decoder.push::<K>(&data) {
                Ok(events) => events,
                Err(error) => return WatchEnd::Failed(SourceError::Decode(error.to_string())),
            };
            let mut changed = false;
            for event in events {
                match self.objects.lock().apply(event, rv) {
                    Applied::Changed => changed = true,
                    Applied::Bookmark => {}
                    Applied::Expired => {
                        if changed {
                            self.apply();
                        }
                        return WatchEnd::Expired;
                    }
                    Applied::Error(message) => {
                        if changed {
                            self.apply();
                        }
                        return WatchEnd::Failed(SourceError::Decode(message));
                    }
                }
            }
            if changed {
                self.apply();
            }
        }
    }

    async fn get(
        &self,
        path_and_query: &str,
        watch: bool,
    ) -> Result<http::Response<crate::upstream::UpstreamBody>, SourceError> {
        let uri = self
            .upstream
            .uri_for(path_and_query)
            .map_err(|e| SourceError::Transport(e.to_string()))?;
        let request = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header(http::header::ACCEPT, "application/json")
            .body(empty_body())
            .map_err(|e| SourceError::Transport(e.to_string()))?;
        self.upstream
            .send(
                request,
                UpstreamAuth::Proxy,
                if watch {
                    Route::LongRunning
                } else {
                    Route::Short
                },
            )
            .await
            .map_err(|e| SourceError::Transport(e.to_string()))
    }

    /// Loads both kinds' objects as one configuration and applies it as a reload does.
    fn apply(&self) {
        let (loaded, counts) = {
            let objects = self.objects.lock();
            (objects.load(), objects.counts())
        };
        self.metrics.objects(counts);
        match self
            .reloader
            .apply_loaded("<cluster>", loaded, Instant::now())
        {
            Ok(()) => {
                self.metrics.synced();
                if !self.ready.is_ready() {
                    tracing::info!(
                        flow_schemas = counts.0,
                        priority_levels = counts.1,
                        "Configuration from the cluster applied; ready"
                    );
                }
                self.ready.set(true);
            }
            Err(error) => tracing::error!(%error, "Configuration from the cluster refused"),
        }
    }
}

/// A random duration in [MIN_WATCH_TIMEOUT, 2 × MIN_WATCH_TIMEOUT), whole seconds.
fn watch_timeout() -> Duration {
    // Whole seconds, as the reflector asks (`timeoutSeconds`); under 2 × MIN.
    let secs = jittered(MIN_WATCH_TIMEOUT, 1.0).as_secs();
    Duration::from_secs(secs.min(MIN_WATCH_TIMEOUT.as_secs() * 2 - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_timeouts_are_spread_over_five_to_ten_minutes() {
        for _ in 0..100 {
            let t = watch_timeout();
            assert!(t >= MIN_WATCH_TIMEOUT && t < MIN_WATCH_TIMEOUT * 2, "{t:?}");
        }
    }
}
