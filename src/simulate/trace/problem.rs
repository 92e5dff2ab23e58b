//! Why a trace line could not be replayed: one variant per kind of problem, each saying what it
//! found. A run counts skipped lines per kind ([`LineProblem::same_kind`]), with the first line
//! of each kind as its example.

use super::EXPECTED_FORMATS;
use crate::classify::MAX_LINE_BYTES;

/// What is wrong with a trace line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineProblem {
    /// Longer than [`MAX_LINE_BYTES`].
    #[error("line longer than {MAX_LINE_BYTES} bytes")]
    TooLong,
    /// Before the format is known: not JSON (the parser's words).
    #[error("not a JSON object ({0}); {EXPECTED_FORMATS}")]
    NotJson(String),
    /// Before the format is known: JSON, but none of the formats.
    #[error("not a trace line: {EXPECTED_FORMATS}")]
    NoFormat,
    /// In an audit log: not an `Event` as JSON (the parser's words).
    #[error("not an audit event: {0}")]
    NotAuditEvent(String),
    /// In an audit log: an object of another kind.
    #[error("kind {0:?} is not an audit Event")]
    NotAuditKind(String),
    /// An audit event without a field it needs (its name).
    #[error("audit event without {0}")]
    AuditWithout(&'static str),
    /// An audit event of a stage that is none of the audit stages.
    #[error("stage {0:?} is not an audit stage")]
    NotAuditStage(String),
    /// An audit event whose verb no HTTP method stands behind (impersonation, proxy verbs).
    #[error("verb {0:?} has no HTTP method")]
    NoHttpMethod(String),
    /// An audit event whose recorded queue wait is not a Go duration (what is wrong with it).
    #[error("annotations[\"apiserver.latency.k8s.io/apf-queue-wait\"]: {0}")]
    RecordedWait(String),
    /// A timestamp that is not RFC 3339, or before 1970 (what is wrong with it).
    #[error("{0}")]
    Timestamp(String),
    /// In an access log: not a log event as JSON (the parser's words).
    #[error("not an access-log line: {0}")]
    NotAccessLog(String),
    /// An access-log line without a field it needs (its name).
    #[error("access-log line without {0} (written by an older proxy?)")]
    AccessWithout(&'static str),
    /// An access-log line without `duration_ms`.
    #[error("access-log line without duration_ms")]
    AccessWithoutDuration,
    /// A method that is not an HTTP method (the parser's words).
    #[error("method: {0}")]
    Method(String),
    /// An access-log line whose `groups` is not a JSON list of strings (the parser's words).
    #[error("groups: {0}")]
    Groups(String),
    /// In a file of trace lines: not a trace line as JSON (the parser's words).
    #[error("not a trace line: {0}")]
    NotTraceLine(String),
    /// A trace line's time field that is no time (negative, not finite, too large).
    #[error("{field}: {value} is not a time")]
    NotATime {
        /// `at`, `durationMs` or `firstByteMs`.
        field: &'static str,
        /// What it held, in seconds.
        value: f64,
    },
}

impl LineProblem {
    /// Whether `other` is the same kind of problem: the same variant, and where a variant names
    /// what it found (a kind, a stage, a verb, a field), the same one. A line that is none of the
    /// formats and a trace line that does not parse are both "not a trace line"; every bad
    /// timestamp is one kind.
    pub fn same_kind(&self, other: &LineProblem) -> bool {
        use LineProblem::*;
        match (self, other) {
            (NoFormat | NotTraceLine(_), NoFormat | NotTraceLine(_)) => true,
            (NotAuditKind(a), NotAuditKind(b))
            | (NotAuditStage(a), NotAuditStage(b))
            | (NoHttpMethod(a), NoHttpMethod(b)) => a == b,
            (AuditWithout(a), AuditWithout(b)) | (AccessWithout(a), AccessWithout(b)) => a == b,
            (NotATime { field: a, .. }, NotATime { field: b, .. }) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }

    /// The problem without the list of the formats expected, for a message that gives it once
    /// at its end.
    pub fn brief(&self) -> String {
        match self {
            LineProblem::NotJson(why) => format!("not a JSON object ({why})"),
            LineProblem::NoFormat => "not a trace line".to_string(),
            other => other.to_string(),
        }
    }
}
