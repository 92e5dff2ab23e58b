//! The commands behind the binary's subcommands, writing to standard output.
//!
//! `main.rs` parses the command line and maps results to exit codes; the work is here so that it is
//! reachable from tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Deserialize;

use crate::server::{self, ServeOptions};

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

/// `kube-apf-proxy serve` (also the command when none is given): sets up logging, builds a
/// multi-threaded runtime and serves until SIGTERM or Ctrl-C.
pub fn serve(opts: ServeOptions) -> anyhow::Result<ExitCode> {
    server::init_logging(opts.log_format, opts.verbosity)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("kube-apf-proxy")
        .build()?;
    runtime.block_on(server::run(opts, pipeline_handler()))?;
    Ok(ExitCode::SUCCESS)
}

/// The request pipeline behind the secure port.
///
/// Seam: until `proxy::Proxy::handle` lands, every request is answered 503 with a Status body.
fn pipeline_handler() -> Arc<dyn server::Handler> {
    Arc::new(|_request: http::Request<hyper::body::Incoming>| async {
        let status = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the request pipeline is not built yet",
            "reason": "ServiceUnavailable",
            "code": 503,
        });
        let mut response = http::Response::new(server::full_body(status.to_string()));
        *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    })
}

/// `kube-apf-proxy check --config-dir DIR`.
///
/// Valid: exit 0, a one-line summary on standard output, warnings (skipped objects, dangling
/// FlowSchemas) on standard error. Invalid: exit 1, one line per problem on standard output
/// (`FILE: KIND/NAME: FIELD.PATH: message`), warnings and a count on standard error.
/// An unreadable directory or file is an error (exit 2 in `main`).
pub fn check(config_dir: &Path) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let print_warnings = |warnings: &[crate::config::Problem]| {
        warnings.iter().for_each(|w| eprintln!("warning: {w}"))
    };
    let mut out = std::io::stdout().lock();
    match crate::config::load_dir(config_dir) {
        Ok(loaded) => {
            print_warnings(&loaded.warnings);
            let config = &loaded.config;
            writeln!(
                out,
                "OK: {}: {} priority levels, {} FlowSchemas ({} dangling, skipped)",
                config_dir.display(),
                config.priority_levels().count(),
                config.flow_schemas().len(),
                config.dangling().len(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(crate::config::ConfigError::Invalid { problems, warnings }) => {
            print_warnings(&warnings);
            for problem in &problems {
                writeln!(out, "{problem}")?;
            }
            eprintln!("{}: {} problem(s)", config_dir.display(), problems.len());
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

/// `kube-apf-proxy config dump [--config-dir DIR]`.
///
/// Writes the effective configuration as multi-document v1 YAML on standard output (see
/// [`crate::config::to_yaml`]); warnings go to standard error. An invalid configuration prints
/// its problems on standard error and exits 1.
pub fn config_dump(config_dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let print_warnings = |warnings: &[crate::config::Problem]| {
        warnings.iter().for_each(|w| eprintln!("warning: {w}"))
    };
    let config = match config_dir {
        None => crate::config::bootstrap(),
        Some(dir) => match crate::config::load_dir(dir) {
            Ok(loaded) => {
                print_warnings(&loaded.warnings);
                loaded.config
            }
            Err(crate::config::ConfigError::Invalid { problems, warnings }) => {
                print_warnings(&warnings);
                for problem in &problems {
                    eprintln!("{problem}");
                }
                return Ok(ExitCode::from(1));
            }
            Err(e) => return Err(e.into()),
        },
    };
    std::io::stdout()
        .lock()
        .write_all(crate::config::to_yaml(&config).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `kube-apf-proxy classify`.
pub fn classify(_config_dir: Option<&Path>, _source: ClassifySource) -> anyhow::Result<ExitCode> {
    anyhow::bail!("classify is not built yet")
}
