//! Whether a `labelSelector` parses.
//!
//! Mirrors `k8s.io/apimachinery/pkg/labels/selector.go` (`Parse`: lexer, recursive-descent parser
//! and `NewRequirement` validation, with the key and value rules of
//! `pkg/api/validate/content/kube.go`). Only validity is kept: the apiserver discards the parsed
//! selector when it computes request attributes, but a selector that fails to parse changes the
//! verb and name logic.

/// Mirrors the lexer's `Token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// Go's `ErrorToken`; unreachable in practice (every single special symbol is a token), and
    /// accepted by no parser state.
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The `string2token` table.
fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Mirrors `Lexer`. Byte-oriented like Go's; a NUL byte reads as end of input, as in Go.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, &'a [u8]) {
        let start = self.pos;
        let mut end = start;
        loop {
            match self.read() {
                0 => break,
                b if is_special_symbol(b) || is_whitespace(b) => {
                    self.unread();
                    break;
                }
                _ => end = self.pos,
            }
        }
        let lit = &self.s[start..end];
        match keyword(lit) {
            Some(tok) => (tok, lit),
            None => (Token::Identifier, lit),
        }
    }

    fn scan_special_symbol(&mut self) -> Token {
        let start = self.pos;
        let mut last = None;
        loop {
            match self.read() {
                0 => break,
                b if is_special_symbol(b) => {
                    // The buffer is contiguous: only special symbols were read since `start`.
                    match keyword(&self.s[start..self.pos]) {
                        Some(tok) => last = Some(tok),
                        None if last.is_some() => {
                            self.unread();
                            break;
                        }
                        None => {}
                    }
                }
                _ => {
                    self.unread();
                    break;
                }
            }
        }
        last.unwrap_or(Token::Error)
    }

    fn lex(&mut self) -> (Token, &'a [u8]) {
        let mut b = self.read();
        while is_whitespace(b) {
            b = self.read();
        }
        match b {
            0 => (Token::EndOfString, &[]),
            b if is_special_symbol(b) => {
                self.unread();
                (self.scan_special_symbol(), &[])
            }
            _ => {
                self.unread();
                self.scan_id_or_keyword()
            }
        }
    }
}

/// The parser's context: in `Values`, `in` and `notin` are plain identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// The operators of `pkg/selection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    Exists,
    DoesNotExist,
}

/// A syntax or validation error; its details are not kept.
struct Invalid;

/// Mirrors `Parser`.
struct Parser<'a> {
    items: Vec<(Token, &'a [u8])>,
    position: usize,
}

