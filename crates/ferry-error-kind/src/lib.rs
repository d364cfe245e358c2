//! The kinds of failure Ferry's broker, its front ends and its clients agree on.
//!
//! The broker classifies every error it raises into one [`ErrorKind`]
//! (`ferry_broker::BrokerError::kind`); every front end derives its protocol's answer from the
//! kind (gRPC codes, HTTP statuses, and the codes of the protocol front ends), the server
//! sends the kind's [wire name](ErrorKind::as_str) with every broker error, and the client
//! decodes it ([`ErrorKind::from_wire`]). It lives in a crate of its own, with no
//! dependencies, so that the client can name the same kinds without linking the broker.

use std::fmt;

/// The gRPC metadata key under which the server names a failure's kind (see `ferry.proto`).
pub const METADATA_KEY: &str = "ferry-error-kind";

/// The gRPC metadata keys under which the server names what a `not_found` failure is about:
/// its kind (`queue`, `topic`) and its name, so that a client says which without parsing
/// the message.
pub const MISSING_KIND_METADATA_KEY: &str = "ferry-missing-kind";
/// See [`MISSING_KIND_METADATA_KEY`].
pub const MISSING_NAME_METADATA_KEY: &str = "ferry-missing-name";

/// What kind of failure an error is. Matching on it is exhaustive on purpose: a new kind
/// does not compile anywhere until every front end has decided what it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A queue, topic, group, partition or message the caller named does not exist.
    NotFound,
    /// A queue or topic of that name exists already.
    AlreadyExists,
    /// The call conflicts with what exists: deleting a queue another dead-letters into or a
    /// topic with subscriptions, shrinking a topic, redriving from a queue that is no
    /// dead-letter queue. The caller must change what exists first.
    Conflict,
    /// The delivery the caller settles is no longer its own: the lease ended, or the message
    /// was settled through another delivery.
    StaleLease,
    /// The caller acted on a view the broker has moved past: a group membership or a
    /// partition ownership that ended, an offset behind the committed one, a producer
    /// sequence out of order. The caller refreshes its view and tries again.
    Fenced,
    /// The request is malformed or breaks a rule (names, settings, headers, limits).
    Invalid,
    /// A message's payload does not match the schema subject its queue or topic requires:
    /// the producer must send data written with a registered schema of that subject.
    SchemaViolation,
    /// A position outside what a topic partition holds.
    OutOfRange,
    /// A payload or a batch over the size limit.
    TooLarge,
    /// The queue is at its length limit and its overflow policy refuses publishes.
    Full,
    /// The broker's disk has no room beyond its reserve; publishes wait for space.
    DiskFull,
    /// The broker cannot serve the call now: a failed or unreadable store, a poisoned queue.
    Unavailable,
    /// The caller is not known: no token, or one the server does not know. Raised by the
    /// server's front ends, never by the broker.
    Unauthenticated,
    /// The caller is known but may not do this. Raised by the server's front ends, never by
    /// the broker.
    PermissionDenied,
}

impl ErrorKind {
    /// Every kind, for tests and tables that must cover them all.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::Conflict,
        ErrorKind::StaleLease,
        ErrorKind::Fenced,
        ErrorKind::Invalid,
        ErrorKind::SchemaViolation,
        ErrorKind::OutOfRange,
        ErrorKind::TooLarge,
        ErrorKind::Full,
        ErrorKind::DiskFull,
        ErrorKind::Unavailable,
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
    ];

    /// The kind's name on the wire (the gRPC `ferry-error-kind` metadata): snake_case and
    /// stable; kinds may be added, never renamed.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::Conflict => "conflict",
            ErrorKind::StaleLease => "stale_lease",
            ErrorKind::Fenced => "fenced",
            ErrorKind::Invalid => "invalid",
            ErrorKind::SchemaViolation => "schema_violation",
            ErrorKind::OutOfRange => "out_of_range",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Full => "full",
            ErrorKind::DiskFull => "disk_full",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::PermissionDenied => "permission_denied",
        }
    }

    /// The kind a wire name stands for; `None` for a name this build does not know (one
    /// from a newer server), so the caller falls back to the protocol's own code.
    pub fn from_wire(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }

    /// Whether the same call may succeed later without the caller changing it.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ErrorKind::Full | ErrorKind::DiskFull | ErrorKind::Unavailable
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_wire_name_and_reads_back() {
        let names: std::collections::HashSet<_> =
            ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        for kind in ErrorKind::ALL {
            assert!(
                kind.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_')
            );
            assert_eq!(ErrorKind::from_wire(kind.as_str()), Some(kind));
        }
        assert_eq!(ErrorKind::from_wire("a_kind_from_a_newer_server"), None);
    }

    #[test]
    fn only_waiting_helps_with_transient_kinds() {
        let transient: Vec<_> = ErrorKind::ALL
            .into_iter()
            .filter(|k| k.is_transient())
            .collect();
        assert_eq!(
            transient,
            [ErrorKind::Full, ErrorKind::DiskFull, ErrorKind::Unavailable]
        );
    }
}
