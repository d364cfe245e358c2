//! The worker processes of a run: `ferry chaos worker` children of the harness, each
//! incarnation with its own history file, so a killed consumer's history is kept and its
//! replacement starts a new one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::error::{ChaosError, Result};
use crate::server::send_signal;
use crate::worker::Role;

/// How long a worker may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct WorkerProcess {
    role: Role,
    index: u32,
    incarnation: u32,
    child: Child,
}

/// What every worker of a run shares.
#[derive(Debug, Clone)]
pub struct WorkerEnv {
    pub binary: PathBuf,
    pub url: String,
    pub history_dir: PathBuf,
    pub log: PathBuf,
    pub seed: u64,
}

impl WorkerProcess {
    /// Starts incarnation `incarnation` of worker `index`; `extra` are role-specific flags.
    pub fn spawn(
        env: &WorkerEnv,
        role: Role,
        index: u32,
        incarnation: u32,
        extra: &[String],
    ) -> Result<WorkerProcess> {
        let name = match role {
            Role::Producer => "producer",
            Role::Consumer => "consumer",
        };
        let history = env
            .history_dir
            .join(format!("{name}-{index}.{incarnation}.jsonl"));
        let log = open_log(&env.log)?;
        let child = Command::new(&env.binary)
            .args(["chaos", "worker", "--role", name, "--url", &env.url])
            .arg("--history")
            .arg(&history)
            .args(["--index", &index.to_string()])
            .args(["--seed", &env.seed.to_string()])
            .args(extra)
            // The logs are files: no colour codes in them.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ChaosError::Worker(format!("starting {name} {index}: {e}")))?;
        Ok(WorkerProcess {
            role,
            index,
            incarnation,
            child,
        })
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// An error if the worker has exited on its own (it only ends when told).
    pub fn check_running(&mut self, log: &Path) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(ChaosError::Worker(format!(
                "{:?} {} exited on its own ({status}); see {}",
                self.role,
                self.index,
                log.display()
            ))),
            Err(e) => Err(ChaosError::Worker(format!("checking a worker: {e}"))),
        }
    }

    /// SIGKILL, and wait until it is gone.
    pub async fn kill(&mut self) -> Result<()> {
        self.child
            .kill()
            .await
            .map_err(|e| ChaosError::Worker(format!("killing {:?} {}: {e}", self.role, self.index)))
    }

    /// SIGTERM, and wait for a clean exit.
    pub async fn stop(&mut self) -> Result<()> {
        send_signal(&self.child, libc::SIGTERM).map_err(ChaosError::Worker)?;
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(status) => Err(ChaosError::Worker(format!(
                "{:?} {} failed: {status:?}",
                self.role, self.index
            ))),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(ChaosError::Worker(format!(
                    "{:?} {} did not stop within {STOP_TIMEOUT:?} of SIGTERM",
                    self.role, self.index
                )))
            }
        }
    }
}

fn open_log(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| ChaosError::io(path, e))
}
