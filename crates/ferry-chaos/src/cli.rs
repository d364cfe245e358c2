//! `ferry chaos …`: the subcommands, kept here so the `ferry` binary only dispatches.

use std::path::PathBuf;

use crate::error::{ChaosError, Result};
use crate::harness::{self, RunOptions};
use crate::report::Report;
use crate::scenario::ScenarioArgs;
use crate::worker::{self, WorkerArgs};

#[derive(clap::Subcommand, Debug)]
pub enum ChaosCommand {
    /// Run the server under faults (kills, pauses, network cuts, a clock jump) with
    /// producers and consumers, then check that nothing acknowledged was lost, nothing
    /// acked came back and per-key order held. Exits 1 if a check fails.
    Run {
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Write the full report (JSON) to FILE.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Keep the history files (and the scenario) in DIR, which must be empty; a
        /// failing run keeps them anyway, in ./ferry-chaos-<seed> unless this is given.
        #[arg(long, value_name = "DIR")]
        keep_history: Option<PathBuf>,
    },
    /// Check the histories a run kept in DIR again.
    Check {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Write the full report (JSON) to FILE.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
    },
    /// Internal to `chaos run`: one producer or consumer process.
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// Runs a `chaos` subcommand; `Ok(false)` when the checks failed (the verdict says why).
pub fn run(command: ChaosCommand) -> Result<bool> {
    match command {
        ChaosCommand::Run {
            scenario,
            report,
            keep_history,
        } => {
            let binary = std::env::current_exe().map_err(|e| {
                ChaosError::Worker(format!("finding the ferry binary to start: {e}"))
            })?;
            let options = RunOptions {
                scenario: scenario.scenario(),
                binary,
                keep_history,
            };
            eprintln!(
                "ferry chaos: seed {} (rerun with --seed {})",
                options.scenario.seed, options.scenario.seed
            );
            finish(&harness::run(&options)?, report)
        }
        ChaosCommand::Check { dir, report } => finish(&harness::check_dir(&dir)?, report),
        ChaosCommand::Worker(args) => worker::run(&args).map(|()| true),
    }
}

fn finish(report: &Report, file: Option<PathBuf>) -> Result<bool> {
    println!("{}", report.verdict());
    for violation in &report.findings.violations {
        println!("  {violation}");
    }
    if let Some(dir) = &report.history_dir {
        println!("chaos: histories kept in {}", dir.display());
    }
    if let Some(file) = file {
        std::fs::write(&file, serde_json::to_vec_pretty(report)?)
            .map_err(|e| ChaosError::io(&file, e))?;
    }
    Ok(report.clean)
}
