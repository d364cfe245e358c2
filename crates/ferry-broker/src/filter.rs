//! Subscription filters: which of a topic's messages a subscription takes.
//!
//! A [`Filter`] is a boolean expression over a message's headers — predicates joined by
//! `and`, `or` and `not`, with parentheses for grouping — where a predicate is one of:
//!
//! - **subject patterns** on the `subject` header, dot-separated like RabbitMQ topic routing
//!   keys: `*` matches exactly one segment, `#` zero or more (`orders.*` matches
//!   `orders.created` but not `orders` or `orders.eu.created`; `orders.#` matches all three);
//! - **equals**: a header has this value;
//! - **in**: a header has one of these values;
//! - **exists**: a header is present;
//! - **prefix**: a header's value starts with this text.
//!
//! The text form, for configuration and the command line:
//!
//! ```text
//! subject ~ orders.# and type = order.created and region in (eu, "us-east") and exists(trace) and not priority = low
//! (region = eu or prefix(region, "us-")) and not exists(test)
//! ```
//!
//! `not` applies to the predicate or group right after it, `and` binds tighter than `or`
//! (`a or b and c` is `a or (b and c)`), and a group may nest at most [`MAX_DEPTH`] deep.
//! Richer languages of front ends (Google Pub/Sub's `attributes.k = "v" OR
//! hasPrefix(...)`) translate into this one, so the CLI and the console show every
//! subscription's filter in one syntax.
//!
//! Values are bare (letters, digits and `_ . : / - + @`) or double-quoted with `\"` and `\\`
//! escapes; header names follow the message header rules. Parsing is strict: anything else is
//! [`BrokerError::InvalidFilter`] naming the position.
//!
//! Matching reads headers only (never the payload), costs O(predicates × pattern length), and
//! allocates nothing.

use std::fmt;

use crate::error::{BrokerError, Result};
use crate::header::SUBJECT;
use crate::message::Headers;

/// The longest filter text accepted, and the most predicates and `in` values.
pub const MAX_FILTER_BYTES: usize = 4096;
pub const MAX_PREDICATES: usize = 32;
pub const MAX_IN_VALUES: usize = 64;
/// How deep groups and `not`s may nest: parsing recurses per level, and a filter is text
/// anyone allowed to subscribe may send.
pub const MAX_DEPTH: usize = 16;

/// A subject pattern: dot-separated segments, `*` one segment, `#` any number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectPattern {
    segments: Vec<Segment>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    One,
    Any,
}

