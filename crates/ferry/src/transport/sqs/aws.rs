//! The SQS and SNS clients, and their errors as the SDK's.

use std::fmt::Debug;

use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use super::capabilities::NAME;
use super::url::Endpoint;
use crate::error::Error;

/// The SDK's own HTTP client: plain HTTP for local engines, rustls (ring) for HTTPS.
fn http_client(endpoint: &Endpoint) -> aws_sdk_sqs::config::SharedHttpClient {
    use aws_smithy_http_client::tls;
    let builder = aws_smithy_http_client::Builder::new();
    match endpoint.url.as_deref() {
        Some(url) if url.starts_with("http://") => builder.build_http(),
        _ => builder
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https(),
    }
}

pub(super) fn clients(endpoint: &Endpoint) -> (aws_sdk_sqs::Client, aws_sdk_sns::Client) {
    let http = http_client(endpoint);
    let sqs = {
        use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
        let mut config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(endpoint.region.clone()))
            .credentials_provider(Credentials::new(
                &endpoint.access_key,
                &endpoint.secret_key,
                endpoint.session_token.clone(),
                None,
                "ferry-url-or-environment",
            ))
            .http_client(http.clone());
        if let Some(url) = &endpoint.url {
            config = config.endpoint_url(url);
        }
        aws_sdk_sqs::Client::from_conf(config.build())
    };
    let sns = {
        use aws_sdk_sns::config::{BehaviorVersion, Credentials, Region};
        let mut config = aws_sdk_sns::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(endpoint.region.clone()))
            .credentials_provider(Credentials::new(
                &endpoint.access_key,
                &endpoint.secret_key,
                endpoint.session_token.clone(),
                None,
                "ferry-url-or-environment",
            ))
            .http_client(http);
        if let Some(url) = &endpoint.url {
            config = config.endpoint_url(url);
        }
        aws_sdk_sns::Client::from_conf(config.build())
    };
    (sqs, sns)
}

/// A failed call: the service's error code, when it answered one, and the error as the SDK
/// reports it when nothing more specific applies.
pub(super) struct Failure {
    pub code: String,
    pub error: Error,
}

impl Failure {
    /// The code is one of `codes`.
    pub fn is(&self, codes: &[&str]) -> bool {
        codes.contains(&self.code.as_str())
    }

    /// The error, with the codes every call shares classified.
    pub fn into_error(self) -> Error {
        let message = self.error.to_string();
        match self.code.as_str() {
            "InvalidClientTokenId"
            | "SignatureDoesNotMatch"
            | "UnrecognizedClientException"
            | "MissingAuthenticationToken"
            | "IncompleteSignature"
            | "InvalidSecurity" => Error::unauthorized(message),
            "AccessDenied" | "AccessDeniedException" | "AuthorizationError" => {
                Error::forbidden(message)
            }
            "InvalidParameterValue"
            | "InvalidParameter"
            | "InvalidMessageContents"
            | "MessageTooLong"
            | "InvalidAttributeValue"
            | "InvalidAttributeName"
            | "BatchRequestTooLong"
            | "ValidationError" => Error::invalid("request", message),
            _ => self.error,
        }
    }
}

/// Any SQS or SNS call's error as a [`Failure`].
pub(super) fn failure<E, R>(e: SdkError<E, R>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: Debug + Send + Sync + 'static,
{
    // The query protocol's codes carry SQS's prefix; the JSON protocol's do not.
    let code = e.code().unwrap_or_default();
    let code = code
        .strip_prefix("AWS.SimpleQueueService.")
        .unwrap_or(code)
        .to_owned();
    let message = match (e.code(), e.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => DisplayErrorContext(&e).to_string(),
    };
    Failure {
        code,
        error: Error::Transport {
            transport: NAME,
            message,
            source: Some(Box::new(e)),
        },
    }
}

/// Codes for a queue that does not exist (the JSON and query protocols' spellings, SQS's
/// prefix taken off).
pub(super) const NO_QUEUE: &[&str] = &["QueueDoesNotExist", "NonExistentQueue"];

/// Codes for a receipt handle no longer good: the lease ran out or the message is gone.
pub(super) const NOT_HELD: &[&str] = &[
    "ReceiptHandleIsInvalid",
    "MessageNotInflight",
    "InvalidParameterValue",
];

/// Codes for a queue name taken with other attributes.
pub(super) const NAME_TAKEN: &[&str] = &["QueueAlreadyExists", "QueueNameExists"];

/// Codes for a topic that does not exist.
pub(super) const NO_TOPIC: &[&str] = &["NotFound", "NotFoundException"];
