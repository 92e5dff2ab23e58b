//! The request pipeline behind the secure port: authenticate → request_info → classify → admit →
//! forward → finish, as plain methods over a per-request context.
//!
//! Mirrors `k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go` for what flow control
//! does to a request, with the proxy notes of the APF reference: a watch holds its seats until the
//! upstream's response head arrives (the analogue of "initialised"), long-running requests other
//! than watches bypass flow control, and exempt requests are counted but never queued.

mod metering;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::OptionFuture;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use smallvec::SmallVec;
use tokio::time::Instant;

use self::metering::Execution;
use super::rejections::{RecentRejections, Rejected};
use super::{
    error_response, ForwardRequest, ForwardableIdentity, Forwarder, ProxyBody, ProxyError,
};
use crate::auth::authorize::Authorizer;
use crate::auth::impersonation::{self, ImpersonationError};
use crate::auth::{carries_bearer_token, AuthMethod, Authenticated, Authenticator, Identity};
use crate::classify::Classification;
use crate::config::{FlowSchemaRef, PriorityLevelRef};
use crate::fairqueue::controller::FlowControl;
use crate::fairqueue::controller::LevelHandle;
use crate::fairqueue::flow_request::{
    Described, FlowRequest, FrontDoor, Handling, NotAdmitted, Sink,
};
use crate::fairqueue::level_queues::{Rejection, Seat};
use crate::fairqueue::shadow::{self, Shadow, ShadowTickets};
use crate::fairqueue::timeout::Deadlines;
use crate::fairqueue::work_estimate::{WatchGuard, WorkEstimator};
use crate::fairqueue::WorkEstimate;
use crate::metrics::{FlowMetrics, Metrics};
use crate::request_info::{self, RequestInfo, RequestInfoError, Timeout};
use crate::server::ConnectionInfo;

/// `X-Kubernetes-PF-FlowSchema-UID`: the matched FlowSchema's UID.
pub static FLOW_SCHEMA_UID_HEADER: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
/// `X-Kubernetes-PF-PriorityLevel-UID`: its priority level's UID.
pub static PRIORITY_LEVEL_UID_HEADER: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");

/// `Audit-Id`: the apiserver's ID of the request's audit event, on every response.
static AUDIT_ID_HEADER: HeaderName = HeaderName::from_static("audit-id");

/// kube-apiserver's default `--max-request-bytes` (3 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// The verbs whose handlers read the body through the apiserver's `limitedReadBody`.
const BODY_LIMITED_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The apiserver reads at most `limit` body bytes of a write (`limitedReadBody`) and answers 413
/// beyond. It does so after taking a seat; a declared `Content-Length` lets the proxy give the
/// same answer without one. Chunked bodies (no length) are streamed and left to the upstream.
fn check_body_size(
    info: &RequestInfo,
    headers: &http::HeaderMap,
    limit: u64,
) -> Result<(), ProxyError> {
    if limit == 0 || !info.is_resource_request || !BODY_LIMITED_VERBS.contains(&info.verb.as_str())
    {
        return Ok(());
    }
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > limit => Err(ProxyError::PayloadTooLarge {
            message: format!("limit is {limit}"),
        }),
        _ => Ok(()),
    }
}

/// Everything a request passes through.
pub struct Proxy {
    authenticator: Arc<Authenticator>,
    /// Authorizes callers' own `Impersonate-*` headers; without one they are refused.
    authorizer: Option<Arc<Authorizer>>,
    flow_control: Arc<FlowControl>,
    estimator: WorkEstimator,
    forwarder: Forwarder,
    request_timeout: Duration,
    max_request_bytes: u64,
    metrics: Arc<Metrics>,
    /// Configurations evaluated on every request without enforcing (shadow, dry-run).
    shadows: Vec<Arc<Shadow>>,
    /// `--flow-control=dry-run`: nothing is queued or rejected.
    dry_run: bool,
    /// The last rejected requests of each level (`/debug/api_priority_and_fairness/rejected`).
    rejections: Arc<RecentRejections>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// A request without a response yet; counted as abandoned when dropped so.
struct Unanswered<'a>(Option<&'a Metrics>);

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(metrics) = self.0 {
            metrics.inc_abandoned();
        }
    }
}

