//! `cargo run --example orders` — the seeds' e-commerce order flow on the embedded broker,
//! with its faults injected, ending in a summary; `-- --transport nats://127.0.0.1:4222`
//! (or `ferry://`, `redis://`, `postgres://`, `amqp://`) runs it on another engine.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// The e-commerce order flow: outbox, fan-out, saga with compensation, idempotent
/// consumers, dead letters, and a broker restart half-way.
#[derive(Debug, Parser)]
struct Args {
    /// The transport's URL (default: the embedded broker in the data directory).
    #[arg(long)]
    transport: Option<String>,
    /// Where the embedded broker and the shop's database live (default: a fresh temporary
    /// directory, removed afterwards).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Orders to place.
    #[arg(long, default_value_t = 40)]
    orders: u32,
    /// Do not restart the broker half-way.
    #[arg(long)]
    no_restart: bool,
    /// Longest wait for the flow to settle, in seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .init();
    // The analytics handler panics on purpose (the middleware turns it into a retry): one
    // line for it, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        eprintln!("injected fault: handler panicked: {what}");
    }));
    let args = Args::parse();
    let temporary = tempfile::tempdir()?;
    let data = args
        .data
        .clone()
        .unwrap_or_else(|| temporary.path().to_owned());
    let summary = orders::run(orders::Config {
        transport: args.transport,
        data,
        orders: args.orders,
        restart_broker: !args.no_restart,
        timeout: Duration::from_secs(args.timeout),
    })
    .await?;
    println!("{summary}");
    Ok(())
}
