//! One described request judged against a configuration: its classification, why (every
//! FlowSchema tried), and the seats it would take. `classify`, `classify --explain` and the admin
//! listener's `explain` and `rejected` endpoints share it; the seats come from flow control's
//! front door ([`FrontDoor::prepare`]), the very path that admits live requests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::auth::Identity;
use crate::classify::{classify, explain, Classification, ClassifyInput, Explanation, Impersonate};
use crate::config::Config;
use crate::fairqueue::controller::{FlowControl, FlowControlError, Snapshot};
use crate::fairqueue::flow_request::{Described, FrontDoor, Handling};
use crate::fairqueue::timeout::Deadlines;
use crate::fairqueue::work_estimate::WorkEstimator;
use crate::request_info::{self, RequestInfo};

/// The server concurrency limit a command assumes when it serves nothing: the defaults of
/// `--max-requests-inflight` (400) and `--max-mutating-requests-inflight` (200). It sets each
/// level's `maxSeats`.
pub const DEFAULT_SERVER_CONCURRENCY_LIMIT: u32 = 600;

/// A request classified, with its attributes and seats.
#[derive(Debug)]
pub struct Judged {
    /// The request's attributes.
    pub info: Arc<RequestInfo>,
    /// Its FlowSchema, level and flow.
    pub classification: Classification,
    /// The seats it would occupy at its widest (`max(initial, final)`), capped by its level's
    /// `maxSeats` as flow control caps them.
    pub seats: u32,
}

/// Judges `input` against the configuration and levels of `snapshot`, with `estimator`'s seats;
/// `Err` with a message when its URL does not parse.
pub fn judge(
    snapshot: &Snapshot,
    estimator: &WorkEstimator,
    input: &ClassifyInput,
) -> Result<Judged, String> {
    let target = input.target();
    let info = Arc::new(request_info::parse(&input.method, target).map_err(|e| e.to_string())?);
    let identity = input.identity();
    // Judged whatever its handling, with no time to wait.
    let request = Described {
        identity: &identity,
        info: &info,
        handling: Handling::of(&info),
        deadlines: Deadlines::of(Duration::ZERO),
    };
    let classification = classify(snapshot.index(), &identity, &info);
    let prepared = FrontDoor::new(snapshot, estimator)
        .prepare(&request, classification, Instant::now(), &mut ())
        .map_err(|e| e.to_string())?;
    Ok(Judged {
        seats: prepared.admit.estimate.max_seats(),
        classification: prepared.classification,
        info,
    })
}

/// Flow control for a configuration that serves nothing, to judge described requests against.
pub struct Offline {
    flow_control: FlowControl,
    estimator: WorkEstimator,
}

impl Offline {
    /// Flow control for `config` at `server_cl`, with an estimator that knows no object counts
    /// (lists, watches and writes cost what the apiserver charges for unknown resources).
    pub fn new(config: &Config, server_cl: u32) -> Result<Offline, FlowControlError> {
        let (flow_control, _) = FlowControl::new(config, server_cl, Instant::now())?;
        Ok(Offline {
            flow_control,
            estimator: WorkEstimator::default(),
        })
    }

    /// [`judge`] against this configuration.
    pub fn judge(&self, input: &ClassifyInput) -> Result<Judged, String> {
        judge(&self.flow_control.snapshot(), &self.estimator, input)
    }

    /// [`explain_request`] against this configuration.
    pub fn explain(&self, input: &ClassifyInput) -> Result<Explained, String> {
        explain_request(&self.flow_control.snapshot(), &self.estimator, input)
    }
}

/// The JSON form of `classify --explain`: the explanation and the verdict.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explained {
    /// The request's attributes.
    pub request_info: RequestInfo,
    /// The identity the request is classified as: the impersonated one when it impersonates.
    pub user: UserInfo,
    /// The caller that impersonates [`Explained::user`] (the apiserver's audit records it as
    /// `user`, and the effective identity as `impersonatedUser`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonator: Option<UserInfo>,
    /// The schemas tried and why each matched or not.
    #[serde(flatten)]
    pub explanation: Explanation,
    /// The chosen FlowSchema.
    pub flow_schema: String,
    /// Its priority level.
    pub priority_level: String,
    /// The flow distinguisher.
    pub flow_distinguisher: String,
    /// Whether the level is exempt.
    pub exempt: bool,
    /// The queues the flow is dealt, when the level shuffle-shards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hand: Option<Vec<usize>>,
    /// The seats the request would occupy.
    pub seats: u32,
}

/// An identity in the shape of the apiserver's `UserInfo` (`authentication.k8s.io/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    /// The user name.
    pub username: String,
    /// The UID; absent when empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups, with those the apiserver adds.
    pub groups: Vec<String>,
    /// Extra attributes; absent when none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<Identity> for UserInfo {
    fn from(identity: Identity) -> Self {
        UserInfo {
            username: identity.user,
            uid: identity.uid,
            groups: identity.groups,
            extra: identity.extra,
        }
    }
}

