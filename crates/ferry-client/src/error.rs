//! What the client fails with.

use tonic::Code;

pub use ferry_error_kind::{ErrorKind, METADATA_KEY as ERROR_KIND_METADATA};
use ferry_error_kind::{MISSING_KIND_METADATA_KEY, MISSING_NAME_METADATA_KEY};

/// What a `not_found` answer is about, as the server names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// `queue` or `topic`.
    pub kind: String,
    pub name: String,
}

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
    /// The server could not be reached, or the TLS handshake with it failed. `url` is the
    /// address as the caller gave it; `reason` is the root cause (refused, a name that does
    /// not resolve, timed out, a TLS failure) from `error`'s sources, which tonic's own
    /// text ("transport error") leaves out. `error` is no `source`: its text is in the
    /// message already.
    #[error("could not connect to {url}: {reason}")]
    Connect {
        url: String,
        reason: String,
        error: tonic::transport::Error,
    },
    /// The TLS handshake failed for a reason the client can name: `failure` says what is
    /// wrong and what fixes it; the rustls error is in `source`'s sources.
    #[error("TLS with {url} failed: {failure}")]
    Tls {
        url: String,
        failure: TlsFailure,
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
        /// What is missing, when the server says (a `not_found` queue or topic).
        missing: Option<Missing>,
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

    /// What a `not_found` answer is about, when the server named it.
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            ClientError::Server { missing, .. } => missing.as_ref(),
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

/// The texts of `error`'s sources, outermost first, each once: a connection failure's
/// reason sits under layers that say only "transport error" or "client error".
pub(crate) fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = error.source();
    while let Some(cause) = next {
        let part = cause.to_string();
        if !text.ends_with(&part) && !part.is_empty() {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        next = cause.source();
    }
    if text.is_empty() {
        error.to_string()
    } else {
        text
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
        // A channel reconnecting after its first connection (the server restarted with
        // another certificate) fails its handshake here rather than in `connect`.
        if let Some(failure) = tls_failure(&status, "") {
            message = format!("TLS with the server failed: {failure}");
        }
        let kind = status
            .metadata()
            .get(ERROR_KIND_METADATA)
            .and_then(|value| value.to_str().ok())
            .and_then(ErrorKind::from_wire);
        let text = |key: &str| {
            status
                .metadata()
                .get(key)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let missing = text(MISSING_KIND_METADATA_KEY)
            .zip(text(MISSING_NAME_METADATA_KEY))
            .map(|(kind, name)| Missing { kind, name });
        ClientError::Server {
            code: status.code(),
            message,
            kind,
            missing,
        }
    }
}

/// Why the server's certificate or the TLS handshake was refused, each with what fixes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The server presents a CA certificate (basicConstraints CA:TRUE) as its own: a
    /// self-signed certificate made with `openssl req -x509` and given as the CA too.
    #[error(
        "the server's certificate is a CA certificate used as its own (self-signed): make a \
         CA and a server certificate signed by it (see the README's Security section)"
    )]
    CaUsedAsEndEntity,
    /// An X.509 v1 certificate (`openssl x509 -req` without `-extfile`): no subjectAltName,
    /// no basicConstraints, which the checks need.
    #[error(
        "the server's certificate is X.509 v1: it needs v3 extensions (subjectAltName, \
         basicConstraints CA:FALSE); sign it with an extensions file (see the README's \
         Security section)"
    )]
    UnsupportedCertVersion,
    /// The CA given does not sign the server's certificate (none of its name, or one of
    /// its name with another key).
    #[error("the server's certificate is not signed by the CA given: give the CA that signed it")]
    UnknownIssuer,
    /// The certificate does not name `host`, the host dialled (or the TLS domain set).
    #[error(
        "the server's certificate is not valid for {host:?}, the host dialled: its \
         subjectAltName has {}; dial a name it has, or add {host:?} to its subjectAltName",
        if presented.is_empty() { "no name that matches".to_owned() } else { presented.join(", ") }
    )]
    NotValidForName {
        host: String,
        presented: Vec<String>,
    },
    /// The server speaks none of the client's application protocols (ALPN `h2`): another
    /// TLS service, or Ferry's HTTP port (`http/1.1`) rather than its gRPC one.
    #[error(
        "the server speaks no protocol the client offers (ALPN h2): this port may not be a \
         Ferry gRPC port (the HTTP port is another, by default 7071 beside 7070)"
    )]
    NoApplicationProtocol,
}

/// The TLS failure in `error`'s sources, if there is one the client can name. `host` is the
/// name the client checked the certificate against, for a mismatch without its context.
pub(crate) fn tls_failure(
    error: &(dyn std::error::Error + 'static),
    host: &str,
) -> Option<TlsFailure> {
    use rustls::{AlertDescription, CertificateError};
    let mut next = Some(error);
    while let Some(cause) = next {
        // An I/O error's `source` skips the error it wraps, where rustls puts its own.
        let inner = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        for candidate in [Some(cause), inner].into_iter().flatten() {
            let Some(tls) = candidate.downcast_ref::<rustls::Error>() else {
                continue;
            };
            let failure = match tls {
                rustls::Error::InvalidCertificate(certificate) => match certificate {
                    // A bad signature here is a CA of the issuer's name but another key:
                    // as much not the signer as a CA of another name.
                    CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                        TlsFailure::UnknownIssuer
                    }
                    CertificateError::NotValidForName => TlsFailure::NotValidForName {
                        host: host.to_owned(),
                        presented: Vec::new(),
                    },
                    CertificateError::NotValidForNameContext {
                        expected,
                        presented,
                    } => TlsFailure::NotValidForName {
                        host: expected.to_str().into_owned(),
                        presented: presented.clone(),
                    },
                    // rustls passes these checker verdicts on as they are.
                    CertificateError::Other(other) => {
                        match other.0.downcast_ref::<webpki::Error>()? {
                            webpki::Error::CaUsedAsEndEntity => TlsFailure::CaUsedAsEndEntity,
                            webpki::Error::UnsupportedCertVersion => {
                                TlsFailure::UnsupportedCertVersion
                            }
                            _ => return None,
                        }
                    }
                    _ => return None,
                },
                rustls::Error::NoApplicationProtocol
                | rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol) => {
                    TlsFailure::NoApplicationProtocol
                }
                _ => return None,
            };
            return Some(failure);
        }
        next = cause.source();
    }
    None
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;
