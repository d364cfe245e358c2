//! What an importer hands back: the design it read, and a note for everything in the
//! source that the topology format has no place for. An import never drops a setting
//! silently: a setting it cannot carry over is named in a note, so a reviewer sees what
//! the file does not say.

use std::fmt;

use crate::Topology;

/// A design read from another format, with what did not carry over.
#[derive(Debug, Clone)]
pub struct Imported {
    pub topology: Topology,
    pub notes: Vec<Note>,
}

/// One thing in the source that the topology does not carry, or carries only in part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Where in the source: `queue "orders" in vhost "/"`, `channel "userSignedUp"`.
    pub subject: String,
    /// What was left out or changed, and why.
    pub message: String,
}

impl Note {
    pub(crate) fn new(subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.subject, self.message)
    }
}
