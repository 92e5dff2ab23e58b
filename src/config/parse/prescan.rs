//! A cheap pass over a YAML (or JSON) text before the parser sees it, bounding what parsing it
//! could cost.
//!
//! serde_yaml (over libyaml) reads a whole document's events into memory before it builds a
//! value, and checks its recursion limit (128) only while building: 500,000 nested `[` (500 KB)
//! cost 3.2 s and 164 MB before being refused, a 1 MB flat list `[a,a,...]` about as much. The
//! apiserver's YAML reader (`sigs.k8s.io/yaml` over `yaml.v2`/`yaml.v3`) stops at depth 10,000 as
//! it parses; the limit here is serde_yaml's own (anything deeper fails after parsing anyway), and
//! it is applied before any event is made.
//!
//! Two bounds, each O(n) over the bytes with O(depth) memory:
//!
//! - **Depth** ([`MAX_DEPTH`]): flow collections (`[`, `{`) are counted outside quoted scalars,
//!   comments and block scalars; block nesting is estimated from the stack of strictly increasing
//!   indentations (twice its height: a block sequence may sit at its parent mapping's
//!   indentation) plus compact entries (`- - - x`). It errs towards over-estimating (a document
//!   refused here would have failed serde_yaml's recursion limit, or is one no person writes);
//!   what it cannot see (a quote character that opens no quoted scalar, inside a multi-line plain
//!   scalar) the token bound still limits.
//! - **Structural tokens** ([`MAX_TOKENS`], the webhook's reviews only): every `[`, `{`, `,`,
//!   every `-`, `?` or `:` followed by a space or a line end, and every line, counted regardless
//!   of quoting — an upper bound on the events the parser makes, so on its time and memory,
//!   whatever the depth scan made of the quotes. The embedded default configuration (10 KB) has about 1,100; a realistic 1 MB
//!   configuration about 100,000, more than [`MAX_TOKENS`] allows.

/// The deepest nesting accepted (serde_yaml's recursion limit).
pub const MAX_DEPTH: usize = 128;

/// The most structural tokens the webhook accepts in one review's configuration: about 320 KB of
/// realistic configuration (some 550 objects; the embedded default has 1,100 tokens for its 19), and about 20 MB of
/// parser memory at the worst ratio measured (a flat list `[a,a,...]`, about 600 bytes per token
/// on the release binary), so that the webhook's two reviews at a time stay well inside its
/// Deployment's 128 Mi.
pub const MAX_TOKENS: usize = 32 * 1024;

/// Why a text is refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrescanError {
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("nesting deeper than {MAX_DEPTH} levels at line {line} (refused before parsing)")]
    TooDeep {
        /// The 1-based line where the bound was crossed.
        line: usize,
    },
    /// More than `limit` structural tokens.
    #[error("more than {limit} structural tokens ([, {{, comma, list and mapping indicators, lines) (refused before parsing)")]
    TooManyTokens {
        /// The bound crossed.
        limit: usize,
    },
}

/// What the scan found in an accepted text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Structural tokens (see the module documentation).
    pub tokens: usize,
    /// The deepest nesting estimated.
    pub depth: usize,
}

/// Scans `text`, refusing it past [`MAX_DEPTH`] or `max_tokens`.
pub fn prescan(text: &str, max_tokens: usize) -> Result<Shape, PrescanError> {
    // Depth first: it stops at the first line too deep, where counting would read on.
    let depth = check_depth(text)?;
    let tokens = count_tokens(text.as_bytes());
    if tokens > max_tokens {
        return Err(PrescanError::TooManyTokens { limit: max_tokens });
    }
    Ok(Shape { tokens, depth })
}

/// The nesting of `text`, refused past [`MAX_DEPTH`] (what every configuration file gets: the
/// proxy's own files and the cluster's objects are the operator's, so their size is not bounded
/// here; the webhook's reviews are, with [`prescan`]).
pub(in crate::config) fn check_depth(text: &str) -> Result<usize, PrescanError> {
    Depth::default().scan(text.as_bytes())
}

fn count_tokens(bytes: &[u8]) -> usize {
    let mut tokens = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let next = bytes.get(i + 1).copied();
        let separated = matches!(next, None | Some(b' ' | b'\n' | b'\r' | b'\t'));
        tokens += match b {
            b'[' | b'{' | b',' | b'\n' => 1,
            b'-' | b'?' | b':' if separated => 1,
            _ => 0,
        };
    }
    tokens
}

/// A quoted scalar the scan is inside (it may span lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Single,
    Double,
}

#[derive(Debug, Default)]
struct Depth {
    /// Open flow collections.
    flow: usize,
    /// Strictly increasing indentations of the open block nodes.
    indents: Vec<usize>,
    /// Inside a quoted scalar.
    quote: Option<Quote>,
    /// Inside a block scalar (`|`, `>`) whose header line had this indentation.
    block_scalar: Option<usize>,
    deepest: usize,
}

