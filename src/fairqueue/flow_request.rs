//! Flow control's front door: a request described once where it arrives ([`Described`]: who
//! asks, its attributes with the options of its query, its [`Handling`] and [`Deadlines`]) goes
//! in through [`FrontDoor::enter`], which classifies it against a [`Snapshot`], estimates its
//! seats and builds what the level is asked ([`FlowRequest`]); the caller then admits it.
//!
//! The proxy's pipeline, the shadow configurations and both simulators go through this door,
//! and differ only in what they record ([`Sink`]) and in how they classify: `simulate` hands
//! over the classification it keeps for requests alike (see
//! [`FrontDoor::enter_classified`]). So a replay or a shadow verdict runs the very semantics
//! that enforce. Mirrors `apf_filter.go: Handle(ctx, digest, noteFn, ...)`: one way in, one
//! description of the request, and a callback for what the caller notes.

use std::borrow::Borrow;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::controller::{LevelHandle, Snapshot};
use super::level_queues::AdmitRequest;
use super::queueset::FlowMeta;
use super::timeout::{deadlines, Deadlines, InvalidTimeout};
use super::work_estimate::WorkEstimator;
use super::WorkEstimate;
use crate::auth::Identity;
use crate::classify::{classify, Classification};
use crate::debug_dump::RequestDetails;
use crate::request_info::{self, RequestInfo};

/// How flow control treats a request, from its attributes alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Classified, queued, and holds its seats until it finishes.
    Ordinary,
    /// A watch: classified and queued; holds its seats only until it is initialised.
    Watch,
    /// Long-running and not a watch (exec, attach, port-forward, proxy, log follow): bypasses
    /// flow control, as in the apiserver.
    Bypass,
}

impl Handling {
    /// The handling of a request with these attributes.
    pub fn of(info: &RequestInfo) -> Handling {
        if !request_info::is_long_running(info) {
            Handling::Ordinary
        } else if info.verb == "watch" {
            Handling::Watch
        } else {
            Handling::Bypass
        }
    }
}

/// The priority level a FlowSchema names has no queues (it was left out when flow control was
/// configured).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("priority level {0:?} has no queues")]
pub struct NoQueues(pub String);

/// A request as flow control sees it, described once where it arrives.
#[derive(Debug, Clone, Copy)]
pub struct Described<'a> {
    /// Who asks.
    pub identity: &'a Identity,
    /// Its attributes, with the list options and `?timeout=` of its query.
    pub info: &'a Arc<RequestInfo>,
    /// How flow control treats it.
    pub handling: Handling,
    /// How long it may take, and how long it may still wait in a queue.
    pub deadlines: Deadlines,
}

impl<'a> Described<'a> {
    /// `identity`'s request with attributes `info`, under `--request-timeout` =
    /// `request_timeout`; `Err` for a `?timeout=` the apiserver refuses with 400.
    pub fn new(
        identity: &'a Identity,
        info: &'a Arc<RequestInfo>,
        request_timeout: Duration,
    ) -> Result<Described<'a>, InvalidTimeout> {
        let (handling, deadlines) = Described::terms(info, request_timeout)?;
        Ok(Described {
            identity,
            info,
            handling,
            deadlines,
        })
    }

    /// What of the description the attributes alone give: the handling, and the deadlines
    /// under `--request-timeout` = `request_timeout`. The pipeline needs them before it
    /// authenticates the caller (the apiserver's deadline filter answers a bad `?timeout=`
    /// before authentication).
    pub fn terms(
        info: &RequestInfo,
        request_timeout: Duration,
    ) -> Result<(Handling, Deadlines), InvalidTimeout> {
        let handling = Handling::of(info);
        Ok((handling, deadlines(handling, info, request_timeout)?))
    }

    /// [`Described::new`] for a request replayed from a record: a `?timeout=` the apiserver
    /// would refuse gets the full timeout (the recording server answered the request, so it was
    /// valid there).
    pub fn replayed(
        identity: &'a Identity,
        info: &'a Arc<RequestInfo>,
        request_timeout: Duration,
    ) -> Described<'a> {
        Described::new(identity, info, request_timeout).unwrap_or_else(|_| Described {
            identity,
            info,
            handling: Handling::of(info),
            deadlines: Deadlines::of(request_timeout),
        })
    }
}

/// What a caller of the [`FrontDoor`] records of a request going in. Each method has a default
/// that records nothing (`()` records nothing at all).
pub trait Sink {
    /// Whether the request's admission keeps who asked for what, for the debug dumps.
    fn keeps_details(&self) -> bool {
        false
    }

