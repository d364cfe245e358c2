//! `ferry chaos worker`: one producer or consumer as its own process, so the harness can
//! kill it with SIGKILL. It writes its history to one file and stops on SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use ferry_client::Client;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::{ChaosError, Result};
use crate::history::HistoryWriter;
use crate::producer::{self, ProducerPlan};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Producer,
    Consumer,
}

/// The arguments the harness gives a worker.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    #[arg(long)]
    pub role: Role,
    /// The server (the harness's proxy): ferry://host:port.
    #[arg(long)]
    pub url: String,
    /// The history file to append to.
    #[arg(long)]
    pub history: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub index: u32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Producer: messages per second.
    #[arg(long, default_value_t = 50)]
    pub rate: u32,
    /// Producer: stop after this many acknowledged publishes.
    #[arg(long)]
    pub max_messages: Option<u64>,
}

/// Runs the worker until SIGTERM (or, for a producer, until it has published its share).
pub fn run(args: &WorkerArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ChaosError::Worker(format!("starting the async runtime: {e}")))?;
    let mut history = HistoryWriter::create(&args.history)?;
    runtime.block_on(async {
        match args.role {
            Role::Producer => {
                let plan = ProducerPlan {
                    index: args.index,
                    seed: args.seed,
                    rate: args.rate,
                    max_messages: args.max_messages,
                };
                producer::run(&args.url, plan, &mut history).await
            }
            Role::Consumer => crate::consumer::run(&args.url, args.index, &mut history).await,
        }
    })
}

/// SIGTERM, remembered once received.
pub(crate) struct Stop {
    term: Signal,
    received: bool,
}

impl Stop {
    pub fn on_sigterm() -> Result<Stop> {
        let term = signal(SignalKind::terminate())
            .map_err(|e| ChaosError::Worker(format!("installing a SIGTERM handler: {e}")))?;
        Ok(Stop {
            term,
            received: false,
        })
    }

    /// Resolves when SIGTERM has come (at once if it already has).
    pub async fn signalled(&mut self) {
        if !self.received {
            self.term.recv().await;
            self.received = true;
        }
    }
}

/// Connects, retrying while the server is unreachable; `None` if SIGTERM came first.
pub(crate) async fn connect(url: &str, stop: &mut Stop) -> Result<Option<Client>> {
    loop {
        match Client::connect(url).await {
            Ok(client) => return Ok(Some(client)),
            Err(error) if error.is_transient() => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = stop.signalled() => return Ok(None),
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
}
