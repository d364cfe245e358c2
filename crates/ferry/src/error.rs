//! The SDK's one error type: every transport maps its engine's failures onto it, so an
//! application handles them the same way whatever the URL says.

use std::time::Duration;

/// What went wrong, and for whom to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The transport cannot do what was asked. Returned when the thing is declared or first
    /// asked for, never silently ignored.
    #[error("{transport} does not support {feature}: {why}")]
    Unsupported {
        transport: &'static str,
        feature: String,
        why: String,
    },
    #[error("bad URL `{url}`: {problem}")]
    BadUrl { url: String, problem: String },
    /// A name, a setting or a message the SDK or the engine refuses; nothing changed.
    #[error("invalid {what}: {problem}")]
    Invalid { what: String, problem: String },
    #[error("{kind} `{name}` does not exist")]
    NotFound { kind: &'static str, name: String },
    /// The call conflicts with what exists: a declaration with other settings than the
    /// existing one, a delete of something others depend on (a topic with subscriptions),
    /// a duplicate key. Change what exists first; retrying alone will not help.
    #[error("{kind} `{name}` conflicts with what exists: {problem}")]
    Conflict {
        kind: &'static str,
        name: String,
        problem: String,
    },
    /// The engine does not know who is calling: no credentials, or ones it refuses (an
    /// unknown token, a wrong password, a user that does not exist). Fix the credentials;
    /// retrying with the same ones will not help.
    #[error("not authenticated: {message}")]
    Unauthorized { message: String },
    /// The engine knows the caller, who may not do this (a token or user without the
    /// permission). Grant it or use other credentials; retrying will not help.
    #[error("forbidden: {message}")]
    Forbidden { message: String },
    /// The destination is at its length limit, or the broker's disk is full, and refuses
    /// more; back off and retry.
    #[error("full: {message}")]
    Full { message: String },
    /// The delivery was settled already (ack, nack and reject are final), or its lease ran
    /// out and it was handed to another consumer.
    #[error("delivery {id} is no longer held: {why}")]
    NotHeld { id: String, why: String },
    /// The consumer, publisher or connection was closed.
    #[error("closed")]
    Closed,
    #[error("the engine gave no answer within {0:?}")]
    Timeout(Duration),
    /// A payload that does not decode as the type asked for, or a value that does not encode.
    #[error("payload: {0}")]
    Payload(#[from] serde_json::Error),
    /// The engine or the connection to it failed; retrying may help.
    #[error("{transport}: {message}")]
    Transport {
        transport: &'static str,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl Error {
    pub fn unsupported(
        transport: &'static str,
        feature: impl Into<String>,
        why: impl Into<String>,
    ) -> Error {
        Error::Unsupported {
            transport,
            feature: feature.into(),
            why: why.into(),
        }
    }

    pub fn invalid(what: impl Into<String>, problem: impl Into<String>) -> Error {
        Error::Invalid {
            what: what.into(),
            problem: problem.into(),
        }
    }

    /// An engine failure with its cause kept for `source()`.
    pub fn transport(
        transport: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Transport {
            transport,
            message: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Error {
        Error::Unauthorized {
            message: message.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Error {
        Error::Forbidden {
            message: message.into(),
        }
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Transport { .. } | Error::Timeout(_) | Error::Full { .. }
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
