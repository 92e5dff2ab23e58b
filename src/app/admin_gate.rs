//! The secure admin listener's gate: authenticate with the proxy's own authenticators, then
//! authorize by SubjectAccessReview (non-resource path, lowercased method as verb), as
//! kube-apiserver guards its `/metrics` and `/debug` endpoints.
//!
//! Where we differ: anonymous callers get 401 instead of being reviewed as `system:anonymous`
//! (kube-rbac-proxy and controller-runtime's metrics filter do the same); a scrape without
//! credentials is a configuration mistake worth saying so.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use hyper::body::Incoming;
use prometheus::{IntCounterVec, Opts, Registry};

use crate::auth::authorize::{non_resource_verb, Authorization, Authorizer, Decision};
use crate::auth::{Authenticator, Identity, ANONYMOUS_USER};
use crate::body::ProxyBody;
use crate::proxy::{error_response, ProxyError};
use crate::server::{AdminGate, ConnectionInfo};

/// Authentication, then SubjectAccessReview, for every admin path but the health endpoints.
pub struct AdminGuard {
    authenticator: Arc<Authenticator>,
    authorizer: Arc<Authorizer>,
    counters: AdminCounters,
}

/// `apf_proxy_admin_*`: the gate's outcomes.
#[derive(Clone)]
struct AdminCounters {
    authentications: IntCounterVec,
    authorizations: IntCounterVec,
}

impl AdminCounters {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let authentications = IntCounterVec::new(
            Opts::new(
                "apf_proxy_admin_authentications_total",
                "Requests to the secure admin listener's guarded paths by authentication result.",
            ),
            &["result"],
        )?;
        let authorizations = IntCounterVec::new(
            Opts::new(
                "apf_proxy_admin_authorizations_total",
                "Authorization decisions of the secure admin listener (SubjectAccessReview) by \
                 decision (allowed, denied, error) and whether the answer came from the cache.",
            ),
            &["decision", "cached"],
        )?;
        registry.register(Box::new(authentications.clone()))?;
        registry.register(Box::new(authorizations.clone()))?;
        Ok(AdminCounters {
            authentications,
            authorizations,
        })
    }

    fn authenticated(&self, result: &str) {
        self.authentications.with_label_values(&[result]).inc();
    }

    fn authorized(&self, decision: &str, cached: bool) {
        let cached = if cached { "true" } else { "false" };
        self.authorizations
            .with_label_values(&[decision, cached])
            .inc();
    }
}

// === impl AdminGuard ===

impl AdminGuard {
    /// A guard reporting to `registry`.
    pub fn new(
        authenticator: Arc<Authenticator>,
        authorizer: Arc<Authorizer>,
        registry: &Registry,
    ) -> Result<Self, prometheus::Error> {
        Ok(AdminGuard {
            authenticator,
            authorizer,
            counters: AdminCounters::register(registry)?,
        })
    }
}

impl AdminGate for AdminGuard {
    fn check(
        &self,
        request: &Request<Incoming>,
    ) -> BoxFuture<'static, Option<Response<ProxyBody>>> {
        let peer_certificates = request
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|c| c.peer_certificates.clone());
        let headers = request.headers().clone();
        let path = request.uri().path().to_owned();
        let verb = non_resource_verb(request.method());
        let authenticator = Arc::clone(&self.authenticator);
        let authorizer = Arc::clone(&self.authorizer);
        let counters = self.counters.clone();
        Box::pin(async move {
            let authenticated = authenticator
                .authenticate(&headers, peer_certificates.as_deref().map(Vec::as_slice))
                .await;
            let identity = match authenticated {
                Ok(ok) if ok.identity.user != ANONYMOUS_USER => ok.identity,
                Ok(_) | Err(_) => {
                    counters.authenticated("failure");
                    return Some(error_response(&ProxyError::Unauthorized {
                        message: "Unauthorized".to_string(),
                    }));
                }
            };
            counters.authenticated("success");
            let answer = authorizer.authorize(&identity, &verb, &path).await;
            decide(&counters, &identity, &verb, &path, answer)
        })
    }
}

/// The response for an authorization outcome: `None` (through) only when allowed.
fn decide(
    counters: &AdminCounters,
    identity: &Identity,
    verb: &str,
    path: &str,
    answer: Result<Authorization, crate::auth::authorize::AuthorizeError>,
) -> Option<Response<ProxyBody>> {
    // The apiserver's `forbidden` message (`responsewriters.forbiddenMessage`); `ProxyError`
    // adds the `forbidden: ` prefix.
    let mut message = format!("User {:?} cannot {verb} path {path:?}", identity.user);
    match answer {
        Ok(Authorization {
            decision: Decision::Allowed,
            cached,
        }) => {
            counters.authorized("allowed", cached);
            return None;
        }
        Ok(Authorization {
            decision: Decision::Denied { reason },
            cached,
        }) => {
            counters.authorized("denied", cached);
            if !reason.is_empty() {
                message = format!("{message}: {reason}");
            }
        }
        Err(error) => {
            counters.authorized("error", false);
            tracing::warn!(%error, user = %identity.user, path, "Admin request denied: authorization failed");
        }
    }
    Some(error_response(&ProxyError::Forbidden { message }))
}
