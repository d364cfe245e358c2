//! `ferry-bench run`: workload files against engines, reported into a directory.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferry_bench::{Plan, Target};

#[derive(Parser, Debug)]
#[command(
    name = "ferry-bench",
    about = "Workload benchmarks of Ferry's SDK over every engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run every workload (or those named by --only) against every target.
    Run(RunArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// An engine to measure, as NAME=URL (e.g. `embedded=embedded:/var/tmp/x`,
    /// `redis-default=redis://127.0.0.1:6379/0`); repeatable, run in the order given.
    #[arg(long = "target", value_name = "NAME=URL", required = true)]
    targets: Vec<String>,
    /// The server process of target NAME, sampled for CPU seconds and peak RSS; repeatable.
    /// `embedded:` targets sample this process.
    #[arg(long = "pid", value_name = "NAME=PID")]
    pids: Vec<String>,
    /// The directory of workload files.
    #[arg(long, value_name = "DIR", default_value = "bench/workloads")]
    workloads: PathBuf,
    /// Multiplies message counts and durations (e.g. 0.01 for a smoke run).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    scale: f64,
    /// Run only this workload; repeatable.
    #[arg(long, value_name = "WORKLOAD")]
    only: Vec<String>,
    /// Where results.json, results.md and the SVG charts are written.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: PathBuf,
    /// The target the others are compared with in results.md.
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let Command::Run(args) = Cli::parse().command;
    let mut targets = args
        .targets
        .iter()
        .map(|t| Target::parse(t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for spec in &args.pids {
        let (name, pid) = spec
            .split_once('=')
            .with_context(|| format!("--pid {spec}: expected NAME=PID"))?;
        let pid: u32 = pid
            .parse()
            .with_context(|| format!("--pid {spec}: {pid} is not a process id"))?;
        let target = targets
            .iter_mut()
            .find(|t| t.name == name)
            .with_context(|| format!("--pid {spec}: no --target is named {name}"))?;
        target.pid = Some(pid);
    }
    let plan = Plan {
        workloads_dir: args.workloads,
        targets,
        scale: args.scale,
        only: args.only,
        out: args.out,
        baseline: args.baseline,
        fsync_probe: Duration::from_secs(1),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let results = runtime.block_on(ferry_bench::run(&plan))?;
    println!("{}", ferry_bench::report::markdown(&results));
    eprintln!("wrote {}", plan.out.display());
    // The reports hold every figure that was measured, but a script running the bench must
    // still learn that some run failed.
    let failed = results
        .workloads
        .iter()
        .flat_map(|w| &w.targets)
        .filter(|t| matches!(t.outcome, ferry_bench::driver::Outcome::Failed(_)))
        .count();
    if failed > 0 {
        anyhow::bail!("{failed} workload runs failed; see results.md");
    }
    Ok(())
}
