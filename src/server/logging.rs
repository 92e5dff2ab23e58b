//! Logging set-up: `tracing` to standard error, as text or JSON lines.
//!
//! In the text format a field value that holds whitespace, `=`, `"` or a control character is
//! written as a quoted string with its escapes (`user="bob status=200"`), as klog quotes such
//! values, and the message has its control characters escaped: a value that comes from a client
//! (a certificate's CN, a user name, an AdmissionReview's `name`, a URL) can never pose as
//! another field, start a line of its own or drive a terminal. The JSON format escapes them
//! already.

use std::fmt::{self, Write as _};

use tracing::field::Field;
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

/// The text format's fields: `name=value` separated by spaces, the message bare. A value that
/// holds whitespace, `=`, `"` or a control character, or is empty, is written as a quoted string
/// with Go's escapes (`user="bob status=200"`), as klog writes it, so that no value can pose as
/// another field; other values are written bare (a `?`-recorded string's own quotes are
/// escaped like any others). The message has its control characters escaped.
pub fn text_fields(
) -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    TextFields
}

/// [`text_fields`].
struct TextFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for TextFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        writer: Writer<'w>,
        fields: R,
    ) -> fmt::Result {
        let mut visitor = TextVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct TextVisitor<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl TextVisitor<'_> {
    fn field(&mut self, field: &Field, value: Value<'_>) {
        if self.result.is_err() {
            return;
        }
        self.result = self.write_field(field, value);
    }

    fn write_field(&mut self, field: &Field, value: Value<'_>) -> fmt::Result {
        if !self.first {
            self.writer.write_char(' ')?;
        }
        self.first = false;
        let name = field.name();
        let name = name.strip_prefix("r#").unwrap_or(name);
        if name == "message" {
            return match value {
                Value::Str(text) => Escaping(&mut self.writer).write_str(text),
                Value::Debug(value) => write!(Escaping(&mut self.writer), "{value:?}"),
            };
        }
        write!(self.writer, "{name}=")?;
        match value {
            Value::Str(text) => write_value(&mut self.writer, text),
            Value::Debug(value) => write_value(&mut self.writer, &format!("{value:?}")),
        }
    }
}

enum Value<'a> {
    Str(&'a str),
    Debug(&'a dyn fmt::Debug),
}

impl tracing::field::Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field, Value::Str(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field, Value::Debug(value));
    }
}

/// `text` bare, or quoted when it holds anything that could end the value or start another.
fn write_value(writer: &mut impl fmt::Write, text: &str) -> fmt::Result {
    if !needs_quotes(text) {
        return writer.write_str(text);
    }
    writer.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => writer.write_str("\\\"")?,
            '\\' => writer.write_str("\\\\")?,
            '\n' => writer.write_str("\\n")?,
            '\r' => writer.write_str("\\r")?,
            '\t' => writer.write_str("\\t")?,
            c if u32::from(c) < 0x20 || c == '\u{7f}' => write!(writer, "\\x{:02x}", u32::from(c))?,
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                write!(writer, "\\u{:04x}", u32::from(c))?;
            }
            c => writer.write_char(c)?,
        }
    }
    writer.write_char('"')
}

/// Empty, or holding whitespace, `=`, `"`, `\` or a control character.
fn needs_quotes(text: &str) -> bool {
    text.is_empty()
        || text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '=' | '"' | '\\'))
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

    /// Lines the text format writes for the events `log` emits.
    fn text_lines(log: impl FnOnce()) -> String {
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
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(buffer.0.lock().clone()).expect("utf-8");
        text
    }

    /// The first probe: a certificate CN `x\n<fake line>` logged as a user makes one line.
    #[test]
    fn control_characters_in_fields_and_messages_never_start_a_line() {
        let forged = "x\n2026-11-26T10:00:00Z  INFO kube_apf_proxy: Request user=admin status=200";
        let text = text_lines(|| {
            tracing::info!(user = %forged, name = forged, uri = ?forged, "Request\r{}", "\u{1b}[2J");
        });
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(r#"user="x\n2026-11-26T10:00:00Z  INFO kube_apf_proxy: Request user=admin status=200""#),
            "{text}"
        );
        assert!(text.contains(r#"name="x\n2026"#), "{text}");
        assert!(text.contains(r#"uri="\"x\\n2026"#), "{text}");
        assert!(text.contains(r"Request\r\u{1b}[2J"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    /// The second probe: a valid user name that holds spaces and `=` cannot add fields to the
    /// access line; values are quoted as klog quotes them, plain ones stay bare.
    #[test]
    fn values_with_spaces_equals_or_quotes_are_quoted_and_cannot_pose_as_fields() {
        let user = "bob status=200 user=system:admin";
        let groups = r#"["system:authenticated","a b"]"#;
        let text = text_lines(|| {
            tracing::info!(
                target: "kube_apf_proxy::access",
                method = %"GET",
                user = %user,
                groups = %groups,
                empty = "",
                tab = "a\tb\u{7}\u{85}",
                path = "/api/v1/namespaces/a\\b",
                status = 503_u16,
                duration_ms = 1.5_f64,
                "Request"
            );
        });
        assert_eq!(text.lines().count(), 1, "{text}");
        let fields = text
            .split_once("Request ")
            .map_or("", |(_, f)| f)
            .trim_end();
        assert_eq!(
            fields,
            concat!(
                r#"method=GET user="bob status=200 user=system:admin" "#,
                r#"groups="[\"system:authenticated\",\"a b\"]" empty="" "#,
                r#"tab="a\tb\x07\u0085" path="/api/v1/namespaces/a\\b" "#,
                "status=503 duration_ms=1.5"
            )
        );
        // Read as logfmt (quoted values whole), the line has each field once.
        let (mut keys, mut quoted, mut key) = (Vec::new(), false, String::new());
        let mut chars = fields.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' if quoted => {
                    chars.next();
                }
                '"' => quoted = !quoted,
                '=' if !quoted && !key.is_empty() => keys.push(std::mem::take(&mut key)),
                ' ' if !quoted => key.clear(),
                c if !quoted => key.push(c),
                _ => {}
            }
        }
        let want = [
            "method",
            "user",
            "groups",
            "empty",
            "tab",
            "path",
            "status",
            "duration_ms",
        ];
        assert_eq!(keys, want, "{text}");
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
