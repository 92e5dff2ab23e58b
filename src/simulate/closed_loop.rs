//! The closed-loop driver of `simulate --workload`: every thread of every [`Client`] calls, waits
//! for its reply, thinks, and calls again, each call going through flow control's front door
//! ([`FrontDoor`]) and admitted by
//! [`FlowControl::start_admit_at`](crate::fairqueue::controller::FlowControl::start_admit_at) —
//! the code that enforces — on the paused tokio clock of [`super::engine`].
//!
//! The driver keeps its own events (calls, replies) at their exact nanosecond instants and
//! measures executions from them; the queue sets read the tokio clock, which moves in whole
//! milliseconds (README, "Where the millisecond clock limits fidelity"). A rejected call is
//! answered at once; its thread waits [`RETRY_AFTER`] (the `Retry-After` client-go honours), or
//! its think time when that is longer, before it calls again.
//!
//! Each configuration runs on its own: a closed loop's arrivals depend on its own replies.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::engine::{Outcome, Sim, SimError, SimOptions, TICK};
use super::record::ClientRecord;
use super::report::SimReport;
use super::workload::{Client, Workload};
use crate::classify::Classification;
use crate::config::Config;
use crate::fairqueue::controller::{self, LevelHandle};
use crate::fairqueue::flow_request::{
    Described, FlowRequest, FrontDoor, Handling, NotAdmitted, Sink,
};
use crate::fairqueue::level_queues::{LevelQueues, Rejection, Seat};
use crate::fairqueue::timeout::Deadlines;
use crate::fairqueue::WorkEstimate;
use crate::request_info::{self, RequestInfo};

/// How long a thread waits after a rejection before it calls again (unless it thinks longer).
/// The apiserver's `Retry-After` is at least 1 s; a fixed value keeps runs deterministic.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Runs `workload` against each of `configs`, one report per configuration, each with its
/// per-client results.
pub fn simulate_workload(
    workload: &Workload,
    configs: &[&Config],
    options: &SimOptions,
) -> Result<Vec<SimReport>, SimError> {
    configs
        .iter()
        .map(|config| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()?;
            runtime.block_on(run(workload, config, options))
        })
        .collect()
}

async fn run(
    workload: &Workload,
    config: &Config,
    options: &SimOptions,
) -> Result<SimReport, SimError> {
    let origin = Instant::now();
    let sim = Sim::new(config, options, origin)?;
    let mut driver = Driver::new(sim, workload, options, origin)?;
    driver.run().await;
    let mut report = driver
        .sim
        .recorder
        .lock()
        .report(workload.duration, options.server_concurrency_limit);
    report.clients = driver
        .records
        .iter()
        .map(|r| r.report(workload.duration))
        .collect();
    report.notes = fidelity_notes(workload);
    Ok(report)
}

/// What the millisecond clock of the queue sets cannot resolve in `workload`.
pub fn fidelity_notes(workload: &Workload) -> Vec<String> {
    let sub_millisecond = |d: Duration| d.subsec_nanos() % 1_000_000 != 0;
    let fine: Vec<&str> = workload
        .clients
        .iter()
        .filter(|c| {
            [c.execution, c.think, c.overlap, c.start]
                .into_iter()
                .chain(c.final_seats.map(|(_, d)| d))
                .any(sub_millisecond)
        })
        .map(|c| c.name.as_str())
        .collect();
    let mut notes = vec![
        "calls and replies happen at their exact instants (threads staggered by nanoseconds), \
         but the queue sets read a clock that moves in whole milliseconds: their virtual time \
         and waits are resolved to 1 ms"
            .to_string(),
    ];
    if !fine.is_empty() {
        notes.push(format!(
            "sub-millisecond times (clients {}) are ordered exactly but not resolved by the \
             queue sets",
            fine.join(", ")
        ));
    }
    notes
}

/// A client's requests as flow control sees them, derived once.
struct Caller<'a> {
    client: &'a Client,
    info: Arc<RequestInfo>,
    handling: Handling,
    deadlines: Deadlines,
}

impl Caller<'_> {
    /// The description of each of its calls.
    fn described(&self) -> Described<'_> {
        Described {
            identity: &self.client.identity,
            info: &self.info,
            handling: self.handling,
            deadlines: self.deadlines,
        }
    }
}

/// A client that states its seats: its calls cost what it says, not what the estimator
/// reckons.
struct StatedSeats<'a>(&'a Client);

impl Sink for StatedSeats<'_> {
    fn classified(&mut self, _: &Classification, _: &LevelHandle, estimate: &mut WorkEstimate) {
        let client = self.0;
        if let Some(seats) = client.seats {
            estimate.initial_seats = seats;
        }
        if let Some((seats, linger)) = client.final_seats {
            estimate.final_seats = seats;
            estimate.additional_latency = linger;
        }
    }
}

/// Something that happens to a thread at an instant.
enum Event {
    /// Its `made`-th call (0-based) goes out.
    Call { made: u64 },
    /// The reply to its call comes back; the seats are given back.
    Reply { made: u64, seat: Option<Seat> },
}

