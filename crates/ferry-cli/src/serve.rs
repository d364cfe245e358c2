//! `ferry serve`: the broker behind its gRPC and HTTP APIs, durable in a directory, until
//! Ctrl-C or SIGTERM — then it stops accepting, finishes the calls in progress, gives
//! unsettled deliveries of open consume streams back, and exits 0.

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
    /// Address of the HTTP/JSON listener (with /healthz, /readyz and /metrics).
    #[arg(long, default_value = "127.0.0.1:7071", env = "FERRY_HTTP_ADDR")]
    pub http: SocketAddr,
    /// Serve gRPC only.
    #[arg(long)]
    pub no_http: bool,
    /// A config file with API tokens and limits (see `ferry config check`).
    #[arg(long, value_name = "FILE", env = "FERRY_CONFIG")]
    pub config: Option<PathBuf>,
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    // A bad config stops the server before it opens anything.
    let config = args
        .config
        .as_deref()
        .map(crate::config::load)
        .transpose()?;
    let broker = Broker::open(&args.data_dir, BrokerConfig::default())
        .await
        .with_context(|| format!("opening the broker in {}", args.data_dir.display()))?;
    let grpc = ferry_server::bind(args.grpc).await?;
    let grpc_addr = grpc
        .local_addr()
        .context("reading the gRPC listener's address")?;
    let mut server = ferry_server::Server::new(broker).grpc(grpc);
    let mut authenticated = false;
    if let Some(config) = config {
        if let Some(n) = config.max_batch {
            server = server.max_batch(n);
        }
        if let Some(n) = config.max_connections {
            server = server.max_connections(n);
        }
        if let Some(auth) = config.auth {
            println!("ferry: authentication on: {} token(s)", auth.tokens.len());
            authenticated = true;
            server = server.auth(auth);
        }
    }
    let mut loopback = grpc_addr.ip().is_loopback();
    // Tests and scripts read these lines to find the ports when they asked for port 0.
    println!(
        "ferry: serving gRPC (ferry.v1) on {grpc_addr}, data in {}",
        args.data_dir.display()
    );
    if !args.no_http {
        let http = ferry_server::bind(args.http).await?;
        let http_addr = http
            .local_addr()
            .context("reading the HTTP listener's address")?;
        loopback &= http_addr.ip().is_loopback();
        println!("ferry: serving HTTP on http://{http_addr}");
        server = server.http(http);
    }
    if authenticated {
        // Said above.
    } else if loopback {
        println!("ferry: no authentication configured: listening on the loopback interface only");
    } else {
        println!("ferry: WARNING: no authentication configured and listening beyond loopback");
    }
    println!("ferry: Ctrl-C stops");
    server.serve(shutdown_signal()).await?;
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
