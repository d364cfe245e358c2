//! Pub/Sub's subscription filter syntax, translated into the broker's filter and back.
//!
//! | Pub/Sub | broker |
//! |---|---|
//! | `attributes:KEY` | `exists(KEY)` |
//! | `attributes.KEY = "v"` | `KEY = "v"` |
//! | `attributes.KEY != "v"` | `not KEY = "v"` (also true without the attribute) |
//! | `hasPrefix(attributes.KEY, "v")` | `prefix(KEY, "v")` |
//! | `NOT x`, `-x` | `not x` |
//! | `x AND y`, `x OR y`, `( … )` | `and`, `or`, groups |
//!
//! As in Pub/Sub: at most [`MAX_FILTER_BYTES`], keywords in capitals, values as string
//! literals, a key either bare (letters, digits, `_` and `-`) or a string literal, and `AND`
//! and `OR` never mixed without parentheses. The broker matches the result on every
//! message the topic takes, so messages that do not match never reach the subscription
//! (Pub/Sub acknowledges them on the subscriber's behalf).
//!
//! Written by hand: the syntax is a small subset of Google's AIP-160 filters, with no
//! crate that parses it; a CEL crate would accept a different language.

use ferry_broker::{Filter, Predicate};
use tonic::Status;

/// Pub/Sub's limit on a filter's length.
pub const MAX_FILTER_BYTES: usize = 256;

/// The broker filter for Pub/Sub's `text`; empty text takes everything.
pub fn parse(text: &str) -> Result<Filter, Status> {
    if text.len() > MAX_FILTER_BYTES {
        return Err(Status::invalid_argument(format!(
            "The filter is {} bytes, over Pub/Sub's {MAX_FILTER_BYTES}",
            text.len()
        )));
    }
    let tokens = tokenize(text)?;
    if tokens.is_empty() {
        return Ok(Filter::all());
    }
    let mut parser = Parser {
        text,
        tokens,
        next: 0,
    };
    let expression = parser.expression()?;
    if let Some((at, token)) = parser.tokens.get(parser.next) {
        return Err(parser.error(*at, &format!("unexpected {token}")));
    }
    let predicates = match expression {
        Predicate::All(all) => all,
        one => vec![one],
    };
    let filter = Filter { predicates };
    // The broker's own limits (predicates, nesting) apply to what it stores: reading the
    // filter back in its syntax checks them with its message.
    Filter::parse(&filter.to_string())
        .map_err(|e| Status::invalid_argument(format!("Invalid filter {text:?}: {e}")))
}

/// `filter` in Pub/Sub's syntax, for a subscription described through this API. A filter
/// that uses what Pub/Sub cannot say (a subject pattern, made through another API) is
/// shown in the broker's syntax.
pub fn render(filter: &Filter) -> String {
    let mut out = String::new();
    let ok = match filter.predicates.as_slice() {
        [] => true,
        [one] => write(&mut out, one, false),
        all => write_joined(&mut out, all, " AND ", true),
    };
    if ok { out } else { filter.to_string() }
}

/// Writes `p`; false when Pub/Sub's syntax cannot say it. `grouped` asks for parentheses
/// around an `AND` or `OR`, which Pub/Sub needs inside another one or after `NOT`.
fn write(out: &mut String, p: &Predicate, grouped: bool) -> bool {
    match p {
        Predicate::Exists { header } => {
            out.push_str("attributes:");
            out.push_str(&key(header));
        }
        Predicate::Equals { header, value } => {
            out.push_str(&format!("attributes.{} = {}", key(header), literal(value)));
        }
        Predicate::Not(inner) => match inner.as_ref() {
            Predicate::Equals { header, value } => {
                out.push_str(&format!("attributes.{} != {}", key(header), literal(value)));
            }
            inner => {
                out.push_str("NOT ");
                return write(out, inner, true);
            }
        },
        Predicate::Prefix { header, prefix } => {
            out.push_str(&format!(
                "hasPrefix(attributes.{}, {})",
                key(header),
                literal(prefix)
            ));
        }
        Predicate::In { header, values } => {
            let alternatives: Vec<Predicate> = values
                .iter()
                .map(|value| Predicate::Equals {
                    header: header.clone(),
                    value: value.clone(),
                })
                .collect();
            return match alternatives.as_slice() {
                [one] => write(out, one, grouped),
                _ => write(out, &Predicate::Any(alternatives), grouped),
            };
        }
        Predicate::All(all) => return write_group(out, all, " AND ", grouped),
        Predicate::Any(any) => return write_group(out, any, " OR ", grouped),
        Predicate::Subject(_) => return false,
    }
    true
}

