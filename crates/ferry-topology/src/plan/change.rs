//! One step of a plan and whether it would lose data, as people read it
//! (`~ queue orders: max_deliveries 5 → 7`) and as JSON.

use std::fmt;

use serde::Serialize;

use super::channel::{Kind, Settings};
use super::setting::{Setting, Value};

/// One change to one channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub kind: Kind,
    pub name: String,
    #[serde(flatten)]
    pub action: Action,
    /// Set when carrying the change out can lose messages already stored.
    pub loses_data: Option<Loss>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Create the channel with the settings the file gives it (the server's defaults for
    /// the rest).
    Create { settings: Settings },
    /// Change one setting; `from` is `None` when the server reports none (unbounded).
    Update {
        setting: Setting,
        from: Option<Value>,
        to: Value,
    },
    /// Delete the channel and what it holds.
    Delete,
}

/// Why a change can lose data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// Deleting the channel deletes its messages or records.
    DeletesMessages,
    /// A shorter retention, changed in place: records and dead letters already stored
    /// expire sooner.
    ShortensRetention,
    /// The server cannot change this setting in place: the channel is deleted and created
    /// again, and what it held is lost.
    Recreates,
}

impl Loss {
    pub fn as_str(self) -> &'static str {
        match self {
            Loss::DeletesMessages => "its messages are deleted",
            Loss::ShortensRetention => "what is stored expires sooner",
            Loss::Recreates => "the server changes it only by recreating it, emptied",
        }
    }
}

impl Change {
    /// The sign of the change: `+` create, `~` update, `-` delete.
    pub fn sign(&self) -> char {
        match self.action {
            Action::Create { .. } => '+',
            Action::Update { .. } => '~',
            Action::Delete => '-',
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.sign(), self.kind, self.name)?;
        if let Action::Update { setting, from, to } = &self.action {
            let from = from
                .as_ref()
                .map_or_else(|| "unset".to_owned(), ToString::to_string);
            write!(f, ": {setting} {from} → {to}")?;
        }
        if let Some(loss) = self.loses_data {
            write!(f, " (loses data: {})", loss.as_str())?;
        }
        Ok(())
    }
}
