//! Ferry's server: the embedded broker behind gRPC (`ferry.v1`, see `ferry-proto`) and
//! behind HTTP/JSON with health, readiness and Prometheus metrics (see [HTTP API](#http-api)).
//!
//! ```no_run
//! # async fn run(broker: ferry_broker::Broker) -> Result<(), ferry_server::ServeError> {
//! let grpc = ferry_server::bind("127.0.0.1:7070".parse().unwrap()).await?;
//! let http = ferry_server::bind("127.0.0.1:7071".parse().unwrap()).await?;
//! ferry_server::Server::new(broker)
//!     .grpc(grpc)
//!     .http(http)
//!     .serve(async { /* Ctrl-C, SIGTERM … */ })
//!     .await
//! # }
//! ```
//!
//! **Shutdown.** When the shutdown future completes, `/readyz` answers 503 at once; after
//! the [drain](Server::drain) period (none by default) — during which everything is still
//! served, so a load balancer polling `/readyz` can take the server out of rotation —
//! both listeners stop accepting, the calls in progress finish (publishes included; a
//! receive waits at most [`MAX_WAIT`]), consume streams end — their unsettled
//! deliveries go back to ready — and [`Server::serve`] returns. [`serve`] is the gRPC-only
//! shorthand.
//!
//! **Access and limits.** With [`Server::auth`], every call but `/healthz`, `/readyz` and
//! the web console's files under `/ui` needs `authorization: Bearer <token>`: no token or
//! an unknown one is `UNAUTHENTICATED` / 401 — answered before the request's body or
//! message is read — and a token without the permission for the call's action on its
//! name is `PERMISSION_DENIED` / 403 (see [`AuthConfig`] for what each call needs; `/metrics`
//! needs `metrics`, unless [`Server::open_metrics`]). Publishes over [`Server::max_batch`]
//! messages or over their token's quota are `RESOURCE_EXHAUSTED` (HTTP 413 and 429), and
//! connections over [`Server::max_connections`] ([`DEFAULT_MAX_CONNECTIONS`] per listener
//! unless set) are refused; a gRPC connection carries at most
//! [`Server::max_streams_per_connection`] calls at once, its client queueing the rest.
//! Every check comes before the broker sees the call, so a refused call changes nothing.
//! Lists (`list_queues`, `list_topics`) show only the names the token may administer. Dead
//! letters have their own permission, and peeks at them mask credential headers
//! ([`Redaction`], [`Server::redact_headers`]).
//!
//! **TLS.** With [`Server::tls`], both listeners speak TLS only (see [`TlsConfig`]); the
//! handshake comes after admission, so limits and refusals work as without it.
//!
//! **Embedding.** A program that serves HTTP itself can take the API as a router
//! ([`Server::into_http_router`]) and mount it, or drive it in process. A program's own
//! tests can run the whole server on loopback ports with [`Server::start_local`].
//!
//! # HTTP API
//!
//! HTTP/1.1 and JSON, for `curl` and scripts: admin, publish, receive and settle, dead
//! letters, and the operational endpoints `/healthz`, `/readyz` and `/metrics`.
//!
//! | method | path | body → reply |
//! | --- | --- | --- |
//! | `POST` | `/v1/queues` | `{"name", "spec"?}` → 201 `{"name"}` |
//! | `GET` | `/v1/queues` | → `{"names": [..]}` |
//! | `GET` | `/v1/queues/{queue}` | → queue info (spec and stats) |
//! | `PUT` | `/v1/queues/{queue}` | a whole spec → queue info: the settings that may change after creation, in place (a fixed one changed is 400 `queue_setting_fixed`) |
//! | `DELETE` | `/v1/queues/{queue}` | → 204, also with messages in flight (their leases end with the queue) |
//! | `POST` | `/v1/queues/{queue}/messages` | `{"messages": [..]}` → `{"ids": [..]}` |
//! | `POST` | `/v1/queues/{queue}/receive` | `{"consumer", "max"?, "lease_ms"?, "wait_ms"?}` → `{"deliveries": [..]}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/ack` | `{"token"}` → `{"already_settled"}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/nack` | `{"token", "delay_ms"?, "error"?}` → `{"retry_at_ms"}` or `{"dead_lettered"}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/reject` | `{"token", "reason"}` → `{}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/extend` | `{"token", "by_ms"}` → `{"lease_until_ms"}` |
//! | `GET` | `/v1/queues/{queue}/messages` | query `key`, `header_name`+`header_value`, `older_than_ms`, `newer_than_ms`, `reason`, `after_seq`, `max` → `{"messages": [.. with "in_flight"], "next_after_seq", "more"}`: browse any queue without taking anything, headers masked as dead-letter peeks mask them |
//! | `POST` | `/v1/queues/{queue}/purge` | `{"confirm": "<queue>"}` → `{"purged"}`; another or no `confirm` is 400 `confirmation_mismatch` |
//! | `GET` | `/v1/queues/{dlq}/dead-letters` | query `reason`, `header_name`+`header_value`, `older_than_ms`, `newer_than_ms`, `after_seq`, `max` → `{"letters": [..], "next_after_seq", "more"}`, redacted header values as `***` ([`Redaction`]) |
//! | `POST` | `/v1/queues/{dlq}/redrive` | `{"target"?, "filter"?, "max_messages"?, "rate_per_sec"?}` → `{"moved", "skipped"}` |
//! | `POST` | `/v1/queues/{dlq}/redrive-jobs` | `{"seqs"?, "filter"?, "target"?, "rate_per_sec"?}` (rate default 500 a second, 0 unlimited) → 202 job: a redrive in the background of the letters that match now, with progress |
//! | `GET` | `/v1/redrive-jobs` | → `{"jobs": [..]}`, newest first, the last 50 |
//! | `GET` | `/v1/redrive-jobs/{id}` | → `{"id", "dead_letter_queue", "target", "state" (running, done, failed), "matched", "moved", "error", "started_at_ms", "finished_at_ms"}` |
//! | `PUT` | `/v1/queues/{queue}/parked/{key}` | query `encoding=base64`? (the key's bytes in standard base64; else its UTF-8 text) → 204: the key's messages are held until unparked (key-shared queues only, else 409 `not_key_shared`) |
//! | `DELETE` | `/v1/queues/{queue}/parked/{key}` | query `encoding=base64`? → 204: the key's messages flow again, in order |
//! | `GET` | `/v1/queues/{queue}/parked` | → `{"keys": [{"key" or "key_base64", "held"}]}` in byte order of the keys |
//! | `POST` | `/v1/temporary-queues` | `{"owner", "idle_timeout_ms"?}` → 201 `{"name", "idle_timeout_ms"}`: a queue only `owner` receives from, deleted after the idle timeout (default 60 s) without use, or when a gRPC Consume stream its owner opened on it ends |
//! | `POST` | `/v1/topics` | `{"name", "spec"?}` → 201 `{"name"}` |
//! | `GET` | `/v1/topics` | → `{"names": [..]}` |
//! | `GET` | `/v1/topics/{topic}` | → topic info |
//! | `PUT` | `/v1/topics/{topic}` | a whole spec → topic info: retention, compaction, keyless placement in place; a larger `partitions` adds partitions, a smaller one is 400 `topic_setting_fixed` |
//! | `DELETE` | `/v1/topics/{topic}` | → 204 |
//! | `POST` | `/v1/topics/{topic}/messages` | `{"messages", "partition"?, "producer_id"?, "first_sequence"?}` → `{"positions": [..]}` |
//! | `GET` | `/v1/topics/{topic}/groups/{group}` | → group info with lag per partition |
//! | `POST` | `/v1/topics/{topic}/groups/{group}/offsets` | `{"partition"?, "to": "earliest" \| "latest" \| {"offset"} \| {"timestamp_ms"}}` → group info, after the reset |
//! | `POST` | `/v1/subscriptions` | `{"name", "spec": {"topic", ..}}` → 201 `{"name"}` |
//! | `GET` | `/v1/subscriptions/{name}` | → subscription info |
//! | `DELETE` | `/v1/subscriptions/{name}` | → 204 |
//! | `GET` | `/v1/console/overview` | query `name`, `queue_offset`, `topic_offset`, `limit` (1 to 500, default 50) → a page of queues and of topics with depth, rates, sparklines and alerts |
//! | `GET` | `/v1/console/queues/{queue}/history` | → `{"sample_interval_ms", "samples": [..]}`: the last hour of samples, oldest first |
//! | `GET` | `/v1/console/topics/{topic}/history` | → the same for a topic |
//! | `GET` | `/v1/console/events` | → `text/event-stream`: `sample` after each sample, `redrive` on a job's progress, a keep-alive comment every 15 s |
//! | `GET` | `/v1/console/topology` | → `{"nodes", "edges"}`: topics, subscriptions, queues, dead-letter queues, and the names the Kafka, SQS and SNS front ends give them |
//! | `GET` | `/healthz` | 200 while the process serves |
//! | `GET` | `/readyz` | 200 when the broker takes traffic; 503 once shutdown began |
//! | `GET` | `/metrics` | Prometheus text format (see `docs/metrics.md`); with tokens configured, needs a `metrics` permission |
//! | `GET` | `/ui` | the web console (see `docs/console.md`): static files, served without a token; the page sends the token on its API calls |
//! | any | `/schema-registry/...` | Confluent Schema Registry's REST API, when given one ([`Server::schema_registry`], see `docs/schema-registry.md`); with tokens, Bearer or HTTP Basic with the token as password |
//!
//! ```sh
//! curl -s localhost:7071/v1/queues -d '{"name": "jobs", "spec": {"retry": {"max_deliveries": 5}}}'
//! curl -s localhost:7071/v1/queues/jobs/messages -d '{"messages": [{"payload": "hello", "delay_ms": 1000}]}'
//! curl -s localhost:7071/v1/queues/jobs/receive -d '{"consumer": "w1", "max": 10, "wait_ms": 5000}'
//! curl -s localhost:7071/v1/queues/jobs/messages/0/ack -d '{"token": 1099511627776}'
//! curl -s 'localhost:7071/v1/queues/jobs.dlq/dead-letters?reason=max_deliveries&max=20'
//! ```
//!
//! Specs and messages take the shapes of `ferry.v1`'s messages, with enums as lower-case
//! words (`"ordering": "key_shared"`) and every field optional but the names; unknown
//! fields are refused. Payloads and keys are UTF-8 text (`payload`, `key`) or base64
//! (`payload_base64`, `key_base64`); deliveries come back the same way, as text when it is
//! valid UTF-8. A receive's `max` is 1 to [`ferry_proto::MAX_RECEIVE`] (unset: 1), its `lease_ms` 1 ms to
//! 12 hours (unset: the queue's); `wait_ms` is cut to [`MAX_WAIT`]. Out-of-range numbers are
//! refused, never clamped — except the wait, which only bounds how long an empty poll lasts.
//! Dead-letter pages go on from `next_after_seq` while `more` is true: a page holds at
//! most `max` letters (unset: 100; at most 1000) and [`Server::max_read_bytes`] of them,
//! so a page shorter than `max` is not the end.
//!
//! The `/v1/console/...` endpoints serve the web console (see `docs/console-api.md`).
//! Its overview and topology list only what the token may describe (`admin`); the
//! histories need `admin` on the name; browsing, as reading the queue; redrive jobs, as
//! a redrive; purging, as deleting the queue (`admin`). Rates come from a sampler that
//! reads every queue's and topic's stats each [`Server::console_sample_interval`].
//!
//! Failures answer `{"error", "code"}` with a status from the kind of failure; the code of
//! a broker error is its variant's name (`queue_not_found`, `stale_lease`), so a client
//! program can tell failures apart without parsing the message. Every request is checked whole before the broker sees it, so a refused
//! request changes nothing. With tokens configured ([`Server::auth`]), requests but the
//! operational endpoints send `Authorization: Bearer <token>`: 401 `unauthenticated`
//! without a known one, 403 `forbidden` without the permission, 413 `batch_too_large`
//! over the batch limit, 429 `over_quota` over the token's publish rate. A publish on a
//! full disk is 507 `disk_full` (gRPC: `RESOURCE_EXHAUSTED`) and stores nothing; receives
//! and acks keep working, and publishes resume once space is freed. A publish to a queue or
//! topic that requires a schema subject, with a payload that does not match it, is 422
//! `schema_violation` (gRPC: `INVALID_ARGUMENT`), naming the field, and stores nothing (see
//! [`RegistryPayloadValidator`] for how a message names its schema).

