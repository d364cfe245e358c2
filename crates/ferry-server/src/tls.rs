//! TLS on both listeners: the [`TlsConfig`], and the acceptor each listener takes from it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::ServeError;

/// How long a client has to finish its TLS handshake before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// ALPN of the gRPC listener.
pub(crate) const ALPN_GRPC: &[u8] = b"h2";
/// ALPN of the HTTP listener (HTTP/1.1 only: the HTTP API is served by hyper's http1).
pub(crate) const ALPN_HTTP: &[u8] = b"http/1.1";

/// A server certificate chain and its private key, checked to fit each other
/// ([`Server::tls`](crate::Server::tls)): one for both listeners, with ALPN `h2` on the
/// gRPC listener and `http/1.1` on the HTTP one.
///
/// The handshake happens after a connection is accepted and admitted
/// ([`Server::max_connections`](crate::Server::max_connections)), so a connection over the
/// limit is refused in its own protocol as without TLS, and in a task of its own: a client
/// that stalls in its handshake holds its permit for at most [`HANDSHAKE_TIMEOUT`] and
/// never delays the accepting of others.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsConfig { .. }")
    }
}

fn invalid(problem: impl Into<String>) -> ServeError {
    ServeError::Tls(problem.into())
}

impl TlsConfig {
    /// Reads the certificate chain (PEM, the server's certificate first, then any
    /// intermediates) and the private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<TlsConfig, ServeError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| ServeError::TlsFile {
                path: path.to_owned(),
                source,
            })
        };
        let (cert_pem, key_pem) = (read(cert)?, read(key)?);
        TlsConfig::from_pem(&cert_pem, &key_pem).map_err(|e| match e {
            ServeError::Tls(problem) => invalid(format!(
                "{problem} (certificate {}, key {})",
                cert.display(),
                key.display()
            )),
            other => other,
        })
    }

    /// The same from PEM text in memory.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> Result<TlsConfig, ServeError> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("the certificate chain is not valid PEM: {e}")))?;
        if certs.is_empty() {
            return Err(invalid(
                "the certificate file holds no `BEGIN CERTIFICATE` block",
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
            invalid(format!(
                "the key file holds no private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"
            ))
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| {
                invalid(format!(
                    "the certificate and key cannot be used together: {e}"
                ))
            })?;
        Ok(TlsConfig {
            config: Arc::new(config),
        })
    }

    /// An acceptor offering `alpn` as the only application protocol.
    pub(crate) fn acceptor(&self, alpn: &[u8]) -> TlsAcceptor {
        let mut config = (*self.config).clone();
        config.alpn_protocols = vec![alpn.to_vec()];
        TlsAcceptor::from(Arc::new(config))
    }
}
