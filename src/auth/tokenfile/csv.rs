//! The part of Go's `encoding/csv` that `--token-auth-file` relies on: comma-separated fields,
//! a variable number of fields per record, RFC 4180 quoting (`""` is a quote, quoted fields may
//! span lines), empty lines skipped, `\r\n` read as `\n`, no trimming, no comments.

/// One record and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) line: usize,
    pub(crate) fields: Vec<String>,
}

/// A syntax error, positioned as Go's `csv.ParseError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub(crate) start_line: usize,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: &'static str,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.start_line != self.line {
            write!(f, "record on line {}; ", self.start_line)?;
        }
        write!(
            f,
            "parse error on line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

const BARE_QUOTE: &str = "bare \" in non-quoted-field";
const QUOTE: &str = "extraneous or missing \" in quoted-field";

/// Parses every record of `input`.
pub(crate) fn parse(input: &str) -> Result<Vec<Record>, ParseError> {
    let mut lines = Lines::new(input);
    let mut records = Vec::new();
    while let Some((number, line)) = lines.next_line() {
        if line.is_empty() {
            continue;
        }
        records.push(parse_record(number, line, &mut lines)?);
    }
    Ok(records)
}

// Lines without their terminator (`\n` or `\r\n`), numbered from 1.
struct Lines<'a> {
    rest: &'a str,
    number: usize,
}

impl<'a> Lines<'a> {
    fn new(input: &'a str) -> Self {
        Lines {
            rest: input,
            number: 0,
        }
    }

    fn next_line(&mut self) -> Option<(usize, &'a str)> {
        if self.rest.is_empty() {
            return None;
        }
        self.number += 1;
        let (line, rest) = match self.rest.find('\n') {
            Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
            None => (self.rest, ""),
        };
        self.rest = rest;
        Some((self.number, line.strip_suffix('\r').unwrap_or(line)))
    }
}

fn parse_record(start: usize, first: &str, lines: &mut Lines<'_>) -> Result<Record, ParseError> {
    let mut fields = Vec::new();
    let (mut number, mut line) = (start, first);
    let mut pos = 0;
    let error = |line, column, message| ParseError {
        start_line: start,
        line,
        column,
        message,
    };
    loop {
        let rest = &line[pos..];
        if !rest.starts_with('"') {
            let end = rest.find(',').unwrap_or(rest.len());
            let field = &rest[..end];
            if let Some(q) = field.find('"') {
                return Err(error(number, pos + q + 1, BARE_QUOTE));
            }
            fields.push(field.to_string());
            if end == rest.len() {
                break;
            }
            pos += end + 1;
            continue;
        }
        // Quoted field: may continue over following lines.
        let mut field = String::new();
        pos += 1;
        loop {
            let rest = &line[pos..];
            match rest.find('"') {
                Some(q) => {
                    field.push_str(&rest[..q]);
                    let after = &rest[q + 1..];
                    if after.starts_with('"') {
                        field.push('"');
                        pos += q + 2;
                    } else if after.is_empty() || after.starts_with(',') {
                        pos += q + 1;
                        break;
                    } else {
                        return Err(error(number, pos + q + 2, QUOTE));
                    }
                }
                None => {
                    field.push_str(rest);
                    field.push('\n');
                    let Some((n, next)) = lines.next_line() else {
                        return Err(error(number, line.len() + 1, QUOTE));
                    };
                    (number, line, pos) = (n, next, 0);
                }
            }
        }
        fields.push(field);
        if pos == line.len() {
            break;
        }
        pos += 1; // the comma
    }
    Ok(Record {
        line: start,
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(input: &str) -> Vec<Vec<String>> {
        parse(input)
            .expect("test input parses")
            .into_iter()
            .map(|r| r.fields)
            .collect()
    }

    #[test]
    fn reads_records_like_go_encoding_csv() {
        let cases: &[(&str, &[&[&str]])] = &[
            ("a,b,c\n", &[&["a", "b", "c"]]),
            ("a,b,c", &[&["a", "b", "c"]]),
            ("a,b\r\nc,d\r\n", &[&["a", "b"], &["c", "d"]]),
            ("\n\na,b\n\n", &[&["a", "b"]]),
            (" a , b ", &[&[" a ", " b "]]),
            ("a,,", &[&["a", "", ""]]),
            ("a,\"b,c\",d", &[&["a", "b,c", "d"]]),
            ("\"a\"\"b\",c", &[&["a\"b", "c"]]),
            ("a,\"\"", &[&["a", ""]]),
            ("a,\"x\ny\",z\nq", &[&["a", "x\ny", "z"], &["q"]]),
            ("a,\"x\r\ny\"", &[&["a", "x\ny"]]),
            ("a\n b", &[&["a"], &[" b"]]),
        ];
        for (input, want) in cases {
            let want: Vec<Vec<String>> = want
                .iter()
                .map(|r| r.iter().map(|f| f.to_string()).collect())
                .collect();
            assert_eq!(fields(input), want, "{input:?}");
        }
    }

    #[test]
    fn records_know_their_starting_line() {
        let records = parse("\na,\"x\ny\"\nb\n").expect("parses");
        let lines: Vec<usize> = records.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![2, 4]);
    }

    #[test]
    fn rejects_bad_quoting_with_go_positions() {
        let cases: &[(&str, &str)] = &[
            ("a,b\"c", "parse error on line 1, column 4: bare \" in non-quoted-field"),
            ("ok\na,\"b\"c", "parse error on line 2, column 6: extraneous or missing \" in quoted-field"),
            (
                "a,\"open\nstill open",
                "record on line 1; parse error on line 2, column 11: extraneous or missing \" in quoted-field",
            ),
        ];
        for (input, want) in cases {
            let err = parse(input).expect_err("malformed");
            assert_eq!(err.to_string(), *want, "{input:?}");
        }
    }
}