struct Timed {
    at: Instant,
    seq: u64,
    client: usize,
    event: Event,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Timed {}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

type Admitting = Pin<Box<dyn Future<Output = Result<Seat, Rejection>>>>;

/// A call in flow control.
struct CallMade {
    client: usize,
    made: u64,
    arrived: Instant,
    /// Its initial seats: what its execution holds.
    seats: u32,
    outcome: Outcome,
    queues: Arc<LevelQueues>,
}

/// A call waiting in a queue.
struct Waiting {
    call: CallMade,
    admitting: Admitting,
    waker: Waker,
}

/// The waiting calls whose futures were woken, in the order they were.
#[derive(Default)]
struct Wakes {
    woken: Mutex<Vec<u64>>,
    notify: Notify,
}

struct WakeOne {
    id: u64,
    wakes: Arc<Wakes>,
}

impl Wake for WakeOne {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.woken.lock().push(self.id);
        self.wakes.notify.notify_one();
    }
}

struct Driver<'a> {
    sim: Sim,
    callers: Vec<Caller<'a>>,
    records: Vec<ClientRecord>,
    origin: Instant,
    end: Instant,
    events: BinaryHeap<Reverse<Timed>>,
    seq: u64,
    waiting: HashMap<u64, Waiting>,
    next_id: u64,
    wakes: Arc<Wakes>,
}

// === impl Driver ===

impl<'a> Driver<'a> {
    fn new(
        sim: Sim,
        workload: &'a Workload,
        options: &SimOptions,
        origin: Instant,
    ) -> Result<Self, SimError> {
        let mut callers = Vec::with_capacity(workload.clients.len());
        for client in &workload.clients {
            // The workload was validated: its URLs parse.
            let info = request_info::parse(client.method.as_str(), &client.url)
                .map_err(|e| SimError::Workload(format!("{}: url: {e}", client.name)))?;
            let info = Arc::new(info);
            let described = Described::replayed(&client.identity, &info, options.request_timeout);
            let (handling, deadlines) = (described.handling, described.deadlines);
            callers.push(Caller {
                client,
                info,
                handling,
                deadlines,
            });
        }
        let mut driver = Driver {
            sim,
            records: workload
                .clients
                .iter()
                .map(|c| ClientRecord::new(&c.name))
                .collect(),
            callers,
            origin,
            end: origin + workload.duration,
            events: BinaryHeap::new(),
            seq: 0,
            waiting: HashMap::new(),
            next_id: 0,
            wakes: Arc::default(),
        };
        for (i, client) in workload.clients.iter().enumerate() {
            for thread in 0..client.threads {
                let at = origin + client.first_call(i, thread);
                driver.push(at, i, Event::Call { made: 0 });
            }
        }
        Ok(driver)
    }

    fn push(&mut self, at: Instant, client: usize, event: Event) {
        self.seq += 1;
        let seq = self.seq;
        self.events.push(Reverse(Timed {
            at,
            seq,
            client,
            event,
        }));
    }

    /// Runs until every thread has stopped and every call has been answered: at the latest to
    /// the workload's end, and past it only while calls made before it still wait in a queue
    /// (if events remain, the run is taken to the end itself, for its sample). What is pending
    /// then (replies giving seats back, calls that would go out after the end) can change no
    /// result, and a reply or a think due in a century would have the virtual clock visit every
    /// borrowing tick and every timeline sample until then.
    async fn run(&mut self) {
        let mut now = self.origin;
        loop {
            self.poll_woken(now);
            let next = self.events.peek().map(|Reverse(t)| t.at);
            match next {
                Some(at) if at >= self.end && self.waiting.is_empty() => {
                    // The timeline's last sample is the end's own.
                    if Instant::now() < self.end {
                        tokio::time::sleep_until(self.end).await;
                        tokio::task::yield_now().await;
                    }
                    break;
                }
                // Within the millisecond the clock already reads: at once, at its exact instant.
                Some(at) if at < Instant::now() + TICK => {
                    if let Some(Reverse(timed)) = self.events.pop() {
                        now = now.max(timed.at);
                        self.happen(timed);
                    }
                }
                Some(at) => {
                    tokio::select! {
                        biased;
                        () = self.wakes.notify.notified() => {}
                        () = tokio::time::sleep_until(at) => {
                            // Timers due at the same instant (final seats given back) go first.
                            tokio::task::yield_now().await;
                        }
                    }
                    now = now.max(Instant::now().min(at));
                }
                None if self.waiting.is_empty() => break,
                None => {
                    self.wakes.notify.notified().await;
                    now = now.max(Instant::now());
                }
            }
        }
    }

    fn happen(&mut self, timed: Timed) {
        let Timed {
            at, client, event, ..
        } = timed;
        match event {
            Event::Call { made } => self.call(at, client, made),
            Event::Reply { made, seat } => {
                drop(seat);
                // The seats just given back dispatch the next calls at this very instant.
                self.poll_woken(at);
                let c = self.callers[client].client;
                if c.overlap.is_zero() {
                    self.push(at + c.think, client, Event::Call { made: made + 1 });
                }
            }
        }
    }

