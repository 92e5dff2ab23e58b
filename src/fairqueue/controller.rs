//! Flow control over every priority level: configuration, limits, borrowing, admission.
//!
//! Mirrors the queue-set half of `apf_controller.go`: `lockAndDigestConfigObjects` (levels kept,
//! changed, added; removed ones quiesce until idle, then go), `finishQueueSetReconfigsLocked`
//! (limits from the shares of every level, quiescing ones included), `updateBorrowingLocked` (run
//! after each digest and every 10 s), and `startRequest`/`Handle` for admission with the
//! dropped-requests tracker's `Retry-After`.

use parking_lot::{Mutex, MutexGuard, RwLock};
use std::collections::BTreeMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use tokio::time::Instant;

use super::borrowing::{self, BorrowingOutcome, LevelDemand, SeatDemandStats};
use super::level_queues::{
    AdmitRequest, AdmitStarted, LevelObserver, LevelQueues, Rejection, Seat,
};
use super::limits::{self, LevelLimits};
use super::queueset::{QueueSetError, QueueShape, QueuingConfig};
use super::retry_after::DroppedRequestsTracker;
use crate::classify::MatchIndex;
use crate::config::{Config, PriorityLevel, PriorityLevelRef};

/// Why flow control cannot be built or a level cannot be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowControlError {
    /// `--max-requests-inflight` + `--max-mutating-requests-inflight` is 0.
    #[error("the server concurrency limit is 0: API Priority and Fairness needs a positive limit")]
    ZeroServerConcurrency,
    /// A level's queuing parameters are unusable; the level is left out (or keeps its old shape).
    #[error("priority level {name:?} has an invalid queuing configuration: {source}")]
    Level {
        /// The level.
        name: String,
        /// Why.
        source: QueueSetError,
    },
}

/// A priority level as a request sees it: captured once per request from a [`Snapshot`].
#[derive(Debug, Clone)]
pub struct LevelHandle {
    queues: Arc<LevelQueues>,
    priority_level: PriorityLevelRef,
    max_seats: Option<u32>,
}

impl LevelHandle {
    /// The level's object (name, uid for `X-Kubernetes-PF-PriorityLevel-UID`, spec).
    pub fn priority_level(&self) -> &PriorityLevelRef {
        &self.priority_level
    }

    /// Whether requests of this level are exempt.
    pub fn is_exempt(&self) -> bool {
        self.priority_level.is_exempt()
    }

    /// The per-request seat cap the work estimator applies (`MaxSeatsTracker`); `None` for
    /// exempt and `Reject` levels.
    pub fn max_seats(&self) -> Option<u32> {
        self.max_seats
    }

    /// The level's queues (stats, dumps).
    pub fn queues(&self) -> &Arc<LevelQueues> {
        &self.queues
    }
}

/// An immutable view for classifying and admitting requests: the configuration and its levels,
/// swapped whole on reconfiguration so both always agree.
#[derive(Debug)]
pub struct Snapshot {
    config: Arc<Config>,
    /// The configuration's classification index, built once per configuration.
    index: MatchIndex,
    /// FNV: looked up by a configured level name (not caller input).
    levels: fnv::FnvHashMap<String, LevelHandle>,
    /// The same handles by the address of their level's object, which is the object the
    /// classification index hands out: what each request looks up ([`Snapshot::level_of`]).
    by_object: ObjectMap,
}

/// [`Snapshot::level_of`]'s map: keyed by the address of a live `PriorityLevel` (the snapshot
/// holds every one it keys by, so an address names one object).
type ObjectMap = std::collections::HashMap<usize, LevelHandle, BuildHasherDefault<AddressHasher>>;

/// Hashes an address: one folded multiplication instead of a byte-wise hash of a name.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only addresses are hashed (`write_usize`); anything else is hashed FNV-1a style.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_usize(&mut self, n: usize) {
        let m = u128::from(n as u64) * 0x9e37_79b9_7f4a_7c15;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The key of a level's object in [`ObjectMap`].
fn object_key(pl: &PriorityLevelRef) -> usize {
    Arc::as_ptr(pl) as usize
}

