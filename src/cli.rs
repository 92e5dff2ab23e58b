//! The commands behind the binary's subcommands: thin shells that load a configuration, call a
//! room below (`app`, `lint`, `simulate`, `admission`, ...) and write to standard output. No room
//! imports `cli`; domain code a command needs lives in the room it belongs to.
//!
//! The flags of the commands that serve live here too ([`flags`]: `serve`'s and `webhook`'s; no
//! room below `cli` knows clap), with the one mapping of them onto the rooms' plain configs
//! (`configs`).
//!
//! `main.rs` parses the command line and maps results to exit codes; the commands live in the
//! library so that tests reach them.

use std::path::Path;
use std::process::ExitCode;

use crate::classify::ClassifyInput;
use crate::config::{Config, ConfigError, Problem};
use crate::server;

pub mod classify;
mod configs;
pub mod explain;
pub mod flags;
pub mod lint;
pub mod queueset_run;
pub mod simulate;

pub use flags::{
    parse_upstream_url, ConfigSource, FlowControlMode, ServeOptions, ServerLimits,
    UpstreamUrlError, WebhookOptions,
};

/// Why a command's configuration could not be had.
#[derive(Debug)]
pub enum LoadFailure {
    /// The configuration is invalid: the problems were printed on standard error (exit 1).
    Invalid,
    /// A directory or file could not be read (exit 2).
    Io(ConfigError),
}

/// The configuration of a command: the directory's, or the embedded default without one.
///
/// Warnings are printed on standard error as `warning: ...`; an invalid configuration prints one
/// line per problem on standard error.
pub fn load_config(config_dir: Option<&Path>) -> Result<Config, LoadFailure> {
    match crate::config::load(config_dir) {
        Ok(loaded) => {
            print_warnings(&loaded.warnings);
            Ok(loaded.config)
        }
        Err(ConfigError::Invalid { problems, warnings }) => {
            print_warnings(&warnings);
            problems.iter().for_each(|p| eprintln!("{p}"));
            Err(LoadFailure::Invalid)
        }
        Err(e) => Err(LoadFailure::Io(e)),
    }
}

/// The configuration `flag` names (the embedded default without a directory). Warnings are
/// printed on standard error as `check` prints them; an invalid configuration prints each
/// problem, then `FLAG DIR: N problem(s)`, and is `None` (exit 1). An unreadable directory or
/// file is an error naming `flag` once.
pub fn load_config_named(dir: Option<&Path>, flag: &str) -> anyhow::Result<Option<Config>> {
    use crate::config::ConfigError;
    let shown = dir.map_or_else(|| "(embedded)".to_owned(), |d| d.display().to_string());
    match crate::config::load(dir) {
        Ok(loaded) => {
            print_warnings(&loaded.warnings);
            Ok(Some(loaded.config))
        }
        Err(ConfigError::Invalid { problems, warnings }) => {
            print_warnings(&warnings);
            problems.iter().for_each(|p| eprintln!("{p}"));
            eprintln!("{flag} {shown}: {} problem(s)", problems.len());
            Ok(None)
        }
        Err(ConfigError::ReadDir { source, .. }) => Err(anyhow::anyhow!(
            "{flag} {shown}: cannot read the directory: {source}"
        )),
        Err(e) => Err(anyhow::anyhow!("{flag} {shown}: {e}")),
    }
}

fn print_warnings(warnings: &[Problem]) {
    warnings.iter().for_each(|w| eprintln!("warning: {w}"));
}

/// Where `classify` reads its requests from.
#[derive(Debug, Clone)]
pub enum ClassifySource {
    /// One request from flags.
    One(ClassifyInput),
    /// JSON lines from a file, or standard input for `-`.
    Lines(String),
}

/// `kube-apf-proxy serve` (also the command when none is given): sets up logging, loads the
/// configuration (the embedded default without `--config-dir`), builds a multi-threaded runtime
/// and serves until SIGTERM or Ctrl-C.
pub fn serve(opts: ServeOptions) -> anyhow::Result<ExitCode> {
    server::init_logging(opts.log_format, opts.verbosity)?;
    let config = match load_config(opts.config_dir.as_deref()) {
        Ok(config) => config,
        Err(LoadFailure::Invalid) => return Ok(ExitCode::from(1)),
        Err(LoadFailure::Io(e)) => return Err(e.into()),
    };
    raise_open_file_limit();
    disable_transparent_huge_pages();
    let runtime = runtime()?;
    runtime.block_on(async {
        let app = crate::app::App::start(opts.config(), &config)
            .await
            .map_err(|error| {
                let flag = match &error {
                    crate::app::StartError::Server(server) => listener_flag(server),
                    _ => None,
                };
                match flag {
                    Some(flag) => anyhow::Error::new(error).context(flag),
                    None => anyhow::Error::new(error),
                }
            })?;
        server::wait_for_termination().await;
        app.shutdown().await;
        tracing::info!("Stopped");
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Raises the soft limit on open files to the hard limit, as the Go runtime does for every Go
/// program (kube-apiserver included) since Go 1.19: each client connection, upstream connection
/// and watched file is a descriptor, and the usual soft limit of 1024 would cap the proxy far
/// below `--max-connections`.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "Open file limit"),
        Err(error) => tracing::warn!(%error, "Could not raise the open file limit"),
    }
}

/// Opts the process out of transparent huge pages (`prctl(PR_SET_THP_DISABLE)`, Linux). A proxy
/// holding tens of thousands of watches lives on many small allocations spread over its heap;
/// the kernel's khugepaged collapsing those regions into 2 MiB pages grew the resident memory by
/// 10–20 MiB after a load had passed, with nothing allocated (`scripts/scale.sh soak`,
/// BENCHMARKS.md), for no measurable gain in a proxy's small working set.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(error) = nix::sys::prctl::set_thp_disable(true) {
        tracing::debug!(%error, "Transparent huge pages left as they are");
    }
}

