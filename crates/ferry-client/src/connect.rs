//! How a [`Client`](crate::Client) reaches its server: the address, TLS, and the API
//! token sent with every call.
//!
//! Addresses are `ferry://host:port` (plaintext; `http://` is the same) or
//! `ferrys://host:port` (TLS; `https://` is the same). TLS needs the CA certificate that
//! signed the server's ([`ConnectOptions::tls_ca_pem`]): this client trusts no system
//! roots. Given a CA, a `ferry://` address is reached over TLS too; an `http://` one is
//! refused, being plaintext by name. The server's certificate must name the host of the
//! address (a DNS name or an IP address), unless [`ConnectOptions::tls_domain`] says
//! which name to expect.

use std::fmt;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use crate::error::{ClientError, Result};

/// Options of [`Client::connect_with`](crate::Client::connect_with).
///
/// ```no_run
/// # async fn run() -> ferry_client::Result<()> {
/// use ferry_client::{Client, ConnectOptions};
/// let options = ConnectOptions::new().token("s3cret");
/// let client = Client::connect_with("ferry://127.0.0.1:7070", options).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct ConnectOptions {
    token: Option<String>,
    tls_ca: Option<Vec<u8>>,
    tls_domain: Option<String>,
}

impl ConnectOptions {
    pub fn new() -> ConnectOptions {
        ConnectOptions::default()
    }

    /// Send `authorization: Bearer <token>` with every call, streams included.
    pub fn token(mut self, token: impl Into<String>) -> ConnectOptions {
        self.token = Some(token.into());
        self
    }

    /// Connect over TLS, trusting the CA certificate(s) in `pem` (PEM text).
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> ConnectOptions {
        self.tls_ca = Some(pem.into());
        self
    }

    /// The name the server's certificate must carry, when it is not the address's host.
    pub fn tls_domain(mut self, name: impl Into<String>) -> ConnectOptions {
        self.tls_domain = Some(name.into());
        self
    }

    /// `endpoint` with TLS on when `target` asks for it.
    /// The name the server's certificate is checked against: the TLS domain if set, else
    /// the host of the address.
    pub(crate) fn tls_host(&self, target: &Target) -> String {
        if let Some(domain) = &self.tls_domain {
            return domain.clone();
        }
        let authority = target
            .uri
            .split_once("://")
            .map_or(&*target.uri, |(_, a)| a);
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host);
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()
    }

    pub(crate) fn apply_tls(&self, endpoint: Endpoint, target: &Target) -> Result<Endpoint> {
        if !target.tls {
            return Ok(endpoint);
        }
        let bad_ca = |problem: String| ClientError::BadTls(problem);
        let ca = self
            .tls_ca
            .as_deref()
            .ok_or_else(|| bad_ca("no CA certificate given".into()))?;
        if !ca.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(bad_ca(
                "the CA file holds no `BEGIN CERTIFICATE` block (PEM expected)".into(),
            ));
        }
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some(domain) = &self.tls_domain {
            config = config.domain_name(domain.clone());
        }
        endpoint
            .tls_config(config)
            .map_err(|e| bad_ca(e.to_string()))
    }

    /// The interceptor that adds the token, checked once here rather than on each call.
    pub(crate) fn credentials(&self) -> Result<Credentials> {
        let Some(token) = &self.token else {
            return Ok(Credentials(None));
        };
        if token.is_empty() {
            return Err(ClientError::BadToken("the token is empty"));
        }
        let printable = token.chars().all(|c| c.is_ascii_graphic());
        let value = printable
            .then(|| MetadataValue::try_from(format!("Bearer {token}")).ok())
            .flatten();
        let Some(mut value) = value else {
            return Err(ClientError::BadToken(
                "a token is printable ASCII, without spaces or control characters",
            ));
        };
        value.set_sensitive(true);
        Ok(Credentials(Some(value)))
    }
}

