//! Configuration analysis shared by `kube-apf-proxy lint`, the admission webhook and
//! `classify --explain`: configurations that the apiserver accepts but that do harm.
//!
//! Every finding is computed from the semantics the proxy enforces — the classifier's rule
//! matchers ([`crate::classify`]), the concurrency-limit arithmetic
//! ([`crate::fairqueue::limits`]), the wait limit ([`crate::fairqueue::timeout::wait_limit`]) and
//! the shuffle-sharding dealer's parameters — never from the text of the objects.

mod coverage;
mod levels;
pub mod request;
mod schemas;
mod sharding;

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::config::Loaded;

pub use sharding::mouse_squash_probability;

/// A warning's stable code. docs/lint-webhook-explain.md lists each with an example and the fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Code {
    /// A FlowSchema that can never match: earlier schemas take every request it accepts.
    #[serde(rename = "flowschema-shadowed")]
    FlowSchemaShadowed,
    /// Two FlowSchemas of equal `matchingPrecedence` whose rules overlap.
    #[serde(rename = "precedence-tie")]
    PrecedenceTie,
    /// A broad subject sent to an exempt level or to one larger than `global-default`.
    #[serde(rename = "broad-subject-privileged-level")]
    BroadSubjectPrivilegedLevel,
    /// A priority level that no FlowSchema uses.
    #[serde(rename = "priority-level-unused")]
    PriorityLevelUnused,
    /// A FlowSchema whose priority level does not exist.
    #[serde(rename = "flowschema-dangling")]
    FlowSchemaDangling,
    /// A limited level with a nominal concurrency of one seat or less.
    #[serde(rename = "nominal-concurrency-tiny")]
    NominalConcurrencyTiny,
    /// A level whose full queues cannot drain within the wait limit.
    #[serde(rename = "queues-cannot-drain")]
    QueuesCannotDrain,
    /// `queues` and `handSize` that leave a mouse flow likely to share every queue with elephants.
    #[serde(rename = "shuffle-sharding-weak")]
    ShuffleShardingWeak,
    /// Lending and borrowing settings that contradict each other.
    #[serde(rename = "borrowing-contradiction")]
    BorrowingContradiction,
    /// An object in an API version that current apiservers no longer serve.
    #[serde(rename = "api-version-removed")]
    ApiVersionRemoved,
}

impl Code {
    /// Every code, in documentation order.
    pub const ALL: [Code; 10] = [
        Code::FlowSchemaShadowed,
        Code::PrecedenceTie,
        Code::BroadSubjectPrivilegedLevel,
        Code::PriorityLevelUnused,
        Code::FlowSchemaDangling,
        Code::NominalConcurrencyTiny,
        Code::QueuesCannotDrain,
        Code::ShuffleShardingWeak,
        Code::BorrowingContradiction,
        Code::ApiVersionRemoved,
    ];

    /// The code as written in output (`flowschema-shadowed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::FlowSchemaShadowed => "flowschema-shadowed",
            Code::PrecedenceTie => "precedence-tie",
            Code::BroadSubjectPrivilegedLevel => "broad-subject-privileged-level",
            Code::PriorityLevelUnused => "priority-level-unused",
            Code::FlowSchemaDangling => "flowschema-dangling",
            Code::NominalConcurrencyTiny => "nominal-concurrency-tiny",
            Code::QueuesCannotDrain => "queues-cannot-drain",
            Code::ShuffleShardingWeak => "shuffle-sharding-weak",
            Code::BorrowingContradiction => "borrowing-contradiction",
            Code::ApiVersionRemoved => "api-version-removed",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much a finding matters. Configuration errors (what `check` reports) are not findings:
/// they stop loading before lint runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Probably harmful; worth fixing before the configuration lands.
    Warning,
}