/// Marks the response of a watch (in its extensions), so the server can end the stream cleanly
/// at shutdown without deriving the request's attributes again.
#[derive(Debug, Clone, Copy)]
pub struct WatchStream;

/// What one request has gathered so far; `finish` logs it.
///
/// Kept small: it is part of every waiting request's state (BENCHMARKS.md, memory per queued
/// request); what only the access log reads lives in `logged`.
#[derive(Debug)]
struct RequestContext {
    received_at: Instant,
    /// The connection it came on: the client's address and certificates.
    connection: Option<Arc<ConnectionInfo>>,
    info: Option<Arc<RequestInfo>>,
    /// The matched FlowSchema and its level (for the PF headers and the access log).
    classification: Option<(FlowSchemaRef, PriorityLevelRef)>,
    /// What only the access log needs; `None` (no allocation) unless it is enabled.
    logged: Option<Box<Logged>>,
}

/// The access log's fields beyond the context's own (among them what a replay, `simulate`,
/// needs).
#[derive(Debug)]
struct Logged {
    method: http::Method,
    auth_method: Option<AuthMethod>,
    /// The user the request runs as (the impersonated one, if any).
    user: String,
    /// The authenticated caller when it impersonates `user` (as the apiserver's audit records
    /// `user` and `impersonatedUser`); empty otherwise.
    impersonator: String,
    /// The upstream's `Audit-Id` response header: the `auditID` of its audit event.
    audit_id: String,
    estimate: Option<WorkEstimate>,
    /// How long it waited in its queue.
    waited: Duration,
    /// Wall-clock arrival.
    received: std::time::SystemTime,
    /// Path and query, as received.
    uri: String,
    /// The user's groups, as a JSON array.
    groups: String,
    /// When it reached flow control (after authentication): its arrival for a replay.
    at_flow_control: Option<Instant>,
    /// When it got its seats: the start of its execution.
    dispatched: Option<Instant>,
}

/// What the first phase of the pipeline ([`Proxy::admit`]) decided.
enum Admission {
    /// Its turn came (or flow control is a dry run).
    Admitted(Admitted),
    /// A long-running request other than a watch, answered without flow control.
    Bypassed(Response<ProxyBody>),
}

/// A classified request about to take its turn ([`Proxy::take_turn`]).
struct Turn<A> {
    class: Classification,
    flow: Arc<FlowMetrics>,
    /// Its level is exempt (no wait is observed).
    exempt: bool,
    shadows: ShadowTickets,
    /// The future of its admission; `None` in a dry run.
    admitting: Option<A>,
}

/// What a request that took its turn carries into its execution.
struct Admitted {
    identity: ForwardableIdentity,
    info: Arc<RequestInfo>,
    /// Its level is exempt (no wait is observed).
    exempt: bool,
    flow: Arc<FlowMetrics>,
    shadows: ShadowTickets,
    /// `None` in a dry run.
    seat: Option<Seat>,
}

/// What the pipeline records of a request going through flow control's front door: its
/// classification and estimate for the response headers and the access log, and its flow's
/// metrics.
struct Noted<'a> {
    ctx: &'a mut RequestContext,
    proxy: &'a Proxy,
    info: &'a RequestInfo,
    /// Its flow's metrics, once classified.
    flow: Option<Arc<FlowMetrics>>,
}

impl Sink for Noted<'_> {
    fn keeps_details(&self) -> bool {
        true
    }

    fn classified(
        &mut self,
        class: &Classification,
        _level: &LevelHandle,
        estimate: &mut WorkEstimate,
    ) {
        self.ctx.classification = Some((
            Arc::clone(&class.flow_schema),
            Arc::clone(&class.priority_level),
        ));
        if let Some(logged) = &mut self.ctx.logged {
            logged.estimate = Some(*estimate);
        }
        let flow = self
            .proxy
            .metrics
            .flow(&class.priority_level.name, &class.flow_schema.name);
        metering::record_estimate(&flow, &self.proxy.estimator, self.info, estimate);
        self.flow = Some(flow);
    }
}

