//! PENDING STUBS — replaced at merge by the configuration loader built on the `config` branch.
//!
//! They exist only so that the `classify` command compiles on the `classify` branch:
//! [`bootstrap`] yields the mandatory objects alone (not yet the suggested ones) and
//! [`load_dir`] always fails.

use std::path::{Path, PathBuf};

use super::Config;

/// Why [`load_dir`] failed: the loader is not on this branch.
#[derive(Debug, thiserror::Error)]
pub enum PendingConfigError {
    /// Loading a configuration directory is not available on this branch.
    #[error("{0}: loading a configuration directory is not built on this branch")]
    NotBuilt(PathBuf),
}

/// The embedded default configuration. Stub: only the mandatory objects.
pub fn bootstrap() -> Config {
    Config::resolve(Vec::new(), Vec::new())
}

/// Loads a configuration directory. Stub: always fails.
pub fn load_dir(dir: &Path) -> Result<Config, PendingConfigError> {
    Err(PendingConfigError::NotBuilt(dir.to_path_buf()))
}
