//! Waiting for seats: a priority level's queue set as requests see it (the queue's state machine).
//!
//! Mirrors the waiting half of `queueset.go` (`StartRequest` → `Finish` → `wait`) and
//! `apf_filter.go: Handle`, over tokio: the sans-I/O [`QueueSet`] sits behind a mutex that is never
//! held across an `.await`; a waiting request parks a oneshot sender in the queue set and is woken
//! when it is dispatched or times out. The future's drop guard takes a request out of its queue the
//! moment its caller goes away. [`Seat`] is the RAII value that releases the seats.

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::sync::oneshot;
use tokio::time::{Instant, Timeout};

use super::borrowing::{IntegratorResults, SeatDemandIntegrator};
use super::queueset::{
    Arrival, Counters, DispatchR, FlowMeta, Note, QueueSet, QueueSetDump, QueueSetError,
    QueuingConfig, RejectReason, Removal, RequestId, RequestState, Started,
};
use super::WorkEstimate;

/// A request refused by flow control: answered with 429 and `Retry-After`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many requests: {} at priority level {priority_level}", reason.as_str())]
pub struct Rejection {
    /// `queue-full`, `concurrency-limit` or `time-out`.
    pub reason: RejectReason,
    /// The priority level's name.
    pub priority_level: Arc<str>,
    /// How long it waited in its queue before giving up (zero for immediate rejections).
    pub waited: Duration,
    /// Seconds for the `Retry-After` header (1 unless the controller filled it in).
    pub retry_after: u64,
}

/// What one request asks of a level.
#[derive(Debug, Clone)]
pub struct AdmitRequest {
    /// Its seats.
    pub estimate: WorkEstimate,
    /// Its flow's hash (`hashFlowID(flowSchema, distinguisher)`).
    pub hash: u64,
    /// Its flow, for dumps.
    pub flow: FlowMeta,
    /// How long it may wait in a queue ([`wait_limit`](super::timeout::wait_limit)).
    pub wait_limit: Duration,
}

/// Read-only figures of a level, for metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelStats {
    /// Requests waiting.
    pub waiting: u32,
    /// Requests executing.
    pub executing: u32,
    /// Seats held (executing and lingering).
    pub seats_in_use: u64,
    /// Σ MaxSeats of waiting requests.
    pub seats_waiting: u64,
    /// The concurrency limit in force (currentCL).
    pub concurrency_limit: u32,
    /// Totals.
    pub counters: Counters,
    /// R, the queue set's virtual clock, at its last change (`current_r`).
    pub current_r: f64,
}

type Waiter = oneshot::Sender<()>;

struct LevelState {
    qs: QueueSet<Waiter>,
    demand: SeatDemandIntegrator,
}

/// One priority level's queue set, shared by every request of the level.
pub struct LevelQueues {
    name: Arc<str>,
    state: Mutex<LevelState>,
    observer: Option<Arc<dyn LevelObserver>>,
}