mod admission;
mod auth;
mod convert;
mod grpc;
mod http;
mod local;
mod metrics;
mod redaction;
mod schema_enforcement;
mod settle;
mod status;
mod temporary;
mod tls;

pub use admission::REFUSED_GRACE;
pub use auth::{
    Action, AuthConfig, AuthError, DEFAULT_MAX_BATCH, NamePattern, Permission, TokenGrant,
    parse_sha256_hex, sha256,
};
pub use convert::MAX_WAIT;
pub use http::console::topology::{AwsNames, ConsoleAliases};
pub use http::console::{DEFAULT_ALERT_AFTER, DEFAULT_SAMPLE_INTERVAL};
pub use local::LocalServer;
pub use redaction::{DEFAULT_REDACTED_HEADERS, MASK, Redaction, RedactionError};
pub use schema_enforcement::RegistryPayloadValidator;
pub use tls::{HANDSHAKE_TIMEOUT, TlsConfig};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry_broker::Broker;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::TcpListenerStream;

use crate::admission::{Admission, Connection, HttpListener};
use crate::auth::Gate;
use crate::http::console::{self, Console, ConsoleSettings};
use crate::metrics::Meters;

/// The shortest sample interval taken: shorter ones would only spend the broker's time.
const MIN_SAMPLE_INTERVAL: Duration = Duration::from_millis(10);

