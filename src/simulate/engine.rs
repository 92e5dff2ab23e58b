//! The virtual-time driver: each request of a trace goes through flow control's front door
//! ([`FrontDoor`]) and [`FlowControl::start_admit_at`] — the code that enforces — on a tokio
//! runtime whose clock is paused, so time jumps from one event to the next and an hour of
//! traffic replays in seconds.
//!
//! Every configuration compared runs in the same runtime, fed the same requests at the same
//! virtual instants. Borrowing is adjusted every 10 s of trace time, as in `serve`.

use parking_lot::Mutex;
use std::cell::{Ref, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::attributes::Derived;
use super::classifications::Classifications;
use super::feed::{self, Fed};
use super::record::Recorder;
use super::report::{Sample, SimReport};
use super::trace::{TraceEvent, TraceRequest};
use crate::config::Config;
use crate::fairqueue::borrowing::BORROWING_ADJUSTMENT_PERIOD;
use crate::fairqueue::controller::{Admitting, FlowControl, FlowControlError, Snapshot};
use crate::fairqueue::flow_request::{Described, FlowRequest, FrontDoor, Handling, NotAdmitted};
use crate::fairqueue::level_queues::{LevelQueues, Rejection, Seat};
use crate::fairqueue::work_estimate::{ObjectStats, WatchGuard, WorkEstimator};
use crate::request_info::{RequestInfo, RequestInfoError};

/// How a simulation runs.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// `--max-requests-inflight` + `--max-mutating-requests-inflight`.
    pub server_concurrency_limit: u32,
    /// `--request-timeout`: a request waits in a queue for a quarter of it at most.
    pub request_timeout: Duration,
    /// Object counts (and average sizes, 0 when unknown) per resource key (`pods`,
    /// `deployments.apps`) for the cost of lists.
    pub object_counts: Vec<(String, ObjectStats)>,
    /// Sample every level this often for the timeline (`None`: no timeline).
    pub timeline_interval: Option<Duration>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            server_concurrency_limit: 600,
            request_timeout: Duration::from_secs(60),
            object_counts: Vec::new(),
            timeline_interval: None,
        }
    }
}

/// Why a simulation cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Flow control could not be built from a configuration.
    #[error("flow control: {0}")]
    FlowControl(#[from] FlowControlError),
    /// A workload cannot be run as written.
    #[error("the workload: {0}")]
    Workload(String),
    /// The runtime could not start.
    #[error("the simulation runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// One request of a trace as the driver replays it, the same for every configuration.
#[derive(Clone, Copy)]
struct Replay<'a> {
    request: &'a TraceRequest,
    /// Its attributes, or why the apiserver could not derive them.
    derived: Result<&'a Derived, &'a RequestInfoError>,
    /// When it arrived; the clock reads that rounded up to the millisecond: `now`.
    arrived: Instant,
    now: Instant,
    /// Earlier than an event already replayed.
    late: bool,
}

/// One configuration under simulation.
pub(super) struct Sim {
    pub(super) flow_control: Arc<FlowControl>,
    pub(super) estimator: WorkEstimator,
    pub(super) recorder: Arc<Mutex<Recorder>>,
    /// Watches whose end comes as a later [`TraceEvent::Ended`].
    open_watches: Arc<Mutex<HashMap<String, WatchGuard>>>,
    /// The snapshot of the configuration, with its generation: a simulation never applies
    /// another configuration, so it is taken once, not under the lock per event; should one be
    /// swapped in, the generation tells.
    snapshot: RefCell<(u64, Arc<Snapshot>)>,
    /// The classifications of the requests seen lately. The driver alone replays requests,
    /// one at a time on one thread: no lock.
    classifications: RefCell<Classifications>,
    /// When each of its periodic tasks wakes next.
    background: Vec<NextWake>,
}