/// One finding: `FILE: KIND/NAME: FIELD.PATH: [CODE] message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The stable code.
    pub code: Code,
    /// The severity.
    pub severity: Severity,
    /// The file the object was read from; empty for the mandatory objects the proxy implies.
    pub file: String,
    /// `FlowSchema` or `PriorityLevelConfiguration`.
    pub kind: &'static str,
    /// `metadata.name`.
    pub name: String,
    /// The field the finding is about (`spec.matchingPrecedence`).
    pub field_path: String,
    /// What is wrong and why, with the numbers it was computed from.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.file.is_empty() {
            write!(f, "{}: ", self.file)?;
        }
        write!(
            f,
            "{}/{}: {}: [{}] {}",
            self.kind, self.name, self.field_path, self.code, self.message
        )
    }
}

/// The server settings the level checks are computed at, and the assumptions they rest on.
#[derive(Debug, Clone, PartialEq)]
pub struct LintOptions {
    /// `--max-requests-inflight` (400).
    pub max_requests_inflight: u32,
    /// `--max-mutating-requests-inflight` (200).
    pub max_mutating_requests_inflight: u32,
    /// `--request-timeout` (60 s): the wait limit is a quarter of it, at most 1 min.
    pub request_timeout: Duration,
    /// The time one request holds its seat, for the drain check (100 ms).
    pub request_duration: Duration,
    /// The number of elephant flows the shuffle-sharding check assumes (4).
    pub elephant_flows: u32,
    /// The probability above which a mouse flow sharing all of its queues with the elephants is
    /// reported (0.25).
    pub squash_threshold: f64,
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions {
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            request_timeout: Duration::from_secs(60),
            request_duration: Duration::from_millis(100),
            elephant_flows: 4,
            squash_threshold: 0.25,
        }
    }
}

impl LintOptions {
    /// The server concurrency limit: the sum of the two in-flight limits.
    pub fn server_concurrency_limit(&self) -> u32 {
        self.max_requests_inflight
            .saturating_add(self.max_mutating_requests_inflight)
    }
}

/// Lints a loaded configuration: every finding, FlowSchemas first (in matching order), then
/// priority levels (by name), then API versions (in reading order).
pub fn lint(loaded: &Loaded, options: &LintOptions) -> Vec<Finding> {
    let files = Files(loaded);
    let mut findings = schemas::lint_flow_schemas(&loaded.config, options, &files);
    findings.extend(levels::lint_priority_levels(
        &loaded.config,
        options,
        &files,
    ));
    findings.extend(removed_versions(loaded));
    findings
}

/// Looks up the file an object was read from.
struct Files<'a>(&'a Loaded);

impl Files<'_> {
    fn of(&self, kind: &str, name: &str) -> String {
        self.0
            .sources
            .iter()
            .find(|s| s.kind == kind && s.name == name)
            .map(|s| s.file.clone())
            .unwrap_or_default()
    }

    fn version_of(&self, kind: &str, name: &str) -> Option<crate::config::raw::ApiVersion> {
        self.0
            .sources
            .iter()
            .find(|s| s.kind == kind && s.name == name)
            .map(|s| s.version)
    }

    fn finding(&self, code: Code, kind: &'static str, name: &str, field: &str) -> Finding {
        Finding {
            code,
            severity: Severity::Warning,
            file: self.of(kind, name),
            kind,
            name: name.to_string(),
            field_path: field.to_string(),
            message: String::new(),
        }
    }
}

/// `flowcontrol.apiserver.k8s.io` versions that current apiservers no longer serve.
fn removed_versions(loaded: &Loaded) -> Vec<Finding> {
    use crate::config::raw::ApiVersion;
    loaded
        .sources
        .iter()
        .filter_map(|s| {
            let removed_in = match s.version {
                ApiVersion::V1alpha1 => "1.21",
                ApiVersion::V1beta1 => "1.26",
                ApiVersion::V1beta2 => "1.29",
                ApiVersion::V1beta3 => "1.32",
                ApiVersion::V1 => return None,
            };
            Some(Finding {
                code: Code::ApiVersionRemoved,
                severity: Severity::Warning,
                file: s.file.clone(),
                kind: s.kind,
                name: s.name.clone(),
                field_path: "apiVersion".to_string(),
                message: format!(
                    "{} is not served since Kubernetes {removed_in}; write it as {}",
                    s.version,
                    ApiVersion::V1
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