/// The largest gRPC message the server takes by default: a batch of the broker's largest
/// messages (1 MiB each) needs room for several.
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The largest HTTP request body taken by default: the same batch as gRPC's, with room
/// for base64's third more.
pub const DEFAULT_MAX_BODY: usize = 24 * 1024 * 1024;
/// The most message bytes (payloads, keys, headers) one peek, topic read or group poll
/// answers with by default — at least one message always comes, so paging progresses.
/// Under gRPC's common 4 MiB default for a message a client receives, with room for the
/// per-message fields, and a thousand 1 KiB messages still fit one answer.
pub const DEFAULT_MAX_READ_BYTES: usize = 2 * 1024 * 1024;
/// The most connections open at once on each listener by default. Finite, so that a
/// client opening connections in a loop runs into a refusal rather than the process's
/// file-descriptor limit (often 1024, which the broker's own files share); two listeners
/// at this limit leave room under it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The most calls (HTTP/2 streams) one gRPC connection carries at once by default. HTTP/2
/// leaves the bound to the server, and the gRPC library this server runs on sets none,
/// so one connection could otherwise open streams until memory runs out. Generous,
/// because an application may hold all its consumers' long-lived streams on one
/// connection: a client past the bound waits for a stream to end, it is not refused.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// What serving may fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    // The OS error is in the message; it is not also the error's `source`, which a chain
    // printer (`{:#}`) would print a second time.
    #[error("could not listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error("nothing to serve: give the server a gRPC or an HTTP listener")]
    NoListener,
    #[error("could not read the TLS file {path}: {error}")]
    TlsFile {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(String),
}

