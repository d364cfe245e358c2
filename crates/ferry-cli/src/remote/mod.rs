//! The commands that talk to a running server (`--server`, FERRY_SERVER; `--token`,
//! FERRY_TOKEN) through `ferry-client`: admin, publish, consume, dead letters and stats.

/// `println!` that ends the command quietly when stdout is a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::remote::output::write_line(format_args!($($arg)*))
    };
}

pub mod admin;
pub mod dead_letters;
pub mod delivery;
pub mod messages;
pub mod output;
pub mod parked;
pub mod stats;

use std::future::Future;

use anyhow::Context;
use ferry_client::{Client, ConnectOptions};

/// A connected client and how to print.
pub struct Remote {
    pub client: Client,
    pub server: String,
    pub json: bool,
}

impl Remote {
    pub async fn connect(
        server: &str,
        options: ConnectOptions,
        json: bool,
    ) -> anyhow::Result<Remote> {
        let client = Client::connect_with(server, options)
            .await
            .map_err(|e| output::explain(e, server))?;
        Ok(Remote {
            client,
            server: server.to_owned(),
            json,
        })
    }

    /// Awaits a client call, turning its error into one line with what to do.
    pub async fn call<T>(
        &self,
        call: impl Future<Output = ferry_client::Result<T>>,
    ) -> anyhow::Result<T> {
        call.await.map_err(|e| output::explain(e, &self.server))
    }
}

/// A runtime for one command: the client's calls are async.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}
