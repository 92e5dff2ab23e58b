//! The bounded label values, as enums so no caller spells one.

/// Why API Priority and Fairness rejected a request (`reason` of `rejected_requests_total`): the
/// queue set's own reasons, whose `as_str` gives the apiserver's label values.
pub use crate::fairqueue::queueset::RejectReason;

/// The `type` label of `request_execution_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionType {
    /// Any request but a watch.
    Regular,
    /// A watch (its initial stage only).
    Watch,
}

impl ExecutionType {
    /// The label value the apiserver uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionType::Regular => "regular",
            ExecutionType::Watch => "watch",
        }
    }

    /// `watch` for the verb `watch`, `regular` otherwise (as `ObserveExecutionDuration` decides).
    pub fn of_verb(verb: &str) -> Self {
        if verb == "watch" {
            ExecutionType::Watch
        } else {
            ExecutionType::Regular
        }
    }
}

/// Read-only versus mutating (`request_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// `get`, `list` and `watch`.
    ReadOnly,
    /// Every other verb.
    Mutating,
}

impl RequestKind {
    /// The label value the apiserver uses (`epmetrics.ReadOnlyKind` / `MutatingKind`).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::ReadOnly => "readOnly",
            RequestKind::Mutating => "mutating",
        }
    }

    /// The kind of a request with this RequestInfo verb (`get`, `list`, `watch` are read-only).
    pub fn of_verb(verb: &str) -> Self {
        if crate::request_info::is_read_only_verb(verb) {
            RequestKind::ReadOnly
        } else {
            RequestKind::Mutating
        }
    }
}

/// Waiting in a queue versus executing (`phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Queued.
    Waiting,
    /// Holding seats.
    Executing,
}

impl Phase {
    /// The label value the apiserver uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Executing => "executing",
        }
    }
}

/// How an upstream exchange ended, for `apf_proxy_upstream_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpstreamOutcome {
    /// The upstream answered with this status code.
    Status(u16),
    /// No response: connection, TLS or protocol failure.
    Error,
    /// No response before the deadline.
    Timeout,
}

impl UpstreamOutcome {
    /// The `code` label: the status class (`2xx` … `5xx`), `error` or `timeout`.
    pub fn code_class(self) -> &'static str {
        match self {
            UpstreamOutcome::Status(code) => status_class(code),
            UpstreamOutcome::Error => "error",
            UpstreamOutcome::Timeout => "timeout",
        }
    }

    /// A dense index of [`code_class`](Self::code_class): one per label value, below
    /// [`UPSTREAM_CODE_CLASSES`].
    pub(crate) fn code_class_index(self) -> usize {
        match self {
            UpstreamOutcome::Status(code) => match code {
                100..=599 => usize::from(code / 100 - 1),
                _ => 5,
            },
            UpstreamOutcome::Error => 6,
            UpstreamOutcome::Timeout => 7,
        }
    }
}

/// How many values the upstream `code` label takes.
pub(crate) const UPSTREAM_CODE_CLASSES: usize = 8;

/// `1xx` … `5xx` for a status code, `other` outside 100..=599.
pub(crate) fn status_class(code: u16) -> &'static str {
    match code {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}

/// How many values [`status_code_label`] takes: 100..=599 and `other`.
pub(crate) const STATUS_CODE_LABELS: usize = 501;

/// A dense index of [`status_code_label`], below [`STATUS_CODE_LABELS`].
pub(crate) fn status_code_index(code: u16) -> usize {
    if (100..=599).contains(&code) {
        usize::from(code - 100)
    } else {
        STATUS_CODE_LABELS - 1
    }
}

/// A status code as a label value; codes outside 100..=599 collapse into `other` so the label
/// stays bounded whatever a peer sends.
pub(crate) fn status_code_label(code: u16) -> String {
    if (100..=599).contains(&code) {
        code.to_string()
    } else {
        "other".to_owned()
    }
}
