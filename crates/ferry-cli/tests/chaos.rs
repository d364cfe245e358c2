//! `ferry chaos run` against the real binary for two minutes: server kills, consumer kills,
//! pauses longer than a lease, proxy faults and a clock jump, then the checker. The run
//! must be clean, every kind of fault must really have been injected, and messages must
//! have flowed after the last one. The seed is fixed, so the schedule is the same each
//! time (and a failure replays with `ferry chaos run --seed 424242 --duration 2m`).

use std::process::Command;

#[test]
fn chaos_run_under_every_kind_of_fault_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .current_dir(dir.path())
        .args(["chaos", "run", "--duration", "2m", "--seed", "424242"])
        .arg("--report")
        .arg(&report_path)
        .output()
        .expect("running ferry chaos run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "ferry chaos run failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.starts_with("chaos: CLEAN"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    assert_eq!(report["clean"], true);
    let faults = &report["faults"];
    let count = |kind: &str| faults[kind].as_u64().unwrap_or(0);
    assert!(count("server_kill") >= 2, "{faults}");
    assert!(count("consumer_kill") >= 2, "{faults}");
    assert!(count("pause") >= 2, "{faults}");
    assert!(count("proxy") >= 3, "{faults}");
    assert_eq!(count("clock_jump"), 1, "{faults}");

    let findings = &report["findings"];
    let n = |field: &str| findings[field].as_u64().unwrap();
    for violation in [
        "lost",
        "acked_twice",
        "acked_came_back",
        "order_violations",
        "dead_letter_mismatches",
        "dedup_violations",
    ] {
        assert_eq!(n(violation), 0, "{violation}: {findings}");
    }
    assert!(n("acked_publishes") > 1000, "{findings}");
    assert!(n("published_after_faults") > 0, "{findings}");
    assert!(n("delivered_after_faults") > 0, "{findings}");
    // Rejects and poison messages reached the dead-letter queue; re-publishes under used
    // dedup ids happened.
    assert!(findings["dead_letters"]["rejected"].as_u64().unwrap() > 0);
    assert!(findings["dead_letters"]["max_deliveries"].as_u64().unwrap() > 0);
    assert!(n("republished") > 0, "{findings}");
}

/// `ferry chaos check` on a kept run whose only history file is `file` holding `lines`:
/// whether it passed, and what it printed.
fn check_kept_history(file: &str, lines: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let scenario = serde_json::json!({
        "seed": 1, "duration_ms": 1000, "rate": 10, "max_messages": null,
        "producers": 1, "consumers": 1, "lease_ms": 4000,
        "work_max_deliveries": 3, "orders_max_deliveries": 25,
        "fault_gap_ms": [1000, 2000], "clock_jumps": 1, "clock_jump_ms": 1000,
        "calm_ms": 0, "drain_timeout_ms": 1000
    });
    std::fs::write(dir.path().join("scenario.json"), scenario.to_string()).unwrap();
    std::fs::write(dir.path().join(file), lines).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["chaos", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), stdout)
}

#[test]
fn chaos_check_fails_on_a_history_with_a_lost_message() {
    let (passed, stdout) = check_kept_history(
        "producer-0.0.jsonl",
        r#"{"ev":"published","t":1,"queue":"chaos.work","sent_id":"A","id":"A","key":null,"kseq":null,"fate":"ack","dedup":null}
"#,
    );
    assert!(!passed, "{stdout}");
    assert!(stdout.starts_with("chaos: FAILED"), "{stdout}");
    assert!(stdout.contains("lost 1"), "{stdout}");
}

#[test]
fn chaos_check_fails_on_a_run_in_which_nothing_was_published() {
    // The harness's history of a run whose producers never got a publish through.
    let (passed, stdout) = check_kept_history(
        "harness.jsonl",
        r#"{"ev":"phase","t":1,"phase":"faults_over"}
{"ev":"phase","t":2,"phase":"drained"}
"#,
    );
    assert!(!passed, "{stdout}");
    assert!(stdout.starts_with("chaos: FAILED"), "{stdout}");
    assert!(stdout.contains("no messages published"), "{stdout}");
}

