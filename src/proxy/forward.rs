//! One caller request → one upstream request: identity headers, header hygiene, streaming bodies
//! both ways, the request timeout, and upgrades.
//!
//! Timeouts mirror the apiserver's `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`:
//! a non-long-running request gets `--request-timeout` (or a shorter `?timeout=`); when it runs
//! out before the upstream answers, the caller gets a 504 `Status`; when it runs out while the
//! body streams, the body ends with an error (the caller sees the stream abort, as when the
//! apiserver's timeout filter fires after the headers were written). Long-running requests
//! (watch, exec, attach, port-forward, log follow, proxy) have no deadline.
//!
//! `Host` is the upstream's authority, as the apiserver's proxy sends with `UseLocationHost`: the
//! caller's `Host` names the proxy, which the upstream neither knows nor needs. Headers are
//! prepared by [`super::headers`] (hop-by-hop, forged identity headers, identity modes,
//! `X-Forwarded-For`); its module documentation explains how a caller's own `Impersonate-*`
//! headers are treated in each mode.

mod deadline;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;

use hyper::upgrade::OnUpgrade;
use tokio::time::Instant;

use super::headers::{
    is_upgrade_request, prepare_request_headers, prepare_response_headers, ForgeableHeaders,
};
use super::identity::{ForwardableIdentity, IdentityForwarding};
use super::upgrade::splice_upgrades;
use super::ProxyError;
use crate::body::{empty_body, BoxError, ProxyBody};
use crate::upstream::{Route, UpstreamAuth, UpstreamBody, UpstreamClient, UpstreamError};
use deadline::DeadlineBody;

/// How requests are forwarded.
#[derive(Debug, Clone)]
pub struct ForwarderConfig {
    /// `--identity-forwarding`.
    pub mode: IdentityForwarding,
    /// `--request-timeout`: the longest a non-long-running request may take.
    pub request_timeout: Duration,
    /// Configured requestheader names, stripped from every caller request (`X-Remote-*` always is).
    pub forgeable: ForgeableHeaders,
}

/// Why a forwarding mode cannot work with the upstream credentials given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwarderConfigError {
    /// `requestheader` asserts identities with a front-proxy client certificate.
    #[error("--identity-forwarding=requestheader needs an upstream client certificate (--upstream-client-cert-file/--upstream-client-key-file or the kubeconfig's client-certificate) trusted by the upstream's --requestheader-client-ca-file")]
    RequestheaderNeedsClientCertificate,
    /// `impersonate` authenticates as the proxy.
    #[error("--identity-forwarding=impersonate needs upstream credentials of the proxy (a client certificate or a token) allowed to impersonate")]
    ImpersonateNeedsCredentials,
}

/// What the pipeline knows about a request besides the request itself.
#[derive(Debug, Clone)]
pub struct ForwardRequest<'a> {
    /// The authenticated caller, checked for this forwarder's mode.
    pub identity: &'a ForwardableIdentity,
    /// Long-running (watch, exec, attach, port-forward, log follow, proxy): no deadline.
    pub long_running: bool,
    /// The caller's address, appended to `X-Forwarded-For`.
    pub peer: Option<SocketAddr>,
    /// When the request was received (the deadline counts from here, as the apiserver's does);
    /// now when `None`.
    pub received_at: Option<Instant>,
    /// The request's own `?timeout=`, as its attributes read it (`Timeout::Given`); the
    /// forwarder's `--request-timeout` applies when it is `None` or longer.
    pub timeout: Option<Duration>,
}

/// Forwards requests to the upstream.
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: UpstreamClient,
    config: ForwarderConfig,
}

// === impl Forwarder ===

impl Forwarder {
    /// Checks that `config.mode` has the credentials it needs.
    pub fn new(
        client: UpstreamClient,
        config: ForwarderConfig,
    ) -> Result<Self, ForwarderConfigError> {
        match config.mode {
            IdentityForwarding::Passthrough => {}
            IdentityForwarding::Impersonate => {
                if !client.has_client_identity() && !client.has_token() {
                    return Err(ForwarderConfigError::ImpersonateNeedsCredentials);
                }
            }
            IdentityForwarding::Requestheader => {
                if !client.has_client_identity() {
                    return Err(ForwarderConfigError::RequestheaderNeedsClientCertificate);
                }
            }
        }
        Ok(Forwarder { client, config })
    }

    /// `--identity-forwarding`.
    pub fn mode(&self) -> IdentityForwarding {
        self.config.mode
    }

    /// Checks an authenticated caller for this forwarder's mode: the only way to a
    /// [`ForwardableIdentity`] it forwards.
    pub fn forwardable(
        &self,
        identity: crate::auth::Identity,
    ) -> Result<ForwardableIdentity, super::IdentityRefused> {
        ForwardableIdentity::check(identity, self.config.mode)
    }

