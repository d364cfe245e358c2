//! The server's configuration (`ferry serve`): listeners, data directory, limits, TLS,
//! header redaction and API tokens, from a TOML file (`--config FILE`, FERRY_CONFIG), `FERRY_<SECTION>_<KEY>`
//! environment variables and flags. Each value is the first found of: its flag, its
//! variable, the file, the default. Tokens come from the file only.
//!
//! ```toml
//! [grpc]
//! addr = "127.0.0.1:7070"   # FERRY_GRPC_ADDR, --grpc
//!
//! [http]
//! addr = "127.0.0.1:7071"   # FERRY_HTTP_ADDR, --http
//! enabled = true            # FERRY_HTTP_ENABLED, --no-http
//! metrics_auth = true       # FERRY_HTTP_METRICS_AUTH: /metrics needs a token with a
//!                           # `metrics` permission; default true with [auth], and only
//!                           # settable with it (without tokens everything is open)
//!
//! [data]
//! dir = "./ferry-data"      # FERRY_DATA_DIR, --data-dir
//! disk_reserve_mib = 64     # FERRY_DATA_DISK_RESERVE_MIB: free space publishes leave for
//!                           # acks and housekeeping; below it publishes are refused
//!
//! [limits]
//! max_batch = 1000          # FERRY_LIMITS_MAX_BATCH: messages per publish, default 1000
//! max_connections = 256     # FERRY_LIMITS_MAX_CONNECTIONS: per listener, default 256
//! max_streams_per_connection = 1024  # FERRY_LIMITS_MAX_STREAMS_PER_CONNECTION: calls at
//!                           # once on one gRPC connection (more wait), default 1024
//! max_read_bytes = 2097152  # FERRY_LIMITS_MAX_READ_BYTES: message bytes one dead-letter
//!                           # peek, topic read or group poll answers with, default 2 MiB
//!
//! [tls]                     # both listeners over TLS only
//! cert = "/etc/ferry/cert.pem"  # FERRY_TLS_CERT, --tls-cert: the server's certificate,
//!                               # then intermediates (PEM)
//! key = "/etc/ferry/key.pem"    # FERRY_TLS_KEY, --tls-key: PKCS#8, PKCS#1 or SEC1 (PEM)
//!
//! [aws]                     # the Amazon SQS, SNS and STS endpoint (see ferry_aws)
//! addr = "127.0.0.1:4566"   # FERRY_AWS_ADDR, --aws-addr
//! enabled = true            # FERRY_AWS_ENABLED, --no-aws (see "The AWS endpoint" below)
//! account_id = "000000000000"  # FERRY_AWS_ACCOUNT_ID: the account in queue URLs and ARNs
//! region = "us-east-1"      # FERRY_AWS_REGION: the region in ARNs
//!
//! [kafka]                   # the Kafka protocol over Ferry's topics (see ferry_kafka)
//! addr = "127.0.0.1:9092"   # FERRY_KAFKA_ADDR, --kafka-addr
//! enabled = true            # FERRY_KAFKA_ENABLED, --no-kafka (see "The Kafka endpoint" below)
//! advertised = "host:9092"  # FERRY_KAFKA_ADVERTISED: the host and port Metadata gives
//!                           # clients, default the listener's own address
//! default_partitions = 1    # FERRY_KAFKA_DEFAULT_PARTITIONS: of topics created by
//!                           # Metadata or by CreateTopics without a count
//! auto_create_topics = true # FERRY_KAFKA_AUTO_CREATE_TOPICS: Metadata creates what it is
//!                           # asked about (when the client allows it)
//! max_frame_bytes = 104857600  # FERRY_KAFKA_MAX_FRAME_BYTES: the largest request taken
//! group_min_session_timeout_ms = 6000     # FERRY_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS and
//! group_max_session_timeout_ms = 1800000  # _MAX_: the session timeouts a consumer group
//!                           # member may ask for (Kafka's group.min/max.session.timeout.ms)
//! group_initial_rebalance_delay_ms = 3000  # FERRY_KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS:
//!                           # how long an empty group's first rebalance waits for more
//!                           # members (Kafka's group.initial.rebalance.delay.ms; 0: none)
//! tls = true                # FERRY_KAFKA_TLS: TLS with [tls]'s certificate (default: on
//!                           # with [tls]; SSL, or SASL_SSL with [auth])
//! allow_plaintext_sasl = false  # FERRY_KAFKA_ALLOW_PLAINTEXT_SASL: with [auth] and no
//!                           # TLS, serve beyond loopback anyway (tokens in the clear)
//!
//! [pubsub]                  # the Google Cloud Pub/Sub API (see ferry_pubsub)
//! addr = "127.0.0.1:8085"   # FERRY_PUBSUB_ADDR, --pubsub-addr
//! enabled = true            # FERRY_PUBSUB_ENABLED, --no-pubsub (see "The Pub/Sub endpoint"
//!                           # below)
//!
//! [[aws.credentials]]       # an access key SigV4 requests must be signed with
//! access_key_id = "AKIAORDERS0000000001"
//! secret_access_key_env = "ORDERS_AWS_SECRET"  # or secret_access_key_file = "/run/…",
//!                           # or secret_access_key = "…" in the file itself: exactly one
//! name = "orders-service"   # optional: the IAM user name in ARNs (else the root)
//! account_id = "111111111111"  # optional: the key's account, default aws.account_id
//! permissions = ["publish:orders.*", "consume:orders.#"]
//!
//! [redaction]               # FERRY_REDACTION_HEADERS (comma-separated), --redact-header
//! headers = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"]
//!
//! [[auth.tokens]]
//! name = "orders-service"
//! sha256 = "9f86d0…"        # `ferry token hash TOKEN`; the token itself never goes here
//! permissions = ["publish:orders.*", "consume:orders.#", "dlq:orders.dlq"]
//! publish_rate = 500        # messages per second, optional
//! scram_secret_env = "ORDERS_TOKEN"  # optional: the token itself, for Kafka SCRAM (or
//!                           # scram_secret_file = "/run/…"); PLAIN needs neither
//! ```
//!
//! `redaction.headers` names the headers (any case) whose values dead-letter peeks show as
//! `***`, over gRPC (so in `ferry dlq list/peek`) and HTTP; the default is the list above.
//! `headers = []`, or `none` in the variable or the flag, shows every value. Consumers and
//! redrives always get the real headers.
//!
//! A permission is `<action>:<pattern>`: `publish`, `consume` (ordinary queues, topics),
//! `dead_letters` or `dlq` (peek, receive from and redrive dead-letter queues; `consume`
//! does not read them), `admin`; see `ferry_server::AuthConfig` for what each call needs.
//!
//! **The AWS endpoint.** With `[[aws.credentials]]` every SQS, SNS and STS request must be
//! signed (SigV4) with one of them, and each action needs the key's permissions on its
//! queue or topic (`ferry_aws`'s `auth/requirements.rs` has the table): such an endpoint is
//! served by default, on any address, beside `[auth]` — except with `[tls]`, as it speaks
//! plain HTTP: then it is off unless `aws.enabled = true` (signed requests, bodies in the
//! clear). Without credentials it is open — signatures are not checked — so it is off by
//! default with `[tls]` or `[auth]` (and `aws.enabled = true` with them is refused), and an
//! `aws.addr` beyond the loopback interface is refused. Credentials come from the file
//! only; their secrets never show in `ferry config check` or the logs.
//!
//! A credential's `account_id` (12 digits) says which account it belongs to. A key of
//! `aws.account_id` — the default — is governed by its `permissions`, and an explicit
//! `Deny` in a queue's or topic's `Policy` refuses it. A key of another account is a
//! cross-account caller, as in IAM: an action needs both its `permissions` (standing for
//! what its own account's identity policy grants it) and the queue's or topic's `Policy`
//! (AddPermission, SetQueueAttributes, SetTopicAttributes) to allow it; actions AWS keeps to
//! a resource's own account (SetQueueAttributes, DeleteQueue, tagging, …) are refused to
//! it, and lists show it nothing. Without credentials there is no caller to evaluate a
//! policy for: policies are validated and kept, and nothing is enforced.
//!
//! **The Kafka endpoint** authenticates with SASL when `[auth]` is configured: every
//! request but ApiVersions and the SASL handshake needs a token, given as PLAIN (user: the
//! token's name, password: the token) or SCRAM-SHA-256/512 (for tokens whose secret the
//! server is given with `scram_secret_env` or `scram_secret_file`; see
//! `kafka_security.rs`), and each API is held to the token's permissions. With `[tls]` the
//! Kafka listener speaks TLS with the same certificate (`kafka.tls`, default on with
//! `[tls]`; `kafka.tls = true` without `[tls]` is refused). An address beyond the loopback
//! interface is refused unless SASL is required and either TLS is on or
//! `kafka.allow_plaintext_sasl = true` says tokens may cross the network in the clear;
//! without `[auth]` the endpoint is open and stays on loopback.
//!
//! **The Pub/Sub endpoint** serves Google Cloud Pub/Sub's gRPC API for its clients'
//! `PUBSUB_EMULATOR_HOST`, by default at the emulator's own address, 127.0.0.1:8085. Like
//! Google's emulator it authenticates no one, so it is off by default with `[tls]` or
//! `[auth]` (`ferry serve` says so), asking for it beside them (an address from any layer,
//! or `pubsub.enabled = true`) is refused, and an address beyond the loopback interface is
//! refused.
//!
//! With an `[auth]` section every call needs `authorization: Bearer <token>` (except
//! `/healthz` and `/readyz`; `/metrics` too unless `http.metrics_auth = false`); without one the server is open and should listen
//! on the loopback interface only. Relative paths are taken from the working directory.
//! A variable set to the empty string counts as unset.