/// `ferry serve` with its stdout read line by line.
struct Serve {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    grpc: String,
    /// What it printed before it said where it listens.
    before: Vec<String>,
}

impl Serve {
    fn start(data: &std::path::Path, extra: &[&std::ffi::OsStr]) -> Serve {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args([
                "serve",
                "--grpc",
                "127.0.0.1:0",
                "--no-http",
                "--no-aws",
                "--no-kafka",
                "--no-pubsub",
                "--data-dir",
            ])
            .arg(data)
            .args(extra)
            .env_remove("FERRY_TEST_CLOCK")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut serve = Serve {
            child,
            lines,
            grpc: String::new(),
            before: Vec::new(),
        };
        let line = loop {
            let line = serve.next_line();
            if line.starts_with("ferry: serving gRPC (ferry.v1) on ") {
                break line;
            }
            serve.before.push(line);
        };
        let addr = line
            .split(" on ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap();
        serve.grpc = format!("ferry://{addr}");
        serve
    }

    /// The next line starting with `prefix` (earlier lines are skipped).
    fn wait_for(&self, prefix: &str) -> String {
        loop {
            let line = self.next_line();
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("ferry serve printed another line")
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child, not yet waited for.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn without_the_test_clock_sigusr1_is_refused_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    serve.signal(libc::SIGUSR1);
    serve.wait_for("ferry: SIGUSR1 ignored: the test clock is off");
    let list = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &serve.grpc, "queue", "list"])
        .output()
        .unwrap();
    assert!(list.status.success());
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_test_clock_jump_expires_a_held_lease_at_once() {
    use ferry_client::{Client, Message, proto};
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    std::fs::write(&clock, "0").unwrap();
    let serve = Serve::start(
        &dir.path().join("data"),
        &["--test-clock".as_ref(), clock.as_os_str()],
    );
    assert!(
        serve
            .before
            .iter()
            .any(|l| l.starts_with("ferry: TEST CLOCK ON")),
        "{:?}",
        serve.before
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = Client::connect(&serve.grpc).await.unwrap();
        // An ended lease is a failed attempt: redelivered after the backoff, kept short.
        let spec = proto::QueueSpec {
            lease_ms: Some(600_000),
            retry: Some(proto::RetryPolicy {
                max_deliveries: Some(5),
                backoff: Some(proto::Backoff {
                    base_ms: Some(10),
                    cap_ms: Some(10),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        client.create_queue("jump", spec).await.unwrap();
        client
            .publish("jump", vec![Message::new("m")])
            .await
            .unwrap();
        let first = client.receive("jump", "c", 1, None).await.unwrap();
        assert_eq!(first.len(), 1);
        let nothing_ready = async || {
            client
                .receive("jump", "c", 1, None)
                .await
                .unwrap()
                .is_empty()
        };
        // The clock file is read on SIGUSR1, and the server says what it made of it.
        let set_clock = |text: &str, said: &str| {
            std::fs::write(&clock, text).unwrap();
            serve.signal(libc::SIGUSR1);
            serve.wait_for(said);
        };
        assert!(nothing_ready().await);

        // A file that does not hold a number changes nothing.
        set_clock("later", "ferry: test clock unchanged");
        assert!(nothing_ready().await);

        // Eleven minutes on: the ten-minute lease has run out, and the message is back
        // (in real time, within the backoff, not the lease).
        set_clock("660000", "ferry: test clock offset 660000 ms");
        let started = std::time::Instant::now();
        let wait = Some(std::time::Duration::from_secs(20));
        let again = client.receive("jump", "c", 1, wait).await.unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, first[0].id);
        assert_eq!(again[0].delivery, 2);
    });
}