impl std::fmt::Debug for LevelQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelQueues")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl LevelQueues {
    /// A level's queues with `config` and concurrency limit `concurrency_limit`.
    pub fn new(
        name: Arc<str>,
        config: QueuingConfig,
        concurrency_limit: u32,
        now: Instant,
    ) -> Result<Arc<LevelQueues>, QueueSetError> {
        Self::with_observer(name, config, concurrency_limit, now, None)
    }

    /// [`new`](Self::new), reporting queue and seat changes to `observer` (per-FlowSchema
    /// metrics).
    pub fn with_observer(
        name: Arc<str>,
        config: QueuingConfig,
        concurrency_limit: u32,
        now: Instant,
        observer: Option<Arc<dyn LevelObserver>>,
    ) -> Result<Arc<LevelQueues>, QueueSetError> {
        let mut qs = QueueSet::new(config, concurrency_limit, now)?;
        if observer.is_some() {
            qs.keep_notes();
        }
        Ok(Arc::new(LevelQueues {
            name,
            state: Mutex::new(LevelState {
                qs,
                demand: SeatDemandIntegrator::new(now),
            }),
            observer,
        }))
    }

    /// The priority level's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// Waits until the request may execute, or is refused.
    ///
    /// Exempt levels answer at once; `Reject` levels answer at once with a seat or
    /// `concurrency-limit`; queuing levels may answer `queue-full` at once, or a seat once
    /// dispatched, or `time-out` after `wait_limit`. Dropping the future while it waits takes the
    /// request out of its queue immediately.
    ///
    /// Nothing happens until the future is first polled. It is a state machine of its own rather
    /// than an `async fn`, so a waiting request holds only its wait guard and its timer, not the
    /// request it was given (BENCHMARKS.md, memory per queued request).
    pub fn admit(self: &Arc<Self>, req: AdmitRequest) -> Admit {
        Admit {
            state: AdmitState::Start {
                level: Arc::clone(self),
                req,
            },
        }
    }

    /// [`admit`](Self::admit) begun at once: the answer when there is one without waiting (most
    /// requests), else the admission of the request just queued, to be polled for the rest.
    /// `now` is the clock's reading, which a caller that has it hands over.
    pub fn start_admit(self: &Arc<Self>, req: AdmitRequest, now: Instant) -> AdmitStarted {
        match self.enqueue(req, now) {
            Enqueued::Answered(answer) => AdmitStarted::Answered(answer),
            Enqueued::Queued { guard, woken } => AdmitStarted::Queued(Admit {
                state: AdmitState::Waiting { guard, woken },
            }),
        }
    }

    /// Takes `req`, arrived `now`, to the queue set: answered at once, or queued with a guard.
    fn enqueue(self: &Arc<Self>, req: AdmitRequest, now: Instant) -> Enqueued {
        let arrived = now;
        let deadline = arrived + req.wait_limit;
        let flow_schema = Arc::clone(&req.flow.flow_schema);
        let mutating = req.flow.mutating;
        let seats = req.estimate.max_seats();
        let arrival = Arrival {
            estimate: req.estimate,
            hash: req.hash,
            deadline: Some(deadline),
            flow: req.flow,
        };
        let mut st = self.state.lock();
        let started = st.qs.start_request(arrived, arrival);
        let out = match started {
            Started::Executing(id) => Err(Ok(st.qs.seats_of(id).map(|s| (id, s)))),
            Started::Rejected(reason) => Err(Err(reason)),
            Started::Queued(id) => {
                let (tx, rx) = oneshot::channel();
                // Just queued under this lock: it is waiting.
                let _ = st.qs.set_waiter(id, tx);
                let len = st.qs.queue_of(id).map_or(0, |q| st.qs.queue_len(q));
                Ok((id, rx, len))
            }
        };
        self.after_change(&mut st, arrived);
        drop(st);
        let (id, rx, queue_length) = match out {
            Ok(waiting) => waiting,
            Err(Ok(Some((id, held)))) => {
                return Enqueued::Answered(Ok(self.seat(id, Duration::ZERO, flow_schema, held)));
            }
            Err(Ok(None)) => {
                return Enqueued::Answered(Err(
                    self.rejection(RejectReason::TimeOut, Duration::ZERO)
                ))
            }
            Err(Err(reason)) => {
                return Enqueued::Answered(Err(self.rejection(reason, Duration::ZERO)))
            }
        };
        if let Some(o) = &self.observer {
            o.enqueued(&self.name, &flow_schema, seats, queue_length);
            o.waiting_changed(mutating, 1);
        }
        let guard = WaitGuard {
            level: Arc::clone(self),
            id: Some(id),
            flow_schema,
            seats,
            mutating,
            arrived,
        };
        Enqueued::Queued {
            guard,
            woken: tokio::time::timeout_at(deadline, rx),
        }
    }

    /// The end of a wait: `woken` when the queue set dispatched the request before its wait
    /// limit. Disarms `guard`.
    fn finish_wait(guard: &mut WaitGuard, woken: bool) -> Result<Seat, Rejection> {
        let Some(id) = guard.id.take() else {
            // Only a finished wait disarms its guard, and a finished future is not polled.
            return Err(guard.level.rejection(RejectReason::TimeOut, Duration::ZERO));
        };
        let now = Instant::now();
        let waited = now.saturating_duration_since(guard.arrived);
        let (level, seats) = (&guard.level, guard.seats);
        let flow_schema = Arc::clone(&guard.flow_schema);
        let mut st = level.state.lock();
        let outcome = match st.qs.state(id) {
            Some(RequestState::Executing) => Ok(st.qs.seats_of(id).unwrap_or(seats)),
            Some(RequestState::Waiting) => {
                // The timer fired first (or the waiter vanished, which cannot happen while we
                // hold the level): the wait limit is reached.
                debug_assert!(!woken, "woken while still waiting");
                st.qs.cancel(id, now, Removal::TimedOut);
                level.after_change(&mut st, now);
                Err(())
            }
            // Timed out by the queue set (its own deadline check).
            Some(RequestState::Lingering) | None => Err(()),
        };
        drop(st);
        if let Some(o) = &level.observer {
            o.dequeued(&level.name, &flow_schema, seats, outcome.is_ok());
            o.waiting_changed(guard.mutating, -1);
        }
        match outcome {
            Ok(held) => Ok(level.seat(id, waited, flow_schema, held)),
            Err(()) => Err(level.rejection(RejectReason::TimeOut, waited)),
        }
    }

    /// Applies a new queuing configuration, keeping queued and executing requests.
    pub fn reconfigure(&self, config: QueuingConfig, now: Instant) -> Result<(), QueueSetError> {
        self.with_queue_set(now, |qs| qs.reconfigure(config, now))
    }

    /// Sets the concurrency limit and dispatches what now fits.
    pub fn set_concurrency_limit(&self, concurrency_limit: u32, now: Instant) {
        self.with_queue_set(now, |qs| qs.set_concurrency_limit(concurrency_limit, now));
    }

    /// The seat-demand statistics since the last call; starts a new period.
    pub fn reset_seat_demand(&self, now: Instant) -> IntegratorResults {
        let mut st = self.state.lock();
        st.demand.reset(now)
    }

    /// The level's figures now.
    pub fn stats(&self) -> LevelStats {
        let st = self.state.lock();
        LevelStats {
            waiting: st.qs.waiting(),
            executing: st.qs.executing(),
            seats_in_use: st.qs.seats_in_use(),
            seats_waiting: st.qs.seats_waiting(),
            concurrency_limit: st.qs.concurrency_limit(),
            counters: st.qs.counters(),
            current_r: st.qs.current_r().to_f64(),
        }
    }

    /// The seats held now (executing and lingering): [`stats`](Self::stats)`.seats_in_use`
    /// alone.
    pub fn seats_in_use(&self) -> u64 {
        self.state.lock().qs.seats_in_use()
    }

    /// The readings behind the dispatch gauges ([`QueueSet::dispatch_readings`]).
    pub fn dispatch_readings(&self) -> Option<DispatchR> {
        self.state.lock().qs.dispatch_readings()
    }

    /// Every queue and request (debug endpoints).
    pub fn dump(&self) -> QueueSetDump {
        self.state.lock().qs.dump()
    }

    /// Nothing waiting, executing or holding final seats.
    pub fn is_drained(&self) -> bool {
        self.state.lock().qs.is_drained()
    }

    fn with_queue_set<R>(&self, now: Instant, f: impl FnOnce(&mut QueueSet<Waiter>) -> R) -> R {
        let mut st = self.state.lock();
        let r = f(&mut st.qs);
        self.after_change(&mut st, now);
        r
    }

    fn seat(self: &Arc<Self>, id: RequestId, waited: Duration, fs: Arc<str>, seats: u32) -> Seat {
        if let Some(o) = &self.observer {
            o.seats_changed(&self.name, &fs, i64::from(seats));
        }
        Seat {
            level: Arc::clone(self),
            id: Some(id),
            waited,
            flow_schema: fs,
            seats,
        }
    }

    fn rejection(&self, reason: RejectReason, waited: Duration) -> Rejection {
        Rejection {
            reason,
            priority_level: Arc::clone(&self.name),
            waited,
            retry_after: 1,
        }
    }

    /// Ends the execution of `id`; its final seats linger on a timer if it has any.
    fn release(self: &Arc<Self>, id: RequestId, fs: &Arc<str>, seats: u32, now: Instant) {
        let finished = self.with_queue_set(now, |qs| qs.finish(id, now));
        let Ok(fin) = finished else {
            tracing::error!(priority_level = %self.name, "Seat released twice or unknown");
            return;
        };
        let Some(linger) = fin.linger else {
            self.note_released(fs, seats);
            return;
        };
        let level = Arc::clone(self);
        let fs = Arc::clone(fs);
        let release_final = move || {
            let now = Instant::now();
            let _ = level.with_queue_set(now, |qs| qs.release_final_seats(id, now));
            level.note_released(&fs, seats);
        };
        // The client is not delayed: the final seats are given back by a timer.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    tokio::time::sleep(linger).await;
                    release_final();
                });
            }
            Err(_) => release_final(),
        }
    }

    /// After every change: feed the seat-demand integrator, wake the requests that were
    /// dispatched or timed out, and hand the queue set's notes to the observer (under the lock,
    /// so they arrive in order).
    fn after_change(&self, st: &mut LevelState, now: Instant) {
        let demand = st.qs.seat_demand() as f64;
        st.demand.set(demand, now);
        for event in st.qs.drain_events() {
            if let Some(tx) = event.waiter {
                // The receiver may be gone (its future is being dropped); its guard then finds
                // the request executing and releases it.
                let _ = tx.send(());
            }
        }
        if let Some(o) = &self.observer {
            for note in st.qs.drain_notes() {
                o.noted(&self.name, &note);
            }
        }
    }

    fn note_released(&self, fs: &str, seats: u32) {
        if let Some(o) = &self.observer {
            o.seats_changed(&self.name, fs, -i64::from(seats));
        }
    }
}