/// Replays `events` (in arrival order; see [`super::trace::TraceReader`]) through each of
/// `configs` and reports what flow control would have done, one report per configuration.
///
/// With a second CPU, the events are taken and their requests' attributes derived on a thread
/// of its own, ahead of the replay (the module `simulate::feed`): the same results.
pub fn simulate(
    events: impl Iterator<Item = TraceEvent> + Send,
    configs: &[&Config],
    options: &SimOptions,
) -> Result<Vec<SimReport>, SimError> {
    let ahead = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    simulate_fed(events, configs, options, ahead)
}

/// [`simulate`] with everything on the caller's thread, as on one CPU.
pub fn simulate_on_this_thread(
    events: impl Iterator<Item = TraceEvent> + Send,
    configs: &[&Config],
    options: &SimOptions,
) -> Result<Vec<SimReport>, SimError> {
    simulate_fed(events, configs, options, false)
}

/// [`simulate`], fed on a thread of its own (`ahead`) or on the caller's.
pub(super) fn simulate_fed(
    events: impl Iterator<Item = TraceEvent> + Send,
    configs: &[&Config],
    options: &SimOptions,
    ahead: bool,
) -> Result<Vec<SimReport>, SimError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    if ahead {
        feed::on_a_thread(events, |fed| runtime.block_on(drive(fed, configs, options)))?
    } else {
        runtime.block_on(drive(feed::inline(events), configs, options))
    }
}

async fn drive(
    events: impl Iterator<Item = Fed>,
    configs: &[&Config],
    options: &SimOptions,
) -> Result<Vec<SimReport>, SimError> {
    let origin = Instant::now();
    let mut sims = Vec::with_capacity(configs.len());
    for config in configs {
        sims.push(Sim::new(config, options, origin)?);
    }
    // Every request task holds a sender; when the last one is gone, everything has finished.
    let (alive, mut finished) = mpsc::channel::<()>(1);
    let mut trace_origin: Option<Duration> = None;
    let mut last_end = origin;
    // Seats of requests dispatched at once, held by the driver until their end: the common case
    // costs no task and no timer of its own.
    let mut holding = Holding::default();
    let mut executions = Executions::default();
    let mut latest = origin;
    let background: Vec<NextWake> = sims.iter().flat_map(|s| s.background.clone()).collect();
    let mut clock = Clock {
        now: origin,
        paused: origin,
        metrics: tokio::runtime::Handle::current().metrics(),
        background: &background,
    };
    for fed in events {
        let mut at = |t: Duration| {
            let first = *trace_origin.get_or_insert(t);
            origin + t.saturating_sub(first)
        };
        let time = match &fed {
            Fed::Request(request, _) => at(request.arrival),
            Fed::Ended { at: t, .. } => at(*t),
        };
        release_until(&mut holding, time, &mut clock).await;
        // Late: earlier than an event already replayed (further out of order than the reader's
        // window). Not the clock: it reads the last instant rounded up to the millisecond.
        let late = time < latest;
        latest = latest.max(time);
        // Until the next `.await` the clock stands still: read once for the whole event.
        let now = clock.advance_to(time).await;
        match fed {
            Fed::Request(mut request, derived) => {
                executions.fill_in(&mut request);
                if let Some(d) = request.duration {
                    last_end = last_end.max(now + d);
                }
                let replay = Replay {
                    request: &request,
                    derived: derived.as_ref(),
                    arrived: if late { now } else { time.min(now) },
                    now,
                    late,
                };
                for sim in &sims {
                    let started = sim.start(&replay, options, &alive);
                    if let Some((until, seat)) = started {
                        holding.push(until, seat);
                    }
                }
            }
            Fed::Ended { key, .. } => {
                last_end = last_end.max(now);
                for sim in &sims {
                    sim.open_watches.lock().remove(&key);
                }
            }
        }
    }
    let never = clock.now + Duration::from_secs(u32::MAX.into());
    release_until(&mut holding, never, &mut clock).await;
    clock.catch_up().await;
    drop(alive);
    let _ = finished.recv().await;
    for sim in &sims {
        sim.open_watches.lock().clear();
    }
    let end = last_end.max(Instant::now());
    let duration = end.saturating_duration_since(origin);
    Ok(sims
        .iter()
        .map(|sim| {
            sim.recorder
                .lock()
                .report(duration, options.server_concurrency_limit)
        })
        .collect())
}

