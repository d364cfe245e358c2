//! A server on loopback ports in a background task: what a program embedding Ferry wants
//! in its own tests, where a fixed port would collide with another test or another run.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::{ServeError, Server, bind};

/// A [`Server`] serving on 127.0.0.1 in a background task, from [`Server::start_local`].
///
/// [`LocalServer::stop`] shuts it down and waits for the end. Dropping it begins the same
/// shutdown without waiting, so a test that fails half-way does not leave a server behind.
pub struct LocalServer {
    grpc: SocketAddr,
    http: SocketAddr,
    stop: oneshot::Sender<()>,
    served: JoinHandle<Result<(), ServeError>>,
}

impl Server {
    /// Binds a gRPC and an HTTP listener on 127.0.0.1, on ports the system picks (in place of
    /// any listeners given before), and serves on both in a background task on the current
    /// Tokio runtime until [`LocalServer::stop`].
    ///
    /// ```no_run
    /// # async fn run(broker: ferry_broker::Broker) -> Result<(), ferry_server::ServeError> {
    /// let server = ferry_server::Server::new(broker).start_local().await?;
    /// let url = format!("ferry://{}", server.grpc_addr());
    /// // … the code under test talks to `url` …
    /// server.stop().await
    /// # }
    /// ```
    pub async fn start_local(self) -> Result<LocalServer, ServeError> {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let (grpc, http) = (bind(loopback).await?, bind(loopback).await?);
        let local_addr = |listener: &tokio::net::TcpListener| {
            listener.local_addr().map_err(|error| ServeError::Bind {
                addr: loopback,
                error,
            })
        };
        let (grpc_addr, http_addr) = (local_addr(&grpc)?, local_addr(&http)?);
        let (stop, stopped) = oneshot::channel::<()>();
        // A dropped sender ends the wait as a sent stop does: shutdown begins either way.
        let served = tokio::spawn(self.grpc(grpc).http(http).serve(async {
            let _ = stopped.await;
        }));
        Ok(LocalServer {
            grpc: grpc_addr,
            http: http_addr,
            stop,
            served,
        })
    }
}

impl LocalServer {
    /// Where gRPC (`ferry.v1`) is served.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc
    }

    /// Where the HTTP API is served.
    pub fn http_addr(&self) -> SocketAddr {
        self.http
    }

    /// Shuts down as [`Server::serve`] does and waits until serving has ended; what serving
    /// failed with, if anything. A panic in the serving task is raised here again.
    pub async fn stop(self) -> Result<(), ServeError> {
        let _ = self.stop.send(());
        match self.served.await {
            Ok(served) => served,
            Err(failed) => match failed.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Only a runtime shutting down cancels the task; serving has ended.
                Err(_) => Ok(()),
            },
        }
    }
}