/// The error of a stage that finds the request gone from its slot (a bug, never a client's).
fn already_forwarded() -> ProxyError {
    ProxyError::Internal {
        message: "the request was already forwarded".to_string(),
    }
}

// === impl Proxy ===

impl Proxy {
    /// A pipeline over its parts; `request_timeout` is `--request-timeout`.
    pub fn new(
        authenticator: Arc<Authenticator>,
        flow_control: Arc<FlowControl>,
        estimator: WorkEstimator,
        forwarder: Forwarder,
        request_timeout: Duration,
    ) -> Proxy {
        Proxy {
            authenticator,
            authorizer: None,
            flow_control,
            estimator,
            forwarder,
            request_timeout,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            metrics: Metrics::new(),
            shadows: Vec::new(),
            dry_run: false,
            rejections: Arc::default(),
        }
    }

    /// Authorizes callers' own `Impersonate-*` headers (`kubectl --as`) with SubjectAccessReviews
    /// through `authorizer`, as the apiserver's impersonation filter does.
    pub fn with_authorizer(mut self, authorizer: Arc<Authorizer>) -> Proxy {
        self.authorizer = Some(authorizer);
        self
    }

    /// Feeds every request that reaches flow control to `shadow` too (see [`Shadow`]).
    pub fn with_shadow(mut self, shadow: Arc<Shadow>) -> Proxy {
        self.shadows.push(shadow);
        self
    }

    /// `--flow-control=dry-run`: requests are classified and counted but never queued or
    /// rejected; give the configuration in force as a shadow to see what it would do.
    pub fn with_dry_run(mut self, dry_run: bool) -> Proxy {
        self.dry_run = dry_run;
        self
    }

