//! `ferry serve`: the broker behind its gRPC API, durable in a directory, until Ctrl-C or
//! SIGTERM — then it stops accepting, finishes the calls in progress, gives unsettled
//! deliveries of open consume streams back, and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use ferry_broker::{Broker, BrokerConfig};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where the broker keeps its data (created if missing).
    #[arg(long, default_value = "./ferry-data", env = "FERRY_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Address of the gRPC listener (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:7070", env = "FERRY_GRPC_ADDR")]
    pub grpc: SocketAddr,
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let broker = Broker::open(&args.data_dir, BrokerConfig::default())
        .await
        .with_context(|| format!("opening the broker in {}", args.data_dir.display()))?;
    let listener = ferry_server::bind(args.grpc).await?;
    let addr = listener
        .local_addr()
        .context("reading the listener's address")?;
    println!(
        "ferry: serving gRPC (ferry.v1) on {addr}, data in {}",
        args.data_dir.display()
    );
    if addr.ip().is_loopback() {
        println!("ferry: no authentication configured: listening on the loopback interface only");
    }
    println!("ferry: Ctrl-C stops");
    ferry_server::serve(broker, listener, shutdown_signal()).await?;
    println!("ferry: stopped");
    Ok(())
}

/// Ctrl-C, or SIGTERM (what service managers and container runtimes send).
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
