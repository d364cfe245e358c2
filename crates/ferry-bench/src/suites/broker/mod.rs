//! `ferry bench broker`: the broker engine in process, under `Fsync` durability, 128-byte
//! payloads, 4 producers and 4 consumers acking — steady traffic, the same traffic on top of a
//! large backlog, and publishing next to many delayed messages — each figure checked against
//! its target, the relative ones against figures of the same run.

mod args;
mod backlog;
mod checks;
mod delayed;
mod fill;
pub mod json;
pub mod process;
mod report;
mod steady;
mod traffic;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ferry_broker::{Broker, BrokerConfig, Durability, QueueSpec};
use ferry_storage::{DirLock, StorageError};

use super::{fsync_count, settle};
pub use args::{BrokerDirArgs, WindowArgs};
use traffic::{AckMode, Shape};

/// The queue every scenario uses, in a broker of its own.
pub const QUEUE: &str = "bench";
/// The targets' traffic: 4 producers, 4 consumers, 128-byte payloads.
const PRODUCERS: usize = 4;
const CONSUMERS: usize = 4;
const PAYLOAD_BYTES: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Scenario {
    Steady,
    Backlog,
    Delayed,
}

#[derive(clap::Args, Debug)]
pub struct BrokerArgs {
    /// Short run (well under a minute): 0.5 s warm-up and 2 s windows, a 200,000-message
    /// backlog and 100,000 delayed messages.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub dir: BrokerDirArgs,
    /// Scenarios to run, comma-separated (default: all). The backlog check compares with
    /// steady, so it needs steady in the same run.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub only: Vec<Scenario>,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Messages per publish_batch call.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub batch: usize,
    /// Most messages one receive call asks for.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub receive_max: usize,
    /// How a consumer acks the messages of one receive.
    #[arg(long, value_enum, default_value_t = AckMode::Batch)]
    pub acks: AckMode,
    /// Producers run at most N messages ahead of the acks, so the queue stays near a steady
    /// depth instead of growing for as long as a window lasts.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub credit: usize,
    /// Messages in the backlog (default 10,000,000, or 200,000 with --quick).
    #[arg(long, value_name = "N")]
    pub backlog: Option<u64>,
    /// Delayed messages (1 hour) held while publishing (default 1,000,000, or 100,000 with
    /// --quick).
    #[arg(long, value_name = "N")]
    pub delayed: Option<u64>,
    /// Also write every figure as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Durations and sizes of one run, resolved from the arguments.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub quick: bool,
    pub warmup: Duration,
    pub window: Duration,
    pub credit: usize,
    pub backlog: u64,
    pub delayed: u64,
}

/// The backlog the memory target is stated for.
pub const TARGET_BACKLOG: u64 = 10_000_000;
/// The delayed messages the delayed target is stated for.
pub const TARGET_DELAYED: u64 = 1_000_000;
/// How long closing a broker may take (freeing the state of a 10-million-message backlog
/// takes seconds, not minutes).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(120);
/// How far in the future the held delayed messages are due: far beyond any run.
pub const DELAY: Duration = Duration::from_secs(3600);

impl Plan {
    fn from_args(args: &BrokerArgs) -> anyhow::Result<Plan> {
        let quick = args.quick;
        let window = args.window.window(quick)?;
        if args.credit < args.batch {
            bail!(
                "--credit {} is less than one batch ({}): producers could never publish",
                args.credit,
                args.batch
            );
        }
        Ok(Plan {
            quick,
            warmup: args.window.warmup(quick)?,
            window,
            credit: args.credit,
            backlog: args
                .backlog
                .unwrap_or(if quick { 200_000 } else { TARGET_BACKLOG }),
            delayed: args
                .delayed
                .unwrap_or(if quick { 100_000 } else { TARGET_DELAYED }),
        })
    }
}

/// The runtime an in-process broker bench drives its producers and consumers on: the
/// broker needs timers, and no I/O driver.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .context("start the tokio runtime")
}

/// A fresh broker in its own directory under `base`, with the bench queue created.
pub struct Fresh {
    pub broker: Broker,
    dir: tempfile::TempDir,
}