/// What [`LevelQueues::start_admit`] did with a request.
#[derive(Debug)]
pub enum AdmitStarted {
    /// A seat or a refusal, at once.
    Answered(Result<Seat, Rejection>),
    /// Queued: the rest of its admission.
    Queued(Admit),
}

/// What [`LevelQueues::enqueue`] did with a request.
enum Enqueued {
    /// A seat or a refusal, at once.
    Answered(Result<Seat, Rejection>),
    /// In a queue until dispatched or `woken` times out.
    Queued {
        guard: WaitGuard,
        woken: Timeout<oneshot::Receiver<()>>,
    },
}

pin_project! {
    /// The future of [`LevelQueues::admit`]: a seat, or the reason there is none.
    ///
    /// Dropping it while it waits takes the request out of its queue.
    #[must_use = "futures do nothing unless polled"]
    pub struct Admit {
        #[pin]
        state: AdmitState,
    }
}

impl std::fmt::Debug for Admit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admit").finish_non_exhaustive()
    }
}

pin_project! {
    #[project = AdmitProj]
    #[project_replace = AdmitOwned]
    enum AdmitState {
        Start {
            level: Arc<LevelQueues>,
            req: AdmitRequest,
        },
        Waiting {
            guard: WaitGuard,
            #[pin]
            woken: Timeout<oneshot::Receiver<()>>,
        },
        Done,
    }
}

