//! What the linter reports: one broken rule on one element, and what to do about it.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth a look; does not fail a lint run.
    Warning,
    /// Fails a lint run: the design loses, duplicates or leaks messages as written.
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's stable id, e.g. `FT001`.
    pub id: &'static str,
    pub severity: Severity,
    /// What it is about, e.g. `queue payments` or `message OrderPlaced`.
    pub element: String,
    /// The line the element is defined on, when known.
    pub line: Option<u64>,
    pub message: String,
    /// What to change in the file.
    pub fix: String,
}