/// The token never shows in debug output.
impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls_ca", &self.tls_ca.as_ref().map(|pem| pem.len()))
            .field("tls_domain", &self.tls_domain)
            .finish()
    }
}

/// Adds the API token, if any, to the metadata of every call.
#[derive(Clone)]
pub struct Credentials(Option<MetadataValue<Ascii>>);

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Credentials(<token>)"
        } else {
            "Credentials(none)"
        })
    }
}

impl Interceptor for Credentials {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Where to connect: the endpoint URI made of the user's URL, and whether over TLS.
pub(crate) struct Target {
    pub(crate) uri: String,
    pub(crate) tls: bool,
}

impl Target {
    pub(crate) fn parse(url: &str, options: &ConnectOptions) -> Result<Target> {
        let bad = |problem: &str| ClientError::BadUrl {
            url: url.to_owned(),
            problem: problem.to_owned(),
        };
        let has_ca = options.tls_ca.is_some();
        let (rest, tls) = if let Some(rest) = url.strip_prefix("ferry://") {
            (rest, has_ca)
        } else if let Some(rest) = url.strip_prefix("http://") {
            if has_ca {
                return Err(bad(
                    "http:// is plaintext but a CA was given: use ferrys://host:port for TLS",
                ));
            }
            (rest, false)
        } else if let Some(rest) = url
            .strip_prefix("ferrys://")
            .or_else(|| url.strip_prefix("https://"))
        {
            if !has_ca {
                return Err(ClientError::BadTls(format!(
                    "{url} is over TLS, which needs the CA certificate that signed the \
                     server's"
                )));
            }
            (rest, true)
        } else {
            return Err(bad("unknown scheme"));
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(bad("expected host:port with no path"));
        }
        let scheme = if tls { "https" } else { "http" };
        Ok(Target {
            uri: format!("{scheme}://{authority}"),
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(url: &str) -> Result<String> {
        Target::parse(url, &ConnectOptions::default()).map(|t| t.uri)
    }

    #[test]
    fn server_addresses() {
        assert_eq!(
            uri("ferry://127.0.0.1:7070").unwrap(),
            "http://127.0.0.1:7070"
        );
        assert_eq!(uri("http://localhost:1/").unwrap(), "http://localhost:1");
        for bad in ["nats://x:1", "ferry://", "ferry://h:1/path"] {
            assert!(matches!(uri(bad), Err(ClientError::BadUrl { .. })), "{bad}");
        }
    }

    #[test]
    fn a_ca_turns_tls_on_and_ferrys_needs_one() {
        let with_ca = ConnectOptions::new().tls_ca_pem("pem");
        let tls = |url: &str| Target::parse(url, &with_ca).map(|t| (t.uri, t.tls));
        assert_eq!(tls("ferrys://h:1").unwrap(), ("https://h:1".into(), true));
        assert_eq!(tls("https://h:1").unwrap(), ("https://h:1".into(), true));
        assert_eq!(tls("ferry://h:1").unwrap(), ("https://h:1".into(), true));
        assert!(tls("http://h:1").is_err(), "plaintext by name");
        let e = uri("ferrys://h:1").unwrap_err();
        assert!(matches!(e, ClientError::BadTls(_)), "{e}");
        assert!(e.to_string().contains("CA"), "{e}");
    }

    #[test]
    fn a_token_is_checked_and_never_shown() {
        let options = ConnectOptions::new().token("s3cret");
        assert!(!format!("{options:?}").contains("s3cret"));
        let credentials = options.credentials().unwrap();
        assert!(!format!("{credentials:?}").contains("s3cret"));
        let mut credentials = credentials;
        let request = credentials.call(tonic::Request::new(())).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer s3cret"
        );
        for bad in ["", "two words", "tab\there", "é"] {
            let e = ConnectOptions::new().token(bad).credentials().unwrap_err();
            assert!(matches!(e, ClientError::BadToken(_)), "{bad:?}");
        }
    }
}
