//! Flow-control configuration: FlowSchemas and PriorityLevelConfigurations.
//!
//! Loading runs in separate steps — read files → parse documents (every API version) → default →
//! validate (every problem, with its field path) → resolve — and ends in an immutable [`Config`].

mod convert;
mod defaults;
mod dump;
mod field;
pub mod load;
pub mod maintain;
pub mod model;
mod names;
pub mod parse;
pub mod raw;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use dump::to_yaml;
pub use model::*;

/// Kubernetes' bootstrap objects (`pkg/apis/flowcontrol/bootstrap/default.go`), in v1 YAML.
pub const BOOTSTRAP_YAML: &str = include_str!("config/bootstrap.yaml");

/// One problem (or warning) found while loading: `FILE: KIND/NAME: FIELD.PATH: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, as named by the directory and file name.
    pub file: String,
    /// `KIND/NAME`, `document N`, or empty when the problem is about the whole file.
    pub object: String,
    /// `FIELD.PATH: message`, or a message.
    pub message: String,
}

impl Problem {
    /// A problem in `file` about `object` (may be empty).
    pub fn new(file: &str, object: &str, message: String) -> Problem {
        Problem {
            file: file.to_string(),
            object: object.to_string(),
            message,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in [&self.file, &self.object] {
            if !part.is_empty() {
                write!(f, "{part}: ")?;
            }
        }
        f.write_str(&self.message)
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The directory could not be listed.
    #[error("--config-dir {}: cannot read the directory: {source}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The files were read but the configuration is invalid.
    #[error("invalid configuration: {} problem(s)", problems.len())]
    Invalid {
        /// Every problem, one per line when displayed.
        problems: Vec<Problem>,
        /// Warnings found on the way.
        warnings: Vec<Problem>,
    },
}

impl ConfigError {
    /// Whether this is an I/O error (exit code 2) rather than an invalid configuration (1).
    pub fn is_io(&self) -> bool {
        matches!(
            self,
            ConfigError::ReadDir { .. } | ConfigError::ReadFile { .. }
        )
    }
}

/// A loaded configuration and what was warned about while loading it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The resolved configuration.
    pub config: Config,
    /// Skipped objects (other kinds or versions), then the dangling FlowSchemas (last, one
    /// warning each, in [`Config::dangling`]'s order; a level name within a typo of an existing
    /// one is suggested).
    pub warnings: Vec<Problem>,
    /// Where each object was read from and in which API version, in reading order.
    pub sources: Vec<ObjectSource>,
}

/// Where one loaded object came from: what `lint` needs to name the file and the API version that
/// the resolved (version-independent) model no longer records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSource {
    /// `FlowSchema` or `PriorityLevelConfiguration`.
    pub kind: &'static str,
    /// `metadata.name`.
    pub name: String,
    /// The file, as problems name it.
    pub file: String,
    /// The API version the object was written in.
    pub version: raw::ApiVersion,
}

/// Loads the `.yaml`, `.yml` and `.json` files of `dir` (sorted by name, not recursive):
/// read → parse → default → validate → resolve. Every problem is reported, not just the first.
pub fn load_dir(dir: &Path) -> Result<Loaded, ConfigError> {
    let files = load::read_dir(dir)?;
    let mut loaded = load::load_sources(&files)?;
    if files.is_empty() {
        let msg = "no .yaml, .yml or .json files; only the mandatory objects apply".to_string();
        loaded
            .warnings
            .push(Problem::new(&dir.display().to_string(), "", msg));
    }
    Ok(loaded)
}

/// Loads the embedded bootstrap configuration through the same pipeline.
pub fn load_bootstrap() -> Result<Loaded, ConfigError> {
    load::load_sources(&[load::SourceFile {
        name: "<embedded>/bootstrap.yaml".to_string(),
        bytes: BOOTSTRAP_YAML.as_bytes().to_vec(),
        format: parse::Format::Yaml,
    }])
}

/// The one configuration-loading entry of the commands: `--config-dir`'s files, or the embedded
/// default configuration without one.
pub fn load(config_dir: Option<&Path>) -> Result<Loaded, ConfigError> {
    match config_dir {
        Some(dir) => load_dir(dir),
        None => load_bootstrap(),
    }
}