// === impl Sim ===

impl Sim {
    pub(super) fn new(
        config: &Config,
        options: &SimOptions,
        origin: Instant,
    ) -> Result<Sim, SimError> {
        let (flow_control, problems) =
            FlowControl::new(config, options.server_concurrency_limit, origin)?;
        for problem in problems {
            tracing::warn!(%problem, "A priority level is left out of the simulation");
        }
        let flow_control = Arc::new(flow_control);
        let estimator = WorkEstimator::default();
        let mut counts_wake = None;
        if !options.object_counts.is_empty() {
            set_object_counts(&estimator, &options.object_counts, origin);
            let next = NextWake::new(origin);
            tokio::spawn(keep_object_counts(
                estimator.clone(),
                options.object_counts.clone(),
                next.clone(),
            ));
            counts_wake = Some(next);
        }
        let mut recorder = Recorder::default();
        if options.timeline_interval.is_none() {
            recorder.without_timeline();
        }
        for level in flow_control.levels() {
            let pl = &level.priority_level;
            recorder.level(&pl.name, pl.is_exempt(), level.limits.nominal_cl);
        }
        let generation = flow_control.generation();
        let snapshot = RefCell::new((generation, flow_control.snapshot()));
        let mut sim = Sim {
            snapshot,
            flow_control,
            estimator,
            recorder: Arc::new(Mutex::new(recorder)),
            open_watches: Arc::default(),
            classifications: RefCell::default(),
            background: counts_wake.into_iter().collect(),
        };
        let next = NextWake::new(origin);
        tokio::spawn(adjust_borrowing(
            Arc::clone(&sim.flow_control),
            next.clone(),
        ));
        sim.background.push(next);
        if let Some(every) = options.timeline_interval {
            let next = NextWake::new(origin);
            tokio::spawn(sample(
                Arc::clone(&sim.flow_control),
                Arc::clone(&sim.recorder),
                every,
                origin,
                next.clone(),
            ));
            sim.background.push(next);
        }
        Ok(sim)
    }