/// Binds `addr` (port 0 picks a free one); the listener says where it listens.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| ServeError::Bind { addr, error })
}

/// Serves `broker` over gRPC on `listener` until `shutdown` completes.
pub async fn serve(
    broker: Broker,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    Server::new(broker).grpc(listener).serve(shutdown).await
}

/// The broker on a gRPC listener, an HTTP listener, or both, with one shutdown.
pub struct Server {
    broker: Broker,
    grpc: Option<TcpListener>,
    http: Option<TcpListener>,
    max_message: usize,
    max_body: usize,
    drain: Duration,
    meters: Arc<Meters>,
    auth: Option<AuthConfig>,
    max_batch: usize,
    max_connections: usize,
    max_streams_per_connection: u32,
    tls: Option<TlsConfig>,
    redaction: Redaction,
    open_metrics: bool,
    max_read_bytes: usize,
    console: ConsoleSettings,
    schema_registry: Option<Arc<ferry_schema_registry::SchemaRegistry>>,
}

impl Server {
    pub fn new(broker: Broker) -> Server {
        Server {
            broker,
            grpc: None,
            http: None,
            max_message: DEFAULT_MAX_MESSAGE,
            max_body: DEFAULT_MAX_BODY,
            drain: Duration::ZERO,
            meters: Arc::default(),
            auth: None,
            max_batch: auth::DEFAULT_MAX_BATCH,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_streams_per_connection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
            tls: None,
            redaction: Redaction::default(),
            open_metrics: false,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            console: ConsoleSettings::default(),
            schema_registry: None,
        }
    }