/// The embedded default configuration: Kubernetes' mandatory and suggested objects.
///
/// Parsed once, at first use; a unit test proves that it loads without problems or warnings.
pub fn bootstrap() -> Config {
    static BOOTSTRAP: OnceLock<Config> = OnceLock::new();
    BOOTSTRAP
        .get_or_init(|| {
            load_bootstrap()
                .expect("invariant: the embedded bootstrap configuration is valid")
                .config
        })
        .clone()
}

/// The counts `check` reports, in words that read one way:
/// `8 priority levels, 11 FlowSchemas in use` and, when some are dangling,
/// `, 2 more FlowSchemas skipped (dangling)`. The FlowSchemas in use include the implied
/// mandatory ones; the skipped ones are not among them.
pub fn summary(config: &Config) -> String {
    let plural = |n: usize, word: &str| {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    let mut out = format!(
        "{}, {} in use",
        plural(config.priority_levels().count(), "priority level"),
        plural(config.flow_schemas().len(), "FlowSchema"),
    );
    let dangling = config.dangling().len();
    if dangling > 0 {
        out.push_str(&format!(
            ", {dangling} more {} skipped (dangling)",
            if dangling == 1 {
                "FlowSchema"
            } else {
                "FlowSchemas"
            }
        ));
    }
    out
}

/// A resolved configuration: what classification and the queues run on.
///
/// Immutable; a reload builds a new one and swaps it in whole.
#[derive(Debug, Clone)]
pub struct Config {
    /// FlowSchemas in matching order: dangling ones removed, sorted by precedence then name,
    /// mandatory `exempt` first and `catch-all` last when the files do not define them.
    flow_schemas: Vec<FlowSchemaRef>,
    /// Every priority level by name, mandatory ones implied.
    priority_levels: BTreeMap<String, PriorityLevelRef>,
    /// FlowSchemas skipped because their priority level does not exist, with the level's name.
    dangling: Vec<(FlowSchemaRef, String)>,
}

impl Config {
    /// Resolves validated objects as the apiserver's config digest does
    /// (mirrors `apf_controller.go: lockAndDigestConfigObjects`): dangling FlowSchemas are set
    /// aside, the mandatory objects are implied where missing, and the FlowSchemas are sorted by
    /// `matchingPrecedence` then name.
    ///
    /// The implied mandatory FlowSchemas are sorted with the others, where the objects the
    /// apiserver's ensurer re-creates sort. (The controller alone prepends a missing `exempt` and
    /// appends a missing `catch-all`; that differs only for a FlowSchema of precedence 10000
    /// named after `catch-all`, and only in the minute before the ensurer acts: validation
    /// keeps precedence 1 for `exempt`.) So `config dump`, which names them, loads back in the
    /// same order.
    ///
    /// The mandatory priority levels are implied *before* the dangling check. The controller
    /// alone checks first, but a running apiserver never lacks the `exempt` and `catch-all`
    /// objects: its bootstrap ensurer (`pkg/registry/flowcontrol/ensurer`) re-creates them within
    /// a minute of their deletion. So a FlowSchema naming either (the Kubernetes documentation's
    /// `health-for-strangers`) is never dangling in a cluster, and is not here.
    ///
    /// Names must be unique within each kind (validation guarantees it); a later duplicate wins.
    /// An object without `metadata.uid` gets a stable one derived from its kind and name
    /// ([`model::derived_uid`]), for the `X-Kubernetes-PF-*-UID` response headers.
    pub fn resolve(flow_schemas: Vec<FlowSchema>, priority_levels: Vec<PriorityLevel>) -> Config {
        let mut levels: BTreeMap<String, PriorityLevelRef> = priority_levels
            .into_iter()
            .map(|pl| (pl.name.clone(), Arc::new(pl.with_uid())))
            .collect();
        for pl in [
            mandatory::exempt_priority_level(),
            mandatory::catch_all_priority_level(),
        ] {
            levels
                .entry(pl.name.clone())
                .or_insert_with(|| Arc::new(pl.with_uid()));
        }
        let (mut matching, dangling): (Vec<_>, Vec<_>) = flow_schemas
            .into_iter()
            .map(|fs| Arc::new(fs.with_uid()))
            .partition(|fs| levels.contains_key(&fs.priority_level));
        let dangling = dangling
            .into_iter()
            .map(|fs| {
                let level = fs.priority_level.clone();
                (fs, level)
            })
            .collect();
        for (name, implied) in [
            (
                model::EXEMPT,
                mandatory::exempt_flow_schema as fn() -> FlowSchema,
            ),
            (model::CATCH_ALL, mandatory::catch_all_flow_schema),
        ] {
            if !matching.iter().any(|fs| fs.name == name) {
                matching.push(Arc::new(implied().with_uid()));
            }
        }
        matching.sort_by(|a, b| {
            (a.matching_precedence, a.name.as_str()).cmp(&(b.matching_precedence, b.name.as_str()))
        });
        Config {
            flow_schemas: matching,
            priority_levels: levels,
            dangling,
        }
    }

    /// FlowSchemas in matching order (first match wins).
    pub fn flow_schemas(&self) -> &[FlowSchemaRef] {
        &self.flow_schemas
    }

    /// The priority level of that name.
    pub fn priority_level(&self, name: &str) -> Option<&PriorityLevelRef> {
        self.priority_levels.get(name)
    }

    /// Every priority level, by name.
    pub fn priority_levels(&self) -> impl Iterator<Item = &PriorityLevelRef> {
        self.priority_levels.values()
    }

    /// The `catch-all` FlowSchema (always present after resolution).
    pub fn catch_all(&self) -> &FlowSchemaRef {
        self.flow_schemas
            .iter()
            .rev()
            .find(|fs| fs.name == model::CATCH_ALL)
            .expect("invariant: resolve always adds the catch-all FlowSchema")
    }

    /// FlowSchemas that reference a missing priority level, with that level's name.
    pub fn dangling(&self) -> &[(FlowSchemaRef, String)] {
        &self.dangling
    }
}

/// The mandatory objects (`pkg/apis/flowcontrol/bootstrap/default.go`), implied when missing.
pub mod mandatory {
    use super::model::*;

    fn all_rules(subjects: Vec<Subject>) -> Vec<PolicyRulesWithSubjects> {
        let star = || vec!["*".to_string()];
        vec![PolicyRulesWithSubjects {
            subjects,
            resource_rules: vec![ResourcePolicyRule {
                verbs: star(),
                api_groups: star(),
                resources: star(),
                cluster_scope: true,
                namespaces: star(),
            }],
            non_resource_rules: vec![NonResourcePolicyRule {
                verbs: star(),
                non_resource_urls: star(),
            }],
        }]
    }

    fn group(name: &str) -> Subject {
        Subject::Group {
            name: name.to_string(),
        }
    }

    /// FlowSchema `exempt`: precedence 1, group `system:masters`, everything, to level `exempt`.
    pub fn exempt_flow_schema() -> FlowSchema {
        FlowSchema {
            name: EXEMPT.to_string(),
            uid: String::new(),
            matching_precedence: 1,
            priority_level: EXEMPT.to_string(),
            distinguisher_method: None,
            rules: all_rules(vec![group("system:masters")]),
        }
    }

    /// FlowSchema `catch-all`: precedence 10000, ByUser, every request, to level `catch-all`.
    pub fn catch_all_flow_schema() -> FlowSchema {
        FlowSchema {
            name: CATCH_ALL.to_string(),
            uid: String::new(),
            matching_precedence: 10000,
            priority_level: CATCH_ALL.to_string(),
            distinguisher_method: Some(DistinguisherMethod::ByUser),
            rules: all_rules(vec![
                group("system:unauthenticated"),
                group("system:authenticated"),
            ]),
        }
    }

    /// Priority level `exempt`: type Exempt, shares 0, lendable 0.
    pub fn exempt_priority_level() -> PriorityLevel {
        PriorityLevel {
            name: EXEMPT.to_string(),
            uid: String::new(),
            spec: PriorityLevelSpec::Exempt {
                nominal_concurrency_shares: 0,
                lendable_percent: 0,
            },
        }
    }

    /// Priority level `catch-all`: Limited, shares 5, lendable 0, Reject.
    pub fn catch_all_priority_level() -> PriorityLevel {
        PriorityLevel {
            name: CATCH_ALL.to_string(),
            uid: String::new(),
            spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
                nominal_concurrency_shares: 5,
                lendable_percent: 0,
                borrowing_limit_percent: None,
                limit_response: LimitResponse::Reject,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