impl Depth {
    fn scan(mut self, bytes: &[u8]) -> Result<usize, PrescanError> {
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            self.line(line, i + 1)?;
        }
        Ok(self.deepest)
    }

    fn line(&mut self, line: &[u8], number: usize) -> Result<(), PrescanError> {
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let rest = &line[indent..];
        let blank = rest.iter().all(|b| b.is_ascii_whitespace());
        if let Some(parent) = self.block_scalar {
            if blank || indent > parent {
                return Ok(());
            }
            self.block_scalar = None;
        }
        let mut at = indent;
        if self.quote.is_none() && self.flow == 0 {
            if blank || rest.first() == Some(&b'#') {
                return Ok(());
            }
            if rest.starts_with(b"---") || rest.starts_with(b"...") {
                self.indents.clear();
            }
            while self.indents.last().is_some_and(|&top| top >= indent) {
                self.indents.pop();
            }
            self.indents.push(indent);
            // Compact entries (`- - x`, `? - x`) open one block node each on this line.
            while let Some(after) = compact_entry(line, at) {
                self.indents.push(after);
                at = after;
            }
            self.check(number)?;
        }
        self.tokens(line, at, indent, number)
    }

    fn depth(&self) -> usize {
        2 * self.indents.len() + self.flow
    }

    fn check(&mut self, line: usize) -> Result<(), PrescanError> {
        let depth = self.depth();
        self.deepest = self.deepest.max(depth);
        if depth > MAX_DEPTH {
            return Err(PrescanError::TooDeep { line });
        }
        Ok(())
    }

    /// Flow indicators, quotes, comments and block scalar headers from `start` on.
    fn tokens(
        &mut self,
        line: &[u8],
        start: usize,
        indent: usize,
        number: usize,
    ) -> Result<(), PrescanError> {
        let mut node_start = true;
        let mut i = start;
        while i < line.len() {
            let b = line[i];
            if let Some(quote) = self.quote {
                i = self.in_quote(line, i, quote);
                node_start = false;
                continue;
            }
            let after_space = i == 0 || matches!(line[i - 1], b' ' | b'\t');
            match b {
                b' ' | b'\t' | b'\r' => {}
                b'#' if after_space => return Ok(()),
                b'"' if node_start => self.quote = Some(Quote::Double),
                b'\'' if node_start => self.quote = Some(Quote::Single),
                b'[' | b'{' if node_start || self.flow > 0 => {
                    self.flow += 1;
                    self.check(number)?;
                    node_start = true;
                }
                b']' | b'}' if self.flow > 0 => {
                    self.flow -= 1;
                    node_start = false;
                }
                b',' if self.flow > 0 => node_start = true,
                b':' if separated(line, i) || self.flow > 0 => node_start = true,
                b'-' | b'?' if node_start && separated(line, i) => node_start = true,
                b'|' | b'>' if node_start && self.flow == 0 => {
                    self.block_scalar = Some(indent);
                    return Ok(());
                }
                // Anchors and tags precede a node; the node may still open a collection.
                b'&' | b'!' if node_start => {
                    while i + 1 < line.len() && !matches!(line[i + 1], b' ' | b'\t') {
                        i += 1;
                    }
                }
                _ => node_start = false,
            }
            i += 1;
        }
        Ok(())
    }

    /// Skips quoted text from `i`; returns where scanning goes on (past the closing quote, or
    /// the line's end).
    fn in_quote(&mut self, line: &[u8], mut i: usize, quote: Quote) -> usize {
        while i < line.len() {
            match (quote, line[i]) {
                (Quote::Double, b'\\') => i += 2,
                (Quote::Double, b'"') => {
                    self.quote = None;
                    return i + 1;
                }
                (Quote::Single, b'\'') if line.get(i + 1) == Some(&b'\'') => i += 2,
                (Quote::Single, b'\'') => {
                    self.quote = None;
                    return i + 1;
                }
                _ => i += 1,
            }
        }
        i
    }
}

/// `-` or `?` at `at` followed by spaces and more content: the column of that content.
fn compact_entry(line: &[u8], at: usize) -> Option<usize> {
    let indicator = *line.get(at)?;
    if !matches!(indicator, b'-' | b'?') || !matches!(line.get(at + 1), Some(b' ')) {
        return None;
    }
    let spaces = line[at + 1..].iter().take_while(|&&b| b == b' ').count();
    let content = at + 1 + spaces;
    (content < line.len()).then_some(content)
}

fn separated(line: &[u8], i: usize) -> bool {
    matches!(line.get(i + 1), None | Some(b' ' | b'\t' | b'\r'))
}

#[cfg(test)]
mod tests;
