//! The I/O half: the watch of the labelled Leases and the writes of this replica's own, around
//! the pure [`Replica`]. Lists and watches as the configuration source does (list, then watch
//! from its resource version with bookmarks and a server-side timeout; list again on `410 Gone`;
//! back off with jitter on failures), through the same upstream client.
//!
//! Two loops share the replica's state: the watch feeds every Lease change to
//! [`Replica::observe`] and wakes the writer; the writer runs [`Replica::step`] when woken or
//! when the protocol says (the next renewal, the fall-back deadline), applies the limit, and
//! writes the record (a merge patch; a create when the Lease does not exist yet).
//!
//! Where we differ from client-go's leader election: there is no single holder to elect; each
//! replica holds its own Lease and only reads the others'.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent;
use k8s_openapi::List;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::lease;
use super::metrics::CoordinationMetrics;
use super::protocol::{Demand, Phase, Record, Replica};
use super::CoordinationConfig;
use crate::backoff::{jittered, Backoff};
use crate::body::{empty_body, full_body, ProxyBody};
use crate::config_source::watch_stream::WatchDecoder;
use crate::fairqueue::controller::FlowControl;
use crate::server::ReadyFlag;
use crate::upstream::{Route, UpstreamAuth, UpstreamBody, UpstreamClient};

/// The first pause after a failed list or watch.
const BACKOFF_INITIAL: Duration = Duration::from_millis(800);
/// The longest pause between attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The server-side watch timeout ranges over [MIN, 2 × MIN).
const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);
/// Beyond the server-side timeout, how long a silent watch is given.
const WATCH_GRACE: Duration = Duration::from_secs(60);
/// The largest list body read.
const MAX_LIST_BYTES: usize = 16 << 20;
/// The largest answer to a write read.
const MAX_WRITE_BYTES: usize = 1 << 20;
/// A level's past demand halves every this many renew periods.
const DEMAND_HALF_LIFE_RENEWALS: f64 = 0.25;
/// After a failed write, the least pause before the next (a renewal is due anyway).
const WRITE_RETRY: Duration = Duration::from_millis(500);

/// Sets this replica's share as its server concurrency limit (the app's closure: the flow
/// controller, then the limit gauges).
pub type ShareSink = Box<dyn Fn(u32) + Send + Sync>;

/// Why a request to the Lease store failed.
#[derive(Debug, thiserror::Error)]
enum StoreError {
    #[error("{0}")]
    Transport(String),
    #[error("the API answered {0}")]
    Status(StatusCode),
    #[error("decoding: {0}")]
    Decode(String),
}

/// One replica's coordination: start it with [`Coordinator::run`].
pub struct Coordinator {
    config: CoordinationConfig,
    client: UpstreamClient,
    flow_control: Arc<FlowControl>,
    share_sink: ShareSink,
    replica: Mutex<Replica>,
    wake: Notify,
    ready: ReadyFlag,
    metrics: CoordinationMetrics,
    /// The problem last logged, so that each is logged once.
    problem: Mutex<Option<String>>,
    /// The demand last measured, and when.
    measured: Mutex<Option<(Instant, Demand)>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

// === impl Coordinator ===

impl Coordinator {
    /// A coordinator for `replica`, reading and writing Leases through `client`, measuring the
    /// demand of `flow_control` and handing each new limit to `share_sink`; `ready` is its
    /// readiness check (false while joining).
    pub fn new(
        config: CoordinationConfig,
        client: UpstreamClient,
        flow_control: Arc<FlowControl>,
        share_sink: ShareSink,
        replica: Replica,
        ready: ReadyFlag,
        metrics: CoordinationMetrics,
    ) -> Arc<Self> {
        ready.set_not_ready("joining: waiting for a share of the budget".into());
        Arc::new(Coordinator {
            config,
            client,
            flow_control,
            share_sink,
            replica: Mutex::new(replica),
            wake: Notify::new(),
            ready,
            metrics,
            problem: Mutex::new(None),
            measured: Mutex::new(None),
        })
    }

