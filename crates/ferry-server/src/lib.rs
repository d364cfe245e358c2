//! Ferry's server: the embedded broker behind gRPC (`ferry.v1`, see `ferry-proto`).
//!
//! [`serve`] runs the services on a bound listener until a shutdown signal, then stops
//! accepting, lets the calls in progress finish (publishes included), ends consume streams
//! — whose unsettled deliveries go back to ready — and returns.

pub mod convert;
pub mod grpc;
pub mod status;

use std::future::Future;
use std::net::SocketAddr;

use ferry_broker::Broker;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// The largest gRPC message the server takes by default: a batch of the broker's largest
/// messages (1 MiB each) needs room for several.
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// What [`serve`] may fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
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
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let routes = grpc::routes(&broker, DEFAULT_MAX_MESSAGE, stopping);
    let signal = async move {
        shutdown.await;
        // Open consume streams are calls in progress too: end them, or the wait below
        // would last as long as the slowest client.
        let _ = stop.send(true);
    };
    tonic::transport::Server::builder()
        .add_routes(routes)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), signal)
        .await?;
    Ok(())
}