mod auth;
mod aws_credentials;
mod describe;
mod file;
mod kafka_security;
mod pubsub;
mod resolve;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ferry_server::{AuthConfig, Redaction, TlsConfig};

pub use describe::describe;
pub use file::{
    Auth, Aws, AwsCredential, ConfigFile, Data, Grpc, Http, Kafka, Limits, PubSub,
    RedactionSection, Tls, Token, parse_file,
};
pub use resolve::resolve;

// The data directory's default is public for the fuzz target, which checks a directory
// no layer sets against it; the addresses' are needed only in this module.
const DEFAULT_GRPC: &str = "127.0.0.1:7070";
const DEFAULT_HTTP: &str = "127.0.0.1:7071";
const DEFAULT_AWS: &str = ferry_aws::DEFAULT_ADDR;
const DEFAULT_KAFKA: &str = ferry_kafka::DEFAULT_ADDR;
pub const DEFAULT_DATA_DIR: &str = "./ferry-data";

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env(&'static str),
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File => f.write_str("file"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// What flags set (`None`, `false`: not given).
#[derive(Debug, Default)]
pub struct Flags {
    pub grpc: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub no_http: bool,
    pub aws: Option<SocketAddr>,
    pub no_aws: bool,
    pub kafka: Option<SocketAddr>,
    pub no_kafka: bool,
    pub pubsub: Option<SocketAddr>,
    pub no_pubsub: bool,
    pub data_dir: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `--redact-header`, repeated (empty: not given).
    pub redact_headers: Vec<String>,
}

/// What the server runs with, checked.
#[derive(Debug)]
pub struct Effective {
    pub grpc: Setting<SocketAddr>,
    pub http: Setting<SocketAddr>,
    pub http_enabled: Setting<bool>,
    pub aws: Setting<SocketAddr>,
    /// Whether the SQS endpoint is served (see the module head for the default).
    pub aws_enabled: Setting<bool>,
    pub aws_account_id: Setting<String>,
    pub aws_region: Setting<String>,
    /// The access keys requests must be signed with; empty: the endpoint is open.
    pub aws_access_keys: Vec<ferry_aws::sigv4::AccessKey>,
    pub kafka: Setting<SocketAddr>,
    /// Whether the Kafka endpoint is served (see the module head for the default).
    pub kafka_enabled: Setting<bool>,
    /// `None`: the listener's own address.
    pub kafka_advertised: Setting<Option<ferry_kafka::Advertised>>,
    pub kafka_default_partitions: Setting<u32>,
    pub kafka_auto_create_topics: Setting<bool>,
    pub kafka_max_frame_bytes: Setting<usize>,
    /// The session timeouts a Kafka group member may ask for.
    pub kafka_group_min_session_timeout_ms: Setting<i32>,
    pub kafka_group_max_session_timeout_ms: Setting<i32>,
    /// How long an empty Kafka group's first rebalance waits for more members.
    pub kafka_group_initial_rebalance_delay_ms: Setting<i32>,
    /// TLS on the Kafka listener (SSL, or SASL_SSL with users).
    pub kafka_tls: Setting<bool>,
    pub kafka_allow_plaintext_sasl: Setting<bool>,
    /// The SASL users (every request authenticated), `None` without `[auth]`.
    pub kafka_users: Option<std::sync::Arc<ferry_kafka::Users>>,
    pub pubsub: Setting<SocketAddr>,
    /// Whether the Pub/Sub endpoint is served (see the module head for the default).
    pub pubsub_enabled: Setting<bool>,
    /// Whether `/metrics` needs a token; `false` when there are no tokens to need.
    pub metrics_auth: Setting<bool>,
    pub data_dir: Setting<PathBuf>,
    /// `None`: the broker's default.
    pub disk_reserve_mib: Setting<Option<u64>>,
    pub max_batch: Setting<Option<usize>>,
    pub max_connections: Setting<Option<usize>>,
    pub max_streams_per_connection: Setting<Option<usize>>,
    pub max_read_bytes: Setting<Option<usize>>,
    pub tls_cert: Setting<Option<PathBuf>>,
    pub tls_key: Setting<Option<PathBuf>>,
    pub redaction: Setting<Redaction>,
    pub auth: Option<AuthConfig>,
}

/// The environment, as a function, so that tests need not change the process's own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment; a variable set to the empty string counts as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Reads and checks the config file at `path` (if any) and layers `env` and `flags` over
/// it. TLS files are read and checked too, so that a wrong path or a key that does not
/// fit its certificate is found before anything opens.
pub fn load(path: Option<&Path>, env: Env, flags: &Flags) -> anyhow::Result<Effective> {
    let file = match path {
        None => ConfigFile::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the config file {}", path.display()))?;
            parse_file(&text).with_context(|| format!("in the config file {}", path.display()))?
        }
    };
    let effective = resolve(file, env, flags)?;
    tls(&effective)?;
    Ok(effective)
}

/// The server's TLS configuration, read from the files the effective config names.
pub fn tls(effective: &Effective) -> anyhow::Result<Option<TlsConfig>> {
    match (&effective.tls_cert.value, &effective.tls_key.value) {
        (Some(cert), Some(key)) => {
            TlsConfig::from_pem_files(cert, key)
                .map(Some)
                .with_context(|| {
                    format!(
                        "tls (cert from {}, key from {})",
                        effective.tls_cert.source, effective.tls_key.source
                    )
                })
        }
        _ => Ok(None),
    }
}
