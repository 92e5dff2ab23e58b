//! The commands behind the binary's subcommands, writing to standard output.
//!
//! `main.rs` parses the command line and maps results to exit codes; the work is here so that it is
//! reachable from tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use serde::Deserialize;

pub mod classify;

/// One request to classify: a `classify --requests` input line, or the flags of a single request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifyInput {
    /// The HTTP method.
    pub method: String,
    /// The path and query.
    pub url: String,
    /// The user name; anonymous when absent.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's groups (`system:authenticated` is added for non-anonymous users).
    #[serde(default)]
    pub groups: Vec<String>,
    /// The user's UID.
    #[serde(default)]
    pub uid: String,
    /// Extra attributes.
    #[serde(default)]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Where `classify` reads its requests from.
#[derive(Debug, Clone)]
pub enum ClassifySource {
    /// One request from flags.
    One(ClassifyInput),
    /// JSON lines from a file, or standard input for `-`.
    Lines(String),
}

/// `kube-apf-proxy serve`.
pub fn serve() -> anyhow::Result<ExitCode> {
    anyhow::bail!("serve is not built yet")
}

/// `kube-apf-proxy check --config-dir DIR`.
pub fn check(_config_dir: &Path) -> anyhow::Result<ExitCode> {
    anyhow::bail!("check is not built yet")
}

/// `kube-apf-proxy config dump [--config-dir DIR]`.
pub fn config_dump(_config_dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("config dump is not built yet")
}

/// `kube-apf-proxy classify`: one JSON line per request on standard output; exit 0 when every
/// request was classified, 1 when some input gave an `{"error":...}` line.
pub fn classify(config_dir: Option<&Path>, source: ClassifySource) -> anyhow::Result<ExitCode> {
    classify::run(config_dir, source)
}
