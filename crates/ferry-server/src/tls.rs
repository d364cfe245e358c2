//! TLS on both listeners: the [`TlsConfig`], and the acceptor each listener takes from it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
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
            std::fs::read(path).map_err(|error| ServeError::TlsFile {
                path: path.to_owned(),
                error,
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
        check_server_certificate(&certs[0], &provider)?;
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| match e {
                // rustls words it from a client's side ("invalid peer certificate").
                rustls::Error::InvalidCertificate(problem) => {
                    invalid(format!("the server certificate is not usable: {problem:?}"))
                }
                e => invalid(format!(
                    "the certificate and key cannot be used together: {e}"
                )),
            })?;
        Ok(TlsConfig {
            config: Arc::new(config),
        })
    }

    /// The server configuration without ALPN, for a listener outside this crate that
    /// serves the same certificate (the Kafka endpoint: Kafka clients offer no ALPN).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config)
    }

    /// An acceptor offering `alpn` as the only application protocol.
    pub(crate) fn acceptor(&self, alpn: &[u8]) -> TlsAcceptor {
        let mut config = (*self.config).clone();
        config.alpn_protocols = vec![alpn.to_vec()];
        TlsAcceptor::from(Arc::new(config))
    }
}

/// What the server's certificate needs to fit, said at start: the checks every client
/// makes of it that do not depend on the client (which CA it trusts, which host it
/// dials). A certificate failing them would be refused by every client, at every
/// connection, with a client's words ("invalid peer certificate") on the client's side
/// only; here it stops `serve` with the fix.
fn check_server_certificate(
    leaf: &CertificateDer<'_>,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<(), ServeError> {
    let see = "(see the README's Security section)";
    let leaf_cert = match webpki::EndEntityCert::try_from(leaf) {
        Ok(cert) => cert,
        Err(webpki::Error::UnsupportedCertVersion) => {
            return Err(invalid(format!(
                "the server certificate is X.509 v1: it needs v3 extensions (subjectAltName, \
                 basicConstraints CA:FALSE, extendedKeyUsage serverAuth); sign it with an \
                 extensions file {see}"
            )));
        }
        Err(e) => {
            return Err(invalid(format!(
                "the server certificate cannot be read: {e:?}"
            )));
        }
    };
    // No trust anchor: the checks of the certificate itself (validity, basicConstraints,
    // extendedKeyUsage) come before the search for its issuer, which then fails as
    // expected and is not this check's business.
    let verdict = leaf_cert.verify_for_usage(
        provider.signature_verification_algorithms.all,
        &[],
        &[],
        UnixTime::now(),
        webpki::KeyUsage::server_auth(),
        None,
        None,
    );
    match verdict {
        Err(webpki::Error::CaUsedAsEndEntity) => Err(invalid(format!(
            "the server certificate is a CA certificate (basicConstraints CA:TRUE), as a \
             self-signed one made with `openssl req -x509` is: clients refuse it even when \
             they trust it as their CA; make a CA and a leaf signed by it {see}"
        ))),
        #[allow(deprecated)]
        Err(webpki::Error::RequiredEkuNotFound | webpki::Error::RequiredEkuNotFoundContext(_)) => {
            Err(invalid(format!(
                "the server certificate's extendedKeyUsage lacks serverAuth: clients refuse \
                 it; sign it with `extendedKeyUsage = serverAuth` {see}"
            )))
        }
        // Expiry and the rest are for clients to judge against their own clock and CA.
        _ => Ok(()),
    }
}

/// A failed handshake, said from the server's side when the cause is the server's
/// certificate or the port the client dialled; `None` for the rest (port scans, clients
/// that hang up), which are not worth an operator's attention. `alpn` is the listener's
/// application protocol.
pub(crate) fn handshake_failure(error: &std::io::Error, alpn: &[u8]) -> Option<String> {
    use rustls::AlertDescription as Alert;
    let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    let see = "(see the README's Security section)";
    match tls {
        rustls::Error::AlertReceived(Alert::UnknownCA) => Some(format!(
            "a client does not trust the server certificate: the CA it was given \
             (ferry --tls-ca, FERRY_TLS_CA) did not sign it; give clients the CA that did {see}"
        )),
        // What a client sends when a CA of the issuer's name has another key: a CA made
        // again under the same name, say, and given to clients in place of the one that
        // signed the certificate.
        rustls::Error::AlertReceived(Alert::DecryptError) => Some(format!(
            "a client could not verify the server certificate's signature: the CA it was \
             given (ferry --tls-ca, FERRY_TLS_CA) may be another of the same name; give \
             clients the CA that signed it {see}"
        )),
        rustls::Error::AlertReceived(
            alert @ (Alert::BadCertificate
            | Alert::UnsupportedCertificate
            | Alert::CertificateUnknown
            | Alert::CertificateExpired),
        ) => Some(format!(
            "a client refused the server certificate ({alert:?}): check that it has not \
             expired, that its subjectAltName names the host clients dial, and that it is \
             X.509 v3 and not a CA certificate {see}"
        )),
        rustls::Error::NoApplicationProtocol => Some(format!(
            "a client offered none of this port's application protocol ({}): it may be \
             dialling the wrong port (gRPC speaks h2, HTTP http/1.1)",
            String::from_utf8_lossy(alpn)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(error: rustls::Error) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, error)
    }

    #[test]
    fn handshake_failures_about_the_certificate_or_the_port_are_said_from_the_servers_side() {
        use rustls::AlertDescription as Alert;
        let said = |error| handshake_failure(&io(error), ALPN_GRPC).unwrap_or_default();
        let unknown_ca = said(rustls::Error::AlertReceived(Alert::UnknownCA));
        assert!(unknown_ca.contains("server certificate"), "{unknown_ca}");
        assert!(unknown_ca.contains("--tls-ca"), "{unknown_ca}");
        let same_name = said(rustls::Error::AlertReceived(Alert::DecryptError));
        assert!(
            same_name.contains("another of the same name"),
            "{same_name}"
        );
        let bad = said(rustls::Error::AlertReceived(Alert::BadCertificate));
        assert!(bad.contains("refused the server certificate"), "{bad}");
        assert!(bad.contains("subjectAltName"), "{bad}");
        let alpn = said(rustls::Error::NoApplicationProtocol);
        assert!(
            alpn.contains("(h2)") && alpn.contains("wrong port"),
            "{alpn}"
        );
        for text in [&unknown_ca, &same_name, &bad, &alpn] {
            assert!(!text.contains("peer"), "{text}");
        }
        assert_eq!(
            handshake_failure(&io(rustls::Error::DecryptError), ALPN_GRPC),
            None
        );
        let plain = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert_eq!(handshake_failure(&plain, ALPN_HTTP), None);
    }
}