impl Snapshot {
    /// The configuration to classify with.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The index [`crate::classify::classify`] searches.
    pub fn index(&self) -> &MatchIndex {
        &self.index
    }

    /// The level a FlowSchema names.
    pub fn level(&self, name: &str) -> Option<&LevelHandle> {
        self.levels.get(name)
    }

    /// The level of `pl`, a classification's priority level: by the object when it is the
    /// snapshot's own (always, for a classification made with [`Snapshot::index`]), else by
    /// name ([`Snapshot::level`]).
    pub fn level_of(&self, pl: &PriorityLevelRef) -> Option<&LevelHandle> {
        match self.by_object.get(&object_key(pl)) {
            Some(handle) => Some(handle),
            None => self.level(&pl.name),
        }
    }
}

/// What the debug endpoints and metrics need about one level.
#[derive(Debug, Clone)]
pub struct LevelInfo {
    /// The level's object.
    pub priority_level: PriorityLevelRef,
    /// Its queues.
    pub queues: Arc<LevelQueues>,
    /// Its static limits.
    pub limits: LevelLimits,
    /// Its current concurrency limit.
    pub current_cl: u32,
    /// Its seat-demand statistics.
    pub stats: SeatDemandStats,
    /// Removed from the configuration, draining.
    pub quiescing: bool,
}

struct LevelEntry {
    pl: PriorityLevelRef,
    queues: Arc<LevelQueues>,
    limits: LevelLimits,
    stats: SeatDemandStats,
    current_cl: u32,
    quiescing: bool,
}

struct Inner {
    levels: BTreeMap<String, LevelEntry>,
    nominal_cl_sum: u32,
}

/// An admission started by [`FlowControl::start_admit`].
pub enum Admitting {
    /// Decided at once: seats granted (the request executes now) or a rejection.
    Decided(Result<Seat, Rejection>),
    /// Queued: the rest of the admission, to be awaited.
    Waiting(std::pin::Pin<Box<dyn Future<Output = Result<Seat, Rejection>> + Send>>),
}

impl Admitting {
    /// The admission's outcome, waiting for it if need be.
    pub async fn outcome(self) -> Result<Seat, Rejection> {
        match self {
            Admitting::Decided(admitted) => admitted,
            Admitting::Waiting(admitting) => admitting.await,
        }
    }
}

/// Every priority level's queue set, built from a [`Config`] and the server concurrency limit.
pub struct FlowControl {
    /// Read without the lock ([`FlowControl::server_concurrency_limit`]); written only with
    /// `inner` held, so limits computed under the lock always see the value they derive from.
    server_cl: AtomicU32,
    observer: Option<Arc<dyn LevelObserver>>,
    inner: Mutex<Inner>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// How many snapshots have been published: a caller that keeps one compares this.
    generation: AtomicU64,
    dropped: Mutex<DroppedRequestsTracker>,
}

impl std::fmt::Debug for FlowControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowControl")
            .field("server_cl", &self.server_concurrency_limit())
            .finish_non_exhaustive()
    }
}

impl FlowControl {
    /// Flow control for `config` with `server_cl` = max-requests-inflight +
    /// max-mutating-requests-inflight. Levels whose queuing parameters are unusable are left out
    /// and reported in the second value.
    pub fn new(
        config: &Config,
        server_cl: u32,
        now: Instant,
    ) -> Result<(FlowControl, Vec<FlowControlError>), FlowControlError> {
        Self::with_observer(config, server_cl, now, None)
    }

