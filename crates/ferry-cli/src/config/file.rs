//! The config file's sections as TOML holds them. Each setting is optional, so that
//! resolving can tell a value the file sets from one it leaves to a variable or the
//! default; unknown keys are refused, so that a misspelt one is an error, not a default.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub grpc: Grpc,
    #[serde(default)]
    pub http: Http,
    #[serde(default)]
    pub data: Data,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub tls: Tls,
    #[serde(default)]
    pub redaction: RedactionSection,
    #[serde(default)]
    pub aws: Aws,
    #[serde(default)]
    pub kafka: Kafka,
    #[serde(default)]
    pub pubsub: PubSub,
    pub auth: Option<Auth>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grpc {
    pub addr: Option<SocketAddr>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http {
    pub addr: Option<SocketAddr>,
    pub enabled: Option<bool>,
    pub metrics_auth: Option<bool>,
}

/// The Kafka endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kafka {
    pub addr: Option<SocketAddr>,
    pub enabled: Option<bool>,
    /// `host:port`, checked when resolving.
    pub advertised: Option<String>,
    pub default_partitions: Option<u32>,
    pub auto_create_topics: Option<bool>,
    pub max_frame_bytes: Option<usize>,
    pub group_min_session_timeout_ms: Option<i32>,
    pub group_max_session_timeout_ms: Option<i32>,
    pub group_initial_rebalance_delay_ms: Option<i32>,
    /// TLS on the Kafka listener with `[tls]`'s certificate; default: on with `[tls]`.
    pub tls: Option<bool>,
    /// SASL (with `[auth]`) without TLS on an address beyond loopback: tokens in the clear.
    pub allow_plaintext_sasl: Option<bool>,
}

/// The Google Cloud Pub/Sub endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PubSub {
    pub addr: Option<SocketAddr>,
    pub enabled: Option<bool>,
}

/// The Amazon SQS endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aws {
    pub addr: Option<SocketAddr>,
    pub enabled: Option<bool>,
    pub account_id: Option<String>,
    pub region: Option<String>,
    #[serde(default)]
    pub credentials: Vec<AwsCredential>,
}

/// One `[[aws.credentials]]` entry: an access key requests may be signed with. The secret
/// comes from exactly one of the three `secret_access_key*` keys.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsCredential {
    pub access_key_id: String,
    /// The secret itself, in the file.
    pub secret_access_key: Option<String>,
    /// The name of an environment variable holding the secret.
    pub secret_access_key_env: Option<String>,
    /// A file holding the secret (one line).
    pub secret_access_key_file: Option<PathBuf>,
    pub name: Option<String>,
    /// The account the key belongs to; absent: `aws.account_id`. A key of another account
    /// reaches this account's queues and topics only as their policies allow.
    pub account_id: Option<String>,
    pub permissions: Vec<String>,
}

// By hand, so that printing a parsed config never prints a secret.
impl std::fmt::Debug for AwsCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredential")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key_env", &self.secret_access_key_env)
            .field("secret_access_key_file", &self.secret_access_key_file)
            .field("name", &self.name)
            .field("account_id", &self.account_id)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Data {
    pub dir: Option<PathBuf>,
    pub disk_reserve_mib: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_batch: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_streams_per_connection: Option<usize>,
    pub max_read_bytes: Option<usize>,
}

/// The server's certificate chain and private key, PEM files.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// The headers whose values dead-letter peeks mask.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionSection {
    pub headers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    #[serde(default)]
    pub tokens: Vec<Token>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    pub name: String,
    pub sha256: String,
    pub permissions: Vec<String>,
    pub publish_rate: Option<u32>,
    /// An environment variable holding the token itself, for Kafka's SCRAM (which needs
    /// keys derived from the secret, not its hash).
    pub scram_secret_env: Option<String>,
    /// A file holding the token itself (one line), for Kafka's SCRAM.
    pub scram_secret_file: Option<PathBuf>,
}

pub fn parse_file(text: &str) -> anyhow::Result<ConfigFile> {
    toml::from_str(text).context("not a valid Ferry config")
}