    /// Reports to `metrics` instead of the private registry [`new`](Self::new) made.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Proxy {
        self.metrics = metrics;
        self
    }

    /// `--max-request-bytes`: a create, update, patch, delete or deletecollection whose declared
    /// `Content-Length` exceeds it gets the apiserver's 413 before it takes a seat (0: no limit).
    pub fn with_max_request_bytes(mut self, limit: u64) -> Proxy {
        self.max_request_bytes = limit;
        self
    }

    /// The metrics this pipeline reports to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The flow controller (for the admin endpoints and the periodic borrowing adjustment).
    pub fn flow_control(&self) -> &Arc<FlowControl> {
        &self.flow_control
    }

    /// The last rejected requests of each priority level.
    pub fn rejections(&self) -> &Arc<RecentRejections> {
        &self.rejections
    }

    /// The work estimator (its object counts are fed from the upstream's metrics).
    pub fn estimator(&self) -> &WorkEstimator {
        &self.estimator
    }

    /// Runs one request to its response. Never fails: every error becomes a response with a
    /// Kubernetes `Status` body, and every request is logged once.
    ///
    /// Not an `async fn` on purpose: an async fn keeps its arguments for its whole life, so each
    /// layer that took the request by value would hold its own copy of it while the request waits
    /// in a queue. Here the request is stored once, in the returned future, and lent to the
    /// pipeline's stages.
    ///
    /// `connection` is the one the request came on (`None`: unknown, so no peer address and no
    /// client certificate).
    pub fn handle<B>(
        self: Arc<Self>,
        request: Request<B>,
        connection: Option<Arc<ConnectionInfo>>,
    ) -> impl Future<Output = Response<ProxyBody>> + Send + 'static
    where
        B: Body<Data = Bytes> + Send + Sync + 'static,
        B::Error: Into<super::BoxError>,
    {
        let mut ctx = RequestContext::new(&request, connection);
        let mut request = Some(request);
        async move {
            // Counts the request as abandoned if this future is dropped (the client went away)
            // before it has a response.
            let mut unanswered = Unanswered(Some(&self.metrics));
            let mut response = match self.run(&mut ctx, &mut request).await {
                Ok(response) => response,
                Err(error) => error_response(&error),
            };
            if let Some((flow_schema, priority_level)) = &ctx.classification {
                set_pf_headers(response.headers_mut(), flow_schema, priority_level);
            }
            if let Some(logged) = &mut ctx.logged {
                logged.audit_id = response
                    .headers()
                    .get(&AUDIT_ID_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map_or_else(String::new, str::to_owned);
            }
            ctx.finish(response.status());
            self.metrics.inc_requests(response.status().as_u16());
            unanswered.0 = None;
            response
        }
    }

    /// The pipeline; `slot` holds the request until it is forwarded.
    ///
    /// Two phases with a small hand-over between them ([`Admitted`]): a request waiting in a
    /// queue holds the first phase's state only, and a request upstream the second's.
    async fn run<B>(
        &self,
        ctx: &mut RequestContext,
        slot: &mut Option<Request<B>>,
    ) -> Result<Response<ProxyBody>, ProxyError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<super::BoxError>,
    {
        let admitted = match self.admit(ctx, slot).await? {
            Admission::Admitted(admitted) => admitted,
            Admission::Bypassed(response) => return Ok(response),
        };
        self.execute(ctx, slot, admitted).await
    }

    /// Everything before a request goes upstream: its attributes, authentication, impersonation
    /// and body checks, classification, and its turn in flow control. Long-running requests
    /// other than watches are forwarded from here, without flow control.
    async fn admit<B>(
        &self,
        ctx: &mut RequestContext,
        slot: &mut Option<Request<B>>,
    ) -> Result<Admission, ProxyError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<super::BoxError>,
    {
        let Some(request) = slot.as_ref() else {
            return Err(already_forwarded());
        };
        // The apiserver's outer filters (RequestInfo, then RequestDeadline) run before
        // authentication and flow control: a request they refuse gets 400 from any caller and
        // never reaches a queue.
        // Shared with the context (for the access log) rather than copied field by field.
        let info = Arc::new(attributes(request)?);
        ctx.info = Some(Arc::clone(&info));
        let (handling, deadlines) = Described::terms(&info, self.request_timeout)?;
        let authenticated = self.authenticate(ctx, slot).await?;
        // The apiserver's impersonation filter runs after authentication and before flow
        // control: a refused impersonation never takes a seat, and an allowed one is classified
        // as the user it runs as.
        let (identity, impersonator) = self.impersonate(ctx, slot, authenticated).await?;
        // Before anything else sees it: an identity the upstream would not read back unchanged
        // is refused whole, and no later stage can forward one that was not checked.
        let identity = self.forwardable(identity)?;
        let Some(request) = slot.as_ref() else {
            return Err(already_forwarded());
        };
        if handling == Handling::Bypass {
            // Like the apiserver: exec, attach, port-forward, proxy and log follow bypass APF.
            let response = self.forward(ctx, slot, &identity, true).await?;
            return Ok(Admission::Bypassed(response));
        }
        check_body_size(&info, request.headers(), self.max_request_bytes)?;
        let now = Instant::now();
        if let Some(logged) = &mut ctx.logged {
            logged.at_flow_control = Some(now);
        }
        // The request as flow control sees it: what it may still wait is what is left of its
        // wait limit after authentication.
        let described = Described {
            identity: identity.identity(),
            info: &info,
            handling,
            deadlines: Deadlines {
                wait_limit: deadlines.wait_limit.saturating_sub(now - ctx.received_at),
                ..deadlines
            },
        };
        let Turn {
            class,
            flow,
            exempt,
            shadows,
            admitting,
        } = self.take_turn(ctx, &described)?;
        let seat = match OptionFuture::from(admitting).await {
            None => None,
            Some(answer) => match answer {
                Ok(seat) => Some(seat),
                Err(rejection) => {
                    let (pl_name, fs_name) =
                        (&*class.priority_level.name, &*class.flow_schema.name);
                    metering::record_rejection(&self.metrics, fs_name, &info.verb, &rejection);
                    let url = slot
                        .as_ref()
                        .and_then(|r| r.uri().path_and_query())
                        .map_or("", |p| p.as_str());
                    self.rejections.record(&Rejected {
                        priority_level: pl_name,
                        flow_schema: fs_name,
                        flow_distinguisher: &class.flow_distinguisher,
                        reason: rejection.reason.as_str(),
                        waited: rejection.waited,
                        method: slot.as_ref().map_or("", |r| r.method().as_str()),
                        url,
                        user: &identity.identity().user,
                        groups: &identity.identity().groups,
                        impersonator: impersonator.as_deref(),
                    });
                    if let Some(logged) = &mut ctx.logged {
                        logged.waited = rejection.waited;
                    }
                    return Err(ProxyError::TooManyRequests {
                        retry_after_seconds: u32::try_from(rejection.retry_after)
                            .unwrap_or(u32::MAX),
                    });
                }
            },
        };
        Ok(Admission::Admitted(Admitted {
            identity,
            info,
            exempt,
            flow,
            shadows,
            seat,
        }))
    }

    /// Classifies the request against the configuration in force and sets up its turn: its
    /// classification, its flow's metrics, whether its level is exempt, its shadows' tickets and
    /// the future of its admission (`None` in a dry run). Not `async`: nothing of this is kept
    /// while the request waits but what it returns.
    fn take_turn(
        &self,
        ctx: &mut RequestContext,
        request: &Described<'_>,
    ) -> Result<Turn<impl Future<Output = Result<Seat, Rejection>> + Send + '_>, ProxyError> {
        let snapshot = self.flow_control.snapshot();
        let mut noted = Noted {
            ctx,
            proxy: self,
            info: request.info,
            flow: None,
        };
        let entered =
            FrontDoor::new(&snapshot, &self.estimator).enter(request, Instant::now(), &mut noted);
        let FlowRequest {
            classification: class,
            level,
            admit,
        } = entered.map_err(|refused| ProxyError::Internal {
            message: match refused {
                NotAdmitted::NoQueues(e) => e.to_string(),
                // Forwarded before it reaches flow control (`admit`).
                NotAdmitted::Bypassed => "a long-running request reached flow control".to_string(),
            },
        })?;
        let flow = noted.flow.take().ok_or_else(|| ProxyError::Internal {
            message: "a request was admitted unrecorded".to_string(),
        })?;
        let shadows = shadow::observe_all(&self.shadows, request);
        let admitting = (!self.dry_run).then(|| self.flow_control.admit(level, admit));
        Ok(Turn {
            class,
            flow,
            exempt: level.is_exempt(),
            shadows,
            admitting,
        })
    }

    /// A request's execution: upstream, holding its seats until its response ends (a watch's
    /// until its response head is here).
    ///
    /// Not an `async fn`: one would keep a second copy of `admitted` (BENCHMARKS.md).
    #[allow(clippy::manual_async_fn)] // on purpose, see above
    fn execute<'a, B>(
        &'a self,
        ctx: &'a mut RequestContext,
        slot: &'a mut Option<Request<B>>,
        mut admitted: Admitted,
    ) -> impl Future<Output = Result<Response<ProxyBody>, ProxyError>> + Send + 'a
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<super::BoxError>,
    {
        async move {
            admitted.shadows.start();
            let waited = admitted.seat.as_ref().map_or(Duration::ZERO, Seat::waited);
            if let Some(logged) = &mut ctx.logged {
                logged.dispatched = Some(Instant::now());
                logged.waited = waited;
            }
            if !admitted.exempt {
                admitted.flow.observe_wait(true, waited);
            }
            let execution = Execution::start(&self.metrics, admitted.flow, &admitted.info.verb);
            if admitted.info.verb == "watch" {
                let watch = self.estimator.watches().register(&admitted.info);
                let response = self.forward(ctx, slot, &admitted.identity, true).await;
                // The watch is established upstream once its response head is here: its seats
                // go back to the level while the stream goes on (the tracker entry stays until
                // the end).
                if let Some(seat) = &mut admitted.seat {
                    seat.finish_early();
                }
                drop(admitted.shadows);
                drop(execution);
                return response.map(|r| {
                    let mut r = r.map(|body| SeatBody::wrap(body, None, watch, None, None));
                    r.extensions_mut().insert(WatchStream);
                    r
                });
            }
            let response = self.forward(ctx, slot, &admitted.identity, false).await?;
            let shadows = (!admitted.shadows.is_empty()).then_some(admitted.shadows);
            Ok(response
                .map(|body| SeatBody::wrap(body, admitted.seat, None, Some(execution), shadows)))
        }
    }

    async fn authenticate<B>(
        &self,
        ctx: &mut RequestContext,
        slot: &Option<Request<B>>,
    ) -> Result<Authenticated, ProxyError> {
        let Some(request) = slot else {
            return Err(already_forwarded());
        };
        let peer_certificates = ctx
            .connection
            .as_ref()
            .and_then(|c| c.peer_certificates.as_deref());
        // In passthrough mode, by the credential that reaches the upstream (`proxy::identity`).
        let result = super::identity::authenticate(
            &self.authenticator,
            self.forwarder.mode(),
            request.headers(),
            peer_certificates.map(Vec::as_slice),
        )
        .await;
        match result {
            Ok(authenticated) => {
                if let Some(logged) = &mut ctx.logged {
                    logged.auth_method = Some(authenticated.method);
                    logged.user.clone_from(&authenticated.identity.user);
                    logged.groups =
                        serde_json::to_string(&authenticated.identity.groups).unwrap_or_default();
                }
                Ok(authenticated)
            }
            Err(error) => {
                tracing::debug!(%error, "Authentication failed");
                Err(ProxyError::Unauthorized {
                    message: error.status_message(),
                })
            }
        }
    }

    /// The identity the request runs as: the caller's, or the one its `Impersonate-*` headers ask
    /// for once every attribute is authorized for the caller (`auth::impersonation`); with the
    /// impersonator's user name when it is another's.
    ///
    /// In `passthrough` mode the headers travel untouched and the upstream authorizes them again;
    /// when the proxy does not authenticate tokens (the caller is `system:anonymous` here while
    /// its token travels) it cannot name the subject the upstream will judge, so the request is
    /// classified as the caller, as without the headers.
    async fn impersonate<B>(
        &self,
        ctx: &mut RequestContext,
        slot: &Option<Request<B>>,
        authenticated: Authenticated,
    ) -> Result<(Identity, Option<String>), ProxyError> {
        let Some(request) = slot else {
            return Err(already_forwarded());
        };
        let Some(requested) = impersonation::requested(request.headers())? else {
            return Ok((authenticated.identity, None));
        };
        if self.forwarder.mode() == super::IdentityForwarding::Passthrough
            && authenticated.method == AuthMethod::Anonymous
            && carries_bearer_token(request.headers())
        {
            return Ok((authenticated.identity, None));
        }
        let Some(authorizer) = &self.authorizer else {
            return Err(ImpersonationError::Forbidden(
                "impersonation cannot be authorized: the proxy has no authorizer".to_string(),
            )
            .into());
        };
        let caller = authenticated.identity;
        let effective = impersonation::impersonate(authorizer, &caller, &requested)
            .await
            .inspect_err(|error| {
                tracing::debug!(user = %caller.user, %error, "Impersonation refused");
            })?;
        if let Some(logged) = &mut ctx.logged {
            logged.impersonator = std::mem::take(&mut logged.user);
            logged.user.clone_from(&effective.user);
            logged.groups = serde_json::to_string(&effective.groups).unwrap_or_default();
        }
        Ok((effective, Some(caller.user)))
    }

    /// The identity checked for the forwarding mode; a refusal is counted by its reason.
    fn forwardable(&self, identity: Identity) -> Result<ForwardableIdentity, ProxyError> {
        self.forwarder.forwardable(identity).map_err(|refused| {
            tracing::debug!(field = %refused.field, reason = refused.reason.as_str(), "Identity refused");
            self.metrics.inc_identity_refused(refused.reason.as_str());
            ProxyError::IdentityRefused(refused)
        })
    }

    async fn forward<B>(
        &self,
        ctx: &RequestContext,
        slot: &mut Option<Request<B>>,
        identity: &ForwardableIdentity,
        long_running: bool,
    ) -> Result<Response<ProxyBody>, ProxyError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<super::BoxError>,
    {
        let Some(request) = slot.take() else {
            return Err(already_forwarded());
        };
        let timeout = match ctx.info.as_deref().map(|info| info.options.timeout()) {
            Some(Timeout::Given(timeout)) => Some(*timeout),
            _ => None,
        };
        let forward = ForwardRequest {
            identity,
            long_running,
            peer: ctx.connection.as_ref().map(|c| c.remote_addr),
            received_at: Some(ctx.received_at),
            timeout,
        };
        let started = Instant::now();
        // Boxed: the upstream exchange's future is the largest part of a request's state, and
        // carried inline it would make every request waiting in a queue as large as one in
        // flight (BENCHMARKS.md, memory per queued request).
        let result = Box::pin(self.forwarder.forward(request, forward)).await;
        metering::record_upstream(&self.metrics, &result, started.elapsed());
        result
    }
}