    /// The configuration's current snapshot: the one kept, unless another was published since.
    fn snapshot(&self) -> Ref<'_, Arc<Snapshot>> {
        let generation = self.flow_control.generation();
        if self.snapshot.borrow().0 != generation {
            *self.snapshot.borrow_mut() = (generation, self.flow_control.snapshot());
        }
        Ref::map(self.snapshot.borrow(), |(_, snapshot)| snapshot)
    }

    /// Replays one request (see [`Replay`]). A request dispatched at once (the common case)
    /// returns its seats with the instant they are to be given back, for the driver to hold; one
    /// that waits in a queue, and every watch, goes on in a task of its own.
    fn start(
        &self,
        replay: &Replay<'_>,
        options: &SimOptions,
        alive: &mpsc::Sender<()>,
    ) -> Option<(Instant, Seat)> {
        let Replay {
            request,
            derived,
            arrived,
            now,
            late,
        } = *replay;
        let derived = match derived {
            Ok(derived) => derived,
            Err(error) => {
                // The apiserver answers 400 before flow control; nothing to replay.
                tracing::debug!(line = request.line, %error, "Request attributes not derived");
                self.recorder.lock().request(true, late);
                return None;
            }
        };
        let info = &derived.info;
        let described = Described::replayed(&request.identity, info, options.request_timeout);
        let handling = described.handling;
        let snapshot = self.snapshot();
        let mut classifications = self.classifications.borrow_mut();
        // The classification and the level read in place, the memo's and the snapshot's: a
        // request dispatched at once takes no count of their shared names and queues.
        let entered = FrontDoor::new(&snapshot, &self.estimator).enter_classified(
            &described,
            |_| classifications.of(&snapshot, &request.identity, derived),
            now,
            &mut (),
        );
        let FlowRequest {
            classification,
            level,
            admit,
        } = match entered {
            Ok(entered) => entered,
            Err(not_admitted) => {
                let bypassed = not_admitted == NotAdmitted::Bypassed;
                self.recorder.lock().request(bypassed, late);
                return None;
            }
        };
        let queues = level.queues();
        let flow_schema = &classification.flow_schema_name;
        let admitting = self.flow_control.start_admit_at(level, admit, now);
        let admitting = match (handling, admitting) {
            // Most requests get their seats at once: no task, no timer of their own; the
            // request, its arrival and its dispatch recorded together.
            (Handling::Ordinary, Admitting::Decided(Ok(seat))) => {
                let in_use = queues.seats_in_use();
                self.recorder.lock().dispatched_at_once(
                    late,
                    queues.name(),
                    flow_schema,
                    seat.waited(),
                    in_use,
                );
                // From the exact arrival, not the clock: tokio's timers tick in milliseconds,
                // and `now` is the arrival rounded up to one.
                let until = arrived + request.duration.unwrap_or_default();
                return Some((until, seat));
            }
            (_, admitting) => admitting,
        };
        {
            let mut recorder = self.recorder.lock();
            recorder.request(false, late);
            recorder.arrived(queues.name(), flow_schema);
        }
        let admitting = match (handling, admitting) {
            (Handling::Ordinary, Admitting::Decided(admitted)) => {
                // Refused at once.
                let _ = record(
                    &self.recorder,
                    flow_schema,
                    &classification.flow_distinguisher,
                    admitted,
                    queues,
                );
                return None;
            }
            (_, admitting) => admitting,
        };
        let outcome = Outcome {
            recorder: Arc::clone(&self.recorder),
            priority_level: Arc::clone(queues.name()),
            flow_schema: Arc::clone(flow_schema),
            distinguisher: Arc::clone(&classification.flow_distinguisher),
        };
        let queues = Arc::clone(queues);
        let estimator = self.estimator.clone();
        let open_watches = Arc::clone(&self.open_watches);
        let alive = alive.clone();
        let info = Arc::clone(info);
        let held = Held {
            duration: request.duration,
            first_byte: request.first_byte,
            // Only a watch whose end comes later is looked up by its key.
            key: (handling == Handling::Watch && request.duration.is_none())
                .then(|| request.key.clone()),
        };
        tokio::spawn(async move {
            let _alive = alive;
            let Some(seat) = outcome.record(admitting.outcome().await, &queues) else {
                return;
            };
            match handling {
                Handling::Watch => hold_watch(seat, held, &info, &estimator, &open_watches).await,
                _ => {
                    tokio::time::sleep(held.duration.unwrap_or_default()).await;
                    drop(seat);
                }
            }
        });
        None
    }
}

/// The mean execution time of the requests of each HTTP method that the recording server
/// served, so far in the trace.
///
/// A request the recording server rejected (`429`) never executed: its recorded duration is its
/// wait before the rejection (or nothing). Where the simulated configuration would admit it, it
/// is given the mean execution time of the requests of its method served before it.
///
/// A trace has a handful of methods: they are found by a scan, without hashing.
#[derive(Debug, Default)]
struct Executions {
    by_method: Vec<(http::Method, Duration, u32)>,
}

impl Executions {
    fn fill_in(&mut self, request: &mut TraceRequest) {
        let Some(duration) = request.duration else {
            return;
        };
        let at = self
            .by_method
            .iter()
            .position(|(m, ..)| *m == request.method);
        if request.status == Some(429) {
            if let Some((_, sum, n)) = at.map(|i| &self.by_method[i]) {
                request.duration = Some(*sum / (*n).max(1));
            }
            return;
        }
        let i = at.unwrap_or_else(|| {
            let new = (request.method.clone(), Duration::ZERO, 0);
            self.by_method.push(new);
            self.by_method.len() - 1
        });
        let (_, sum, n) = &mut self.by_method[i];
        if *n < u32::MAX {
            *sum += duration;
            *n += 1;
        }
    }
}