    /// Serve `ferry.v1` over gRPC on `listener`.
    pub fn grpc(mut self, listener: TcpListener) -> Server {
        self.grpc = Some(listener);
        self
    }

    /// Serve the HTTP API, `/healthz`, `/readyz` and `/metrics` on `listener`.
    pub fn http(mut self, listener: TcpListener) -> Server {
        self.http = Some(listener);
        self
    }

    /// The largest gRPC message taken ([`DEFAULT_MAX_MESSAGE`] unless set).
    pub fn max_grpc_message(mut self, bytes: usize) -> Server {
        self.max_message = bytes;
        self
    }

    /// The largest HTTP request body taken ([`DEFAULT_MAX_BODY`] unless set); larger ones
    /// are answered 413 and change nothing.
    pub fn max_http_body(mut self, bytes: usize) -> Server {
        self.max_body = bytes;
        self
    }

    /// Require an API token on every call but `/healthz`, `/readyz` and the console's files
    /// under `/ui`, and allow each call only what its token's permissions grant (see [`AuthConfig`]); `/metrics` then
    /// needs a `metrics` permission unless [`Server::open_metrics`]. Without this the
    /// server is open.
    pub fn auth(mut self, config: AuthConfig) -> Server {
        self.auth = Some(config);
        self
    }

    /// Serve `/metrics` to anyone, without a token, even with [`Server::auth`]. Off by
    /// default: the exposition names every queue, dead-letter queue, subscription and
    /// group. (On a server without tokens everything, `/metrics` included, is open.)
    pub fn open_metrics(mut self) -> Server {
        self.open_metrics = true;
        self
    }

    /// The most message bytes — payloads, keys and headers — one dead-letter peek, topic
    /// read or group poll answers with ([`DEFAULT_MAX_READ_BYTES`] unless set), besides
    /// its count: a thousand messages of 1 MiB would otherwise be a gigabyte gathered for
    /// one answer. The first message always comes, whatever its size, so a reader paging
    /// on progresses; a peek's answer says whether there is `more`.
    pub fn max_read_bytes(mut self, bytes: usize) -> Server {
        self.max_read_bytes = bytes;
        self
    }

    /// The most messages one publish may carry ([`DEFAULT_MAX_BATCH`] unless set); larger
    /// batches are refused whole (`RESOURCE_EXHAUSTED`, HTTP 413).
    pub fn max_batch(mut self, messages: usize) -> Server {
        self.max_batch = messages;
        self
    }

    /// At most `n` connections open at once on each listener (gRPC and HTTP count
    /// apart); [`DEFAULT_MAX_CONNECTIONS`] unless set.
    ///
    /// Every accepted connection holds a permit until it closes; those accepted beyond the
    /// limit are answered in their own protocol, so the client sees why: HTTP gets a `429`
    /// and is closed; gRPC is served for [`REFUSED_GRACE`] with every call answered
    /// `RESOURCE_EXHAUSTED` (an HTTP/2 client cannot be answered without its handshake),
    /// then closed. Connections are counted rather than requests because an idle
    /// keep-alive connection, or an HTTP/2 one carrying any number of streams, holds a
    /// socket and memory without any request in progress.
    pub fn max_connections(mut self, n: usize) -> Server {
        self.max_connections = n;
        self
    }

    /// At most `n` calls at once on one gRPC connection (HTTP/2's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`); [`DEFAULT_MAX_STREAMS_PER_CONNECTION`] unless
    /// set. A client at the bound holds its next call until one of its streams ends, as
    /// HTTP/2 prescribes: nothing is refused, so `n` must cover the long-lived streams
    /// (consumers, publish streams) a client keeps open on one connection.
    pub fn max_streams_per_connection(mut self, n: u32) -> Server {
        self.max_streams_per_connection = n;
        self
    }

    /// Serve both listeners over TLS only, with this certificate (see [`TlsConfig`]): ALPN `h2`
    /// on gRPC, `http/1.1` on HTTP. A plaintext client fails its first call.
    pub fn tls(mut self, config: TlsConfig) -> Server {
        self.tls = Some(config);
        self
    }

