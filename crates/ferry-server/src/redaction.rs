//! Header values hidden from dead-letter peeks: the [`Redaction`], whose docs say why and
//! how.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// What a redacted header's value is shown as.
pub const MASK: &str = "***";

/// The headers redacted unless configured otherwise: the standard places for credentials
/// and session state.
pub const DEFAULT_REDACTED_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// A header name that cannot be redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedactionError {
    #[error("an empty header name cannot be redacted: name the header, e.g. \"authorization\"")]
    EmptyName,
    #[error("{name:?} is not a header name: it holds whitespace or control characters")]
    BadName { name: String },
}

/// A dead-letter filter that names a redacted header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the header {header:?} is redacted: a dead-letter filter on its value would reveal the \
     value one guess at a time; filter on another header"
)]
pub struct RedactedFilter {
    pub header: String,
}

/// The header names whose values dead-letter peeks mask, lower-cased
/// ([`Server::redact_headers`](crate::Server::redact_headers)).
///
/// Dead letters are read by people — an operator listing what failed — rather than by the
/// services the messages were meant for, and credentials a producer put in a header
/// (`authorization`, a session cookie, an API key) have no business on their screen. A
/// `Redaction` names the headers (case-insensitively) whose values a peek shows as
/// [`MASK`]; the key stays, so it is plain that the header was there. Only peeks are
/// masked: consumers receive the real headers, which they need, and a redrive moves the
/// letters with their real headers.
///
/// A dead-letter filter may not name a redacted header: its answer (which letters
/// matched, how many moved) would reveal the value one guess at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    names: BTreeSet<String>,
}

impl Default for Redaction {
    /// [`DEFAULT_REDACTED_HEADERS`].
    fn default() -> Redaction {
        Redaction::new(DEFAULT_REDACTED_HEADERS).expect("the defaults are header names")
    }
}

impl Redaction {
    /// Masks the values of `names`, compared without regard to case. Names are trimmed;
    /// an empty one or one with whitespace inside is refused.
    pub fn new<S: AsRef<str>>(
        names: impl IntoIterator<Item = S>,
    ) -> Result<Redaction, RedactionError> {
        let names = names
            .into_iter()
            .map(|n| {
                let n = n.as_ref().trim();
                if n.is_empty() {
                    return Err(RedactionError::EmptyName);
                }
                if n.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(RedactionError::BadName { name: n.to_owned() });
                }
                Ok(n.to_ascii_lowercase())
            })
            .collect::<Result<_, _>>()?;
        Ok(Redaction { names })
    }

    /// Masks nothing.
    pub fn none() -> Redaction {
        Redaction {
            names: BTreeSet::new(),
        }
    }

    /// Masks these names as well as its own.
    pub fn with(mut self, other: &Redaction) -> Redaction {
        self.names.extend(other.names.iter().cloned());
        self
    }

    /// The names, lower-cased, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether the header `name` is masked.
    pub fn covers(&self, name: &str) -> bool {
        // Few names, short ones: comparing each beats allocating a lower-cased copy.
        self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// Replaces the values of the covered headers by [`MASK`], keeping their keys.
    pub fn mask(&self, headers: &mut HashMap<String, String>) {
        for (name, value) in headers.iter_mut() {
            if self.covers(name) {
                MASK.clone_into(value);
            }
        }
    }

    /// Refuses a dead-letter filter on a covered header.
    pub fn check_filter(&self, header_name: Option<&str>) -> Result<(), RedactedFilter> {
        match header_name {
            Some(header) if self.covers(header) => Err(RedactedFilter {
                header: header.to_owned(),
            }),
            _ => Ok(()),
        }
    }
}

impl FromStr for Redaction {
    type Err = RedactionError;

    /// Comma-separated names (`authorization,x-api-key`), or `none` for none: the form a
    /// variable or a flag gives.
    fn from_str(text: &str) -> Result<Redaction, RedactionError> {
        if text.trim().eq_ignore_ascii_case("none") {
            return Ok(Redaction::none());
        }
        Redaction::new(text.split(','))
    }
}

impl fmt::Display for Redaction {
    /// The names, comma-separated; `none` for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.names.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.names().collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_values_are_masked_whatever_their_case_and_keys_stay() {
        let r = Redaction::new(["Authorization", " x-api-key "]).unwrap();
        let mut headers = HashMap::from([
            ("AUTHORIZATION".to_owned(), "Bearer s3cret".to_owned()),
            ("X-Api-Key".to_owned(), "k-123".to_owned()),
            ("tenant".to_owned(), "acme".to_owned()),
        ]);
        r.mask(&mut headers);
        assert_eq!(headers["AUTHORIZATION"], MASK);
        assert_eq!(headers["X-Api-Key"], MASK);
        assert_eq!(headers["tenant"], "acme");
        assert_eq!(r.to_string(), "authorization, x-api-key");
    }

    #[test]
    fn the_default_covers_credentials_and_none_covers_nothing() {
        let d = Redaction::default();
        for name in [
            "authorization",
            "Cookie",
            "set-cookie",
            "proxy-authorization",
            "X-API-KEY",
        ] {
            assert!(d.covers(name), "{name}");
        }
        assert!(!d.covers("content-type"));
        assert!(!Redaction::none().covers("authorization"));
        assert_eq!(Redaction::none().to_string(), "none");
        let both = Redaction::none().with(&Redaction::new(["x-token"]).unwrap());
        assert!(both.covers("X-Token"));
    }

    #[test]
    fn bad_names_are_refused_and_filters_on_covered_headers_too() {
        assert_eq!(Redaction::new([" "]), Err(RedactionError::EmptyName));
        assert_eq!("a,,b".parse::<Redaction>(), Err(RedactionError::EmptyName));
        assert_eq!(" None ".parse::<Redaction>(), Ok(Redaction::none()));
        assert_eq!(
            "Cookie, x-key".parse::<Redaction>(),
            Redaction::new(["cookie", "X-Key"])
        );
        assert!(matches!(
            Redaction::new(["x api"]),
            Err(RedactionError::BadName { .. })
        ));
        let d = Redaction::default();
        assert!(d.check_filter(Some("Authorization")).is_err());
        assert!(d.check_filter(Some("tenant")).is_ok());
        assert!(d.check_filter(None).is_ok());
    }
}