/// Where a request's outcome is recorded.
pub(super) struct Outcome {
    pub(super) recorder: Arc<Mutex<Recorder>>,
    pub(super) priority_level: Arc<str>,
    pub(super) flow_schema: Arc<str>,
    pub(super) distinguisher: Arc<str>,
}

impl Outcome {
    /// Records a dispatch (with the level's seats then in use) or a rejection; the seat if any.
    pub(super) fn record(
        &self,
        admitted: Result<Seat, Rejection>,
        queues: &LevelQueues,
    ) -> Option<Seat> {
        debug_assert_eq!(self.priority_level, *queues.name());
        record(
            &self.recorder,
            &self.flow_schema,
            &self.distinguisher,
            admitted,
            queues,
        )
    }
}

/// Records a dispatch at `queues`' level (with its seats then in use) or a rejection; the seat
/// if any.
fn record(
    recorder: &Mutex<Recorder>,
    flow_schema: &Arc<str>,
    distinguisher: &str,
    admitted: Result<Seat, Rejection>,
    queues: &LevelQueues,
) -> Option<Seat> {
    let priority_level = queues.name();
    match admitted {
        Ok(seat) => {
            let in_use = queues.seats_in_use();
            recorder.lock().dispatched(
                priority_level,
                flow_schema,
                distinguisher,
                seat.waited(),
                in_use,
            );
            Some(seat)
        }
        Err(rejection) => {
            recorder
                .lock()
                .rejected(priority_level, flow_schema, distinguisher, rejection.reason);
            None
        }
    }
}

/// Seats the driver holds, each until its instant: a heap of small keys (the instant, then the
/// order they were taken in), the seats themselves in slots that are reused.
#[derive(Default)]
struct Holding {
    by_until: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    seats: Vec<Option<Seat>>,
    free: Vec<usize>,
    seq: u64,
}

// === impl Holding ===

impl Holding {
    fn push(&mut self, until: Instant, seat: Seat) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.seats[slot] = Some(seat);
                slot
            }
            None => {
                self.seats.push(Some(seat));
                self.seats.len() - 1
            }
        };
        self.seq += 1;
        self.by_until.push(Reverse((until, self.seq, slot)));
    }

    /// The first seat to give back if it is due by `time`, with its instant.
    fn pop_due(&mut self, time: Instant) -> Option<(Instant, Option<Seat>)> {
        let Reverse((until, _, slot)) = *self.by_until.peek()?;
        if until > time {
            return None;
        }
        self.by_until.pop();
        self.free.push(slot);
        Some((until, self.seats[slot].take()))
    }
}

/// The resolution of tokio's timers: a sleep ends on the next millisecond.
pub(super) const TICK: Duration = Duration::from_millis(1);

/// Gives back, each at its own instant, the seats held until `time` or earlier, letting the
/// requests they dispatch start at that instant too.
async fn release_until(holding: &mut Holding, time: Instant, clock: &mut Clock<'_>) {
    while let Some((until, seat)) = holding.pop_due(time) {
        let now = clock.advance_to(until).await;
        release(seat, now);
        while let Some((_, seat)) = holding.pop_due(now) {
            release(seat, now);
        }
        // The requests those seats dispatched, and the tasks whose timers fired at this
        // instant, run now, before the clock moves on. When no task but the periodic ones is
        // alive and none of those is due, no task can run and no timer can fire at this
        // instant: the yield would only cost a turn of the scheduler.
        if !clock.quiet_at(now) {
            clock.yield_now().await;
        }
    }
}

/// A periodic task's next wake (its interval's next tick), which it publishes before it waits.
/// It starts at the task's spawning, when the task is ready to run.
#[derive(Clone)]
struct NextWake(Arc<Mutex<Instant>>);

