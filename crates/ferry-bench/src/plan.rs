//! One invocation of the workload harness: the targets, the workloads over each of them, and
//! the reports written at the end.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use ferry::Ferry;

use crate::driver::{self, Outcome};
use crate::machine::Machine;
use crate::workload::{self, Workload};
use crate::{charts, report};

/// An engine to measure: a name for the reports, the SDK URL, and the server process whose
/// CPU and memory are sampled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub url: String,
    /// The engine's server process; this process for `embedded:` URLs, where the broker
    /// runs in-process (and the figures then include the bench's own client work).
    pub pid: Option<u32>,
}

impl Target {
    /// A `NAME=URL` argument.
    pub fn parse(spec: &str) -> anyhow::Result<Target> {
        let (name, url) = spec
            .split_once('=')
            .filter(|(n, u)| !n.is_empty() && !u.is_empty())
            .with_context(|| format!("--target {spec}: expected NAME=URL"))?;
        let pid = url.starts_with("embedded:").then(std::process::id);
        Ok(Target {
            name: name.into(),
            url: url.into(),
            pid,
        })
    }
}

/// Everything one invocation runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workloads_dir: PathBuf,
    pub targets: Vec<Target>,
    /// Multiplies message counts and durations.
    pub scale: f64,
    /// Workload names to run; empty runs all.
    pub only: Vec<String>,
    pub out: PathBuf,
    /// The target the others are compared with in `results.md`.
    pub baseline: Option<String>,
    /// How long the fdatasync rate of the output directory is measured.
    pub fsync_probe: Duration,
}

/// One target's answer to one workload.
#[derive(Debug, Clone)]
pub struct TargetResult {
    pub target: String,
    pub url: String,
    pub outcome: Outcome,
}

/// One workload over every target.
#[derive(Debug, Clone)]
pub struct WorkloadResult {
    /// As run: scaled.
    pub workload: Workload,
    pub targets: Vec<TargetResult>,
}

/// A whole run, as written to the reports.
#[derive(Debug, Clone)]
pub struct Results {
    pub machine: Machine,
    pub scale: f64,
    pub baseline: Option<String>,
    pub workloads: Vec<WorkloadResult>,
}

/// Runs the plan and writes `results.json`, `results.md` and the charts into `plan.out`.
pub async fn run(plan: &Plan) -> anyhow::Result<Results> {
    if !(plan.scale.is_finite() && plan.scale > 0.0) {
        bail!("--scale must be a positive number (got {})", plan.scale);
    }
    if plan.targets.is_empty() {
        bail!("give at least one --target NAME=URL");
    }
    for (i, t) in plan.targets.iter().enumerate() {
        if plan.targets[..i].iter().any(|o| o.name == t.name) {
            bail!("--target {}: the name is given twice", t.name);
        }
    }
    if let Some(b) = &plan.baseline
        && !plan.targets.iter().any(|t| &t.name == b)
    {
        bail!("--baseline {b}: no --target has that name");
    }
    let mut workloads = workload::load_dir(&plan.workloads_dir)?;
    if !plan.only.is_empty() {
        for name in &plan.only {
            if !workloads.iter().any(|w| &w.name == name) {
                bail!(
                    "--only {name}: no such workload in {}",
                    plan.workloads_dir.display()
                );
            }
        }
        workloads.retain(|w| plan.only.contains(&w.name));
    }
    std::fs::create_dir_all(&plan.out).with_context(|| format!("create {}", plan.out.display()))?;
    let machine = Machine::probe(&plan.out, plan.fsync_probe);

    let mut results: Vec<WorkloadResult> = workloads
        .iter()
        .map(|w| WorkloadResult {
            workload: w.scaled(plan.scale),
            targets: Vec::new(),
        })
        .collect();
    // One connection per target for all its workloads, in the same order everywhere.
    for target in &plan.targets {
        let ferry = match Ferry::connect(&target.url).await {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("{}: cannot connect to {}: {e}", target.name, target.url);
                for r in &mut results {
                    r.targets.push(TargetResult {
                        target: target.name.clone(),
                        url: target.url.clone(),
                        outcome: Outcome::Failed(format!("connect: {e}")),
                    });
                }
                None
            }
        };
        let Some(ferry) = ferry else { continue };
        for r in &mut results {
            eprintln!("{} on {} ...", r.workload.name, target.name);
            let outcome = driver::run(&ferry, &r.workload, target.pid).await;
            eprintln!(
                "{} on {}: {}",
                r.workload.name,
                target.name,
                report::brief(&outcome)
            );
            r.targets.push(TargetResult {
                target: target.name.clone(),
                url: target.url.clone(),
                outcome,
            });
        }
        if let Err(e) = ferry.close().await {
            eprintln!("warning: {}: close: {e}", target.name);
        }
    }
    let results = Results {
        machine,
        scale: plan.scale,
        baseline: plan.baseline.clone(),
        workloads: results,
    };
    report::write(&results, &plan.out)?;
    charts::write(&results, &plan.out)?;
    Ok(results)
}
