//! Logging set-up: `tracing` to standard error, as text or JSON lines.
//!
//! In the text format every field value, and the message, has its control characters escaped
//! (`\n`, `\r`, `\t`, `\u{1b}`...), as klog quotes such values: a value that comes from a
//! client (a certificate's CN, a user name, an AdmissionReview's `name`, a URL) can never start
//! a line of its own or drive a terminal. The JSON format escapes them already.

use std::fmt::{self, Write as _};

use tracing::field::Field;
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::EnvFilter;

/// The log output format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

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
    // A log line that cannot be written is dropped. tracing-subscriber's default reports the
    // failure with `eprintln!`, which panics when standard error itself is what failed (a closed
    // pipe): the task that logged died with it, and a listener that logged as it started never
    // accepted a connection.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .log_internal_errors(false)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.fmt_fields(text_fields()).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|err| LoggingError::AlreadySet(err.to_string()))
}

/// The text format's fields: `name=value` separated by spaces, the message bare, every value's
/// control characters escaped.
pub fn text_fields(
) -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    tracing_subscriber::fmt::format::debug_fn(write_field).delimited(" ")
}

fn write_field(writer: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug) -> fmt::Result {
    let name = field.name();
    let name = name.strip_prefix("r#").unwrap_or(name);
    if name != "message" {
        write!(writer, "{name}=")?;
    }
    write!(Escaping(writer), "{value:?}")
}

/// Writes through to `0`, each control character as its escape.
struct Escaping<'a, W: fmt::Write + ?Sized>(&'a mut W);

impl<W: fmt::Write + ?Sized> fmt::Write for Escaping<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(char::is_control) {
            self.0.write_str(&rest[..at])?;
            let control = rest[at..].chars().next().unwrap_or_default();
            write!(self.0, "{}", control.escape_default())?;
            rest = &rest[at + control.len_utf8()..];
        }
        self.0.write_str(rest)
    }
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

    /// The issue's probe: a certificate CN `x\n<fake line>` logged as a user makes one line.
    #[test]
    fn control_characters_in_fields_and_messages_never_start_a_line() {
        use parking_lot::Mutex;
        use std::sync::Arc;

        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .fmt_fields(super::text_fields())
            .with_writer(move || writer.clone())
            .finish();
        let forged = "x\n2026-11-26T10:00:00Z  INFO kube_apf_proxy: Request user=admin status=200";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(user = %forged, name = forged, uri = ?forged, "Request\r{}", "\u{1b}[2J");
        });
        let text = String::from_utf8(buffer.0.lock().clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(r"user=x\n2026-11-26T10:00:00Z  INFO"),
            "{text}"
        );
        assert!(text.contains(r#"name="x\n2026"#), "{text}");
        assert!(text.contains(r"Request\r\u{1b}[2J"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
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
