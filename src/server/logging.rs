//! Logging set-up: `tracing` to standard error, as text or JSON lines.

use tracing_subscriber::EnvFilter;

use super::options::LogFormat;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// RUST_LOG is not a valid filter.
    #[error("RUST_LOG: {0}")]
    Filter(#[from] tracing_subscriber::filter::ParseError),
    /// A global subscriber is already installed.
    #[error("logging is already initialised: {0}")]
    AlreadySet(String),
}

/// The filter `-v` gives: this crate at info (0), debug (1) or trace (2+); dependencies stay at
/// info until 3, then everything traces.
pub fn verbosity_filter(verbosity: u8) -> String {
    let ours = match verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let rest = if verbosity >= 3 { "trace" } else { "info" };
    format!("{rest},kube_apf_proxy={ours}")
}

/// Whether text logs carry terminal colour codes: only when standard error is a terminal, so that
/// files, pipes and journald get plain text. `NO_COLOR` (any non-empty value) turns them off too.
pub fn use_ansi(stderr_is_terminal: bool, no_color: Option<&str>) -> bool {
    stderr_is_terminal && no_color.is_none_or(str::is_empty)
}

/// Installs the global subscriber: `RUST_LOG` when set, otherwise the `-v` level. Text has colour
/// codes only on a terminal (`use_ansi`).
pub fn init_logging(format: LogFormat, verbosity: u8) -> Result<(), LoggingError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(directives)?,
        _ => EnvFilter::try_new(verbosity_filter(verbosity))?,
    };
    let ansi = use_ansi(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::env::var("NO_COLOR").ok().as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|err| LoggingError::AlreadySet(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{use_ansi, verbosity_filter};

    #[test]
    fn colour_codes_only_on_a_terminal_without_no_color() {
        let cases = [
            (true, None, true),
            (true, Some(""), true),
            (true, Some("1"), false),
            (false, None, false),
            (false, Some("1"), false),
        ];
        for (terminal, no_color, want) in cases {
            assert_eq!(
                use_ansi(terminal, no_color),
                want,
                "{terminal} {no_color:?}"
            );
        }
    }

    #[test]
    fn verbosity_raises_this_crate_first_then_everything() {
        let cases = [
            (0, "info,kube_apf_proxy=info"),
            (1, "info,kube_apf_proxy=debug"),
            (2, "info,kube_apf_proxy=trace"),
            (3, "trace,kube_apf_proxy=trace"),
            (9, "trace,kube_apf_proxy=trace"),
        ];
        for (verbosity, filter) in cases {
            assert_eq!(verbosity_filter(verbosity), filter);
            assert!(tracing_subscriber::EnvFilter::try_new(filter).is_ok());
        }
    }
}