    /// The protocol's state now (for the debug dump).
    pub fn replica(&self) -> Replica {
        self.replica.lock().clone()
    }

    /// Watches and writes until the task is aborted.
    pub async fn run(self: Arc<Self>) {
        tokio::join!(
            Arc::clone(&self).watch_loop(),
            Arc::clone(&self).write_loop()
        );
    }

    /// Gives the Lease up (empties `holderIdentity`) so that the others take the share at once:
    /// what a graceful shutdown does first. Waits at most `timeout`.
    pub async fn release(&self, timeout: Duration) {
        let path = lease::object_path(&self.config.namespace, &self.config.replica_id);
        let patch = lease::release_patch();
        self.metrics.request("release");
        match tokio::time::timeout(timeout, self.write(Method::PATCH, &path, &patch)).await {
            Ok(Ok(())) => tracing::info!(replica = %self.config.replica_id, "Lease given up"),
            Ok(Err(error)) => tracing::warn!(%error, "Giving up the Lease failed"),
            Err(_) => tracing::warn!(?timeout, "Giving up the Lease took too long"),
        }
    }

    async fn write_loop(self: Arc<Self>) {
        let mut retry_at = Instant::now();
        loop {
            let now = Instant::now();
            let (demand, in_use) = self.measure(now);
            let (record, limit) = {
                let mut replica = self.replica.lock();
                (replica.step(now, demand, in_use), replica.limit())
            };
            (self.share_sink)(limit);
            if let Some(record) = record {
                let ok = now >= retry_at && self.put(&record).await;
                if !ok {
                    retry_at = Instant::now() + WRITE_RETRY;
                }
                self.replica.lock().written(record, now, ok);
            }
            self.report();
            let next = self.replica.lock().next_step().max(retry_at);
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    /// This replica's seat demand per level and its seats in use, exempt levels left out. A
    /// level's demand is its seats in use and waiting now, or what it was before, halved every
    /// [`DEMAND_HALF_LIFE_RENEWALS`] of a renew period since, if that is more: a burst counts for
    /// a little while, a load that moved away stops counting within a renew period or two.
    fn measure(&self, now: Instant) -> (Demand, u32) {
        let mut measured = self.measured.lock();
        let half_life = self
            .config
            .lease_duration
            .mul_f64(DEMAND_HALF_LIFE_RENEWALS / 3.0);
        let decay = |level: &str| {
            measured.as_ref().map_or(0.0, |(at, before)| {
                let halvings =
                    now.saturating_duration_since(*at).as_secs_f64() / half_life.as_secs_f64();
                before.levels.get(level).copied().unwrap_or(0.0) * 0.5f64.powf(halvings)
            })
        };
        let mut demand = Demand::default();
        let mut in_use = 0u64;
        for level in self.flow_control.levels() {
            if level.priority_level.is_exempt() {
                continue;
            }
            let stats = level.queues.stats();
            in_use += stats.seats_in_use;
            let current = (stats.seats_in_use + stats.seats_waiting) as f64;
            let seats = current.max(decay(&level.priority_level.name));
            // Below a tenth of a seat the memory of a burst is gone.
            let seats = if seats < 0.1 { 0.0 } else { seats };
            demand.total += seats;
            demand
                .levels
                .insert(level.priority_level.name.clone(), seats);
        }
        *measured = Some((now, demand.clone()));
        (demand, u32::try_from(in_use).unwrap_or(u32::MAX))
    }

    /// Writes the record: a merge patch, or a create when the Lease does not exist.
    async fn put(&self, record: &Record) -> bool {
        let id = &self.config.replica_id;
        let seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let body = lease::body(id, record, seconds, std::time::SystemTime::now());
        let path = lease::object_path(&self.config.namespace, id);
        self.metrics.request("patch");
        let outcome = match self.write(Method::PATCH, &path, &body).await {
            Err(StoreError::Status(StatusCode::NOT_FOUND)) => {
                self.metrics.request("create");
                let collection = lease::collection_path(&self.config.namespace);
                self.write(Method::POST, &collection, &body).await
            }
            other => other,
        };
        match outcome {
            Ok(()) => {
                self.resolved();
                true
            }
            Err(error) => {
                self.trouble("write", &error);
                false
            }
        }
    }

    async fn write(
        &self,
        method: Method,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let content_type = if method == Method::PATCH {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let bytes = serde_json::to_vec(body).map_err(|e| StoreError::Decode(e.to_string()))?;
        let request = self.request(method, path, content_type, full_body(bytes))?;
        let sent = self.client.send(request, UpstreamAuth::Proxy, Route::Short);
        let response = tokio::time::timeout(self.config.lease_duration / 3, sent)
            .await
            .map_err(|_| StoreError::Transport("no answer within a renew period".into()))?
            .map_err(|e| StoreError::Transport(e.to_string()))?;
        let status = response.status();
        // Read the answer so the connection can be reused.
        let _ = Limited::new(response.into_body(), MAX_WRITE_BYTES)
            .collect()
            .await;
        if status.is_success() {
            Ok(())
        } else {
            Err(StoreError::Status(status))
        }
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: ProxyBody,
    ) -> Result<Request<ProxyBody>, StoreError> {
        let uri = self
            .client
            .uri_for(path)
            .map_err(|e| StoreError::Transport(e.to_string()))?;
        Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body)
            .map_err(|e| StoreError::Transport(e.to_string()))
    }

    /// Sets the gauges and the readiness check from where the replica stands.
    fn report(&self) {
        let (phase, replicas, share) = {
            let replica = self.replica.lock();
            (replica.phase(), replica.replicas_seen(), replica.share())
        };
        let fallback = phase == Phase::Fallback;
        let limit = self.flow_control.server_concurrency_limit();
        self.metrics
            .set(replicas, if fallback { limit } else { share }, fallback);
        match phase {
            Phase::Joining => {}
            Phase::Joined => self.ready.set(true),
            Phase::Fallback => {
                let reason = self.problem.lock().clone().unwrap_or_default();
                self.ready.set_degraded(format!(
                    "serving with a conservative share of {limit} seats: {reason}"
                ));
            }
        }
    }

    /// Logs a problem with the Lease store once (until it clears).
    fn trouble(&self, during: &str, error: &StoreError) {
        let ns = &self.config.namespace;
        let message = match error {
            StoreError::Status(StatusCode::FORBIDDEN) => format!(
                "forbidden: --coordination-namespace {ns} needs get, list, watch, create, update, \
                 patch and delete on leases.coordination.k8s.io in namespace {ns}"
            ),
            StoreError::Status(StatusCode::NOT_FOUND) => {
                format!("--coordination-namespace {ns}: the namespace does not exist")
            }
            other => format!("--coordination-namespace {ns}: {during}: {other}"),
        };
        let mut last = self.problem.lock();
        if last.as_deref() != Some(message.as_str()) {
            tracing::warn!(
                problem = %message,
                "The Lease store cannot be used; serving with a conservative share until it can"
            );
            *last = Some(message);
        }
    }

    fn resolved(&self) {
        if self.problem.lock().take().is_some() {
            tracing::info!("The Lease store can be used again");
        }
    }

    // === the watch ===

    async fn watch_loop(self: Arc<Self>) {
        let mut backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
        loop {
            let rv = match self.list().await {
                Ok(rv) => rv,
                Err(error) => {
                    self.trouble("list", &error);
                    tokio::time::sleep(backoff.pause()).await;
                    continue;
                }
            };
            let started = Instant::now();
            let end = self.watch(rv).await;
            if started.elapsed() >= self.config.lease_duration {
                backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
            }
            match end {
                Ok(()) => tracing::debug!("Lease watch ended; listing again"),
                Err(error) => {
                    tracing::debug!(%error, "Lease watch failed; listing again");
                    tokio::time::sleep(backoff.pause()).await;
                }
            }
        }
    }

    /// Lists the labelled Leases into the replica; returns the list's resource version.
    async fn list(&self) -> Result<String, StoreError> {
        let path = format!(
            "{}?{}",
            lease::collection_path(&self.config.namespace),
            lease::label_selector()
        );
        self.metrics.request("list");
        let response = self.get(&path, false).await?;
        if !response.status().is_success() {
            return Err(StoreError::Status(response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_LIST_BYTES)
            .collect()
            .await
            .map_err(|e| StoreError::Transport(format!("reading the list: {e}")))?
            .to_bytes();
        let list: List<Lease> =
            serde_json::from_slice(&body).map_err(|e| StoreError::Decode(e.to_string()))?;
        let leases = list.items.iter().filter_map(lease::read).collect();
        self.replica.lock().relist(leases, Instant::now());
        self.wake.notify_one();
        Ok(list.metadata.resource_version.unwrap_or_default())
    }

    /// One watch from `rv`; `Ok` when it ended in the ordinary way or its version expired.
    async fn watch(&self, rv: String) -> Result<(), StoreError> {
        let timeout = watch_timeout();
        let path = format!(
            "{}?{}&watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={}",
            lease::collection_path(&self.config.namespace),
            lease::label_selector(),
            timeout.as_secs()
        );
        self.metrics.request("watch");
        let deadline = Instant::now() + timeout + WATCH_GRACE;
        let response = tokio::time::timeout_at(deadline, self.get(&path, true))
            .await
            .map_err(|_| StoreError::Transport("no watch response".into()))??;
        match response.status() {
            StatusCode::GONE => return Ok(()),
            status if !status.is_success() => return Err(StoreError::Status(status)),
            _ => {}
        }
        let mut body = response.into_body();
        let mut decoder = WatchDecoder::new();
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(StoreError::Transport("watch went silent".into())),
                Ok(None) => return Ok(()),
                Ok(Some(Err(error))) => return Err(StoreError::Transport(error.to_string())),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let events = decoder
                .push::<Lease>(&data)
                .map_err(|e| StoreError::Decode(e.to_string()))?;
            for event in events {
                if !self.apply(event)? {
                    return Ok(());
                }
            }
        }
    }

    /// Applies one watch event; `false` when the watch must be started again from a list.
    fn apply(&self, event: WatchEvent<Lease>) -> Result<bool, StoreError> {
        let now = Instant::now();
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                if let Some((id, version, state)) = lease::read(&object) {
                    self.replica.lock().observe(&id, &version, state, now);
                    self.wake.notify_one();
                }
            }
            WatchEvent::Deleted(object) => {
                if let Some((id, _, _)) = lease::read(&object) {
                    self.replica.lock().forget(&id);
                    self.wake.notify_one();
                }
            }
            WatchEvent::Bookmark { .. } => {}
            WatchEvent::ErrorStatus(status) => {
                if status.code == Some(410) {
                    return Ok(false);
                }
                return Err(StoreError::Decode(format!(
                    "an error event: {}",
                    status.message.unwrap_or_default()
                )));
            }
            WatchEvent::ErrorOther(_) => {
                return Err(StoreError::Decode("an error event".into()));
            }
        }
        Ok(true)
    }

    async fn get(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<http::Response<UpstreamBody>, StoreError> {
        let request = self.request(Method::GET, path, "application/json", empty_body())?;
        let route = if watch {
            Route::LongRunning
        } else {
            Route::Short
        };
        let sent = self.client.send(request, UpstreamAuth::Proxy, route);
        tokio::time::timeout(self.config.lease_duration, sent)
            .await
            .map_err(|_| StoreError::Transport("no answer within a Lease duration".into()))?
            .map_err(|e| StoreError::Transport(e.to_string()))
    }
}

/// A random duration in [MIN_WATCH_TIMEOUT, 2 × MIN_WATCH_TIMEOUT), whole seconds.
fn watch_timeout() -> Duration {
    let secs = jittered(MIN_WATCH_TIMEOUT, 1.0).as_secs();
    Duration::from_secs(secs.min(MIN_WATCH_TIMEOUT.as_secs() * 2 - 1))
}
