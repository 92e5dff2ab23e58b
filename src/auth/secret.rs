//! Redaction: the one place that decides how credentials print.
//!
//! Every bearer token the authenticator handles travels in a [`Secret`], whose `Debug` and
//! `Display` never show the value, so a stray `{:?}` in a log line cannot leak it.

use std::fmt;

/// What a [`Secret`] prints instead of its value.
pub const REDACTED: &str = "<redacted>";

/// A credential (bearer token, key material) that never appears in `Debug` or `Display` output.
///
/// Read the value only where it is used, with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Box<str>);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<Box<str>>) -> Self {
        Secret(value.into())
    }

    /// The credential itself. Never log or format the result.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the credential is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let secret = Secret::new("s3cr3t-token");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(
            format!("{:#?}", Some(&secret)),
            "Some(\n    Secret(<redacted>),\n)"
        );
        assert_eq!(secret.expose(), "s3cr3t-token");
    }
}
