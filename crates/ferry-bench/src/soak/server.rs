//! A Ferry server started for a soak (or for `ferry-bench sqs` and `ferry-bench kafka`):
//! `ferry serve` on a fresh data directory and free ports, stopped with SIGTERM (a clean
//! shutdown) when dropped.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ferry::Ferry;

pub struct Server {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
    /// The HTTP API's base URL, when started with it.
    pub http_url: Option<String>,
    /// The SQS endpoint's URL, when started with it.
    pub sqs_url: Option<String>,
    /// The Kafka endpoint's address (`host:port`), when started with it.
    pub kafka_addr: Option<String>,
}

/// The front ends a server is started with besides gRPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fronts {
    GrpcOnly,
    HttpAndSqs,
    Kafka,
}

/// What `ferry serve` prints once its Kafka listener is bound (the address follows).
const KAFKA_LINE: &str = "ferry: serving Kafka on ";

/// The kernel's pick of a free port, released for the server to bind: another process
/// could take it in between, which start-up would then report.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Server {
    /// Starts `binary serve` with its data in `data_dir` and waits until it takes clients.
    pub async fn start(binary: &Path, data_dir: &Path) -> anyhow::Result<Server> {
        Server::spawn(binary, data_dir, Fronts::GrpcOnly).await
    }

    /// As [`Server::start`], with the HTTP API and the SQS endpoint served too, each on a
    /// free port, and waits until both accept connections.
    pub async fn start_with_apis(binary: &Path, data_dir: &Path) -> anyhow::Result<Server> {
        Server::spawn(binary, data_dir, Fronts::HttpAndSqs).await
    }

    /// As [`Server::start`], with the Kafka endpoint on a port the kernel picks
    /// (`--kafka-addr 127.0.0.1:0`, read back from the server's output) and no HTTP API,
    /// SQS or Pub/Sub endpoint.
    pub async fn start_with_kafka(binary: &Path, data_dir: &Path) -> anyhow::Result<Server> {
        Server::spawn(binary, data_dir, Fronts::Kafka).await
    }

    async fn spawn(binary: &Path, data_dir: &Path, fronts: Fronts) -> anyhow::Result<Server> {
        let port = free_port()?;
        let mut command = Command::new(binary);
        // SAFETY: the closure runs in the forked child before exec and only calls prctl,
        // which is async-signal-safe.
        unsafe {
            use std::os::unix::process::CommandExt;
            // A soak stopped by a signal never runs `Drop`; the kernel then stops the server
            // with it instead of leaving it running.
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--grpc")
            .arg(format!("127.0.0.1:{port}"));
        let (mut http_url, mut sqs_url) = (None, None);
        if fronts == Fronts::HttpAndSqs {
            let (http, sqs) = (free_port()?, free_port()?);
            command
                .arg("--http")
                .arg(format!("127.0.0.1:{http}"))
                .arg("--aws-addr")
                .arg(format!("127.0.0.1:{sqs}"));
            http_url = Some(format!("http://127.0.0.1:{http}"));
            sqs_url = Some(format!("http://127.0.0.1:{sqs}"));
        } else {
            command.arg("--no-http").arg("--no-aws");
        }
        if fronts == Fronts::Kafka {
            // Port 0: the kernel's pick, which the server prints.
            command.arg("--kafka-addr").arg("127.0.0.1:0");
        } else {
            // The soak drives gRPC, HTTP and SQS only; Kafka's fixed default port would
            // collide between runs.
            command.arg("--no-kafka");
        }
        // No run drives Pub/Sub, and its fixed default port would collide between runs.
        command.arg("--no-pubsub");
        let stdout = if fronts == Fronts::Kafka {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .spawn()
            .with_context(|| format!("start {} serve", binary.display()))?;
        let kafka_addr = match child.stdout.take() {
            Some(out) => Some(kafka_address(out).await?),
            None => None,
        };
        let mut server = Server {
            child,
            url: format!("ferry://127.0.0.1:{port}"),
            data_dir: data_dir.to_path_buf(),
            http_url,
            sqs_url,
            kafka_addr,
        };
        let started = Instant::now();
        loop {
            if let Some(status) = server.child.try_wait()? {
                bail!("{} serve exited at start-up: {status}", binary.display());
            }
            match Ferry::connect(&server.url).await {
                Ok(ferry) => {
                    let _ = ferry.close().await;
                    // The other listeners are bound before serving starts; check anyway.
                    for url in [&server.http_url, &server.sqs_url].into_iter().flatten() {
                        let addr = url.trim_start_matches("http://");
                        tokio::net::TcpStream::connect(addr)
                            .await
                            .with_context(|| format!("{url} does not accept connections"))?;
                    }
                    return Ok(server);
                }
                Err(e) if started.elapsed() > Duration::from_secs(30) => {
                    bail!("{} did not take clients within 30 s: {e}", server.url)
                }
                // Not listening yet: start-up takes a moment; there is no event to await
                // from another process but its port answering.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Reads the server's output until it names its Kafka address, then drains the rest on a
/// thread of its own (a full pipe would stall the server's next line).
async fn kafka_address(out: std::process::ChildStdout) -> anyhow::Result<String> {
    let (found, addr) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut found = Some(found);
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix(KAFKA_LINE)
                && let Some(found) = found.take()
            {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let _ = found.send(addr.to_owned());
            }
        }
    });
    match tokio::time::timeout(Duration::from_secs(30), addr).await {
        Ok(Ok(addr)) if !addr.is_empty() => Ok(addr),
        Ok(_) => bail!("ferry serve ended its output without serving Kafka"),
        Err(_) => bail!("ferry serve did not serve Kafka within 30 s"),
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill only sends a signal to the child this value owns.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