    /// The upstream client (for TokenReview and health checks).
    pub fn client(&self) -> &UpstreamClient {
        &self.client
    }

    /// Forwards `request` and returns the upstream's response, its body streaming. Errors are
    /// for [`super::error_response`]; a failure after the response head arrived ends the body
    /// with an error instead.
    pub async fn forward<B>(
        &self,
        mut request: Request<B>,
        ctx: ForwardRequest<'_>,
    ) -> Result<Response<ProxyBody>, ProxyError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        if ctx.identity.mode() != self.config.mode {
            return Err(ProxyError::Internal {
                message: "the identity was checked for another forwarding mode".to_string(),
            });
        }
        let caller = request.version();
        let upgrade = caller <= http::Version::HTTP_11 && is_upgrade_request(request.headers());
        let deadline = self.deadline(&ctx, upgrade);
        let caller_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
        let upstream_request = self.upstream_request(request, &ctx, upgrade)?;
        let route = if upgrade {
            Route::Upgrade
        } else if ctx.long_running {
            Route::LongRunning
        } else {
            Route::Short
        };
        let auth = upstream_auth(ctx.identity.mode());
        let response = self
            .send(upstream_request, auth, route, caller, deadline)
            .await?;
        Ok(relay(response, caller_upgrade, deadline))
    }

    /// `None` for long-running requests and upgrades.
    fn deadline(&self, ctx: &ForwardRequest<'_>, upgrade: bool) -> Option<Deadline> {
        if ctx.long_running || upgrade {
            return None;
        }
        let maximum = self.config.request_timeout;
        let after = ctx.timeout.map_or(maximum, |given| given.min(maximum));
        let at = ctx.received_at.unwrap_or_else(Instant::now) + after;
        Some(Deadline { at, after })
    }

    fn upstream_request<B>(
        &self,
        request: Request<B>,
        ctx: &ForwardRequest<'_>,
        upgrade: bool,
    ) -> Result<Request<ProxyBody>, ProxyError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let uri = self
            .client
            .target_for(request.uri().path_and_query())
            .map_err(|e| ProxyError::BadRequest {
                message: format!("the request URL cannot be forwarded: {e}"),
            })?;
        let (mut parts, body) = request.into_parts();
        parts.uri = uri;
        prepare_request_headers(
            &mut parts.headers,
            ctx.identity,
            &self.config.forgeable,
            ctx.peer.map(|p| p.ip()),
            upgrade,
        )?;
        Ok(Request::from_parts(
            parts,
            body.map_err(Into::into).boxed_unsync(),
        ))
    }

    async fn send(
        &self,
        request: Request<ProxyBody>,
        auth: UpstreamAuth,
        route: Route,
        caller: http::Version,
        deadline: Option<Deadline>,
    ) -> Result<Response<UpstreamBody>, ProxyError> {
        let sent = self.client.send_for(request, auth, route, caller);
        Ok(match deadline {
            None => sent.await?,
            Some(Deadline { at, after }) => tokio::time::timeout_at(at, sent)
                .await
                .map_err(|_| UpstreamError::Timeout { after })??,
        })
    }
}

/// The credentials the upstream sees in `mode`: taken from the identity's mode (the one its
/// headers were made for), so the proxy's credentials never go without the caller's identity.
fn upstream_auth(mode: IdentityForwarding) -> UpstreamAuth {
    match mode {
        IdentityForwarding::Passthrough => UpstreamAuth::Caller,
        IdentityForwarding::Impersonate => UpstreamAuth::Proxy,
        IdentityForwarding::Requestheader => UpstreamAuth::ProxyCertificate,
    }
}

/// When a non-long-running request runs out of time.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    after: Duration,
}

/// The upstream's response for the caller: hop-by-hop headers stripped; a `101` joins the two
/// upgraded connections; otherwise the body streams (cut at the deadline, if any).
fn relay(
    mut response: Response<UpstreamBody>,
    caller_upgrade: Option<OnUpgrade>,
    deadline: Option<Deadline>,
) -> Response<ProxyBody> {
    let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    match caller_upgrade {
        Some(caller) if switching => {
            prepare_response_headers(response.headers_mut(), true);
            let upstream = hyper::upgrade::on(&mut response);
            splice_upgrades(caller, upstream);
            response.map(|_| empty_body())
        }
        _ => {
            prepare_response_headers(response.headers_mut(), false);
            match deadline {
                None => response.map(|b| b.map_err(BoxError::from).boxed_unsync()),
                Some(Deadline { at, after }) => {
                    response.map(|b| DeadlineBody::new(b, at, after).boxed_unsync())
                }
            }
        }
    }
}
