//! A real `ferry serve` child process for end-to-end tests, and the `ferry` command run
//! against it.

#![allow(dead_code)] // Each test file uses its own part of this.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// A running `ferry serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    /// `ferry://host:port`.
    pub grpc: String,
    /// `host:port`.
    pub http: String,
}

impl Server {
    /// Starts on free ports and waits for the lines that say where it listens.
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[])
    }

    /// The same with more `serve` arguments.
    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
        let (child, lines) = spawn_serve(data_dir, extra);
        let (grpc, http) = listening(
            &lines,
            "ferry: serving gRPC (ferry.v1) on ",
            "ferry: serving HTTP on http://",
            |_| {},
        );
        Server {
            child,
            grpc: format!("ferry://{grpc}"),
            http,
        }
    }

    /// Runs `ferry ARGS` against this server.
    pub fn ferry(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["--server", &self.grpc])
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `ferry ARGS`, expecting success; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.ferry(args);
        assert!(
            out.status.success(),
            "ferry {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `ferry ARGS --json`, expecting success; its output parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut with = args.to_vec();
        with.push("--json");
        let text = self.ok(&with);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// Runs `ferry ARGS`, expecting failure; its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.ferry(args);
        assert!(!out.status.success(), "ferry {args:?} succeeded");
        String::from_utf8(out.stderr).unwrap()
    }

    /// Consumed messages, one JSON object a line.
    pub fn consume(&self, queue: &str, mode: &str, count: &str) -> Vec<Value> {
        self.ok(&[
            "consume", queue, "--mode", mode, "--count", count, "--wait", "2s", "--json",
        ])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the child's pid; no memory is touched.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0);
    }

    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("ferry serve did not exit within 10 s");
    }
}

/// `ferry serve` on free ports with `extra` arguments, and its stdout a line at a time.
pub fn spawn_serve(data_dir: &Path, extra: &[&str]) -> (Child, mpsc::Receiver<String>) {
    spawn_serve_with(data_dir, extra, |_| {})
}

/// The same, with the command adjusted by `setup` first (its environment, its stderr).
pub fn spawn_serve_with(
    data_dir: &Path,
    extra: &[&str],
    setup: impl FnOnce(&mut Command),
) -> (Child, mpsc::Receiver<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command
        .args(["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(["--aws-addr", "127.0.0.1:0"])
        .args(["--kafka-addr", "127.0.0.1:0"])
        // A free port rather than the emulator's 8085, which tests running at once would
        // share. An address asks for the endpoint, which is refused beside [tls] or
        // [auth]: tests that configure either pass `--no-pubsub`.
        .args(["--pubsub-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .env_remove("FERRY_SERVER")
        .stdout(Stdio::piped());
    setup(&mut command);
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Where `ferry serve` says it listens, `host:port` for gRPC and for HTTP, from the lines
/// that begin with these prefixes; every line read goes through `check` first.
pub fn listening(
    lines: &mpsc::Receiver<String>,
    grpc_prefix: &str,
    http_prefix: &str,
    check: impl Fn(&str),
) -> (String, String) {
    let (mut grpc, mut http) = (None, None);
    while grpc.is_none() || http.is_none() {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("ferry serve printed its addresses");
        check(&line);
        if let Some(rest) = line.strip_prefix(grpc_prefix) {
            grpc = Some(rest.split(',').next().unwrap().to_owned());
        } else if let Some(rest) = line.strip_prefix(http_prefix) {
            // The address is the line's first word after the prefix: the SQS line goes on
            // to say what else it serves.
            http = Some(
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    (grpc.unwrap(), http.unwrap())
}

/// A running `ferry serve` with its SQS/SNS endpoint on a free port, killed when dropped.
pub struct AwsServer {
    pub child: Child,
    /// The SQS/SNS endpoint, `host:port`.
    pub aws: String,
    /// The HTTP/JSON API, `host:port`.
    pub http: String,
}

impl AwsServer {
    /// Starts on `data_dir` and waits for the lines that say where it listens.
    pub fn start(data_dir: &Path) -> AwsServer {
        let (child, lines) = spawn_serve(data_dir, &[]);
        let (http, aws) = listening(
            &lines,
            "ferry: serving HTTP on http://",
            "ferry: serving Amazon SQS on http://",
            |_| {},
        );
        AwsServer { child, aws, http }
    }

    /// `http://host:port` of the SQS/SNS endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.aws)
    }

    /// SIGKILL, and reaped.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AwsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One SNS call in the query protocol (`form` without `Version`) to the endpoint at `addr`.
pub fn sns_call(addr: &str, form: &str) -> (u16, String) {
    let headers = "Content-Type: application/x-www-form-urlencoded\r\n\
                   Authorization: AWS4-HMAC-SHA256 Credential=t/20260101/us-east-1/sns/aws4_request, SignedHeaders=host, Signature=0\r\n";
    http(
        addr,
        headers,
        "POST",
        "/",
        &format!("{form}&Version=2010-03-31"),
    )
}

/// One SQS call in AWS JSON 1.0 to the endpoint at `addr`.
pub fn sqs_call(addr: &str, action: &str, body: &str) -> (u16, String) {
    let headers =
        format!("X-Amz-Target: AmazonSQS.{action}\r\nContent-Type: application/x-amz-json-1.0\r\n");
    http(addr, &headers, "POST", "/", body)
}

/// `ferry config check FILE`, with the environment given to the command.
pub fn config_check(file: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command.args(["config", "check"]).arg(file);
    command
}

/// The lines a `ferry serve` child prints up to the one that says it is ready
/// (`Ctrl-C stops`); the child is killed then.
pub fn lines_until_ready_then_kill(mut child: Child) -> Vec<String> {
    let mut printed = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let last = line.contains("Ctrl-C stops");
        printed.push(line);
        if last {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    printed
}

/// One HTTP/1.1 request on a fresh connection with `headers` (each ending in `\r\n`);
/// the status code and the whole response.
pub fn http(addr: &str, headers: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    (status, response)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ferry token hash TOKEN`: the hash a config file's `sha256` holds.
pub fn sha256_hex(token: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["token", "hash", token])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
