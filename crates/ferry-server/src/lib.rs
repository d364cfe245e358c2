//! Ferry's server: the embedded broker behind gRPC (`ferry.v1`, see `ferry-proto`) and
//! behind HTTP/JSON with health, readiness and Prometheus metrics ([`http`]).
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
//! both listeners stop accepting, the calls in progress finish (publishes included; an
//! HTTP receive waits at most [`http::MAX_WAIT`]), consume streams end — their unsettled
//! deliveries go back to ready — and [`Server::serve`] returns. [`serve`] is the gRPC-only
//! shorthand.
//!
//! **Access and limits.** With [`Server::auth`], every call but `/healthz`, `/readyz` and
//! `/metrics` needs `authorization: Bearer <token>`: no token or an unknown one is
//! `UNAUTHENTICATED` / 401, a token without the permission for the call's action on its
//! name is `PERMISSION_DENIED` / 403 (see [`auth`] for what each call needs). Publishes
//! over [`Server::max_batch`] messages or over their token's quota are
//! `RESOURCE_EXHAUSTED` (HTTP 413 and 429), and connections over
//! [`Server::max_connections`] are refused ([`admission`]). Every check comes before the
//! broker sees the call, so a refused call changes nothing. Lists (`list_queues`,
//! `list_topics`) show only the names the token may administer. Dead letters have their
//! own permission, and peeks at them mask credential headers ([`redaction`],
//! [`Server::redact_headers`]).
//!
//! **TLS.** With [`Server::tls`], both listeners speak TLS only (see [`tls`]); the
//! handshake comes after admission, so limits and refusals work as without it.

pub mod admission;
pub mod auth;
pub mod convert;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod redaction;
mod settle;
pub mod status;
pub mod tls;

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
use crate::auth::{AuthConfig, DEFAULT_MAX_BATCH, Gate};
use crate::metrics::Meters;
use crate::redaction::Redaction;
use crate::tls::TlsConfig;

/// The largest gRPC message the server takes by default: a batch of the broker's largest
/// messages (1 MiB each) needs room for several.
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The largest HTTP request body taken by default: the same batch as gRPC's, with room
/// for base64's third more.
pub const DEFAULT_MAX_BODY: usize = 24 * 1024 * 1024;

/// What serving may fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error("nothing to serve: give the server a gRPC or an HTTP listener")]
    NoListener,
    #[error("could not read the TLS file {path}: {source}")]
    TlsFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(String),
}

/// Binds `addr` (port 0 picks a free one); the listener says where it listens.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
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
    max_connections: Option<usize>,
    tls: Option<TlsConfig>,
    redaction: Redaction,
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
            max_batch: DEFAULT_MAX_BATCH,
            max_connections: None,
            tls: None,
            redaction: Redaction::default(),
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

    /// Require an API token on every call but `/healthz`, `/readyz` and `/metrics`, and
    /// allow each call only what its token's permissions grant (see [`auth`]). Without
    /// this the server is open.
    pub fn auth(mut self, config: AuthConfig) -> Server {
        self.auth = Some(config);
        self
    }

    /// The most messages one publish may carry ([`DEFAULT_MAX_BATCH`] unless set); larger
    /// batches are refused whole (`RESOURCE_EXHAUSTED`, HTTP 413).
    pub fn max_batch(mut self, messages: usize) -> Server {
        self.max_batch = messages;
        self
    }

    /// At most `n` connections open at once on each listener (gRPC and HTTP count
    /// apart); those beyond are refused as [`admission`] says. No limit unless set.
    pub fn max_connections(mut self, n: usize) -> Server {
        self.max_connections = Some(n);
        self
    }

    /// Serve both listeners over TLS only, with this certificate (see [`tls`]): ALPN `h2`
    /// on gRPC, `http/1.1` on HTTP. A plaintext client fails its first call.
    pub fn tls(mut self, config: TlsConfig) -> Server {
        self.tls = Some(config);
        self
    }

    /// The headers whose values dead-letter peeks (gRPC and HTTP) show as
    /// [`redaction::MASK`]; [`Redaction::default`] (credentials and cookies, see
    /// [`redaction::DEFAULT_REDACTED_HEADERS`]) unless set, [`Redaction::none`] to show
    /// every value. Consumers and redrives always get the real headers.
    pub fn redact_headers(mut self, redaction: Redaction) -> Server {
        self.redaction = redaction;
        self
    }

    /// How long to keep serving, with `/readyz` at 503, after shutdown begins and before
    /// the listeners stop accepting.
    pub fn drain(mut self, period: Duration) -> Server {
        self.drain = period;
        self
    }

    /// Serves until `shutdown` completes, then shuts down as the [crate docs](crate) say.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        if self.grpc.is_none() && self.http.is_none() {
            return Err(ServeError::NoListener);
        }
        let gate = Arc::new(Gate::new(self.auth, self.max_batch));
        let redaction = Arc::new(self.redaction);
        let shutting_down = Arc::new(AtomicBool::new(false));
        let (stop_tx, stop_rx) = watch::channel(false);
        // Open consume streams are calls in progress too: they end when serving stops, or
        // the wait for calls in progress would last as long as the slowest client.
        let streams_stop = stop_rx.clone();
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
                streams_stop,
            );
            let admission = Admission::new(self.max_connections);
            let builder = tonic::transport::Server::builder().add_routes(routes);
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
            let shared = http::Shared {
                broker: self.broker.clone(),
                meters: Arc::clone(&self.meters),
                gate: Arc::clone(&gate),
                redaction: Arc::clone(&redaction),
                shutting_down: Arc::clone(&shutting_down),
            };
            let listener = HttpListener {
                listener,
                admission: Admission::new(self.max_connections),
                tls: self.tls.as_ref().map(|tls| tls.acceptor(tls::ALPN_HTTP)),
                handshakes: tokio::task::JoinSet::new(),
            };
            axum::serve(listener, http::router(shared, self.max_body))
                .with_graceful_shutdown(stopped())
                .await
                .map_err(ServeError::Http)
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