fn write_group(out: &mut String, members: &[Predicate], joint: &str, grouped: bool) -> bool {
    if grouped {
        out.push('(');
    }
    let ok = write_joined(out, members, joint, true);
    if grouped {
        out.push(')');
    }
    ok
}

fn write_joined(out: &mut String, members: &[Predicate], joint: &str, grouped: bool) -> bool {
    for (i, p) in members.iter().enumerate() {
        if i > 0 {
            out.push_str(joint);
        }
        if !write(out, p, grouped) {
            return false;
        }
    }
    true
}

fn key(name: &str) -> String {
    if !name.is_empty() && name.chars().all(is_bare_key_char) {
        name.to_owned()
    } else {
        literal(name)
    }
}

fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn is_bare_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Literal(String),
    Colon,
    Dot,
    Eq,
    NotEq,
    Minus,
    Open,
    Close,
    Comma,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{w:?}"),
            Token::Literal(l) => write!(f, "the string {l:?}"),
            Token::Colon => f.write_str("`:`"),
            Token::Dot => f.write_str("`.`"),
            Token::Eq => f.write_str("`=`"),
            Token::NotEq => f.write_str("`!=`"),
            Token::Minus => f.write_str("`-`"),
            Token::Open => f.write_str("`(`"),
            Token::Close => f.write_str("`)`"),
            Token::Comma => f.write_str("`,`"),
        }
    }
}

fn invalid(text: &str, at: usize, problem: &str) -> Status {
    Status::invalid_argument(format!("Invalid filter {text:?} at byte {at}: {problem}"))
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, Status> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            ':' => Token::Colon,
            '.' => Token::Dot,
            '=' => Token::Eq,
            '-' => Token::Minus,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            '!' if chars.next_if(|(_, c)| *c == '=').is_some() => Token::NotEq,
            '"' => Token::Literal(string_literal(text, at, &mut chars)?),
            c if is_bare_key_char(c) => {
                let mut word = c.to_string();
                while let Some((_, c)) = chars.next_if(|(_, c)| is_bare_key_char(*c)) {
                    word.push(c);
                }
                Token::Word(word)
            }
            other => return Err(invalid(text, at, &format!("unexpected {other:?}"))),
        };
        tokens.push((at, token));
    }
    Ok(tokens)
}