    fn call(&mut self, at: Instant, client: usize, made: u64) {
        let caller = &self.callers[client];
        let c = caller.client;
        if at >= self.end || c.calls.is_some_and(|calls| made >= calls) {
            return;
        }
        let snapshot = self.sim.flow_control.snapshot();
        let now = Instant::now();
        let entered = FrontDoor::new(&snapshot, &self.sim.estimator).enter(
            &caller.described(),
            now,
            &mut StatedSeats(c),
        );
        let FlowRequest {
            classification,
            level,
            admit,
        } = match entered {
            Ok(entered) => entered,
            Err(NotAdmitted::Bypassed) => {
                self.sim.recorder.lock().request(true, false);
                self.records[client].called(None);
                self.records[client].dispatched(Duration::ZERO, 0, Duration::ZERO);
                self.push(at + c.execution, client, Event::Reply { made, seat: None });
                if !c.overlap.is_zero() {
                    let next = Event::Call { made: made + 1 };
                    self.push(at + c.execution - c.overlap, client, next);
                }
                return;
            }
            Err(NotAdmitted::NoQueues(_)) => {
                // Its level was left out of flow control (warned about at the start).
                self.sim.recorder.lock().request(false, false);
                self.records[client].called(None);
                self.rejected(at, client, made);
                return;
            }
        };
        self.sim.recorder.lock().request(false, false);
        let seats = admit.estimate.initial_seats;
        let outcome = Outcome {
            recorder: Arc::clone(&self.sim.recorder),
            priority_level: Arc::clone(level.queues().name()),
            flow_schema: Arc::clone(&admit.flow.flow_schema),
            distinguisher: classification.flow_distinguisher,
        };
        self.records[client].called(Some((&outcome.priority_level, &outcome.flow_schema)));
        self.sim
            .recorder
            .lock()
            .arrived(&outcome.priority_level, &outcome.flow_schema);
        let queues = Arc::clone(level.queues());
        let admitting = self.sim.flow_control.start_admit_at(level, admit, now);
        // Most calls are answered at once: no waker, no entry among the waiting.
        let admitting: Admitting = match admitting {
            controller::Admitting::Decided(admitted) => {
                let call = CallMade {
                    client,
                    made,
                    arrived: at,
                    seats,
                    outcome,
                    queues,
                };
                self.settle(at, &call, admitted);
                return;
            }
            controller::Admitting::Waiting(admitting) => admitting,
        };
        let mut waiting = Waiting {
            call: CallMade {
                client,
                made,
                arrived: at,
                seats,
                outcome,
                queues,
            },
            admitting,
            waker: Waker::noop().clone(),
        };
        self.next_id += 1;
        let id = self.next_id;
        waiting.waker = Waker::from(Arc::new(WakeOne {
            id,
            wakes: Arc::clone(&self.wakes),
        }));
        self.waiting.insert(id, waiting);
        // Polled again with its own waker, which the queue set and the timer now hold.
        self.poll(id, at);
    }

    /// Polls the calls whose futures were woken (dispatched, or out of time), as of `now`.
    fn poll_woken(&mut self, now: Instant) {
        loop {
            let woken = std::mem::take(&mut *self.wakes.woken.lock());
            if woken.is_empty() {
                return;
            }
            for id in woken {
                self.poll(id, now);
            }
        }
    }

    fn poll(&mut self, id: u64, now: Instant) {
        let Some(waiting) = self.waiting.get_mut(&id) else {
            return;
        };
        let mut cx = Context::from_waker(&waiting.waker);
        let Poll::Ready(admitted) = waiting.admitting.as_mut().poll(&mut cx) else {
            return;
        };
        if let Some(w) = self.waiting.remove(&id) {
            self.settle(now, &w.call, admitted);
        }
    }

    /// Records a call's answer and moves its thread on.
    fn settle(&mut self, now: Instant, w: &CallMade, admitted: Result<Seat, Rejection>) {
        match w.outcome.record(admitted, &w.queues) {
            Some(seat) => self.dispatched(now, w, seat),
            None => self.rejected(now, w.client, w.made),
        }
    }

    fn dispatched(&mut self, now: Instant, w: &CallMade, seat: Seat) {
        let client = self.callers[w.client].client;
        let reply = now + client.execution;
        let within = reply
            .min(self.end)
            .saturating_duration_since(now.min(self.end));
        let waited = now.saturating_duration_since(w.arrived);
        self.records[w.client].dispatched(waited, w.seats, within);
        if !client.overlap.is_zero() {
            // A negative think: the next call goes out just before this reply.
            let next = Event::Call { made: w.made + 1 };
            self.push(reply - client.overlap, w.client, next);
        }
        self.push(
            reply,
            w.client,
            Event::Reply {
                made: w.made,
                seat: Some(seat),
            },
        );
    }

    fn rejected(&mut self, now: Instant, client: usize, made: u64) {
        self.records[client].rejected();
        let pause = self.callers[client].client.think.max(RETRY_AFTER);
        self.push(now + pause, client, Event::Call { made: made + 1 });
    }
}

#[cfg(test)]
mod tests;
