//! A name as the file writes it, with the line it is on: findings about a queue or a
//! message type point at where it is defined.

use std::fmt;

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};

#[derive(Debug, Clone)]
pub struct Name {
    text: String,
    /// 1-based; 0 when the parser could not tell.
    line: u64,
}

impl Name {
    /// A name made by a program (an export, an import) rather than read from a file: it
    /// has no line.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            line: 0,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The line the name is written on, when known.
    pub fn line(&self) -> Option<u64> {
        (self.line > 0).then_some(self.line)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<String>::deserialize(deserializer)?;
        Ok(Self {
            line: spanned.referenced.line(),
            text: spanned.value,
        })
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}