impl SubjectPattern {
    pub fn parse(text: &str) -> Result<SubjectPattern> {
        let bad = |problem: String| BrokerError::InvalidFilter {
            filter: text.to_owned(),
            position: 0,
            problem,
        };
        if text.is_empty() {
            return Err(bad("a subject pattern is empty".into()));
        }
        let segments = text
            .split('.')
            .map(|segment| match segment {
                "" => Err(bad("a subject pattern has an empty segment".into())),
                "*" => Ok(Segment::One),
                "#" => Ok(Segment::Any),
                s if s.contains(['*', '#']) => Err(bad(format!(
                    "segment {s:?} mixes a wildcard with text; `*` and `#` stand alone"
                ))),
                s => Ok(Segment::Literal(s.to_owned())),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SubjectPattern {
            segments,
            text: text.to_owned(),
        })
    }

    /// Whether `subject` matches.
    pub fn matches(&self, subject: &str) -> bool {
        let parts: Vec<&str> = subject.split('.').collect();
        matches_from(&self.segments, &parts)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Pattern segments against subject parts: wildcard matching with `#` as the star and `*`
/// as the single-item wildcard. When a part does not match, only the latest `#` takes one
/// more part and matching resumes after it: an earlier `#` taking more could only reach
/// states the latest one reaches too. So a match costs at most pattern × parts steps, where
/// trying every split for every `#` costs exponentially many in the number of `#`s (a
/// filter anyone may subscribe with, matched against every message's subject).
fn matches_from(pattern: &[Segment], parts: &[&str]) -> bool {
    let (mut p, mut s) = (0, 0);
    // The pattern index after the latest `#`, and the part index it was resumed at.
    let mut star: Option<(usize, usize)> = None;
    while s < parts.len() {
        match pattern.get(p) {
            Some(Segment::Any) => {
                star = Some((p + 1, s));
                p += 1;
            }
            Some(Segment::One) => {
                p += 1;
                s += 1;
            }
            Some(Segment::Literal(text)) if text == parts[s] => {
                p += 1;
                s += 1;
            }
            _ => match star {
                Some((after, resumed)) => {
                    star = Some((after, resumed + 1));
                    p = after;
                    s = resumed + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|segment| *segment == Segment::Any)
}

/// One predicate over a message's headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Predicate {
    Subject(SubjectPattern),
    Equals {
        header: String,
        value: String,
    },
    In {
        header: String,
        values: Vec<String>,
    },
    Exists {
        header: String,
    },
    /// The header is present and its value starts with `prefix`.
    Prefix {
        header: String,
        prefix: String,
    },
    Not(Box<Predicate>),
    /// Every one holds (a parenthesised group inside an `or`); never fewer than two.
    All(Vec<Predicate>),
    /// At least one holds; never fewer than two.
    Any(Vec<Predicate>),
}

impl Predicate {
    pub fn matches(&self, headers: &Headers) -> bool {
        match self {
            Predicate::Subject(pattern) => headers
                .get(SUBJECT)
                .is_some_and(|subject| pattern.matches(subject)),
            Predicate::Equals { header, value } => headers.get(header) == Some(value),
            Predicate::In { header, values } => headers
                .get(header)
                .is_some_and(|v| values.iter().any(|w| w == v)),
            Predicate::Exists { header } => headers.contains_key(header),
            Predicate::Prefix { header, prefix } => headers
                .get(header)
                .is_some_and(|v| v.starts_with(prefix.as_str())),
            Predicate::Not(inner) => !inner.matches(headers),
            Predicate::All(all) => all.iter().all(|p| p.matches(headers)),
            Predicate::Any(any) => any.iter().any(|p| p.matches(headers)),
        }
    }
}

/// All predicates must hold (the top level of the expression, split at its `and`s); no
/// predicate takes everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    pub predicates: Vec<Predicate>,
}

impl Filter {
    /// Takes every message.
    pub fn all() -> Filter {
        Filter::default()
    }

    pub fn matches(&self, headers: &Headers) -> bool {
        self.predicates.iter().all(|p| p.matches(headers))
    }

    /// Parses the text form (`subject ~ orders.# and type = order.created`; the grammar is in
    /// `filter.rs`). Empty text takes everything.
    pub fn parse(text: &str) -> Result<Filter> {
        if text.len() > MAX_FILTER_BYTES {
            return Err(BrokerError::InvalidFilter {
                filter: text.chars().take(64).collect(),
                position: MAX_FILTER_BYTES,
                problem: format!(
                    "the filter is {} bytes, over {MAX_FILTER_BYTES}",
                    text.len()
                ),
            });
        }
        let mut parser = Parser {
            text,
            tokens: tokenize(text)?,
            next: 0,
            leaves: 0,
        };
        if parser.tokens.is_empty() {
            return Ok(Filter::all());
        }
        let predicates = match parser.expression(0)? {
            Predicate::All(all) => all,
            one => vec![one],
        };
        if let Some((at, token)) = parser.bump() {
            return Err(parser.error_at(at, format!("expected `and` or `or`, found {token}")));
        }
        Ok(Filter { predicates })
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [Predicate::Any(any)] = self.predicates.as_slice() {
            return write_members(f, any, " or ", Place::InAny);
        }
        write_members(f, &self.predicates, " and ", Place::InAll)
    }
}

/// Where a predicate prints, which decides whether a group needs parentheses: an `and`
/// group inside an `or` reads back the same without them (`and` binds tighter), anything
/// else keeps them. So the printed text never nests deeper than the text it came from, and
/// always reads back as the same tree.
#[derive(Clone, Copy)]
enum Place {
    InAll,
    InAny,
}

fn write_members(
    f: &mut fmt::Formatter<'_>,
    members: &[Predicate],
    joint: &str,
    place: Place,
) -> fmt::Result {
    for (i, p) in members.iter().enumerate() {
        if i > 0 {
            f.write_str(joint)?;
        }
        write_predicate(f, p, place)?;
    }
    Ok(())
}

fn write_predicate(f: &mut fmt::Formatter<'_>, p: &Predicate, place: Place) -> fmt::Result {
    match p {
        Predicate::Subject(pattern) => write!(f, "subject ~ {}", bare_or_quoted(pattern.as_str())),
        Predicate::Equals { header, value } => write!(f, "{header} = {}", quoted(value)),
        Predicate::In { header, values } => {
            write!(f, "{header} in (")?;
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(&quoted(v))?;
            }
            f.write_str(")")
        }
        Predicate::Exists { header } => write!(f, "exists({header})"),
        Predicate::Prefix { header, prefix } => write!(f, "prefix({header}, {})", quoted(prefix)),
        Predicate::Not(inner) => {
            f.write_str("not ")?;
            write_predicate(f, inner, Place::InAll)
        }
        Predicate::All(all) if matches!(place, Place::InAny) => {
            write_members(f, all, " and ", Place::InAll)
        }
        Predicate::All(all) => {
            f.write_str("(")?;
            write_members(f, all, " and ", Place::InAll)?;
            f.write_str(")")
        }
        Predicate::Any(any) => {
            f.write_str("(")?;
            write_members(f, any, " or ", Place::InAny)?;
            f.write_str(")")
        }
    }
}

/// A pattern may have been given quoted, with characters a bare word cannot hold: it
/// prints the way it can be read back.
fn bare_or_quoted(pattern: &str) -> String {
    if !pattern.is_empty() && pattern.chars().all(is_word_char) {
        pattern.to_owned()
    } else {
        quoted(pattern)
    }
}

fn quoted(value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Eq,
    Tilde,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{w:?}"),
            Token::Quoted(q) => write!(f, "a quoted {q:?}"),
            Token::Eq => f.write_str("`=`"),
            Token::Tilde => f.write_str("`~`"),
            Token::Open => f.write_str("`(`"),
            Token::Close => f.write_str("`)`"),
            Token::Comma => f.write_str("`,`"),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.:/-+@*#".contains(c)
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>> {
    let bad = |position: usize, problem: String| BrokerError::InvalidFilter {
        filter: text.to_owned(),
        position,
        problem,
    };
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' | '~' | '(' | ')' | ',' => {
                chars.next();
                let token = match c {
                    '=' => Token::Eq,
                    '~' => Token::Tilde,
                    '(' => Token::Open,
                    ')' => Token::Close,
                    _ => Token::Comma,
                };
                tokens.push((at, token));
            }
            '"' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(bad(at, "a quoted value is not closed".into())),
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, c @ ('"' | '\\'))) => value.push(c),
                            _ => {
                                return Err(bad(at, r#"only \" and \\ are escapes"#.into()));
                            }
                        },
                        Some((_, c)) => value.push(c),
                    }
                }
                tokens.push((at, Token::Quoted(value)));
            }
            c if is_word_char(c) => {
                let mut word = String::new();
                while let Some(&(_, c)) = chars.peek() {
                    if !is_word_char(c) {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                tokens.push((at, Token::Word(word)));
            }
            other => return Err(bad(at, format!("unexpected character {other:?}"))),
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<(usize, Token)>,
    next: usize,
    /// Predicates read so far, against [`MAX_PREDICATES`].
    leaves: usize,
}

impl Parser<'_> {
    fn bump(&mut self) -> Option<(usize, Token)> {
        let token = self.tokens.get(self.next).cloned();
        self.next += 1;
        token
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, t)| t)
    }

    fn position(&self) -> usize {
        self.tokens
            .get(self.next)
            .map_or(self.text.len(), |(at, _)| *at)
    }

    fn error(&self, problem: String) -> BrokerError {
        self.error_at(self.position(), problem)
    }

    fn error_at(&self, position: usize, problem: String) -> BrokerError {
        BrokerError::InvalidFilter {
            filter: self.text.to_owned(),
            position,
            problem,
        }
    }

    fn expect(&mut self, wanted: Token) -> Result<()> {
        match self.bump() {
            Some((_, token)) if token == wanted => Ok(()),
            Some((at, token)) => {
                Err(self.error_at(at, format!("expected {wanted}, found {token}")))
            }
            None => Err(self.error(format!("expected {wanted}, found the end"))),
        }
    }

    fn header_name(&mut self) -> Result<String> {
        match self.bump() {
            Some((at, Token::Word(name))) => {
                let valid = name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
                if !valid || name.len() > 256 {
                    return Err(self.error_at(at, format!("{name:?} is not a header name")));
                }
                Ok(name)
            }
            Some((at, token)) => {
                Err(self.error_at(at, format!("expected a header name, found {token}")))
            }
            None => Err(self.error("expected a header name, found the end".into())),
        }
    }

    fn value(&mut self) -> Result<String> {
        match self.bump() {
            Some((_, Token::Quoted(v))) => Ok(v),
            Some((at, Token::Word(w))) if w.contains(['*', '#']) => {
                Err(self.error_at(at, format!("{w:?}: wildcards belong in `subject ~` patterns; quote the value to match them literally")))
            }
            Some((_, Token::Word(w))) => Ok(w),
            Some((at, token)) => Err(self.error_at(at, format!("expected a value, found {token}"))),
            None => Err(self.error("expected a value, found the end".into())),
        }
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    /// `term (or term)*`: one term alone, or [`Predicate::Any`].
    fn expression(&mut self, depth: usize) -> Result<Predicate> {
        let mut any = vec![self.term(depth)?];
        while self.is_word("or") {
            self.bump();
            any.push(self.term(depth)?);
        }
        Ok(if any.len() == 1 {
            any.remove(0)
        } else {
            Predicate::Any(any)
        })
    }

    /// `unary (and unary)*`: one alone, or [`Predicate::All`].
    fn term(&mut self, depth: usize) -> Result<Predicate> {
        let mut all = vec![self.unary(depth)?];
        while self.is_word("and") {
            self.bump();
            all.push(self.unary(depth)?);
        }
        Ok(if all.len() == 1 {
            all.remove(0)
        } else {
            Predicate::All(all)
        })
    }

    /// `not unary`, `( expression )` or a predicate.
    fn unary(&mut self, depth: usize) -> Result<Predicate> {
        if depth >= MAX_DEPTH {
            return Err(self.error(format!("groups and `not`s nest over {MAX_DEPTH} deep")));
        }
        if self.is_word("not") {
            self.bump();
            return Ok(Predicate::Not(Box::new(self.unary(depth + 1)?)));
        }
        if self.peek() == Some(&Token::Open) {
            self.bump();
            let inner = self.expression(depth + 1)?;
            self.expect(Token::Close)?;
            return Ok(inner);
        }
        self.leaves += 1;
        if self.leaves > MAX_PREDICATES {
            return Err(self.error(format!("more than {MAX_PREDICATES} predicates")));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Predicate> {
        match self.peek() {
            Some(Token::Word(w))
                if w == "prefix"
                    && self.tokens.get(self.next + 1).map(|t| &t.1) == Some(&Token::Open) =>
            {
                self.bump();
                self.bump();
                let header = self.header_name()?;
                self.expect(Token::Comma)?;
                let prefix = self.value()?;
                self.expect(Token::Close)?;
                Ok(Predicate::Prefix { header, prefix })
            }
            Some(Token::Word(w)) if w == "exists" => {
                self.bump();
                self.expect(Token::Open)?;
                let header = self.header_name()?;
                self.expect(Token::Close)?;
                Ok(Predicate::Exists { header })
            }
            Some(Token::Word(w))
                if w == SUBJECT
                    && self.tokens.get(self.next + 1).map(|t| &t.1) == Some(&Token::Tilde) =>
            {
                self.bump();
                self.bump();
                let at = self.position();
                let pattern = match self.bump() {
                    Some((_, Token::Word(p) | Token::Quoted(p))) => p,
                    _ => return Err(self.error_at(at, "expected a subject pattern".into())),
                };
                SubjectPattern::parse(&pattern)
                    .map(Predicate::Subject)
                    .map_err(|e| match e {
                        BrokerError::InvalidFilter { problem, .. } => self.error_at(at, problem),
                        other => other,
                    })
            }
            Some(_) => {
                let header = self.header_name()?;
                match self.bump() {
                    Some((_, Token::Eq)) => Ok(Predicate::Equals {
                        header,
                        value: self.value()?,
                    }),
                    Some((_, Token::Word(w))) if w == "in" => {
                        self.expect(Token::Open)?;
                        let mut values = vec![self.value()?];
                        while self.peek() == Some(&Token::Comma) {
                            self.bump();
                            values.push(self.value()?);
                            if values.len() > MAX_IN_VALUES {
                                return Err(self.error(format!("more than {MAX_IN_VALUES} values")));
                            }
                        }
                        self.expect(Token::Close)?;
                        Ok(Predicate::In { header, values })
                    }
                    Some((at, token)) => Err(self.error_at(
                        at,
                        format!("expected `=` or `in` after {header:?}, found {token}"),
                    )),
                    None => Err(self.error(format!("expected `=` or `in` after {header:?}"))),
                }
            }
            None => Err(self.error("expected a predicate, found the end".into())),
        }
    }
}

#[cfg(test)]
mod tests;