    /// [`new`](Self::new), with every level reporting to `observer` (per-FlowSchema metrics).
    pub fn with_observer(
        config: &Config,
        server_cl: u32,
        now: Instant,
        observer: Option<Arc<dyn LevelObserver>>,
    ) -> Result<(FlowControl, Vec<FlowControlError>), FlowControlError> {
        if server_cl == 0 {
            return Err(FlowControlError::ZeroServerConcurrency);
        }
        let fc = FlowControl {
            server_cl: AtomicU32::new(server_cl),
            observer,
            inner: Mutex::new(Inner {
                levels: BTreeMap::new(),
                nominal_cl_sum: 0,
            }),
            snapshot: RwLock::new(Arc::new(Snapshot {
                index: MatchIndex::of(config),
                config: Arc::new(config.clone()),
                levels: fnv::FnvHashMap::default(),
                by_object: ObjectMap::default(),
            })),
            generation: AtomicU64::new(0),
            dropped: Mutex::new(DroppedRequestsTracker::new()),
        };
        let problems = fc.apply_config(config, now);
        Ok((fc, problems))
    }

    /// The server concurrency limit.
    pub fn server_concurrency_limit(&self) -> u32 {
        self.server_cl.load(Ordering::Acquire)
    }

    /// Sets the server concurrency limit (a replica's share of a budget shared with others,
    /// `coordination`) and recomputes every level's limits as a reload does: the nominal limits
    /// follow `server_cl` at once, and borrowing runs. Queued and executing requests stay; a
    /// level whose limit falls serves what it holds and dispatches nothing until it is under
    /// its new limit. A `server_cl` of 0 is refused (the limit is left unchanged).
    pub fn set_server_concurrency_limit(
        &self,
        server_cl: u32,
        now: Instant,
    ) -> Result<(), FlowControlError> {
        if server_cl == 0 {
            return Err(FlowControlError::ZeroServerConcurrency);
        }
        let mut inner = self.lock_inner();
        if self.server_concurrency_limit() == server_cl {
            return Ok(());
        }
        self.server_cl.store(server_cl, Ordering::Release);
        self.recompute_limits(&mut inner, &[]);
        self.adjust_locked(&mut inner, now);
        Ok(())
    }

    /// `Σ NominalCL` of the current levels were the server concurrency limit `server_cl`: the
    /// seats a replica can hand out with that limit (at least one per level with shares, since
    /// each nominal limit is rounded up).
    pub fn nominal_seats_for(&self, server_cl: u32) -> u32 {
        let inner = self.lock_inner();
        let refs: Vec<&PriorityLevel> = inner.levels.values().map(|e| e.pl.as_ref()).collect();
        limits::nominal_cl_sum(&level_limits(server_cl, &refs))
    }

