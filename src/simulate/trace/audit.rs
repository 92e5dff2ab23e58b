//! `audit.k8s.io/v1` `Event` lines (kube-apiserver's `--audit-log-path`, `--audit-log-format=json`).
//!
//! Mirrors `k8s.io/apiserver/pkg/apis/audit/v1/types.go`. Which stage starts and ends a request:
//! `RequestReceived` is ignored (`ResponseComplete` carries the same arrival); `ResponseStarted`
//! is only generated for long-running requests (watches): the request is replayed from it, open
//! ended, and its `ResponseComplete` (or `Panic`) ends it; any other request is replayed from its
//! `ResponseComplete` or `Panic`, with the time between arrival and that stage as its duration.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::Deserialize;

use super::{parse_timestamp, Parsed, TraceEvent, TraceRequest};
use crate::auth::Identity;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    /// Empty for the items of an `EventList`, which the webhook backend writes without it.
    #[serde(default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    items: Vec<Event<'a>>,
    #[serde(default, borrow, rename = "auditID")]
    audit_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    stage: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "requestURI")]
    request_uri: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    verb: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    user: Option<UserInfo<'a>>,
    #[serde(default, borrow)]
    impersonated_user: Option<UserInfo<'a>>,
    #[serde(default)]
    response_status: Option<ResponseStatus>,
    #[serde(default, borrow)]
    request_received_timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    stage_timestamp: Option<Cow<'a, str>>,
    /// `audit.k8s.io/v1alpha1` and `v1beta1` before Kubernetes 1.10: when the request arrived.
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UserInfo<'a> {
    #[serde(default, borrow)]
    username: Cow<'a, str>,
    #[serde(default, borrow)]
    uid: Cow<'a, str>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    extra: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: Option<u16>,
}

/// One line: an `Event`, or an `EventList` of them. `without_duration` counts the events of the
/// old form that have only `timestamp`.
pub(super) fn parse_line(
    line: &[u8],
    number: u64,
    open: &mut HashSet<String>,
    without_duration: &mut u64,
) -> Result<Parsed, String> {
    let event: Event<'_> =
        serde_json::from_slice(line).map_err(|e| format!("not an audit event: {e}"))?;
    match event.kind.as_ref() {
        "Event" => Ok(match one(event, number, open, without_duration)? {
            Some((e, written)) => Parsed::Events(vec![e], written),
            None => Parsed::Ignored,
        }),
        "EventList" => {
            let mut events = Vec::with_capacity(event.items.len());
            let mut latest = Duration::ZERO;
            for item in event.items {
                if !matches!(item.kind.as_ref(), "" | "Event") {
                    return Err(format!("kind {:?} is not an audit Event", item.kind));
                }
                if let Some((e, written)) = one(item, number, open, without_duration)? {
                    latest = latest.max(written);
                    events.push(e);
                }
            }
            Ok(Parsed::Events(events, latest))
        }
        other => Err(format!("kind {other:?} is not an audit Event")),
    }
}

fn required<'a>(field: Option<Cow<'a, str>>, name: &str) -> Result<Cow<'a, str>, String> {
    field.ok_or_else(|| format!("audit event without {name}"))
}

/// The event of one audit `Event`, with the time its stage was written; `None` for a stage that
/// neither starts nor ends a request.
///
/// The old form (`audit.k8s.io/v1alpha1`, `v1beta1` before Kubernetes 1.10) has only
/// `timestamp`, the arrival: such an event is replayed as taking no time, and counted in
/// `without_duration` so that the run can say so once.
fn one(
    event: Event<'_>,
    number: u64,
    open: &mut HashSet<String>,
    without_duration: &mut u64,
) -> Result<Option<(TraceEvent, Duration)>, String> {
    let stage = required(event.stage, "stage")?;
    if stage == "RequestReceived" {
        return Ok(None);
    }
    let started = match stage.as_ref() {
        "ResponseStarted" => true,
        "ResponseComplete" | "Panic" => false,
        other => return Err(format!("stage {other:?} is not an audit stage")),
    };
    let audit_id = required(event.audit_id, "auditID")?;
    let received = event
        .request_received_timestamp
        .or(event.timestamp)
        .ok_or("audit event without requestReceivedTimestamp or timestamp")?;
    let received = parse_timestamp(&received)?;
    let written = match event.stage_timestamp {
        Some(stage_timestamp) => parse_timestamp(&stage_timestamp)?,
        None => {
            *without_duration += 1;
            received
        }
    };
    if !started && open.remove(audit_id.as_ref()) {
        let key = audit_id.into_owned();
        return Ok(Some((TraceEvent::Ended { key, at: written }, written)));
    }
    let uri = required(event.request_uri, "requestURI")?;
    let verb = required(event.verb, "verb")?;
    let method = method_of(&verb)?;
    // The apiserver classifies after impersonation: the impersonated user is the one that counts.
    // Its filter adds `system:authenticated` to an impersonated user's groups as the authenticators
    // do for the caller's, so the same rule applies to both (a no-op where it is recorded).
    let user = event
        .impersonated_user
        .or(event.user)
        .ok_or("audit event without user")?;
    let identity = Identity {
        extra: user.extra,
        ..Identity::authenticated(
            user.username.into_owned(),
            user.uid.into_owned(),
            user.groups,
        )
    };
    let elapsed = written.saturating_sub(received);
    let (duration, first_byte) = if started {
        open.insert(audit_id.to_string());
        (None, Some(elapsed))
    } else {
        (Some(elapsed), None)
    };
    let request = TraceRequest {
        line: number,
        key: audit_id.into_owned(),
        arrival: received,
        duration,
        first_byte,
        method,
        uri: uri.into_owned(),
        identity,
        status: event.response_status.and_then(|s| s.code),
    };
    Ok(Some((TraceEvent::Request(request), written)))
}

/// The HTTP method behind an audit verb: Kubernetes verbs for resource requests, the lowercased
/// method for non-resource ones (`requestinfo.go`).
fn method_of(verb: &str) -> Result<http::Method, String> {
    Ok(match verb {
        "get" | "list" | "watch" => http::Method::GET,
        "create" | "post" => http::Method::POST,
        "update" | "put" => http::Method::PUT,
        "patch" => http::Method::PATCH,
        "delete" | "deletecollection" => http::Method::DELETE,
        "head" => http::Method::HEAD,
        "options" => http::Method::OPTIONS,
        // Impersonation and proxy verbs are not request verbs of their own.
        other => return Err(format!("verb {other:?} has no HTTP method")),
    })
}
