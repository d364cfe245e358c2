//! A name as the file writes it, with the line it is on: findings about a queue or a
//! message type point at where it is defined.

use std::fmt;

use serde::de::{Deserialize, Deserializer};

#[derive(Debug, Clone)]
pub struct Name {
    text: String,
    /// 1-based; 0 when the parser could not tell.
    line: u64,
}

impl Name {
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