    /// The request is classified to `level` and estimated, about to be admitted. A caller that
    /// knows its cost better may change the estimate (a workload that states its seats).
    fn classified(
        &mut self,
        _classification: &Classification,
        _level: &LevelHandle,
        _estimate: &mut WorkEstimate,
    ) {
    }
}

impl Sink for () {}

/// Why a request did not go through the [`FrontDoor`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAdmitted {
    /// Long-running and not a watch: it bypasses flow control.
    Bypassed,
    /// Its level has no queues.
    NoQueues(NoQueues),
}

/// Flow control's one way in, for one configuration: its snapshot, and the work estimator.
#[derive(Debug, Clone, Copy)]
pub struct FrontDoor<'s> {
    snapshot: &'s Snapshot,
    estimator: &'s WorkEstimator,
}

/// A request through the [`FrontDoor`]: classified and estimated, ready for
/// [`FlowControl::admit`] or [`FlowControl::start_admit_at`].
///
/// [`FlowControl::admit`]: super::controller::FlowControl::admit
/// [`FlowControl::start_admit_at`]: super::controller::FlowControl::start_admit_at
#[derive(Debug)]
pub struct FlowRequest<'s, C = Classification> {
    /// Its FlowSchema, level and flow (owned, or borrowed from the caller's memo).
    pub classification: C,
    /// The level's queues, as the snapshot it was classified with holds them.
    pub level: &'s LevelHandle,
    /// What it asks of the level.
    pub admit: AdmitRequest,
}

impl<'s> FrontDoor<'s> {
    /// The door of the configuration in `snapshot`, estimating seats with `estimator`.
    pub fn new(snapshot: &'s Snapshot, estimator: &'s WorkEstimator) -> FrontDoor<'s> {
        FrontDoor {
            snapshot,
            estimator,
        }
    }

    /// Takes `request` in at `now` (the clock reading the caller has): a request that
    /// bypasses flow control goes no further; any other is classified against the snapshot's
    /// index and estimated, and `sink` records it.
    pub fn enter(
        &self,
        request: &Described<'_>,
        now: Instant,
        sink: &mut impl Sink,
    ) -> Result<FlowRequest<'s, Classification>, NotAdmitted> {
        let (identity, info) = (request.identity, request.info);
        self.enter_classified(
            request,
            |snapshot| classify(snapshot.index(), identity, info),
            now,
            sink,
        )
    }

    /// [`enter`](Self::enter) with the classification `classify` gives for the snapshot:
    /// what `simulate` does, which keeps the classifications of the requests it has seen (a
    /// pure function of the index, the user, the groups and the attributes) and lends one in
    /// place, so that a request dispatched at once takes no count of its shared names and
    /// queues. `classify` is called only for a request that does not bypass flow control.
    pub fn enter_classified<C: Borrow<Classification>>(
        &self,
        request: &Described<'_>,
        classify: impl FnOnce(&'s Snapshot) -> C,
        now: Instant,
        sink: &mut impl Sink,
    ) -> Result<FlowRequest<'s, C>, NotAdmitted> {
        if request.handling == Handling::Bypass {
            return Err(NotAdmitted::Bypassed);
        }
        let classification = classify(self.snapshot);
        self.prepare(request, classification, now, sink)
            .map_err(NotAdmitted::NoQueues)
    }

    /// The door past its handling: `classification`'s level and the request for it, estimated at
    /// `now` and recorded in `sink`. What `classify --explain` asks of any request, long-running
    /// ones included.
    pub fn prepare<C: Borrow<Classification>>(
        &self,
        request: &Described<'_>,
        classification: C,
        now: Instant,
        sink: &mut impl Sink,
    ) -> Result<FlowRequest<'s, C>, NoQueues> {
        let class = classification.borrow();
        let info = request.info;
        let level = self
            .snapshot
            .level_of(&class.priority_level)
            .ok_or_else(|| NoQueues(class.priority_level.name.clone()))?;
        let mut estimate = self.estimator.estimate(info, level.max_seats(), now);
        sink.classified(class, level, &mut estimate);
        let details = sink.keeps_details().then(|| {
            Arc::new(RequestDetails {
                user_name: request.identity.user.clone(),
                request: Arc::clone(info),
            })
        });
        let admit = AdmitRequest {
            estimate,
            hash: class.flow_hash,
            flow: FlowMeta {
                flow_schema: Arc::clone(&class.flow_schema_name),
                flow_distinguisher: Arc::clone(&class.flow_distinguisher),
                details,
                mutating: !request_info::is_read_only_verb(&info.verb),
            },
            wait_limit: request.deadlines.wait_limit,
        };
        Ok(FlowRequest {
            classification,
            level,
            admit,
        })
    }
}
