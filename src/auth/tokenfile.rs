//! `--token-auth-file`: static bearer tokens. Mirrors
//! `pkg/authentication/token/tokenfile/tokenfile.go`.
//!
//! Each record is `token,user,uid[,"group1,group2"...]`: at least three columns, the fourth
//! split on commas into groups (an empty fourth column gives one empty group, as Go's
//! `strings.Split` does), further columns ignored. An empty token skips the record and a
//! duplicate token replaces the earlier one, each with a warning. Differs: errors and
//! warnings name the line (the apiserver names only the file, or the record number), and the
//! file must be UTF-8.

mod csv;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Identity;

/// Why a token file cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("--token-auth-file {}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not UTF-8.
    #[error("token file '{}' line {line}: not valid UTF-8", path.display())]
    Utf8 {
        /// The file.
        path: PathBuf,
        /// The first line with invalid bytes.
        line: usize,
    },
    /// A CSV syntax error (quoting).
    #[error("token file '{}': {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Go's `csv.ParseError` text, with line and column.
        message: String,
    },
    /// A record with fewer than three columns.
    #[error(
        "token file '{}' line {line}: must have at least 3 columns (token, user name, user uid), found {found}",
        path.display()
    )]
    TooFewColumns {
        /// The file.
        path: PathBuf,
        /// The line the record starts on.
        line: usize,
        /// How many columns it has.
        found: usize,
    },
}

/// The tokens of a token file, each with its (raw, group-adder not applied) identity.
#[derive(Default)]
pub(crate) struct TokenFile {
    tokens: HashMap<String, Identity>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("TokenFile")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl TokenFile {
    /// Reads and parses a token file.
    pub(crate) fn load(path: &Path) -> Result<Self, TokenFileError> {
        let bytes = std::fs::read(path).map_err(|source| TokenFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            TokenFileError::Utf8 {
                path: path.to_path_buf(),
                line: valid.iter().filter(|b| **b == b'\n').count() + 1,
            }
        })?;
        let file = Self::parse(path, &text)?;
        tracing::info!(path = %path.display(), tokens = file.len(), "Loaded token file");
        Ok(file)
    }

    /// Parses token file contents; `path` is only used in messages.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Self, TokenFileError> {
        let records = csv::parse(text).map_err(|e| TokenFileError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut tokens = HashMap::new();
        for record in records {
            let fields = record.fields;
            if fields.len() < 3 {
                return Err(TokenFileError::TooFewColumns {
                    path: path.to_path_buf(),
                    line: record.line,
                    found: fields.len(),
                });
            }
            if fields[0].is_empty() {
                tracing::warn!(path = %path.display(), line = record.line, "Empty token in token file; record ignored");
                continue;
            }
            let identity = Identity {
                user: fields[1].clone(),
                uid: fields[2].clone(),
                groups: fields
                    .get(3)
                    .map(|g| g.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
                ..Identity::default()
            };
            if tokens.insert(fields[0].clone(), identity).is_some() {
                tracing::warn!(path = %path.display(), line = record.line, "Duplicate token in token file; the later record wins");
            }
        }
        Ok(TokenFile { tokens })
    }

    /// Every `(token, identity)` record, sorted by token (for the fuzz targets).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn records(&self) -> Vec<(String, Identity)> {
        let mut records: Vec<_> = self
            .tokens
            .iter()
            .map(|(t, id)| (t.clone(), id.clone()))
            .collect();
        records.sort_by(|a, b| a.0.cmp(&b.0));
        records
    }

    /// The identity for `token`, if the file lists it.
    pub(crate) fn authenticate(&self, token: &str) -> Option<&Identity> {
        self.tokens.get(token)
    }

    /// How many tokens the file holds.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }
}

#[cfg(test)]
mod tests;
