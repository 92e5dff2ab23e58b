//! The public vocabulary of the queue set: configuration, arrivals, outcomes, counters.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::fairqueue::WorkEstimate;
use crate::shuffle_sharding::DealerError;

/// `estimatedServiceDuration` (G): the service time assumed at dispatch.
pub const ESTIMATED_SERVICE_DURATION: Duration = Duration::from_millis(3);

/// How a level's queue set handles requests (`QueuingConfig.DesiredNumQueues` and friends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueuingConfig {
    /// Exempt level: every request executes at once (counted, never limited).
    Exempt,
    /// `limitResponse.type: Reject`: execute at once or reject with `concurrency-limit`.
    Reject,
    /// `limitResponse.type: Queue`.
    Queue(QueueShape),
}

/// `limitResponse.queuing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueShape {
    /// `queues` (the shuffle-sharding deck).
    pub queues: u32,
    /// `handSize`.
    pub hand_size: u32,
    /// `queueLengthLimit`: waiting requests per queue.
    pub queue_length_limit: u32,
}

/// Why a configuration cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueSetError {
    /// The queue count and hand size do not make a valid shuffle-sharding dealer.
    #[error("the QueueSetConfig implies an invalid shuffle sharding config (DesiredNumQueues is deckSize): {0}")]
    Dealer(#[from] DealerError),
    /// The request is not (or no longer) known.
    #[error("unknown request")]
    UnknownRequest,
    /// The request is not in the phase the call needs.
    #[error("request is not {0}")]
    WrongPhase(&'static str),
}

/// A request's handle in one queue set. Stale handles are detected (generation count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// Who a request belongs to, for dumps and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMeta {
    /// The matched FlowSchema's name.
    pub flow_schema: Arc<str>,
    /// The flow distinguisher (user or namespace; empty when the schema has none).
    pub flow_distinguisher: Arc<str>,
    /// Who asked for what, for `dump_requests?includeRequestDetails=1`; `None` prints empty cells.
    pub details: Option<Arc<crate::debug_dump::RequestDetails>>,
    /// Whether the request mutates (its verb is not `get`, `list` or `watch`), for the
    /// read-versus-write waiting gauge.
    pub mutating: bool,
}

/// What a queue set needs to know about an arriving request.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Its seats and lingering.
    pub estimate: WorkEstimate,
    /// The flow's hash (`hashFlowID`), the shuffle-sharding entropy.
    pub hash: u64,
    /// When it stops waiting with `time-out`; `None` waits for ever.
    pub deadline: Option<Instant>,
    /// Its flow, for dumps.
    pub flow: FlowMeta,
}

/// The reasons a request is refused, with the apiserver's metric label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Its queue is full and every seat is taken.
    QueueFull,
    /// A `Reject` level has no room for it.
    ConcurrencyLimit,
    /// It waited its whole wait limit (or its caller went away).
    TimeOut,
}

impl RejectReason {
    /// `queue-full`, `concurrency-limit` or `time-out`.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::QueueFull => "queue-full",
            RejectReason::ConcurrencyLimit => "concurrency-limit",
            RejectReason::TimeOut => "time-out",
        }
    }
}

/// The outcome of [`QueueSet::start_request`](super::QueueSet::start_request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// Executing now: call [`QueueSet::finish`](super::QueueSet::finish) exactly once.
    Executing(RequestId),
    /// Waiting in a queue: an [`Event`] will say when it is dispatched or timed out.
    Queued(RequestId),
    /// Refused.
    Rejected(RejectReason),
}

/// Why a waiting request leaves its queue without executing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Its wait limit passed.
    TimedOut,
    /// Its caller went away.
    Cancelled,
}

/// Something that happened to a waiting request during a call, for the async layer to deliver.
#[derive(Debug)]
pub struct Event<W> {
    /// The request.
    pub id: RequestId,
    /// Dispatched (now executing) or timed out (gone).
    pub kind: EventKind,
    /// Its waiter, taken out of the queue set.
    pub waiter: Option<W>,
}

