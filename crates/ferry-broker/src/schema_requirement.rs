//! A queue's or topic's schema requirement: the registry subject every message published to
//! it must match, and the port through which the broker asks whether one does.
//!
//! The broker does not know schemas: it depends on nothing above storage (see
//! DESIGN.md's layers). Whoever opens it (the server, over its schema registry) hands it a
//! [`PayloadValidator`] in [`BrokerConfig`](crate::BrokerConfig), and the broker calls it at
//! every publish entry point, on the caller's task and before anything is stored, so a
//! refused message — or a batch with one — stores nothing and costs the engine nothing.
//! A channel that requires a subject on a broker opened without a validator refuses every
//! publish ([`BrokerError::NoPayloadValidator`]) rather than store unchecked data.
//!
//! Only what producers publish is checked. Messages the broker moves itself — a redrive
//! from a dead-letter queue, a link's copy into its queue — were published once already and
//! are not checked again, also when the requirement was set after they were published; a
//! requirement applies from the next publish, as every spec change does.

use std::fmt;

use crate::error::{BrokerError, Result};
use crate::message::OutgoingMessage;

/// The longest subject a requirement may name, in bytes: Confluent's registry takes names of
/// any length, but a spec line and every error message carry it.
pub const MAX_SCHEMA_SUBJECT_BYTES: usize = 255;

/// Why a message does not match the subject its channel requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaRejection {
    /// The path to the first field that fails (`order.items[2].sku`); empty when the
    /// payload as a whole is wrong (truncated, no schema named, an unknown schema id).
    pub field: String,
    /// What is wrong, for people.
    pub reason: String,
}

/// Checks a message against a schema subject: the broker's port to a schema registry.
/// Called on the publishing caller's task, once per message, before anything is stored; it
/// must not block for long (a registry answers from memory).
pub trait PayloadValidator: fmt::Debug + Send + Sync {
    /// `Ok` when `message` (its payload, and its headers where the schema is named by one)
    /// matches a live schema of `subject`.
    fn validate(
        &self,
        subject: &str,
        message: &OutgoingMessage,
    ) -> std::result::Result<(), SchemaRejection>;
}

/// What is wrong with `subject` as a requirement, if anything.
pub(crate) fn subject_problem(subject: &str) -> Option<String> {
    if subject.is_empty() {
        return Some("must not be empty; use None for no schema requirement".to_owned());
    }
    if subject.len() > MAX_SCHEMA_SUBJECT_BYTES {
        return Some(format!(
            "is {} bytes long; a subject may be at most {MAX_SCHEMA_SUBJECT_BYTES} bytes",
            subject.len()
        ));
    }
    if subject.chars().any(char::is_control) {
        return Some(format!("{subject:?} has a control character"));
    }
    None
}

/// Checks every message of a publish against `subject` (when the channel requires one)
/// before any is stored: the first refusal fails the whole publish.
pub(crate) fn check_messages(
    validator: Option<&dyn PayloadValidator>,
    subject: Option<&str>,
    messages: &[OutgoingMessage],
) -> Result<()> {
    let Some(subject) = subject else {
        return Ok(());
    };
    let Some(validator) = validator else {
        return Err(BrokerError::NoPayloadValidator {
            subject: subject.to_owned(),
        });
    };
    for message in messages {
        validator
            .validate(subject, message)
            .map_err(|rejection| BrokerError::SchemaViolation {
                subject: subject.to_owned(),
                field: rejection.field,
                reason: rejection.reason,
            })?;
    }
    Ok(())
}