    /// The current configuration and levels (one read lock and an `Arc` clone).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.read())
    }

    /// Changes whenever another snapshot is published: a caller that keeps a
    /// [`snapshot`](Self::snapshot) (`simulate`, per event) compares this plain load instead
    /// of taking the lock. Read it before the snapshot: a snapshot published in between is
    /// then taken again on the next comparison, never missed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Swaps in a new configuration without losing requests: kept levels are reconfigured in
    /// place, new ones created, removed ones quiesce (serve what they hold, take nothing new,
    /// then go). Limits are recomputed and borrowing runs at once. Returns the levels that
    /// could not be (re)configured; they keep their previous shape or are left out.
    pub fn apply_config(&self, config: &Config, now: Instant) -> Vec<FlowControlError> {
        let mut problems = Vec::new();
        let mut inner = self.lock_inner();
        let mut fresh: Vec<String> = Vec::new();
        for pl in config.priority_levels() {
            let qc = queuing_config(pl);
            match inner.levels.get_mut(&pl.name) {
                Some(entry) => {
                    if let Err(source) = entry.queues.reconfigure(qc, now) {
                        problems.push(level_error(&pl.name, source));
                        continue;
                    }
                    entry.pl = Arc::clone(pl);
                    entry.quiescing = false;
                }
                None => {
                    // The limit is set below, once the shares of every level are known.
                    let name: Arc<str> = Arc::from(pl.name.as_str());
                    let observer = self.observer.clone();
                    match LevelQueues::with_observer(name, qc, 0, now, observer) {
                        Ok(queues) => {
                            inner.levels.insert(pl.name.clone(), new_entry(pl, queues));
                            fresh.push(pl.name.clone());
                        }
                        Err(source) => problems.push(level_error(&pl.name, source)),
                    }
                }
            }
        }
        let in_config = |name: &str| config.priority_level(name).is_some();
        inner
            .levels
            .retain(|name, e| in_config(name) || !e.queues.is_drained());
        for (name, e) in inner.levels.iter_mut() {
            e.quiescing = !in_config(name);
        }
        self.recompute_limits(&mut inner, &fresh);
        self.adjust_locked(&mut inner, now);
        self.publish(&inner, config);
        drop(inner);
        self.lock_dropped().retain(|name| in_config(name));
        problems
    }

    /// The periodic borrowing adjustment: call every [`borrowing::BORROWING_ADJUSTMENT_PERIOD`]
    /// (10 s). Also lets drained quiescing levels go.
    pub fn adjust_borrowing(&self, now: Instant) -> BorrowingOutcome {
        let mut inner = self.lock_inner();
        let before = inner.levels.len();
        inner
            .levels
            .retain(|_, e| !(e.quiescing && e.queues.is_drained()));
        if inner.levels.len() != before {
            self.recompute_limits(&mut inner, &[]);
        }
        self.adjust_locked(&mut inner, now)
    }

    /// Admits a request to `level` (captured from [`snapshot`](Self::snapshot) when it was
    /// classified). A rejection carries the level's current `Retry-After`.
    ///
    /// The level's own future with the `Retry-After` mapped on: nothing of the request is kept
    /// while it waits but the level's wait guard.
    pub fn admit(
        &self,
        level: &LevelHandle,
        req: AdmitRequest,
    ) -> impl Future<Output = Result<Seat, Rejection>> + Send + '_ {
        level
            .queues
            .admit(req)
            .map(move |admitted| admitted.map_err(|rejection| self.with_retry_after(rejection)))
    }

    /// Starts admitting `req` without a runtime task: polls the admission once, so that a
    /// request dispatched at once (most of them) costs no task or timer, and hands back the
    /// future otherwise. What `simulate` and the shadows do for every request they replay.
    ///
    /// A request answered at once costs no future either: only one that waits in a queue is
    /// boxed, and polled once here as before (its timer registered).
    pub fn start_admit(self: &Arc<Self>, level: LevelHandle, req: AdmitRequest) -> Admitting {
        self.start_admit_at(&level, req, Instant::now())
    }

    /// [`start_admit`](Self::start_admit) for a request arriving `now`, the clock's reading,
    /// which a caller that has it hands over (`simulate` reads its paused clock once per event).
    /// The level is borrowed: only a request that waits keeps its queues (in its wait guard).
    pub fn start_admit_at(
        self: &Arc<Self>,
        level: &LevelHandle,
        req: AdmitRequest,
        now: Instant,
    ) -> Admitting {
        let waiting = match level.queues.start_admit(req, now) {
            AdmitStarted::Answered(admitted) => {
                return Admitting::Decided(
                    admitted.map_err(|rejection| self.with_retry_after(rejection)),
                )
            }
            AdmitStarted::Queued(waiting) => waiting,
        };
        let flow_control = Arc::clone(self);
        let mut admitting = Box::pin(waiting.map(move |admitted| {
            admitted.map_err(|rejection| flow_control.with_retry_after(rejection))
        }));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match admitting.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(admitted) => Admitting::Decided(admitted),
            std::task::Poll::Pending => Admitting::Waiting(admitting),
        }
    }

    /// `rejection` with the level's current `Retry-After`, its drop recorded.
    fn with_retry_after(&self, mut rejection: Rejection) -> Rejection {
        let now_secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut dropped = self.lock_dropped();
        dropped.record_dropped(&rejection.priority_level, now_secs);
        rejection.retry_after = dropped.retry_after(&rejection.priority_level);
        rejection
    }

    /// Every level, quiescing ones included, by name.
    pub fn levels(&self) -> Vec<LevelInfo> {
        self.lock_inner()
            .levels
            .values()
            .map(|e| LevelInfo {
                priority_level: Arc::clone(&e.pl),
                queues: Arc::clone(&e.queues),
                limits: e.limits,
                current_cl: e.current_cl,
                stats: e.stats,
                quiescing: e.quiescing,
            })
            .collect()
    }

    fn recompute_limits(&self, inner: &mut Inner, fresh: &[String]) {
        let pls: Vec<PriorityLevelRef> = inner.levels.values().map(|e| Arc::clone(&e.pl)).collect();
        let refs: Vec<&PriorityLevel> = pls.iter().map(|p| p.as_ref()).collect();
        let computed = level_limits(self.server_concurrency_limit(), &refs);
        inner.nominal_cl_sum = limits::nominal_cl_sum(&computed);
        for (e, l) in inner.levels.values_mut().zip(computed) {
            e.limits = l;
        }
        for name in fresh {
            if let Some(e) = inner.levels.get_mut(name) {
                e.current_cl = e.limits.initial_current_cl();
                e.stats = SeatDemandStats::default();
            }
        }
    }

    fn adjust_locked(&self, inner: &mut Inner, now: Instant) -> BorrowingOutcome {
        let mut demands: Vec<LevelDemand> = inner
            .levels
            .values()
            .map(|e| LevelDemand {
                exempt: e.pl.is_exempt(),
                limits: e.limits,
                obs: e.queues.reset_seat_demand(now),
                stats: e.stats,
                current_cl: e.current_cl,
            })
            .collect();
        let outcome = borrowing::adjust_borrowing(
            self.server_concurrency_limit(),
            inner.nominal_cl_sum,
            &mut demands,
        );
        for (e, d) in inner.levels.values_mut().zip(&demands) {
            e.stats = d.stats;
            e.current_cl = d.current_cl;
            e.queues.set_concurrency_limit(d.current_cl, now);
        }
        outcome
    }

    fn publish(&self, inner: &Inner, config: &Config) {
        let levels: fnv::FnvHashMap<String, LevelHandle> = inner
            .levels
            .iter()
            .filter(|(_, e)| !e.quiescing)
            .map(|(name, e)| {
                let handle = LevelHandle {
                    queues: Arc::clone(&e.queues),
                    priority_level: Arc::clone(&e.pl),
                    max_seats: e.limits.max_seats,
                };
                (name.clone(), handle)
            })
            .collect();
        let by_object = levels
            .values()
            .map(|h| (object_key(&h.priority_level), h.clone()))
            .collect();
        let snapshot = Arc::new(Snapshot {
            index: MatchIndex::of(config),
            config: Arc::new(config.clone()),
            levels,
            by_object,
        });
        *self.snapshot.write() = snapshot;
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn lock_inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    fn lock_dropped(&self) -> MutexGuard<'_, DroppedRequestsTracker> {
        self.dropped.lock()
    }
}