/// See [`Event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The request now executes; it must be finished exactly once.
    Dispatched,
    /// The request left its queue: its wait limit passed.
    TimedOut,
}

/// Where a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    /// In a queue.
    Waiting,
    /// Holding its initial seats.
    Executing,
    /// Finished, holding its final seats for the additional latency.
    Lingering,
}

/// What [`QueueSet::finish`](super::QueueSet::finish) leaves to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// `Some(d)`: the final seats stay taken; call
    /// [`QueueSet::release_final_seats`](super::QueueSet::release_final_seats) after `d`.
    pub linger: Option<Duration>,
}

/// Totals since creation. Disjoint: `dispatched + rejected + timed_out + cancelled` equals the
/// arrivals once nothing is waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests that started executing (exempt and `Reject`-level ones included).
    pub dispatched: u64,
    /// Refused on arrival (`queue-full`, `concurrency-limit`).
    pub rejected: u64,
    /// Left their queue when their wait limit passed.
    pub timed_out: u64,
    /// Left their queue because their caller went away.
    pub cancelled: u64,
    /// Dispatch attempts stopped by a head request that did not fit
    /// (`request_dispatch_no_accommodation_total`).
    pub no_accommodation: u64,
    /// Epoch advances of R, successful and with an underflow (`epoch_advance_total{success}`).
    pub epoch_advances: [u64; 2],
}

impl Counters {
    /// The apiserver's `(rejected, timedout, cancelled)` dump counters: it counts a time-out as
    /// both rejected and cancelled and never increments `timedout`.
    pub fn as_reference(&self) -> (u64, u64, u64) {
        let left = self.timed_out + self.cancelled;
        (self.rejected + left, 0, left)
    }
}

/// The readings behind the gauges `SetDispatchMetrics` sets: R and S of the last dispatch from a
/// queue, and the S bounds over the queues with a waiting request.
///
/// The apiserver computes the bounds with a scan of every queue on each dispatch; here they are
/// computed when read (a scrape), over the queues waiting then, so a dispatch stays O(log queues).
/// With no queue waiting, all four bounds are the last dispatch's S (close to what the apiserver
/// shows after a dispatch that emptied its queues).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DispatchR {
    /// The queue set's virtual time at the last dispatch from a queue (`dispatch_r`).
    pub r: f64,
    /// `nextDispatchR` of the queue dispatched from (`latest_s`).
    pub s: f64,
    /// Min over waiting queues of S(oldest waiting request) (`next_s_bounds{bound="min"}`).
    pub s_min: f64,
    /// Max of the same (`next_s_bounds{bound="max"}`).
    pub s_max: f64,
    /// Min over waiting queues of S − estimated work in progress
    /// (`next_discounted_s_bounds{bound="min"}`).
    pub discounted_s_min: f64,
    /// Max of the same (`next_discounted_s_bounds{bound="max"}`).
    pub discounted_s_max: f64,
}

/// A count the apiserver's queue set adds to its metrics as it happens, handed to the
/// [`crate::fairqueue::level_queues::LevelObserver`] after each change. Both are rare: a head
/// that does not fit the free seats, an epoch advance. (The gauges it sets, R and the dispatch
/// readings, are read off the queue set instead: [`QueueSet::current_r`],
/// [`QueueSet::dispatch_readings`].)
///
/// [`QueueSet::current_r`]: super::QueueSet::current_r
/// [`QueueSet::dispatch_readings`]: super::QueueSet::dispatch_readings
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// The head chosen for dispatch did not fit the free seats (`AddDispatchWithNoAccommodation`,
    /// labelled with the head request's FlowSchema).
    NoAccommodation {
        /// The FlowSchema of the request that did not fit.
        flow_schema: Arc<str>,
    },
    /// R was wound back (`AddEpochAdvance`); `success` is false if a reading underflowed.
    EpochAdvanced {
        /// No queue's or request's R reading underflowed.
        success: bool,
    },
}
