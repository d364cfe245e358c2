//! The `ferry` command: broker tools and benchmarks.

mod bench;
mod serve;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Parser, Debug)]
#[command(name = "ferry", version, about = "Ferry broker tools and benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the broker as a server: durable, on the embedded default, until Ctrl-C.
    Serve(serve::ServeArgs),
    /// Measure performance on this machine.
    Bench {
        #[command(subcommand)]
        target: BenchTarget,
    },
}

#[derive(Subcommand, Debug)]
enum BenchTarget {
    /// The storage engine, next to the device's own limits measured in the same run.
    Storage(bench::StorageArgs),
    /// The broker engine: steady traffic, a large backlog and delayed messages, in process.
    Broker(bench::broker::BrokerArgs),
    /// A partitioned topic alone, then fanned out to many subscriptions, in process.
    Fanout(bench::fanout::FanoutArgs),
    /// The server over loopback with the Rust client, next to the embedded broker.
    Remote(bench::remote::RemoteArgs),
    /// Internal to `bench storage`: fills a log in DIR with about BYTES of records, then
    /// aborts without closing it, so the parent can time recovery after an unclean stop.
    #[command(name = "storage-child-fill", hide = true)]
    StorageChildFill { dir: PathBuf, bytes: u64 },
}

fn main() -> anyhow::Result<()> {
    // Warnings from the storage engine (e.g. a failed checkpoint) must not pass silently
    // during a benchmark; RUST_LOG can ask for more.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    match Cli::parse().command {
        Command::Serve(args) => serve::run(&args),
        Command::Bench { target } => match target {
            BenchTarget::Storage(args) => bench::run_storage(&args),
            BenchTarget::Broker(args) => bench::broker::run(&args),
            BenchTarget::Fanout(args) => bench::fanout::run(&args),
            BenchTarget::Remote(args) => bench::remote::run(&args),
            BenchTarget::StorageChildFill { dir, bytes } => bench::reopen::child_fill(&dir, bytes),
        },
    }
}