/// The static limits of every level (section (e)); one function so the source can change.
fn level_limits(server_cl: u32, levels: &[&PriorityLevel]) -> Vec<LevelLimits> {
    limits::compute_limits(server_cl, levels)
}

fn new_entry(pl: &PriorityLevelRef, queues: Arc<LevelQueues>) -> LevelEntry {
    LevelEntry {
        pl: Arc::clone(pl),
        queues,
        limits: LevelLimits {
            nominal_cl: 0,
            lendable_cl: 0,
            borrowing_cl: 0,
            min_cl: 0,
            max_cl: 0,
            max_seats: None,
        },
        stats: SeatDemandStats::default(),
        current_cl: 0,
        quiescing: false,
    }
}

fn level_error(name: &str, source: QueueSetError) -> FlowControlError {
    FlowControlError::Level {
        name: name.to_string(),
        source,
    }
}

/// Mirrors `queueSetCompleterForPL`: exempt → no limit; `Reject` → no queues; `Queue` → its shape.
pub fn queuing_config(pl: &PriorityLevel) -> QueuingConfig {
    if pl.is_exempt() {
        return QueuingConfig::Exempt;
    }
    match pl.queuing() {
        Some(q) => QueuingConfig::Queue(QueueShape {
            queues: q.queues,
            hand_size: q.hand_size,
            queue_length_limit: q.queue_length_limit,
        }),
        None => QueuingConfig::Reject,
    }
}

#[cfg(test)]
mod tests;
