//! `audit.k8s.io/v1` `Event` lines (kube-apiserver's `--audit-log-path`, `--audit-log-format=json`).
//!
//! Mirrors `k8s.io/apiserver/pkg/apis/audit/v1/types.go`. Which stage starts and ends a request:
//! `RequestReceived` is ignored (`ResponseComplete` carries the same arrival); `ResponseStarted`
//! is only generated for long-running requests (watches): the request is replayed from it, open
//! ended, and its `ResponseComplete` (or `Panic`) ends it; any other request is replayed from its
//! `ResponseComplete` or `Panic`, with the time between arrival and that stage as its duration.
//!
//! That duration includes the request's wait in the apiserver's APF queues. The apiserver writes
//! the wait into the event as the annotation `apiserver.latency.k8s.io/apf-queue-wait`, a Go
//! duration string (`k8s.io/apiserver/pkg/endpoints/filters/audit.go`, `writeLatencyToAnnotation`,
//! from the latency trackers of `pkg/endpoints/request/webhook_duration.go`): only on the
//! `ResponseComplete` stage of a request that took over 500 ms, and only when it waited. It is the
//! request's [`TraceRequest::recorded_wait`]; a value that is not a duration makes the line
//! malformed, as a bad timestamp does. The other `apiserver.latency.k8s.io/*` annotations (etcd,
//! webhooks, authentication, serialization, `total`) are part of the execution and are not read.
//!
//! Where we differ: a watch's wait is written only on its `ResponseComplete`, which comes after
//! the watch was replayed from its `ResponseStarted`; a watch keeps its wait in its time until
//! initialised.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::Deserialize;

use super::{parse_timestamp, LineProblem, Parsed, TraceEvent, TraceRequest};
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
    #[serde(default, borrow)]
    annotations: Option<Annotations<'a>>,
}

/// The annotations read; the others are skipped without being kept.
#[derive(Deserialize)]
struct Annotations<'a> {
    #[serde(default, borrow, rename = "apiserver.latency.k8s.io/apf-queue-wait")]
    apf_queue_wait: Option<Cow<'a, str>>,
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

/// One line, an `Event` or an `EventList` of them, as far as it can be read without the reader's
/// state (that is [`apply`]'s part). The items of a list stop at the first that is wrong.
pub(super) fn decode(line: &[u8]) -> Result<Decoded, LineProblem> {
    let event: Event<'_> =
        serde_json::from_slice(line).map_err(|e| LineProblem::NotAuditEvent(e.to_string()))?;
    match event.kind.as_ref() {
        "Event" => Ok(Decoded::Event(one(event))),
        "EventList" => {
            let mut records = Vec::with_capacity(event.items.len());
            for item in event.items {
                let record = if matches!(item.kind.as_ref(), "" | "Event") {
                    one(item)
                } else {
                    Err(LineProblem::NotAuditKind(item.kind.into_owned()))
                };
                let wrong = record.is_err();
                records.push(record);
                if wrong {
                    break;
                }
            }
            Ok(Decoded::List(records))
        }
        other => Err(LineProblem::NotAuditKind(other.to_string())),
    }
}

/// An audit line, decoded.
#[derive(Debug)]
pub(super) enum Decoded {
    /// An `Event`.
    Event(Result<Record, LineProblem>),
    /// The items of an `EventList`, up to the first that is wrong.
    List(Vec<Result<Record, LineProblem>>),
}

/// One audit event, decoded.
#[derive(Debug)]
pub(super) enum Record {
    /// A stage that neither starts nor ends a request (`RequestReceived`).
    Ignored,
    /// A stage that starts or ends one.
    Stage(Box<Stage>),
}

/// A `ResponseStarted`, `ResponseComplete` or `Panic` stage.
#[derive(Debug)]
pub(super) struct Stage {
    /// `ResponseStarted`: a long-running request whose end comes later.
    started: bool,
    audit_id: String,
    /// When the stage was written.
    written: Duration,
    /// Only `timestamp` (the old form): replayed as taking no time.
    without_duration: bool,
    /// The request it starts (its `key` left empty: the audit ID is), or why it cannot be
    /// replayed. Asked for only when the stage does not end an open request.
    request: Result<TraceRequest, LineProblem>,
}

/// The events of a [`decode`]d line, with the reader's state: the audit IDs of long-running
/// requests whose `ResponseStarted` was seen (`open`), and the count of events of the old form
/// with only `timestamp` (`without_duration`). Changes made for the items of a list before a
/// wrong one are kept, as they would be read one by one.
pub(super) fn apply(
    decoded: Decoded,
    number: u64,
    open: &mut HashSet<String>,
    without_duration: &mut u64,
) -> Result<Parsed, LineProblem> {
    match decoded {
        Decoded::Event(record) => Ok(match stage(record?, number, open, without_duration)? {
            Some((e, written)) => Parsed::Events(vec![e], written),
            None => Parsed::Ignored,
        }),
        Decoded::List(records) => {
            let mut events = Vec::with_capacity(records.len());
            let mut latest = Duration::ZERO;
            for record in records {
                if let Some((e, written)) = stage(record?, number, open, without_duration)? {
                    latest = latest.max(written);
                    events.push(e);
                }
            }
            Ok(Parsed::Events(events, latest))
        }
    }
}