impl Future for Admit {
    type Output = Result<Seat, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                AdmitProj::Start { .. } => {
                    let AdmitOwned::Start { level, req } =
                        state.as_mut().project_replace(AdmitState::Done)
                    else {
                        unreachable!("invariant: the state was just matched as Start");
                    };
                    match level.enqueue(req, Instant::now()) {
                        Enqueued::Answered(answer) => return Poll::Ready(answer),
                        Enqueued::Queued { guard, woken } => {
                            state.set(AdmitState::Waiting { guard, woken });
                        }
                    }
                }
                AdmitProj::Waiting { guard, woken } => {
                    // The receiver fails only if its sender was dropped, which the queue set
                    // does when it dispatches or forgets the request: the state tells which.
                    let woken = ready!(woken.poll(cx)).is_ok();
                    let answer = LevelQueues::finish_wait(guard, woken);
                    state.set(AdmitState::Done);
                    return Poll::Ready(answer);
                }
                AdmitProj::Done => panic!("`Admit` polled after completion"),
            }
        }
    }
}

/// Takes a waiting request out of its queue when the admitting future is dropped.
struct WaitGuard {
    level: Arc<LevelQueues>,
    id: Option<RequestId>,
    flow_schema: Arc<str>,
    seats: u32,
    mutating: bool,
    arrived: Instant,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let now = Instant::now();
        let level = &self.level;
        let (state, held) = level.with_queue_set(now, |qs| {
            let state = qs.state(id);
            if state == Some(RequestState::Waiting) {
                qs.cancel(id, now, Removal::Cancelled);
            }
            (state, qs.seats_of(id))
        });
        let dispatched = state == Some(RequestState::Executing);
        if let Some(o) = &level.observer {
            o.dequeued(&level.name, &self.flow_schema, self.seats, dispatched);
            o.waiting_changed(self.mutating, -1);
            if state == Some(RequestState::Waiting) {
                o.cancelled(
                    &level.name,
                    &self.flow_schema,
                    now.saturating_duration_since(self.arrived),
                );
            }
        }
        if let (true, Some(held)) = (dispatched, held) {
            // Dispatched while its caller was leaving: give the seats straight back.
            let fs = Arc::clone(&self.flow_schema);
            drop(level.seat(id, Duration::ZERO, fs, held));
        }
    }
}