/// The request's attributes, or the status the apiserver gives when it cannot derive them.
fn attributes<B>(request: &Request<B>) -> Result<RequestInfo, ProxyError> {
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    request_info::parse(request.method().as_str(), target).map_err(|error| match error {
        // The apiserver's RequestInfo filter answers this with 500 "failed to create RequestInfo".
        RequestInfoError::NoKindAndNamespace(_) => ProxyError::Internal {
            message: format!("failed to create RequestInfo: {error}"),
        },
        // Go's HTTP server refuses these before any handler runs.
        RequestInfoError::InvalidEscape(_) | RequestInfoError::InvalidTarget(_) => {
            ProxyError::BadRequest {
                message: error.to_string(),
            }
        }
    })
}

/// Whether the per-request access log is on (`-v=1` and above); what only it reads is not kept
/// otherwise.
fn access_log_enabled() -> bool {
    tracing::enabled!(target: "kube_apf_proxy::access", tracing::Level::DEBUG)
}

/// Sets `X-Kubernetes-PF-FlowSchema-UID` and `X-Kubernetes-PF-PriorityLevel-UID`, as the apiserver
/// sends them (the objects' UIDs; derived from the name where the files set none). The proxy's
/// value comes first; the upstream's own values of the same headers (an apiserver with APF on
/// sends them too) follow it, so a client sees both classifications.
fn set_pf_headers(
    headers: &mut HeaderMap,
    flow_schema: &FlowSchemaRef,
    priority_level: &PriorityLevelRef,
) {
    for (name, uid) in [
        (&FLOW_SCHEMA_UID_HEADER, &flow_schema.uid),
        (&PRIORITY_LEVEL_UID_HEADER, &priority_level.uid),
    ] {
        // Validation keeps UIDs to header-safe text; a value that is not is left out. The
        // name is a static one: inserting it by `&str` would parse it on every response.
        let Ok(value) = HeaderValue::from_str(uid) else {
            continue;
        };
        match headers.entry(name) {
            http::header::Entry::Vacant(entry) => {
                entry.insert(value);
            }
            http::header::Entry::Occupied(mut entry) => {
                let upstream: SmallVec<[HeaderValue; 1]> = entry.iter().cloned().collect();
                entry.insert(value);
                for value in upstream {
                    entry.append(value);
                }
            }
        }
    }
}