impl<'a> Parser<'a> {
    fn new(selector: &'a str) -> Self {
        let mut lexer = Lexer {
            s: selector.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            items.push(item);
            if item.0 == Token::EndOfString {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn lookahead(&self, context: Context) -> (Token, &'a [u8]) {
        let (tok, lit) = self
            .items
            .get(self.position)
            .copied()
            .unwrap_or((Token::EndOfString, &[]));
        match tok {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'a [u8]) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<(), Invalid> {
        loop {
            match self.lookahead(Context::Values).0 {
                Token::Identifier | Token::DoesNotExist => {
                    self.parse_requirement()?;
                    match self.consume(Context::Values).0 {
                        Token::EndOfString => return Ok(()),
                        Token::Comma => match self.lookahead(Context::Values).0 {
                            Token::Identifier | Token::DoesNotExist => {}
                            _ => return Err(Invalid),
                        },
                        _ => return Err(Invalid),
                    }
                }
                Token::EndOfString => return Ok(()),
                _ => return Err(Invalid),
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<(), Invalid> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        let operator = match operator {
            Some(op) => return new_requirement(key, op, &[]),
            None => self.parse_operator()?,
        };
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => vec![self.parse_exact_value()?],
        };
        new_requirement(key, operator, &values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(&'a [u8], Option<Operator>), Invalid> {
        let mut operator = None;
        let (mut tok, mut literal) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, literal) = self.consume(Context::Values);
        }
        if tok != Token::Identifier || !is_label_key(literal) {
            return Err(Invalid);
        }
        if matches!(
            self.lookahead(Context::Values).0,
            Token::EndOfString | Token::Comma
        ) && operator.is_none()
        {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, Invalid> {
        Ok(match self.consume(Context::KeyAndOperator).0 {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(Invalid),
        })
    }

    fn parse_values(&mut self) -> Result<Vec<&'a [u8]>, Invalid> {
        if self.consume(Context::Values).0 != Token::OpenPar {
            return Err(Invalid);
        }
        match self.lookahead(Context::Values).0 {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                match self.consume(Context::Values).0 {
                    Token::ClosedPar => Ok(values),
                    _ => Err(Invalid),
                }
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![b""])
            }
            _ => Err(Invalid),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<&'a [u8]>, Invalid> {
        // Go collects a set; duplicates do not change validity, so a list is enough.
        let mut values: Vec<&'a [u8]> = Vec::new();
        loop {
            match self.consume(Context::Values) {
                (Token::Identifier, lit) => {
                    values.push(lit);
                    match self.lookahead(Context::Values).0 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(Invalid),
                    }
                }
                (Token::Comma, _) => {
                    // `(,`, `,,` and `,)` each stand for an empty value.
                    if values.is_empty() {
                        values.push(b"");
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.push(b"");
                            return Ok(values);
                        }
                        Token::Comma => values.push(b""),
                        _ => {}
                    }
                }
                _ => return Err(Invalid),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<&'a [u8], Invalid> {
        if matches!(
            self.lookahead(Context::Values).0,
            Token::EndOfString | Token::Comma
        ) {
            return Ok(b"");
        }
        match self.consume(Context::Values) {
            (Token::Identifier, lit) => Ok(lit),
            _ => Err(Invalid),
        }
    }
}

/// Mirrors `NewRequirement`'s checks.
fn new_requirement(key: &[u8], operator: Operator, values: &[&[u8]]) -> Result<(), Invalid> {
    let count_ok = match operator {
        Operator::In | Operator::NotIn => !values.is_empty(),
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => values.len() == 1,
        Operator::Exists | Operator::DoesNotExist => values.is_empty(),
        Operator::GreaterThan | Operator::LessThan => {
            values.len() == 1 && values.iter().all(|v| parses_as_i64(v))
        }
    };
    if count_ok && is_label_key(key) && values.iter().all(|v| is_label_value(v)) {
        Ok(())
    } else {
        Err(Invalid)
    }
}

/// `strconv.ParseInt(v, 10, 64)` succeeds.
fn parses_as_i64(v: &[u8]) -> bool {
    std::str::from_utf8(v).is_ok_and(|s| s.parse::<i64>().is_ok())
}

/// Mirrors `content.IsLabelKey`: `[prefix/]name`, the prefix a DNS-1123 subdomain.
pub(super) fn is_label_key(key: &[u8]) -> bool {
    let mut parts = key.split(|&b| b == b'/');
    let (first, second, third) = (parts.next(), parts.next(), parts.next());
    match (first, second, third) {
        (Some(name), None, _) => is_label_name(name),
        (Some(prefix), Some(name), None) => is_dns1123_subdomain(prefix) && is_label_name(name),
        _ => false,
    }
}

/// The name part of a label key: 1–63 characters of `[-A-Za-z0-9_.]`, alphanumeric at both ends.
fn is_label_name(name: &[u8]) -> bool {
    !name.is_empty() && is_label_value(name)
}

/// Mirrors `content.IsLabelValue`: empty, or up to 63 characters of `[-A-Za-z0-9_.]` with an
/// alphanumeric character at both ends.
pub(super) fn is_label_value(value: &[u8]) -> bool {
    let (Some(first), Some(last)) = (value.first(), value.last()) else {
        return true;
    };
    value.len() <= 63
        && first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && value
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Mirrors `content.IsDNS1123Subdomain`: at most 253 characters, dot-separated labels of
/// `[a-z0-9-]` that start and end with `[a-z0-9]`.
fn is_dns1123_subdomain(value: &[u8]) -> bool {
    value.len() <= 253
        && value.split(|&b| b == b'.').all(|label| {
            let (Some(&first), Some(&last)) = (label.first(), label.last()) else {
                return false;
            };
            is_lower_alnum(first)
                && is_lower_alnum(last)
                && label.iter().all(|&b| is_lower_alnum(b) || b == b'-')
        })
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Whether `labels.Parse(selector)` succeeds.
pub(super) fn is_valid(selector: &str) -> bool {
    Parser::new(selector).parse().is_ok()
}
