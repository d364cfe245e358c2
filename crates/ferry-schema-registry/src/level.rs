//! The seven compatibility levels: which earlier versions a new schema is checked against,
//! and in which direction.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::RegistryError;

/// How a subject's new schema must relate to its earlier versions.
///
/// *Backward*: the new schema reads data written with the earlier ones (consumers upgrade
/// first). *Forward*: the earlier schemas read data written with the new one (producers
/// upgrade first). *Full*: both. *Transitive*: against every earlier version, not only
/// the latest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompatibilityLevel {
    #[default]
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
    None,
}

impl CompatibilityLevel {
    pub const ALL: [CompatibilityLevel; 7] = [
        CompatibilityLevel::Backward,
        CompatibilityLevel::BackwardTransitive,
        CompatibilityLevel::Forward,
        CompatibilityLevel::ForwardTransitive,
        CompatibilityLevel::Full,
        CompatibilityLevel::FullTransitive,
        CompatibilityLevel::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CompatibilityLevel::Backward => "BACKWARD",
            CompatibilityLevel::BackwardTransitive => "BACKWARD_TRANSITIVE",
            CompatibilityLevel::Forward => "FORWARD",
            CompatibilityLevel::ForwardTransitive => "FORWARD_TRANSITIVE",
            CompatibilityLevel::Full => "FULL",
            CompatibilityLevel::FullTransitive => "FULL_TRANSITIVE",
            CompatibilityLevel::None => "NONE",
        }
    }

    /// A level by its name, in any case (clients send `backward` and `BACKWARD` alike).
    pub fn parse(name: &str) -> Result<CompatibilityLevel, RegistryError> {
        CompatibilityLevel::ALL
            .into_iter()
            .find(|level| level.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| RegistryError::InvalidCompatibilityLevel(name.to_owned()))
    }

    /// Checked against every earlier version, not only the latest.
    pub fn transitive(self) -> bool {
        matches!(
            self,
            CompatibilityLevel::BackwardTransitive
                | CompatibilityLevel::ForwardTransitive
                | CompatibilityLevel::FullTransitive
        )
    }

    /// The new schema must read what the earlier ones wrote.
    pub fn backward(self) -> bool {
        matches!(
            self,
            CompatibilityLevel::Backward
                | CompatibilityLevel::BackwardTransitive
                | CompatibilityLevel::Full
                | CompatibilityLevel::FullTransitive
        )
    }

    /// The earlier schemas must read what the new one writes.
    pub fn forward(self) -> bool {
        matches!(
            self,
            CompatibilityLevel::Forward
                | CompatibilityLevel::ForwardTransitive
                | CompatibilityLevel::Full
                | CompatibilityLevel::FullTransitive
        )
    }
}

impl fmt::Display for CompatibilityLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the registry takes registrations: `READWRITE` (the default), `READONLY`
/// (refuses registrations and deletes) or `IMPORT` (takes schemas with their ids and
/// versions from another registry, without compatibility checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mode {
    #[default]
    Readwrite,
    Readonly,
    Import,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Readwrite => "READWRITE",
            Mode::Readonly => "READONLY",
            Mode::Import => "IMPORT",
        }
    }

    pub fn parse(name: &str) -> Result<Mode, RegistryError> {
        [Mode::Readwrite, Mode::Readonly, Mode::Import]
            .into_iter()
            .find(|mode| mode.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| RegistryError::InvalidMode(name.to_owned()))
    }
}