impl std::fmt::Display for UserInfo {
    /// `"alice" (groups ["dev", "system:authenticated"])`, with the UID when there is one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.username)?;
        if !self.uid.is_empty() {
            write!(f, " (uid {:?})", self.uid)?;
        }
        write!(f, " (groups {:?})", self.groups)
    }
}

/// Explains one request against `snapshot`: every FlowSchema in the order tried, then the
/// verdict; `Err` with a message when the URL does not parse.
pub fn explain_request(
    snapshot: &Snapshot,
    estimator: &WorkEstimator,
    input: &ClassifyInput,
) -> Result<Explained, String> {
    let judged = judge(snapshot, estimator, input)?;
    let identity = input.identity();
    let explanation = explain(snapshot.config(), &identity, &judged.info);
    let class = &judged.classification;
    debug_assert_eq!(
        explanation.flow_schemas.last().map(|t| t.name.as_str()),
        Some(class.flow_schema.name.as_str()),
        "explain agrees with classify"
    );
    Ok(Explained {
        explanation,
        flow_schema: class.flow_schema.name.clone(),
        priority_level: class.priority_level.name.clone(),
        flow_distinguisher: class.flow_distinguisher.to_string(),
        exempt: class.is_exempt(),
        hand: class.hand().map(|h| h.as_slice().to_vec()),
        seats: judged.seats,
        request_info: Arc::unwrap_or_clone(judged.info),
        user: identity.into(),
        impersonator: input.impersonator().map(UserInfo::from),
    })
}

// === impl Explained ===

impl Explained {
    /// The text form: for an impersonated request, who runs it and who impersonates; the schemas
    /// tried; then one verdict line.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        if let Some(impersonator) = &self.impersonator {
            text.push_str(&format!(
                "As {}, impersonated by {impersonator}\n",
                self.user
            ));
        }
        text.push_str(&self.explanation.to_text(&self.request_info));
        let hand = self
            .hand
            .as_ref()
            .map(|h| format!(", hand {h:?}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "=> FlowSchema {}, priority level {}{}, flow distinguisher {:?}{hand}, {} seat(s)\n",
            self.flow_schema,
            self.priority_level,
            if self.exempt { " (exempt)" } else { "" },
            self.flow_distinguisher,
            self.seats
        ));
        text
    }
}

/// The request a `/debug/api_priority_and_fairness/explain` query describes:
/// `?url=PATH&method=GET&user=U&group=G&group=G2&uid=I` (`method` defaults to `GET`; without
/// `user` the caller is anonymous), and what the caller impersonates as `kubectl --as`,
/// `--as-group` and `--as-uid` would: `&as=U2&asGroup=G3&asUid=I2`.
pub fn input_from_query(query: &str) -> Result<ClassifyInput, String> {
    const PARAMETERS: &str = "url, method, user, group, uid, as, asGroup, asUid";
    let mut input = ClassifyInput {
        method: "GET".to_string(),
        ..Default::default()
    };
    let mut impersonate = Impersonate::default();
    for (key, value) in request_info::query_params(query) {
        match key.as_str() {
            "url" => input.url = value,
            "method" => input.method = value,
            "user" => input.user = Some(value),
            "group" => input.groups.push(value),
            "uid" => input.uid = value,
            "as" => impersonate.user = value,
            "asGroup" => impersonate.groups.push(value),
            "asUid" => impersonate.uid = value,
            _ => return Err(format!("unknown parameter {key:?}: use {PARAMETERS}")),
        }
    }
    if input.url.is_empty() {
        return Err("the url parameter is required (the request's path and query)".to_string());
    }
    if impersonate.user.is_empty() {
        if !impersonate.groups.is_empty() || !impersonate.uid.is_empty() {
            // As the apiserver refuses Impersonate-Group or -Uid without Impersonate-User.
            return Err("asGroup and asUid need as (the user to impersonate)".to_string());
        }
    } else {
        input.impersonate = Some(Box::new(impersonate));
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_describes_the_caller_and_whom_it_impersonates() {
        let input = input_from_query(
            "url=/api/v1/pods&user=admin&group=system:masters&as=alice&asGroup=dev&asUid=42",
        )
        .expect("a described request");
        assert_eq!(input.caller().user, "admin");
        assert_eq!(input.identity().user, "alice");
        assert!(input.identity().groups.contains(&"dev".to_string()));
        assert_eq!(input.identity().uid, "42");
        assert_eq!(input.impersonator().map(|i| i.user), Some("admin".into()));

        let own = input_from_query("url=/api/v1/pods&user=admin").expect("described");
        assert!(own.impersonate.is_none());
        assert_eq!(own.identity().user, "admin");
    }

    #[test]
    fn groups_or_a_uid_to_impersonate_need_a_user_and_unknown_parameters_are_named() {
        for query in ["url=/api&asGroup=dev", "url=/api&asUid=1"] {
            let error = input_from_query(query).expect_err(query);
            assert!(error.contains("need as"), "{error}");
        }
        let error = input_from_query("url=/api&impersonate=x").expect_err("unknown");
        assert!(error.contains("as, asGroup, asUid"), "{error}");
    }
}