/// The serving runtime: one worker per usable core (the process's CPU affinity and quota count),
/// and a single-threaded scheduler when there is one core, which spares the work-stealing
/// machinery its atomics and wake-ups (measured in BENCHMARKS.md).
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let mut builder = if cores == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    builder.enable_all().thread_name("kube-apf-proxy").build()
}

/// `kube-apf-proxy check --config-dir DIR`.
///
/// Valid: exit 0, a one-line summary on standard output followed by a warning per dangling
/// FlowSchema (with the level name it may have meant), other warnings (skipped objects) on
/// standard error. Invalid: exit 1, one line per problem on standard output
/// (`FILE: KIND/NAME: FIELD.PATH: message`), warnings and a count on standard error.
/// An unreadable directory or file is an error (exit 2 in `main`).
pub fn check(config_dir: &Path) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match crate::config::load_dir(config_dir) {
        Ok(loaded) => {
            // The dangling FlowSchemas are the warnings' last ones: they are valid (as in the
            // apiserver) but likely a typo, so they are said beside the OK, on standard output.
            let config = &loaded.config;
            let at = loaded
                .warnings
                .len()
                .saturating_sub(config.dangling().len());
            let (others, dangling) = loaded.warnings.split_at(at);
            print_warnings(others);
            writeln!(
                out,
                "OK: {}: {}",
                config_dir.display(),
                crate::config::summary(config)
            )?;
            for warning in dangling {
                writeln!(out, "warning: {warning}")?;
            }
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
    let config = match load_config(config_dir) {
        Ok(config) => config,
        Err(LoadFailure::Invalid) => return Ok(ExitCode::from(1)),
        Err(LoadFailure::Io(e)) => return Err(e.into()),
    };
    std::io::stdout()
        .lock()
        .write_all(crate::config::to_yaml(&config).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `kube-apf-proxy classify`: one JSON line per request on standard output; exit 0 when every
/// request was classified, 1 when some input gave an `{"error":...}` line.
pub fn classify(config_dir: Option<&Path>, source: ClassifySource) -> anyhow::Result<ExitCode> {
    classify::run(config_dir, source)
}

/// `kube-apf-proxy webhook`: the validating admission webhook, served until SIGTERM or Ctrl-C.
/// A reference configuration that does not load is an error (exit 1, each problem logged).
pub fn webhook(opts: WebhookOptions) -> anyhow::Result<ExitCode> {
    server::init_logging(opts.log_format, opts.verbosity)?;
    let runtime = runtime()?;
    match runtime.block_on(crate::admission::serve(opts.config())) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(crate::admission::WebhookError::Config(ConfigError::Invalid { problems, .. })) => {
            problems.iter().for_each(|p| eprintln!("{p}"));
            Ok(ExitCode::from(1))
        }
        Err(crate::admission::WebhookError::Server(error)) => match listener_flag(&error) {
            Some(flag) => Err(anyhow::Error::new(error).context(flag)),
            None => Err(error.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// The flag that set the address a listener could not bind, with its value: `--admin-address`
/// for the admin listener; for the secure one (the webhook's too) `--secure-port` when the port
/// is taken or refused, `--bind-address` when the address is not the machine's, both otherwise.
fn listener_flag(error: &server::ServerError) -> Option<String> {
    use std::io::ErrorKind;
    let server::ServerError::Bind {
        listener,
        addr,
        source,
    } = error
    else {
        return None;
    };
    Some(match (listener, source.kind()) {
        (server::Listener::Admin, _) => format!("--admin-address {addr}"),
        (server::Listener::Secure, ErrorKind::AddrInUse | ErrorKind::PermissionDenied) => {
            format!("--secure-port {}", addr.port())
        }
        (server::Listener::Secure, ErrorKind::AddrNotAvailable) => {
            format!("--bind-address {}", addr.ip())
        }
        (server::Listener::Secure, _) => {
            format!("--bind-address {} --secure-port {}", addr.ip(), addr.port())
        }
    })
}