/// The rest of a string literal whose opening quote was at `start`, with its escapes:
/// `\\ \" \' \n \t \r \a \b \f \v`, `\xHH`, `\uHHHH`, and octal `\ooo`.
fn string_literal(
    text: &str,
    start: usize,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<String, Status> {
    let mut value = String::new();
    loop {
        let Some((at, c)) = chars.next() else {
            return Err(invalid(text, start, "a string is not closed"));
        };
        match c {
            '"' => return Ok(value),
            '\\' => {
                let Some((_, e)) = chars.next() else {
                    return Err(invalid(text, at, "a string is not closed"));
                };
                let simple = match e {
                    '\\' | '"' | '\'' | '?' | '`' => Some(e),
                    'n' => Some('\n'),
                    't' => Some('\t'),
                    'r' => Some('\r'),
                    'a' => Some('\u{7}'),
                    'b' => Some('\u{8}'),
                    'f' => Some('\u{c}'),
                    'v' => Some('\u{b}'),
                    _ => None,
                };
                if let Some(c) = simple {
                    value.push(c);
                    continue;
                }
                let (digits, radix) = match e {
                    'x' | 'X' => (2, 16),
                    'u' => (4, 16),
                    'U' => (8, 16),
                    '0'..='7' => (3, 8),
                    _ => return Err(invalid(text, at, &format!("unknown escape \\{e}"))),
                };
                let mut code = String::new();
                if radix == 8 {
                    code.push(e);
                }
                while code.len() < digits {
                    match chars.next() {
                        Some((_, d)) if d.is_digit(radix) => code.push(d),
                        _ => return Err(invalid(text, at, "a short escape sequence")),
                    }
                }
                let c = u32::from_str_radix(&code, radix)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| invalid(text, at, "an escape names no character"))?;
                value.push(c);
            }
            c => value.push(c),
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<(usize, Token)>,
    next: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, t)| t)
    }

    fn bump(&mut self) -> Option<(usize, Token)> {
        let token = self.tokens.get(self.next).cloned();
        self.next += 1;
        token
    }

    fn here(&self) -> usize {
        self.tokens
            .get(self.next)
            .map_or(self.text.len(), |(at, _)| *at)
    }

    fn error(&self, at: usize, problem: &str) -> Status {
        invalid(self.text, at, problem)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn expect(&mut self, wanted: Token) -> Result<(), Status> {
        let at = self.here();
        match self.bump() {
            Some((_, token)) if token == wanted => Ok(()),
            Some((_, token)) => Err(self.error(at, &format!("expected {wanted}, found {token}"))),
            None => Err(self.error(at, &format!("expected {wanted}, found the end"))),
        }
    }

    /// Terms joined by one kind of operator: `AND` and `OR` do not mix without
    /// parentheses, as Pub/Sub has it.
    fn expression(&mut self) -> Result<Predicate, Status> {
        let mut members = vec![self.term()?];
        let mut joint: Option<&'static str> = None;
        loop {
            let this = if self.is_word("AND") {
                "AND"
            } else if self.is_word("OR") {
                "OR"
            } else {
                break;
            };
            if joint.is_some_and(|j| j != this) {
                return Err(self.error(self.here(), "AND and OR need parentheses to be combined"));
            }
            joint = Some(this);
            self.bump();
            members.push(self.term()?);
        }
        Ok(match joint {
            None => members.remove(0),
            Some("AND") => Predicate::All(members),
            Some(_) => Predicate::Any(members),
        })
    }

    fn term(&mut self) -> Result<Predicate, Status> {
        if self.is_word("NOT") || self.peek() == Some(&Token::Minus) {
            self.bump();
            return Ok(Predicate::Not(Box::new(self.term()?)));
        }
        if self.peek() == Some(&Token::Open) {
            self.bump();
            let inner = self.expression()?;
            self.expect(Token::Close)?;
            return Ok(inner);
        }
        if self.is_word("hasPrefix") {
            self.bump();
            self.expect(Token::Open)?;
            let header = self.attribute_after(Token::Dot)?;
            self.expect(Token::Comma)?;
            let prefix = self.value()?;
            self.expect(Token::Close)?;
            return Ok(Predicate::Prefix { header, prefix });
        }
        let at = self.here();
        if !self.is_word("attributes") {
            return Err(self.error(at, "expected `attributes`, `hasPrefix`, `NOT` or `(`"));
        }
        self.bump();
        match self.bump() {
            Some((_, Token::Colon)) => Ok(Predicate::Exists {
                header: self.key()?,
            }),
            Some((_, Token::Dot)) => {
                let header = self.key()?;
                let at = self.here();
                match self.bump() {
                    Some((_, Token::Eq)) => Ok(Predicate::Equals {
                        header,
                        value: self.value()?,
                    }),
                    Some((_, Token::NotEq)) => Ok(Predicate::Not(Box::new(Predicate::Equals {
                        header,
                        value: self.value()?,
                    }))),
                    _ => Err(self.error(at, "expected `=` or `!=`")),
                }
            }
            _ => Err(self.error(at, "expected `attributes.KEY` or `attributes:KEY`")),
        }
    }

    /// `attributes` `separator` KEY, as in `hasPrefix(attributes.KEY, ...)`.
    fn attribute_after(&mut self, separator: Token) -> Result<String, Status> {
        let at = self.here();
        if !self.is_word("attributes") {
            return Err(self.error(at, "expected `attributes.KEY`"));
        }
        self.bump();
        self.expect(separator)?;
        self.key()
    }

    /// A key, bare or quoted, within what the broker's header names allow.
    fn key(&mut self) -> Result<String, Status> {
        let at = self.here();
        let key = match self.bump() {
            Some((_, Token::Word(w) | Token::Literal(w))) => w,
            _ => return Err(self.error(at, "expected an attribute key")),
        };
        let representable = !key.is_empty()
            && key.len() <= 256
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !representable {
            return Err(self.error(
                at,
                &format!(
                    "this server filters on attribute keys of letters, digits, `_`, `.` \
                     and `-` only, not {key:?}"
                ),
            ));
        }
        Ok(key)
    }

    fn value(&mut self) -> Result<String, Status> {
        let at = self.here();
        match self.bump() {
            Some((_, Token::Literal(v))) => Ok(v),
            Some((_, token)) => Err(self.error(
                at,
                &format!("expected a string in double quotes, found {token}"),
            )),
            None => Err(self.error(at, "expected a string in double quotes")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_broker::Headers;

    fn attrs(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn each_form_matches_as_pubsub_documents_it() {
        /// A filter, a message's attributes, and whether it passes.
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            ("attributes:domain", &[("domain", "x")], true),
            ("attributes:domain", &[], false),
            ("NOT attributes:domain", &[], true),
            ("-attributes:domain", &[("domain", "x")], false),
            (r#"attributes.domain = "com""#, &[("domain", "com")], true),
            (r#"attributes.domain = "com""#, &[("domain", "org")], false),
            (r#"attributes.domain != "com""#, &[("domain", "org")], true),
            (r#"attributes.domain != "com""#, &[], true),
            (r#"attributes.domain != "com""#, &[("domain", "com")], false),
            (
                r#"hasPrefix(attributes.domain, "co")"#,
                &[("domain", "com")],
                true,
            ),
            (
                r#"hasPrefix(attributes.domain, "co")"#,
                &[("domain", "org")],
                false,
            ),
            (r#"attributes:a AND attributes:b"#, &[("a", "1")], false),
            (r#"attributes:a OR attributes:b"#, &[("b", "1")], true),
            (
                r#"attributes:domain AND (attributes.lang = "en" OR attributes.lang = "fr")"#,
                &[("domain", "x"), ("lang", "fr")],
                true,
            ),
            (
                r#"attributes:domain AND (attributes.lang = "en" OR attributes.lang = "fr")"#,
                &[("lang", "fr")],
                false,
            ),
            (
                r#"attributes."my.key" = "a\"b\x41""#,
                &[("my.key", "a\"bA")],
                true,
            ),
            ("", &[], true),
        ];
        for (text, headers, expected) in cases {
            let filter = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                filter.matches(&attrs(headers)),
                *expected,
                "{text} on {headers:?}"
            );
        }
    }

    #[test]
    fn what_pubsub_refuses_is_invalid_argument() {
        for text in [
            "attributes:a AND attributes:b OR attributes:c",
            r#"attributes.a = b"#,
            r#"attributes.a == "b""#,
            "attributes:",
            "data:x",
            "(attributes:a",
            r#"hasPrefix(attributes.a)"#,
            r#"attributes.a = "open"#,
            r#"attributes.a = "\q""#,
            "attributes:a and attributes:b",
            r#"attributes."a b" = "x""#,
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{text}: {e:?}");
        }
        let long = format!("attributes.a = \"{}\"", "x".repeat(MAX_FILTER_BYTES));
        assert_eq!(
            parse(&long).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn a_filter_renders_back_in_pubsubs_syntax() {
        for text in [
            "attributes:domain",
            r#"attributes.domain = "com""#,
            r#"attributes.domain != "com""#,
            r#"hasPrefix(attributes.domain, "co")"#,
            r#"attributes:domain AND (attributes.lang = "en" OR attributes.lang = "fr")"#,
            r#"NOT (attributes:a OR attributes:b)"#,
            r#"attributes:a OR attributes:b"#,
        ] {
            let filter = parse(text).unwrap();
            assert_eq!(render(&filter), text);
            assert_eq!(parse(&render(&filter)).unwrap(), filter);
        }
        let ferrys = Filter::parse("subject ~ orders.# and region in (eu, us)").unwrap();
        assert_eq!(render(&ferrys), ferrys.to_string());
        let listed = Filter::parse("region in (eu, us)").unwrap();
        assert_eq!(
            render(&listed),
            r#"attributes.region = "eu" OR attributes.region = "us""#
        );
    }
}