impl NextWake {
    fn new(now: Instant) -> NextWake {
        NextWake(Arc::new(Mutex::new(now)))
    }

    fn set(&self, at: Instant) {
        *self.0.lock() = at;
    }
}

/// The replay's clock: its reading, which the driver moves, and the paused tokio clock, which
/// follows it to that reading whenever anything but the driver could run or read it.
///
/// Only the driver moves the paused clock — by sleeping or advancing it; tasks never move it,
/// and a yield parks the runtime without a timeout, which does not advance it — so the driver
/// knows its reading without asking it.
struct Clock<'a> {
    /// The replay's reading: the instant the queue sets are told.
    now: Instant,
    /// The paused clock's reading: `now`, or behind it while the driver replays a stretch in
    /// which nothing else could run (see [`Clock::advance_to`]).
    paused: Instant,
    metrics: tokio::runtime::RuntimeMetrics,
    /// The periodic tasks of every simulation, the only tasks always alive.
    background: &'a [NextWake],
}

impl Clock<'_> {
    /// No task can run at `at`, or before it from the clock's reading: none is alive but the
    /// periodic ones, and each of those waits for a tick after `at`. A task runs only when
    /// woken — by a timer, which fires only for a task that waits on it, or by a task or the
    /// driver — so then none is in the run queue and no timer is due. (Request tasks, watches
    /// and the queue sets' lingering final seats are tasks: while any is alive, this says no.)
    fn quiet_at(&self, at: Instant) -> bool {
        self.metrics.num_alive_tasks() == self.background.len()
            && self.background.iter().all(|next| *next.0.lock() > at)
    }

    /// Moves the replay to `time` — unless it falls within the current millisecond, which the
    /// clock cannot resolve anyway: then events are replayed at once, still in their exact
    /// order, and the runtime is not parked and woken for each of them. Returns the reading
    /// afterwards.
    ///
    /// A sleep wakes with the clock on the millisecond at or after `time` (tokio's timers tick
    /// in milliseconds from the clock's start, where the reading lies too). When nothing else
    /// could run or read the clock before that ([`quiet_at`](Self::quiet_at)), the replay
    /// moves there on its own: the same reading, without a timer, the two parks of a sleep or
    /// any turn of the scheduler. The paused clock catches up before anything else can run —
    /// a task spawned meanwhile first runs then — so every task reads the replay's clock.
    async fn advance_to(&mut self, time: Instant) -> Instant {
        debug_assert_eq!(
            Instant::now(),
            self.paused,
            "only the driver moves the clock"
        );
        let now = self.now;
        if time < now + TICK {
            return now;
        }
        let ahead = time.duration_since(now);
        let ticks = ahead.as_nanos().div_ceil(TICK.as_nanos());
        let reading = now + Duration::from_millis(ticks as u64);
        if self.quiet_at(reading) {
            self.now = reading;
            return reading;
        }
        self.catch_up().await;
        tokio::time::sleep_until(time).await;
        self.now = Instant::now();
        self.paused = self.now;
        self.now
    }

    /// Lets every task that can run at the replay's instant run, as `tokio::task::yield_now`
    /// does, the paused clock brought to that instant first.
    async fn yield_now(&mut self) {
        if self.paused < self.now {
            // Moves the clock, then yields.
            self.catch_up().await;
        } else {
            tokio::task::yield_now().await;
        }
    }

    /// Brings the paused clock to the replay's reading (a yield when it moves).
    async fn catch_up(&mut self) {
        if self.paused < self.now {
            tokio::time::advance(self.now.duration_since(self.paused)).await;
            self.paused = self.now;
            debug_assert_eq!(Instant::now(), self.now, "the clock moves as a sleep would");
        }
    }
}

/// Gives back seats the driver held, at `now`.
fn release(seat: Option<Seat>, now: Instant) {
    if let Some(seat) = seat {
        seat.release_at(now);
    }
}

/// What a request's task keeps of its trace record.
struct Held {
    duration: Option<Duration>,
    first_byte: Option<Duration>,
    /// The key its end will come by (a watch whose end is a later event).
    key: Option<String>,
}

