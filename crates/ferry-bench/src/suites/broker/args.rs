//! The arguments the in-process broker benches (`broker` and `fanout`) take alike: where
//! their brokers go, and how long each warm-up and measurement window lasts.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use super::super::machine::Machine;
use super::super::{probe_machine, scratch_dir};

#[derive(clap::Args, Debug)]
pub struct BrokerDirArgs {
    /// Where to put the brokers. A scratch directory is made inside it and removed afterwards.
    /// Default: ./target if it exists, else the current directory (never /tmp, which is often
    /// tmpfs and would make every fdatasync free).
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
}

impl BrokerDirArgs {
    /// The run's scratch directory, and the facts of the machine it is on (said on stderr).
    pub fn scratch(&self) -> anyhow::Result<(tempfile::TempDir, Machine)> {
        let scratch = scratch_dir(self.dir.as_deref(), "ferry-bench-")?;
        let machine = probe_machine(scratch.path());
        Ok((scratch, machine))
    }
}

#[derive(clap::Args, Debug)]
pub struct WindowArgs {
    /// Seconds of each measurement window (default 10, or 2 with --quick).
    #[arg(long, value_name = "N")]
    pub seconds: Option<f64>,
    /// Seconds of traffic before each window, not measured (default 2, or 0.5 with --quick).
    #[arg(long, value_name = "N")]
    pub warmup: Option<f64>,
}

impl WindowArgs {
    /// How long each measurement window lasts; never zero.
    pub fn window(&self, quick: bool) -> anyhow::Result<Duration> {
        let window = seconds("seconds", self.seconds, if quick { 2.0 } else { 10.0 })?;
        if window.is_zero() {
            bail!("--seconds must be more than 0");
        }
        Ok(window)
    }

    /// How long the traffic before each window runs.
    pub fn warmup(&self, quick: bool) -> anyhow::Result<Duration> {
        seconds("warmup", self.warmup, if quick { 0.5 } else { 2.0 })
    }
}

fn seconds(name: &str, value: Option<f64>, default: f64) -> anyhow::Result<Duration> {
    let v = value.unwrap_or(default);
    if !(v.is_finite() && v >= 0.0) {
        bail!("--{name} must be a number of seconds >= 0 (got {v})");
    }
    Ok(Duration::from_secs_f64(v))
}
