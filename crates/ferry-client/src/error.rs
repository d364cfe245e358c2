//! What the client fails with.

use tonic::Code;

pub use ferry_error_kind::{ErrorKind, METADATA_KEY as ERROR_KIND_METADATA};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "{url:?} is not a server address: {problem} (use ferry://host:port, or ferrys://host:port for TLS)"
    )]
    BadUrl { url: String, problem: String },
    /// The API token given cannot be sent; the message says why (never the token).
    #[error("the API token cannot be used: {0}")]
    BadToken(&'static str),
    /// TLS was asked for but cannot be set up as given.
    #[error("TLS cannot be set up: {0}")]
    BadTls(String),
    /// The server could not be reached, or the TLS handshake with it failed; the
    /// reason (refused, timed out, an unknown issuer) is in the source's own sources.
    #[error("could not connect to {url}: {source}")]
    Connect {
        url: String,
        source: tonic::transport::Error,
    },
    /// The server answered with an error: `code` says what kind, `message` what and why,
    /// and `kind` the broker's classification when the server sent it (every broker error
    /// carries it; a failure of the connection itself has none).
    #[error("{message} ({code:?})")]
    Server {
        code: Code,
        message: String,
        kind: Option<ErrorKind>,
    },
    #[error("the client was closed")]
    Closed,
}

impl ClientError {
    /// Whether trying again may succeed: the server was unreachable or restarting, not
    /// refusing the request.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClientError::Server {
                code: Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded,
                ..
            } | ClientError::Connect { .. }
        )
    }

    /// The broker's classification of the failure, when the server sent one.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Server { kind, .. } => *kind,
            _ => None,
        }
    }

    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<tonic::Status> for ClientError {
    fn from(status: tonic::Status) -> Self {
        // A status made on this side of a broken connection says only "transport error";
        // the reason is in its sources.
        let mut message = status.message().to_owned();
        let mut source = std::error::Error::source(&status);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.ends_with(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        let kind = status
            .metadata()
            .get(ERROR_KIND_METADATA)
            .and_then(|value| value.to_str().ok())
            .and_then(ErrorKind::from_wire);
        ClientError::Server {
            code: status.code(),
            message,
            kind,
        }
    }
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;