/// Seats held by an executing request. Dropping it (or [`finish_early`](Seat::finish_early))
/// releases them exactly once and dispatches the next requests; final seats
/// (`AdditionalLatency`) are released later by a timer without delaying the caller.
#[derive(Debug)]
#[must_use = "dropping a Seat releases it at once"]
pub struct Seat {
    level: Arc<LevelQueues>,
    id: Option<RequestId>,
    waited: Duration,
    flow_schema: Arc<str>,
    seats: u32,
}

impl Seat {
    /// Releases the seats now while the caller carries on (a watch once it is initialised).
    /// Later calls and the drop do nothing.
    pub fn finish_early(&mut self) {
        // The clock is read only for seats still held: a seat already given back (by
        // `release_at`, say) is dropped without it.
        if self.id.is_some() {
            self.finish_early_at(Instant::now());
        }
    }

    /// Releases the seats at `now`, the clock's reading, which a caller that has it hands over
    /// (`simulate`'s driver).
    pub fn release_at(mut self, now: Instant) {
        self.finish_early_at(now);
    }

    fn finish_early_at(&mut self, now: Instant) {
        if let Some(id) = self.id.take() {
            self.level.release(id, &self.flow_schema, self.seats, now);
        }
    }

    /// Whether the seats are still held by this value.
    pub fn is_held(&self) -> bool {
        self.id.is_some()
    }

    /// The priority level's name.
    pub fn priority_level(&self) -> &Arc<str> {
        &self.level.name
    }

    /// How long the request waited in its queue.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The seats held (MaxSeats, final seats clamped to the limit).
    pub fn seats(&self) -> u32 {
        self.seats
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.finish_early();
    }
}

/// Hooks for the per-FlowSchema metrics (`current_inqueue_*`, `current_executing_seats`,
/// `request_queue_length_after_enqueue`, `rejected_requests_total{reason="time-out"}` for callers
/// that go away) and the queue set's own (see [`LevelObserver::noted`]). Called outside the
/// level's lock except `noted`; every method defaults to nothing.
pub trait LevelObserver: Send + Sync {
    /// A request entered a queue, which now holds `queue_length` waiting requests.
    fn enqueued(
        &self,
        _priority_level: &str,
        _flow_schema: &str,
        _seats: u32,
        _queue_length: usize,
    ) {
    }

    /// A request left its queue: dispatched, or not (timed out or its caller went away).
    fn dequeued(&self, _priority_level: &str, _flow_schema: &str, _seats: u32, _dispatched: bool) {}

    /// A waiting request's caller went away after `waited` (the apiserver counts it as rejected
    /// with reason `time-out`; no [`Rejection`] reaches anyone).
    fn cancelled(&self, _priority_level: &str, _flow_schema: &str, _waited: Duration) {}

    /// Seats were taken (`delta > 0`, execution starts) or given back (`delta < 0`, after any
    /// lingering), exempt levels included.
    fn seats_changed(&self, _priority_level: &str, _flow_schema: &str, _delta: i64) {}

    /// A mutating (or read-only) request entered (`delta = 1`) or left (`-1`) a queue of any
    /// level: the apiserver's `queueNote` (`read_vs_write_current_requests{phase="waiting"}`).
    fn waiting_changed(&self, _mutating: bool, _delta: i64) {}

    /// The queue set of `priority_level` found a head that did not fit, or advanced its epoch
    /// ([`Note`]). Unlike the other hooks this one is called under the level's lock, in order;
    /// it must not call back into the level.
    fn noted(&self, _priority_level: &str, _note: &Note) {}
}

#[cfg(test)]
mod tests;
