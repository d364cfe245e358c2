//! How a [`Client`](crate::Client) reaches its server: the address, and the API token
//! sent with every call.

use std::fmt;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;

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

/// Where to connect: the endpoint URI made of the user's URL.
pub(crate) struct Target {
    pub(crate) uri: String,
}

impl Target {
    /// `ferry://host:port` or `http://host:port` → `http://host:port`.
    pub(crate) fn parse(url: &str, _options: &ConnectOptions) -> Result<Target> {
        let bad = |problem: &str| ClientError::BadUrl {
            url: url.to_owned(),
            problem: problem.to_owned(),
        };
        let rest = if let Some(rest) = url.strip_prefix("ferry://") {
            rest
        } else if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") || url.starts_with("ferrys://") {
            return Err(bad("TLS is not supported by this client yet"));
        } else {
            return Err(bad("unknown scheme"));
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(bad("expected host:port with no path"));
        }
        Ok(Target {
            uri: format!("http://{authority}"),
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