impl Fresh {
    pub async fn open(base: &Path, scenario: &str) -> anyhow::Result<Fresh> {
        let fresh = Fresh::empty(base, scenario).await?;
        let spec = QueueSpec {
            durability: Durability::Fsync,
            ..QueueSpec::default()
        };
        fresh.broker.create_queue(QUEUE, spec).await?;
        Ok(fresh)
    }

    /// A fresh broker in its own directory under `base`, with nothing created in it.
    pub async fn empty(base: &Path, scenario: &str) -> anyhow::Result<Fresh> {
        // Writeback and discards left by the previous broker (gigabytes after a backlog) land
        // now rather than inside this one's measurements.
        settle(base)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("broker-{scenario}-"))
            .tempdir_in(base)
            .with_context(|| format!("create a broker directory in {}", base.display()))?;
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .with_context(|| format!("open a broker in {}", dir.path().display()))?;
        Ok(Fresh { broker, dir })
    }

    /// The broker's directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Drops the broker, waits until it is gone, and opens it again on the same directory:
    /// returns it and how long the open took (recovering every queue).
    pub async fn reopen(self) -> anyhow::Result<(Fresh, Duration)> {
        let Fresh { broker, dir } = self;
        drop(broker);
        wait_closed(&dir).await?;
        let started = Instant::now();
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .with_context(|| format!("reopen the broker in {}", dir.path().display()))?;
        Ok((Fresh { broker, dir }, started.elapsed()))
    }

    /// Drops the broker (closing its logs), waits until it is gone, and removes its directory.
    pub async fn close(self) -> anyhow::Result<()> {
        let Fresh { broker, dir } = self;
        drop(broker);
        wait_closed(&dir).await?;
        let path = dir.path().to_path_buf();
        dir.close()
            .with_context(|| format!("remove {}", path.display()))
    }
}

/// Waits until the broker that had `dir` open is gone.
async fn wait_closed(dir: &tempfile::TempDir) -> anyhow::Result<()> {
    // The broker's timer task wakes on every publish and holds the broker while it looks
    // at the timers, so the last handle may be its: then the broker is dropped there, on
    // a runtime thread, and with millions of messages tracked that takes a while. The
    // directory lock is the broker's last field to drop, after every queue and log, so
    // once it can be taken nothing writes into the directory any more.
    let deadline = Instant::now() + CLOSE_TIMEOUT;
    loop {
        match DirLock::acquire(dir.path()) {
            Ok(_lock) => break,
            Err(StorageError::Locked { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("wait for the broker in {} to close", dir.path().display())
                });
            }
        }
    }
    Ok(())
}

pub fn run(args: &BrokerArgs) -> anyhow::Result<()> {
    fsync_count::install()?;
    let plan = Plan::from_args(args)?;
    if args.batch == 0 || args.receive_max == 0 {
        bail!("--batch and --receive-max must be at least 1");
    }
    let shape = Shape {
        producers: PRODUCERS,
        consumers: CONSUMERS,
        batch: args.batch,
        receive_max: args.receive_max,
        acks: args.acks,
        payload_bytes: PAYLOAD_BYTES,
    };
    let mut scenarios = if args.only.is_empty() {
        vec![Scenario::Steady, Scenario::Backlog, Scenario::Delayed]
    } else {
        args.only.clone()
    };
    scenarios.sort();
    scenarios.dedup();

    let (scratch, machine) = args.dir.scratch()?;
    let dir = scratch.path();

    let runtime = runtime()?;
    let mut run = report::Run {
        machine,
        plan,
        shape,
        steady: None,
        backlog: None,
        delayed: None,
    };
    for scenario in scenarios {
        match scenario {
            Scenario::Steady => {
                run.steady = Some(runtime.block_on(steady::run(dir, &shape, &plan))?);
            }
            Scenario::Backlog => {
                run.backlog = Some(runtime.block_on(backlog::run(dir, &shape, &plan))?);
            }
            Scenario::Delayed => {
                run.delayed = Some(runtime.block_on(delayed::run(dir, &shape, &plan))?);
            }
        }
    }
    drop(runtime);

    println!("{}", run.machine.line());
    println!("{}", report::table(&run));
    println!("{}", report::legend(&run));
    super::json::write(args.json.as_deref(), || json::run(&run))?;
    scratch.close().context("remove the scratch directory")?;
    Ok(())
}