    /// The headers whose values dead-letter peeks (gRPC and HTTP) show as
    /// [`MASK`]; [`Redaction::default`] (credentials and cookies, see
    /// [`DEFAULT_REDACTED_HEADERS`]) unless set, [`Redaction::none`] to show
    /// every value. Consumers and redrives always get the real headers.
    pub fn redact_headers(mut self, redaction: Redaction) -> Server {
        self.redaction = redaction;
        self
    }

    /// How often the web console's sampler reads every queue's and topic's stats into the
    /// history its charts and rates come from ([`DEFAULT_SAMPLE_INTERVAL`] unless set;
    /// at least 10 ms). The history keeps one hour at this interval, at most 3,600
    /// samples per name.
    pub fn console_sample_interval(mut self, interval: Duration) -> Server {
        self.console.sample_interval = interval.max(MIN_SAMPLE_INTERVAL);
        self
    }

    /// How old a queue's oldest ready message may get before the console's overview
    /// raises `old_messages` on it ([`DEFAULT_ALERT_AFTER`] unless set).
    pub fn console_age_alert(mut self, age: Duration) -> Server {
        self.console.age_alert = age;
        self
    }

    /// How far behind (its oldest unread record's age) a consumer group may fall before
    /// the console's overview raises `group_lag` on its topic ([`DEFAULT_ALERT_AFTER`]
    /// unless set).
    pub fn console_lag_alert(mut self, lag: Duration) -> Server {
        self.console.lag_alert = lag;
        self
    }

    /// The names the front ends running beside this server give queues and topics (SQS
    /// queue URLs, SNS topic ARNs, Kafka topics), shown in the console's topology. None
    /// unless set.
    pub fn console_aliases(mut self, aliases: ConsoleAliases) -> Server {
        self.console.aliases = aliases;
        self
    }

    /// Serve `registry` on the HTTP listener under `/schema-registry`, Confluent Schema
    /// Registry's REST API (see `docs/schema-registry.md`), behind the same tokens as
    /// `/v1`: `Authorization: Bearer <token>`, or HTTP Basic with the token as the
    /// password (what Confluent clients send from `basic.auth.user.info`).
    pub fn schema_registry(
        mut self,
        registry: Arc<ferry_schema_registry::SchemaRegistry>,
    ) -> Server {
        self.schema_registry = Some(registry);
        self
    }

    /// How long to keep serving, with `/readyz` at 503, after shutdown begins and before
    /// the listeners stop accepting.
    pub fn drain(mut self, period: Duration) -> Server {
        self.drain = period;
        self
    }