/// A watch holds its seats until it is initialised (its first byte), then stays registered with
/// the watch tracker — which makes writes to what it watches cost more — until it ends.
async fn hold_watch(
    mut seat: Seat,
    request: Held,
    info: &RequestInfo,
    estimator: &WorkEstimator,
    open_watches: &Mutex<HashMap<String, WatchGuard>>,
) {
    let initialised = request.first_byte.unwrap_or_default();
    tokio::time::sleep(initialised).await;
    seat.finish_early();
    let Some(guard) = estimator.watches().register(info) else {
        return;
    };
    match request.duration {
        Some(d) => {
            tokio::time::sleep(d.saturating_sub(initialised)).await;
            drop(guard);
        }
        None => {
            if let Some(key) = request.key {
                open_watches.lock().insert(key, guard);
            }
        }
    }
}

/// Keeps the given object counts fresh on the virtual clock, as `serve` refreshes them from the
/// upstream every minute (they go stale after 3 min).
async fn keep_object_counts(
    estimator: WorkEstimator,
    counts: Vec<(String, ObjectStats)>,
    next: NextWake,
) {
    let period = Duration::from_secs(60);
    let mut ticks = tokio::time::interval(period);
    loop {
        let now = ticks.tick().await;
        set_object_counts(&estimator, &counts, now);
        next.set(now + period);
    }
}

fn set_object_counts(estimator: &WorkEstimator, counts: &[(String, ObjectStats)], now: Instant) {
    for (key, stats) in counts {
        estimator.objects().set(key, *stats, now);
    }
}

/// `serve`'s periodic borrowing adjustment, on the virtual clock.
async fn adjust_borrowing(flow_control: Arc<FlowControl>, next: NextWake) {
    let mut ticks = tokio::time::interval(BORROWING_ADJUSTMENT_PERIOD);
    let start = ticks.tick().await;
    next.set(start + BORROWING_ADJUSTMENT_PERIOD);
    loop {
        let now = ticks.tick().await;
        let _ = flow_control.adjust_borrowing(now);
        next.set(now + BORROWING_ADJUSTMENT_PERIOD);
    }
}

/// The most samples a level's timeline holds before it is halved (twice the report's
/// [`MAX_POINTS`](crate::simulate::report::html::MAX_POINTS), so that every drawn point is
/// the peak of one to two samples).
pub const TIMELINE_SAMPLES: usize = 4_096;

/// Samples every level for the timeline: every `every` at first, coarser for a long trace
/// (see [`TIMELINE_SAMPLES`]).
async fn sample(
    flow_control: Arc<FlowControl>,
    recorder: Arc<Mutex<Recorder>>,
    every: Duration,
    origin: Instant,
    next: NextWake,
) {
    let mut every = every;
    let mut ticks = tokio::time::interval(every);
    let start = ticks.tick().await;
    next.set(start + every);
    let mut taken = 0;
    loop {
        let now = ticks.tick().await;
        let t = now.saturating_duration_since(origin).as_secs_f64();
        let levels = flow_control.levels();
        let mut recorder = recorder.lock();
        for level in levels {
            let stats = level.queues.stats();
            let sample = Sample {
                t,
                seats_in_use: stats.seats_in_use,
                concurrency_limit: level.current_cl,
                nominal_limit: level.limits.nominal_cl,
                waiting: stats.waiting,
                ..Sample::default()
            };
            recorder.sample(&level.priority_level.name, sample);
        }
        // A short trace is sampled finely; a long one halves its samples and goes on at twice
        // the interval whenever they reach the bound, so memory stays bounded.
        taken += 1;
        if taken >= TIMELINE_SAMPLES {
            recorder.halve_timelines();
            taken = taken.div_ceil(2);
            every *= 2;
            ticks = tokio::time::interval_at(now + every, every);
        }
        next.set(now + every);
    }
}

#[cfg(test)]
mod tests;