/// The event of one record, with the time its stage was written; `None` for a stage that
/// neither starts nor ends a request.
fn stage(
    record: Record,
    number: u64,
    open: &mut HashSet<String>,
    without_duration: &mut u64,
) -> Result<Option<(TraceEvent, Duration)>, LineProblem> {
    let Record::Stage(stage) = record else {
        return Ok(None);
    };
    let Stage {
        started,
        audit_id,
        written,
        without_duration: old_form,
        request,
    } = *stage;
    if old_form {
        *without_duration += 1;
    }
    if !started && open.remove(&audit_id) {
        let ended = TraceEvent::Ended {
            key: audit_id,
            at: written,
        };
        return Ok(Some((ended, written)));
    }
    let mut request = request?;
    if started {
        open.insert(audit_id.clone());
    }
    request.line = number;
    request.key = audit_id;
    Ok(Some((TraceEvent::Request(request), written)))
}

fn required<'a>(
    field: Option<Cow<'a, str>>,
    name: &'static str,
) -> Result<Cow<'a, str>, LineProblem> {
    field.ok_or(LineProblem::AuditWithout(name))
}

/// One audit `Event`, decoded.
///
/// The old form (`audit.k8s.io/v1alpha1`, `v1beta1` before Kubernetes 1.10) has only
/// `timestamp`, the arrival: such an event is replayed as taking no time, and counted in
/// `without_duration` so that the run can say so once.
fn one(event: Event<'_>) -> Result<Record, LineProblem> {
    let stage = required(event.stage, "stage")?;
    if stage == "RequestReceived" {
        return Ok(Record::Ignored);
    }
    let started = match stage.as_ref() {
        "ResponseStarted" => true,
        "ResponseComplete" | "Panic" => false,
        other => return Err(LineProblem::NotAuditStage(other.to_string())),
    };
    let audit_id = required(event.audit_id, "auditID")?.into_owned();
    let received =
        event
            .request_received_timestamp
            .or(event.timestamp)
            .ok_or(LineProblem::AuditWithout(
                "requestReceivedTimestamp or timestamp",
            ))?;
    let received = parse_timestamp(&received).map_err(LineProblem::Timestamp)?;
    let (written, without_duration) = match event.stage_timestamp {
        Some(stage_timestamp) => (
            parse_timestamp(&stage_timestamp).map_err(LineProblem::Timestamp)?,
            false,
        ),
        None => (received, true),
    };
    let request = (|| {
        let uri = required(event.request_uri, "requestURI")?;
        let verb = required(event.verb, "verb")?;
        let method = method_of(&verb)?;
        // The apiserver classifies after impersonation: the impersonated user is the one that
        // counts. Its filter adds `system:authenticated` to an impersonated user's groups as the
        // authenticators do for the caller's, so the same rule applies to both (a no-op where it
        // is recorded).
        let user = event
            .impersonated_user
            .or(event.user)
            .ok_or(LineProblem::AuditWithout("user"))?;
        let identity = Identity {
            extra: user.extra,
            ..Identity::authenticated(
                user.username.into_owned(),
                user.uid.into_owned(),
                user.groups,
            )
        };
        let recorded_wait = match event.annotations.and_then(|a| a.apf_queue_wait) {
            Some(wait) => crate::duration::parse_duration(&wait)
                .map_err(|e| LineProblem::RecordedWait(e.to_string()))?,
            None => Duration::ZERO,
        };
        let elapsed = written.saturating_sub(received);
        let (duration, first_byte) = if started {
            (None, Some(elapsed))
        } else {
            (Some(elapsed), None)
        };
        Ok(TraceRequest {
            line: 0,
            key: String::new(),
            arrival: received,
            duration,
            first_byte,
            recorded_wait,
            method,
            uri: uri.into_owned(),
            identity,
            status: event.response_status.and_then(|s| s.code),
        })
    })();
    Ok(Record::Stage(Box::new(Stage {
        started,
        audit_id,
        written,
        without_duration,
        request,
    })))
}

/// The HTTP method behind an audit verb: Kubernetes verbs for resource requests, the lowercased
/// method for non-resource ones (`requestinfo.go`).
fn method_of(verb: &str) -> Result<http::Method, LineProblem> {
    Ok(match verb {
        "get" | "list" | "watch" => http::Method::GET,
        "create" | "post" => http::Method::POST,
        "update" | "put" => http::Method::PUT,
        "patch" => http::Method::PATCH,
        "delete" | "deletecollection" => http::Method::DELETE,
        "head" => http::Method::HEAD,
        "options" => http::Method::OPTIONS,
        // Impersonation and proxy verbs are not request verbs of their own.
        other => return Err(LineProblem::NoHttpMethod(other.to_string())),
    })
}
