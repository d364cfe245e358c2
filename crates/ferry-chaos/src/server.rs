//! The server under test: the real `ferry serve` binary, on one data directory and one
//! port for the whole run, with its test clock on. The supervisor kills it with SIGKILL
//! and starts it again, stops and continues it (SIGSTOP/SIGCONT), and jumps its clock.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::error::{ChaosError, Result};

/// How long a start may take before it counts as failed (recovery of a large log
/// included).
const START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct ServerProcess {
    binary: PathBuf,
    data_dir: PathBuf,
    clock_file: PathBuf,
    log: PathBuf,
    /// Port 0 before the first start; the port it got after.
    addr: SocketAddr,
    clock_offset_ms: i64,
    child: Option<Child>,
    lines: Option<mpsc::UnboundedReceiver<String>>,
}

impl ServerProcess {
    /// A server for `work_dir/data`, not started; its stderr goes to `work_dir/server.log`.
    pub fn new(binary: &Path, work_dir: &Path) -> ServerProcess {
        ServerProcess {
            binary: binary.to_owned(),
            data_dir: work_dir.join("data"),
            clock_file: work_dir.join("clock-offset-ms"),
            log: work_dir.join("server.log"),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            clock_offset_ms: 0,
            child: None,
            lines: None,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn clock_offset_ms(&self) -> i64 {
        self.clock_offset_ms
    }

    /// Starts the server and waits until it listens. A restart uses the port of the first
    /// start; the clock offset so far is kept (it is in the clock file).
    pub async fn start(&mut self) -> Result<()> {
        if self.child.is_some() {
            return Err(ChaosError::Server("started twice".into()));
        }
        write_offset(&self.clock_file, self.clock_offset_ms)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| ChaosError::io(&self.log, e))?;
        let mut child = Command::new(&self.binary)
            .arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--grpc")
            .arg(self.addr.to_string())
            .arg("--no-http")
            .arg("--no-aws")
            .arg("--no-kafka")
            .arg("--no-pubsub")
            .arg("--test-clock")
            .arg(&self.clock_file)
            .env_remove("FERRY_CONFIG")
            // The logs are files: no colour codes in them.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ChaosError::Server(format!("starting {}: {e}", self.binary.display())))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, mut lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        self.child = Some(child);
        let listening = tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.recv().await {
                if let Some(addr) = serving_addr(&line) {
                    return Some(addr);
                }
            }
            None
        })
        .await;
        match listening {
            Ok(Some(addr)) => {
                self.addr = addr;
                self.lines = Some(lines);
                Ok(())
            }
            Ok(None) => {
                let status = self.child.take().map(|mut c| async move { c.wait().await });
                let status = match status {
                    Some(wait) => format!("{:?}", wait.await),
                    None => String::new(),
                };
                Err(ChaosError::Server(format!(
                    "it exited before listening ({status}); see {}",
                    self.log.display()
                )))
            }
            Err(_) => Err(ChaosError::Server(format!(
                "not listening after {START_TIMEOUT:?}; see {}",
                self.log.display()
            ))),
        }
    }

    /// SIGKILL, and wait for the process to be gone (its port and data lock freed).
    pub async fn kill(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child
                .kill()
                .await
                .map_err(|e| ChaosError::Server(format!("killing it: {e}")))?;
        }
        self.lines = None;
        Ok(())
    }

    /// Kill, then start again on the same data and port.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill().await?;
        // The port was just freed; a start that loses the race for it tries again.
        let mut attempt = 0;
        loop {
            match self.start().await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < 5 => {
                    attempt += 1;
                    eprintln!("ferry chaos: restart attempt {attempt} failed: {e}");
                    self.child = None;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn pause(&self) -> Result<()> {
        self.signal(libc::SIGSTOP)
    }

    pub fn resume(&self) -> Result<()> {
        self.signal(libc::SIGCONT)
    }

    /// Moves the server's clock forward by `ms` and waits until the server says it has.
    pub async fn jump_clock(&mut self, ms: u64) -> Result<()> {
        self.clock_offset_ms += ms as i64;
        write_offset(&self.clock_file, self.clock_offset_ms)?;
        self.signal(libc::SIGUSR1)?;
        let expected = format!("ferry: test clock offset {} ms", self.clock_offset_ms);
        let lines = self
            .lines
            .as_mut()
            .ok_or_else(|| ChaosError::Server("not running".into()))?;
        let seen = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.recv().await {
                if line == expected {
                    return true;
                }
            }
            false
        })
        .await;
        match seen {
            Ok(true) => Ok(()),
            _ => Err(ChaosError::Server(format!(
                "it did not confirm the clock jump ({expected:?})"
            ))),
        }
    }

    /// SIGTERM, and wait for a clean exit.
    pub async fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        self.signal_pid(&child, libc::SIGCONT)?;
        self.signal_pid(&child, libc::SIGTERM)?;
        match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(status) => Err(ChaosError::Server(format!(
                "it did not stop cleanly: {status:?}"
            ))),
            Err(_) => {
                let _ = child.kill().await;
                Err(ChaosError::Server(
                    "it did not stop within 30 s of SIGTERM".into(),
                ))
            }
        }
    }

    fn signal(&self, signal: i32) -> Result<()> {
        let child = self
            .child
            .as_ref()
            .ok_or_else(|| ChaosError::Server("not running".into()))?;
        self.signal_pid(child, signal)
    }

    fn signal_pid(&self, child: &Child, signal: i32) -> Result<()> {
        send_signal(child, signal).map_err(ChaosError::Server)
    }
}

/// Sends `signal` to a child that has not been reaped.
pub(crate) fn send_signal(child: &Child, signal: i32) -> std::result::Result<(), String> {
    let pid = child
        .id()
        .ok_or_else(|| "the process has already exited".to_owned())?;
    // SAFETY: kill(2) with a pid of our own unreaped child and a valid signal number.
    if unsafe { libc::kill(pid as i32, signal) } != 0 {
        return Err(format!(
            "signal {signal} to {pid}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The clock file holds the offset in ms; written whole (temp file, rename) so the server
/// never reads half a number.
fn write_offset(path: &Path, offset_ms: i64) -> Result<()> {
    let temp = path.with_extension("tmp");
    std::fs::write(&temp, offset_ms.to_string()).map_err(|e| ChaosError::io(&temp, e))?;
    std::fs::rename(&temp, path).map_err(|e| ChaosError::io(path, e))
}

/// The address in `ferry: serving gRPC (ferry.v1) on 127.0.0.1:7070, data in …`.
fn serving_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("ferry: serving gRPC")?;
    let (_, after) = rest.split_once(" on ")?;
    after.split(',').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_address_is_read_from_the_start_line() {
        assert_eq!(
            serving_addr("ferry: serving gRPC (ferry.v1) on 127.0.0.1:7070, data in /x"),
            Some("127.0.0.1:7070".parse().unwrap())
        );
        assert_eq!(
            serving_addr("ferry: serving HTTP on http://127.0.0.1:1"),
            None
        );
    }
}