    /// The HTTP API, `/healthz`, `/readyz` and `/metrics` as an axum router, with this
    /// server's tokens, limits and redaction, for a program that serves HTTP itself or
    /// drives the API in process (tests, fuzzing). Listeners, TLS, connection limits and
    /// shutdown are then the program's: `/readyz` stays ready, and `/metrics` counts only
    /// what this router served.
    ///
    /// The console's sampler runs while the router (or a clone of it) lives, when this is
    /// called on a Tokio runtime; elsewhere the console's rates and histories stay empty.
    pub fn into_http_router(self) -> axum::Router {
        let gate = Gate::timed_by(self.auth, self.max_batch, broker_time(&self.broker));
        let console = Arc::new(Console::new(self.console));
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(console::history::run(
                self.broker.clone(),
                Arc::downgrade(&console),
                None,
            ));
        }
        let shared = http::Shared {
            broker: self.broker,
            meters: self.meters,
            gate: Arc::new(gate),
            redaction: Arc::new(self.redaction),
            shutting_down: Arc::new(AtomicBool::new(false)),
            open_metrics: self.open_metrics,
            max_read_bytes: self.max_read_bytes,
            console,
            stop: None,
            schema_registry: self.schema_registry,
        };
        http::router(shared, self.max_body)
    }

    /// Serves until `shutdown` completes, then shuts down as the [crate docs](crate) say.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        if self.grpc.is_none() && self.http.is_none() {
            return Err(ServeError::NoListener);
        }
        let gate = Arc::new(Gate::timed_by(
            self.auth,
            self.max_batch,
            broker_time(&self.broker),
        ));
        let redaction = Arc::new(self.redaction);
        let shutting_down = Arc::new(AtomicBool::new(false));
        let (stop_tx, stop_rx) = watch::channel(false);
        // Open consume streams are calls in progress too: they end when serving stops, or
        // the wait for calls in progress would last as long as the slowest client.
        let streams_stop = stop_rx.clone();
        // So do the console's event streams, and its sampler stops with them.
        let console_stop = stop_rx.clone();
        let stopped = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|stop| *stop).await;
            }
        };
        let grpc = async {
            let Some(listener) = self.grpc else {
                return Ok(());
            };
            let routes = grpc::routes(
                &self.broker,
                &gate,
                &redaction,
                &self.meters,
                self.max_message,
                self.max_read_bytes,
                streams_stop,
            );
            let admission = Admission::new(self.max_connections);
            let builder = tonic::transport::Server::builder()
                .max_concurrent_streams(self.max_streams_per_connection)
                .add_routes(routes);
            match &self.tls {
                None => {
                    builder
                        .serve_with_incoming_shutdown(incoming(listener, admission), stopped())
                        .await
                }
                Some(tls) => {
                    let acceptor = tls.acceptor(tls::ALPN_GRPC);
                    let incoming = admission::grpc_tls(listener, admission, acceptor);
                    builder
                        .serve_with_incoming_shutdown(incoming, stopped())
                        .await
                }
            }
            .map_err(ServeError::from)
        };
        let http = async {
            let Some(listener) = self.http else {
                return Ok(());
            };
            let console = Arc::new(Console::new(self.console.clone()));
            let sampler = tokio::spawn(console::history::run(
                self.broker.clone(),
                Arc::downgrade(&console),
                Some(console_stop.clone()),
            ));
            let shared = http::Shared {
                broker: self.broker.clone(),
                meters: Arc::clone(&self.meters),
                gate: Arc::clone(&gate),
                redaction: Arc::clone(&redaction),
                shutting_down: Arc::clone(&shutting_down),
                open_metrics: self.open_metrics,
                max_read_bytes: self.max_read_bytes,
                console,
                stop: Some(console_stop),
                schema_registry: self.schema_registry.clone(),
            };
            let listener = HttpListener {
                listener,
                admission: Admission::new(self.max_connections),
                tls: self.tls.as_ref().map(|tls| tls.acceptor(tls::ALPN_HTTP)),
                handshakes: tokio::task::JoinSet::new(),
            };
            let served = axum::serve(listener, http::router(shared, self.max_body))
                .with_graceful_shutdown(stopped())
                .await
                .map_err(ServeError::Http);
            // Serving ended, so the stop was sent (or the listener failed, and the
            // sampler is of no more use either).
            sampler.abort();
            let _ = sampler.await;
            served
        };
        let signal = async {
            shutdown.await;
            shutting_down.store(true, Ordering::SeqCst);
            tracing::info!(drain = ?self.drain, "shutting down: not ready");
            tokio::time::sleep(self.drain).await;
            let _ = stop_tx.send(true);
        };
        // Either server failing ends the other too: one process, one fate.
        let servers = async {
            let result = tokio::try_join!(grpc, http);
            let _ = stop_tx.send(true);
            result
        };
        let (_, served) = tokio::join!(
            async {
                tokio::select! {
                    () = signal => {}
                    () = stopped() => {}
                }
            },
            servers
        );
        served.map(|_| ())
    }
}

/// The broker's clock, for the gate's quotas.
fn broker_time(broker: &Broker) -> Arc<dyn Fn() -> i64 + Send + Sync> {
    let broker = broker.clone();
    Arc::new(move || broker.now_ms())
}

/// Accepted gRPC connections, counted by `admission`, with Nagle's algorithm off. tonic
/// sets it only on listeners it binds itself; without it, a small response waits for the
/// peer's delayed ACK (40 ms on Linux) and a publish-ack round trip takes 40 ms instead
/// of a fraction of one.
fn incoming(
    listener: TcpListener,
    admission: Admission,
) -> impl tokio_stream::Stream<Item = std::io::Result<Connection>> {
    use tokio_stream::StreamExt;
    TcpListenerStream::new(listener).map(move |accepted| {
        let stream = accepted?;
        stream.set_nodelay(true)?;
        Ok(admission.grpc(stream))
    })
}