// === impl RequestContext ===

impl RequestContext {
    fn new<B>(request: &Request<B>, connection: Option<Arc<ConnectionInfo>>) -> Self {
        RequestContext {
            received_at: Instant::now(),
            connection,
            info: None,
            classification: None,
            logged: access_log_enabled().then(|| {
                Box::new(Logged {
                    method: request.method().clone(),
                    auth_method: None,
                    user: String::new(),
                    impersonator: String::new(),
                    audit_id: String::new(),
                    estimate: None,
                    waited: Duration::ZERO,
                    received: std::time::SystemTime::now(),
                    uri: request
                        .uri()
                        .path_and_query()
                        .map_or("/", |p| p.as_str())
                        .to_string(),
                    groups: "[]".to_string(),
                    at_flow_control: None,
                    dispatched: None,
                })
            }),
        }
    }

    /// One access-log event per request, at debug level (`-v=1`) like the apiserver's own
    /// per-request log lines (`httplog`, at `-v=3`): at the default level the proxy writes nothing
    /// per request. Never a token: only the user, its groups and the request's attributes — what
    /// `simulate` needs to replay the log.
    fn finish(&self, status: http::StatusCode) {
        let Some(logged) = &self.logged else {
            return;
        };
        let info = self.info.as_ref();
        let class = self.classification.as_ref();
        // The arrival a replay wants is at flow control, after authentication: under load the
        // time before it is the proxy's, not the level's.
        let arrival = logged.received
            + logged.at_flow_control.map_or(Duration::ZERO, |t| {
                t.saturating_duration_since(self.received_at)
            });
        tracing::debug!(
            target: "kube_apf_proxy::access",
            method = %logged.method,
            user = %logged.user,
            impersonator = %logged.impersonator,
            audit_id = %logged.audit_id,
            groups = %logged.groups,
            uri = %logged.uri,
            received = %crate::debug_dump::format_rfc3339_nano(Some(arrival)),
            auth = logged.auth_method.map_or("", AuthMethod::as_str),
            verb = info.map_or("", |i| i.verb.as_str()),
            path = info.map_or("", |i| i.path.as_str()),
            resource = info.map_or("", |i| i.resource.as_str()),
            namespace = info.map_or("", |i| i.namespace.as_str()),
            flow_schema = class.map_or("", |(fs, _)| fs.name.as_str()),
            priority_level = class.map_or("", |(_, pl)| pl.name.as_str()),
            seats = logged.estimate.map_or(0, |e| e.max_seats()),
            queue_wait_ms = logged.waited.as_secs_f64() * 1e3,
            status = status.as_u16(),
            duration_ms = self.received_at.elapsed().as_secs_f64() * 1e3,
            execution_ms = logged.dispatched.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3),
            "Request"
        );
    }
}

/// A response body that owns the request's seats and watch registration, and lets go of them at
/// the end of the stream, on error, or when the caller goes away (the body is dropped).
struct SeatBody {
    inner: ProxyBody,
    seat: Option<Seat>,
    watch: Option<WatchGuard>,
    execution: Option<Execution>,
    shadows: Option<ShadowTickets>,
}

impl SeatBody {
    fn wrap(
        inner: ProxyBody,
        seat: Option<Seat>,
        watch: Option<WatchGuard>,
        execution: Option<Execution>,
        shadows: Option<ShadowTickets>,
    ) -> ProxyBody {
        if seat.is_none() && watch.is_none() && execution.is_none() && shadows.is_none() {
            return inner;
        }
        SeatBody {
            inner,
            seat,
            watch,
            execution,
            shadows,
        }
        .boxed_unsync()
    }

    fn release(&mut self) {
        self.execution = None;
        self.shadows = None;
        self.seat = None;
        self.watch = None;
    }
}

impl Body for SeatBody {
    type Data = Bytes;
    type Error = super::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => self.release(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.release(),
            Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
