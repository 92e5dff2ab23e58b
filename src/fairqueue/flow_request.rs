//! The one path from a request's attributes to what flow control admits: classify against a
//! [`Snapshot`], estimate the seats, build the [`AdmitRequest`].
//!
//! The proxy's pipeline, `simulate` and the shadow configurations all go through
//! [`FlowRequest::prepare`], so a replay or a shadow verdict runs the very semantics that enforce.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::controller::{LevelHandle, Snapshot};
use super::level_queues::AdmitRequest;
use super::queueset::FlowMeta;
use super::work_estimate::WorkEstimator;
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

/// A request classified and estimated, ready for [`FlowControl::admit`].
///
/// [`FlowControl::admit`]: super::controller::FlowControl::admit
#[derive(Debug)]
pub struct FlowRequest {
    /// Its FlowSchema, level and flow.
    pub classification: Classification,
    /// The level's queues, captured from the snapshot it was classified with.
    pub level: LevelHandle,
    /// What it asks of the level.
    pub admit: AdmitRequest,
}

impl FlowRequest {
    /// Classifies `info` for `identity` against `snapshot` and estimates its seats at `now`
    /// (`simulate` passes the clock reading it has for the event). `wait_limit` is how long it may
    /// still wait in a queue; `details` (who asked for what) are kept for the debug dumps when
    /// given.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        snapshot: &Snapshot,
        estimator: &WorkEstimator,
        identity: &Identity,
        info: &Arc<RequestInfo>,
        query: Option<&str>,
        wait_limit: Duration,
        with_details: bool,
        now: Instant,
    ) -> Result<FlowRequest, NoQueues> {
        let classification = classify(snapshot.index(), identity, info);
        let (level, admit) = Self::admit_request(
            &classification,
            snapshot,
            estimator,
            identity,
            info,
            query,
            wait_limit,
            with_details,
            now,
        )?;
        Ok(FlowRequest {
            level: level.clone(),
            classification,
            admit,
        })
    }

    /// [`FlowRequest::prepare`]'s second half, without taking anything: the level as `snapshot`
    /// holds it, and the request for it, from a classification already made against
    /// `snapshot`'s index and read in place. What `simulate` does per request: it keeps the
    /// classifications of the requests it has seen (a pure function of the index, the user, the
    /// groups and the attributes), and the snapshot and the classification outlive the
    /// admission (no reference counts taken for a request dispatched at once).
    #[allow(clippy::too_many_arguments)]
    pub fn admit_request<'s>(
        classification: &Classification,
        snapshot: &'s Snapshot,
        estimator: &WorkEstimator,
        identity: &Identity,
        info: &Arc<RequestInfo>,
        query: Option<&str>,
        wait_limit: Duration,
        with_details: bool,
        now: Instant,
    ) -> Result<(&'s LevelHandle, AdmitRequest), NoQueues> {
        let level = snapshot
            .level_of(&classification.priority_level)
            .ok_or_else(|| NoQueues(classification.priority_level.name.clone()))?;
        let estimate = estimator.estimate(info, query, level.max_seats(), now);
        let details = with_details.then(|| {
            Arc::new(RequestDetails {
                user_name: identity.user.clone(),
                request: Arc::clone(info),
            })
        });
        let admit = AdmitRequest {
            estimate,
            hash: classification.flow_hash,
            flow: FlowMeta {
                flow_schema: Arc::clone(&classification.flow_schema_name),
                flow_distinguisher: Arc::clone(&classification.flow_distinguisher),
                details,
                mutating: !request_info::is_read_only_verb(&info.verb),
            },
            wait_limit,
        };
        Ok((level, admit))
    }
}
