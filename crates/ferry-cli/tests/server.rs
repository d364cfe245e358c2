//! The real `ferry serve`, driven by the `ferry` command itself, as a user would.

mod support;

use std::process::{Command, Stdio};

use serde_json::Value;
use support::Server;

#[test]
fn poison_message_goes_to_the_dlq_is_listed_redriven_and_then_acked() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ok(&[
        "queue",
        "create",
        "jobs",
        "--max-deliveries",
        "2",
        "--backoff",
        "50ms",
        "--lease",
        "30s",
    ]);
    let published = server.json(&["publish", "jobs", "poison", "--header", "kind=test"]);
    assert_eq!(published["published"], 1);

    let first = server.consume("jobs", "nack", "1");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["payload"], "poison");
    assert_eq!(first[0]["delivery"], 1);
    let second = server.consume("jobs", "nack", "1");
    assert_eq!(second[0]["delivery"], 2);

    let table = server.ok(&["dlq", "list", "jobs.dlq"]);
    assert!(table.contains("max_deliveries"), "{table}");
    assert!(table.contains("nacked by ferry consume"), "{table}");
    let letters = server.json(&["dlq", "list", "jobs.dlq"]);
    assert_eq!(letters.as_array().unwrap().len(), 1);
    assert_eq!(letters[0]["dead_letter"]["deliveries"], 2);
    assert_eq!(letters[0]["headers"]["kind"], "test");
    let peeked = server.ok(&["dlq", "peek", "jobs.dlq"]);
    assert!(peeked.contains("poison"), "{peeked}");

    let stats = server.json(&["stats"]);
    let jobs = stats
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "jobs")
        .unwrap();
    assert_eq!(jobs["dlq_depth"], 1);
    assert_eq!(jobs["dead_lettered"], 1);
    assert_eq!(jobs["ready"], 0);

    let redriven = server.json(&["dlq", "redrive", "jobs.dlq"]);
    assert_eq!(redriven["moved"], 1);
    let summary = server.ok(&["dlq", "redrive", "jobs.dlq"]);
    assert!(summary.contains("moved 0"), "{summary}");

    let again = server.consume("jobs", "ack", "5");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["payload"], "poison");

    let info = server.json(&["queue", "describe", "jobs"]);
    assert_eq!(info["spec"]["max_deliveries"], 2);
    assert_eq!(info["stats"]["acked"], 1);
    assert_eq!(info["stats"]["ready"], 0);
    assert_eq!(info["stats"]["in_flight"], 0);
    let table = server.ok(&["stats"]);
    assert!(table.contains("jobs.dlq"), "{table}");
}

#[test]
fn a_poison_key_is_parked_listed_and_unparked_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ok(&["queue", "create", "keyed", "--ordering", "key-shared"]);
    server.ok(&["queue", "create", "plain"]);
    for (payload, key) in [("p1", "poison"), ("o1", "other"), ("p2", "poison")] {
        server.ok(&["publish", "keyed", payload, "--key", key]);
    }

    let parked = server.ok(&["queue", "park", "keyed", "poison"]);
    assert!(
        parked.contains("parked key poison on queue keyed"),
        "{parked}"
    );
    // 0xff 0x00: a key that is not text.
    server.ok(&["queue", "park", "keyed", "/wA=", "--key-base64"]);
    let taken = server.consume("keyed", "ack", "5");
    let payloads: Vec<&str> = taken
        .iter()
        .map(|m| m["payload"].as_str().unwrap())
        .collect();
    assert_eq!(payloads, ["o1"], "the parked key's messages are held");

    let listed = server.json(&["queue", "parked", "keyed"]);
    assert_eq!(
        listed,
        serde_json::json!([{"key": "poison", "held": 2}, {"key_base64": "/wA=", "held": 0}])
    );
    let table = server.ok(&["queue", "parked", "keyed"]);
    assert!(
        table.contains("poison") && table.contains("0xff00"),
        "{table}"
    );
    let info = server.json(&["queue", "describe", "keyed"]);
    assert_eq!(info["stats"]["parked"], 2, "{info}");

    let refused = server.ferry(&["queue", "park", "plain", "k"]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("key-shared"), "{why}");
    let bad = server.ferry(&["queue", "park", "keyed", "!", "--key-base64"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("base64"));

    let unparked = server.json(&["queue", "unpark", "keyed", "poison"]);
    assert_eq!(unparked["unparked"], true, "{unparked}");
    server.ok(&["queue", "unpark", "keyed", "/wA=", "--key-base64"]);
    let taken = server.consume("keyed", "ack", "2");
    let payloads: Vec<&str> = taken
        .iter()
        .map(|m| m["payload"].as_str().unwrap())
        .collect();
    assert_eq!(payloads, ["p1", "p2"], "in order once unparked");
    let none = server.ok(&["queue", "parked", "keyed"]);
    assert!(none.contains("no parked keys on keyed"), "{none}");
}

#[test]
fn bulk_publish_from_a_file_and_stdin_stores_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ok(&["queue", "create", "bulk"]);
    let lines: String = (0..1000).map(|i| format!("message {i}\n")).collect();
    let file = dir.path().join("lines.txt");
    std::fs::write(&file, &lines).unwrap();
    let summary = server.ok(&["publish", "bulk", "--file", file.to_str().unwrap()]);
    assert!(summary.contains("published 1000 of 1000"), "{summary}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &server.grpc, "publish", "bulk", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("published 1000 of 1000"), "{summary}");
    let info = server.json(&["queue", "describe", "bulk"]);
    assert_eq!(info["stats"]["ready"], 2000);
}

#[test]
fn unknown_queue_is_a_one_line_error_and_a_failing_exit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    for args in [
        &["queue", "describe", "missing"][..],
        &["publish", "missing", "x"],
        &["consume", "missing", "--wait", "0s"],
    ] {
        let out = server.ferry(args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("missing"), "{stderr}");
    }
    let file = dir.path().join("lines.txt");
    std::fs::write(&file, "a\nb\n").unwrap();
    let out = server.ferry(&["publish", "missing", "--file", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let unreachable = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", "ferry://127.0.0.1:1", "queue", "list"])
        .output()
        .unwrap();
    assert!(!unreachable.status.success());
    let stderr = String::from_utf8_lossy(&unreachable.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ferry serve"), "{stderr}");
}

#[test]
fn sigterm_stops_the_server_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    server.ok(&["queue", "list"]);
    server.signal(libc::SIGTERM);
    let status = server.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn sigkill_and_restart_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data);
    server.ok(&["queue", "create", "durable"]);
    server.ok(&["publish", "durable", "one", "two", "three"]);
    let acked = server.consume("durable", "ack", "1");
    assert_eq!(acked[0]["payload"], "one");
    server.signal(libc::SIGKILL);
    server.wait_exit();

    let server = Server::start(&data);
    let left: Vec<Value> = server.consume("durable", "ack", "10");
    let payloads: Vec<&str> = left
        .iter()
        .map(|d| d["payload"].as_str().unwrap())
        .collect();
    assert_eq!(payloads, ["two", "three"]);
    let info = server.json(&["queue", "describe", "durable"]);
    assert_eq!(info["stats"]["ready"], 0);
    assert_eq!(info["stats"]["published"], 3);
    // The HTTP listener came back too.
    assert!(!server.http.is_empty());
}

#[test]
fn rejected_messages_are_dead_lettered_at_once_and_peeked_by_seq() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ok(&["queue", "create", "parked"]);
    server.ok(&["queue", "create", "work", "--dead-letter", "parked"]);
    server.ok(&["publish", "work", "first", "second"]);
    let rejected = server.consume("work", "reject", "2");
    assert_eq!(rejected.len(), 2);
    for (seq, payload) in [("0", "first"), ("1", "second")] {
        let letter = server.json(&["dlq", "peek", "parked", "--seq", seq]);
        assert_eq!(letter["payload"], payload, "seq {seq}");
        assert_eq!(letter["dead_letter"]["reason"], "rejected");
    }
    let out = server.ferry(&["dlq", "peek", "parked", "--seq", "7"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no dead letter at seq 7"), "{stderr}");
    // To another queue than the origin.
    server.ok(&["queue", "create", "retry"]);
    let moved = server.json(&[
        "dlq", "redrive", "parked", "--target", "retry", "--max", "1",
    ]);
    assert_eq!(moved["moved"], 1);
    assert_eq!(server.consume("retry", "ack", "5").len(), 1);
}

#[test]
fn no_http_serves_grpc_alone() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ferry"))
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
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let printed = support::lines_until_ready_then_kill(child);
    assert!(
        printed.iter().any(|l| l.contains("serving gRPC")),
        "{printed:?}"
    );
    assert!(!printed.iter().any(|l| l.contains("HTTP")), "{printed:?}");
}

/// One GET on a fresh connection, with the token if given; the status code and the whole
/// response.
fn http_get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    support::http(addr, &auth, "GET", path, "")
}

#[test]
fn a_config_file_turns_authentication_on_and_is_checked_first() {
    let dir = tempfile::tempdir().unwrap();
    let hash = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["token", "hash", "s3cret-token"])
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap().trim().to_owned();
    assert_eq!(hash.len(), 64);
    let config = dir.path().join("ferry.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nmax_batch = 100\n\n[[auth.tokens]]\nname = \"ops\"\nsha256 = \"{hash}\"\npermissions = [\"admin:#\", \"publish:#\"]\n"
        ),
    )
    .unwrap();
    let check = support::config_check(&config).output().unwrap();
    let text = String::from_utf8(check.stdout).unwrap();
    assert!(check.status.success());
    assert!(
        text.contains("ops: admin:#") && text.contains("max_batch = 100"),
        "{text}"
    );
    assert!(!text.contains(&hash), "the hash is not printed");

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[auth.tokens]]\nname = \"x\"\nsha256 = \"abc\"\npermissions = []\n",
    )
    .unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "serve",
            "--grpc",
            "127.0.0.1:0",
            "--no-http",
            "--no-aws",
            "--no-kafka",
            "--no-pubsub",
            "--config",
        ])
        .arg(&bad)
        .arg("--data-dir")
        .arg(dir.path().join("never"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("sha256"));
    assert!(!dir.path().join("never").exists(), "nothing opened");

    let server = Server::start_with(
        &dir.path().join("data"),
        &["--no-pubsub", "--config", config.to_str().unwrap()],
    );
    let (status, _) = http_get(&server.http, "/v1/queues", None);
    assert_eq!(status, 401);
    let (status, body) = http_get(&server.http, "/v1/queues", Some("s3cret-token"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(http_get(&server.http, "/healthz", None).0, 200);
    let out = server.ferry(&["queue", "list"]);
    assert!(!out.status.success(), "without a token the CLI is refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--token"), "says what to do: {stderr}");

    // With the token, from the flag or from FERRY_TOKEN, every client command works.
    server.ok(&["--token", "s3cret-token", "queue", "create", "jobs"]);
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &server.grpc, "publish", "jobs", "one", "--json"])
        .env("FERRY_TOKEN", "s3cret-token")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = server.ok(&["queue", "list", "--token", "s3cret-token"]);
    assert!(listed.contains("jobs"), "{listed}");
    let wrong = server.ferry(&["--token", "not-the-token", "queue", "list"]);
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(stderr.contains("token"), "{stderr}");
    assert!(
        !stderr.contains("not-the-token"),
        "the token is never printed: {stderr}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["queue", "list", "--help"])
        .env("FERRY_TOKEN", "s3cret-token")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--token") && !help.contains("s3cret"),
        "{help}"
    );
}

#[test]
fn config_values_come_from_flags_then_variables_then_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    std::fs::write(
        &config,
        format!(
            "[grpc]\naddr = \"127.0.0.1:9\"\n[http]\nenabled = false\n[data]\ndir = \"/from/file\"\n\
             [limits]\nmax_batch = 100\nmax_connections = 7\n\n[[auth.tokens]]\nname = \"ops\"\n\
             sha256 = \"{hash}\"\npermissions = [\"admin:#\"]\n"
        ),
    )
    .unwrap();
    let check = support::config_check(&config)
        .env("FERRY_LIMITS_MAX_BATCH", "50")
        .env("FERRY_DATA_DIR", "/from/env")
        .output()
        .unwrap();
    let text = String::from_utf8(check.stdout).unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    for expected in [
        "limits.max_batch = 50  (env FERRY_LIMITS_MAX_BATCH)",
        "limits.max_connections = 7  (file)",
        "data.dir = /from/env  (env FERRY_DATA_DIR)",
        "grpc.addr = 127.0.0.1:9  (file)",
        "http.enabled = false  (file)",
        "http.addr = 127.0.0.1:7071  (default)",
        "auth: 1 token(s)",
    ] {
        assert!(text.contains(expected), "{expected:?} in {text}");
    }
    assert!(!text.contains(hash), "no hash printed: {text}");
    let bad = support::config_check(&config)
        .env("FERRY_GRPC_ADDR", "not-an-address")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("FERRY_GRPC_ADDR"));

    // serve: the variable beats the file's gRPC address, the flag beats the variable's
    // data directory, and the file turns HTTP off.
    let (from_env, from_flag) = (dir.path().join("env-data"), dir.path().join("flag-data"));
    let child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&from_flag)
        .env("FERRY_GRPC_ADDR", "127.0.0.1:0")
        .env("FERRY_AWS_ADDR", "127.0.0.1:0")
        // Served beside [auth] (with SASL): on a free port, not Kafka's.
        .env("FERRY_KAFKA_ADDR", "127.0.0.1:0")
        .env("FERRY_DATA_DIR", &from_env)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let printed = support::lines_until_ready_then_kill(child);
    let grpc = printed
        .iter()
        .find_map(|l| l.strip_prefix("ferry: serving gRPC (ferry.v1) on "))
        .unwrap_or_else(|| panic!("{printed:?}"));
    assert!(!grpc.starts_with("127.0.0.1:9,"), "{grpc}");
    assert!(grpc.contains(from_flag.to_str().unwrap()), "{grpc}");
    assert!(!printed.iter().any(|l| l.contains("HTTP")), "{printed:?}");
    assert!(from_flag.exists() && !from_env.exists());
}

#[test]
fn serve_help_shows_only_its_own_flags_and_the_client_flags_stay_where_they_were() {
    let help = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--tls-cert"), "{help}");
    for client_flag in ["--server", "--token", "--tls-ca", "FERRY_SERVER"] {
        assert!(!help.contains(client_flag), "{client_flag} in:\n{help}");
    }
    let queue_help = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["queue", "list", "--help"])
        .output()
        .unwrap();
    let queue_help = String::from_utf8_lossy(&queue_help.stdout);
    for client_flag in ["--server", "--token", "--tls-ca", "FERRY_SERVER"] {
        assert!(
            queue_help.contains(client_flag),
            "{client_flag} in:\n{queue_help}"
        );
    }

    // Given to `serve` anyway, they are refused rather than ignored. (A config that does
    // not exist: were they taken, `serve` would fail instead of running on.)
    for args in [
        &[
            "serve",
            "--server",
            "ferry://127.0.0.1:1",
            "--config",
            "/nonexistent/f.toml",
        ][..],
        &["--token", "t", "serve", "--config", "/nonexistent/f.toml"],
        &["config", "check", "--tls-ca", "ca.pem"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains("talk to a server"), "{args:?}: {stderr}");
    }

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // Before the command, after it, and from FERRY_SERVER.
    server.ok(&["queue", "create", "jobs"]);
    let after = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["queue", "list", "--server", &server.grpc])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&after.stdout).contains("jobs"));
    let from_env = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["queue", "list"])
        .env("FERRY_SERVER", &server.grpc)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&from_env.stdout).contains("jobs"));
}

/// The JSON body of a response `support::http` returned whole.
fn json_body(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {response}"))
}

#[test]
fn the_console_flags_set_its_sampling_and_alerts_and_its_topology_names_the_front_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (child, lines) = support::spawn_serve(
        dir.path(),
        &[
            "--console-sample-interval",
            "250ms",
            "--console-age-alert",
            "2m",
            "--console-lag-alert",
            "90s",
        ],
    );
    let (http, aws) = support::listening(
        &lines,
        "ferry: serving HTTP on http://",
        "ferry: serving Amazon SQS on http://",
        |_| {},
    );
    // Killed when dropped, whatever the test does.
    let _server = Server {
        child,
        grpc: String::new(),
        http: http.clone(),
    };
    let (status, _) = support::http(&http, "", "POST", "/v1/queues", r#"{"name": "jobs"}"#);
    assert_eq!(status, 201);
    let (status, _) = support::http(&http, "", "POST", "/v1/topics", r#"{"name": "events"}"#);
    assert_eq!(status, 201);

    let (status, response) = http_get(&http, "/v1/console/overview", None);
    assert_eq!(status, 200, "{response}");
    let overview = json_body(&response);
    assert_eq!(overview["sample_interval_ms"], 250);
    assert_eq!(overview["age_alert_ms"], 120_000);
    assert_eq!(overview["lag_alert_ms"], 90_000);

    let (status, response) = http_get(&http, "/v1/console/topology", None);
    assert_eq!(status, 200, "{response}");
    let topology = json_body(&response);
    let aliases = |id: &str| {
        topology["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {topology}"))["aliases"]
            .clone()
    };
    assert_eq!(
        aliases("queue:jobs"),
        serde_json::json!([{"protocol": "sqs", "name": format!("http://{aws}/000000000000/jobs")}])
    );
    let topic = aliases("topic:events");
    assert_eq!(
        topic[0],
        serde_json::json!({"protocol": "kafka", "name": "events"})
    );
    assert_eq!(topic[1]["protocol"], "sns");
    assert!(
        topic[1]["name"]
            .as_str()
            .unwrap()
            .ends_with(":000000000000:events")
    );
}

#[test]
fn console_durations_need_a_unit_and_a_sample_interval_of_at_least_10ms() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, says) in [
        ("--console-sample-interval", "1ms", "10ms"),
        ("--console-age-alert", "300", "unit"),
        ("--console-lag-alert", "soon", "duration"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["serve", "--data-dir"])
            .arg(dir.path())
            .args([flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value} was taken");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flag) && stderr.contains(says), "{stderr}");
    }
}

#[test]
fn the_pubsub_endpoint_is_served_by_default_and_off_beside_auth_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    // On by default, at the emulator's address (said by `config check`, as serving it on
    // 8085 here would collide with other tests); served on the port asked for.
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let check = support::config_check(&empty).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    for expected in [
        "pubsub.addr = 127.0.0.1:8085  (default)",
        "pubsub.enabled = true  (default)",
    ] {
        assert!(text.contains(expected), "{expected:?} in {text}");
    }
    let (mut child, lines) = support::spawn_serve(&dir.path().join("data"), &[]);
    let pubsub = loop {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("ferry serve said where it serves Pub/Sub");
        if let Some(rest) = line.strip_prefix("ferry: serving Google Cloud Pub/Sub on ") {
            let addr = rest.split_whitespace().next().unwrap().to_owned();
            assert!(
                line.contains(&format!("PUBSUB_EMULATOR_HOST={addr}")),
                "{line}"
            );
            break addr;
        }
        assert!(
            !line.contains("Ctrl-C stops"),
            "no Pub/Sub line before {line}"
        );
    };
    assert!(std::net::TcpStream::connect(&pubsub).is_ok(), "{pubsub}");
    let _ = child.kill();
    let _ = child.wait();

    // A port already taken, as 8085 is by a second server on the same machine: the error
    // names the endpoint and the way out.
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "serve",
            "--grpc",
            "127.0.0.1:0",
            "--no-http",
            "--no-aws",
            "--no-kafka",
        ])
        .args(["--pubsub-addr", &taken, "--data-dir"])
        .arg(dir.path().join("second"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Pub/Sub endpoint")
            && stderr.contains("--no-pubsub")
            && stderr.contains(&taken),
        "{stderr}"
    );

    // Beside [auth] it would be an open door: off by default, and `serve` says why.
    let config = dir.path().join("auth.toml");
    std::fs::write(
        &config,
        "[[auth.tokens]]\nname = \"ops\"\n\
         sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n\
         permissions = [\"admin:#\"]\n",
    )
    .unwrap();
    let serve = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
        command
            .args(["serve", "--grpc", "127.0.0.1:0", "--no-http", "--no-kafka"])
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(dir.path().join("guarded"))
            .args(extra)
            .env_remove("FERRY_PUBSUB_ADDR")
            .env_remove("FERRY_PUBSUB_ENABLED");
        command
    };
    let child = serve(&[]).stdout(Stdio::piped()).spawn().unwrap();
    let printed = support::lines_until_ready_then_kill(child);
    let said: Vec<_> = printed.iter().filter(|l| l.contains("Pub/Sub")).collect();
    assert_eq!(said.len(), 1, "{printed:?}");
    assert!(
        said[0].starts_with("ferry: the Pub/Sub endpoint is off: it has no authentication")
            && said[0].contains("[auth] is configured"),
        "{printed:?}"
    );

    // Asked for there, it is refused before anything opens; --no-pubsub is quiet.
    std::fs::remove_dir_all(dir.path().join("guarded")).unwrap();
    let refused = serve(&["--pubsub-addr", "127.0.0.1:0"]).output().unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no authentication") && stderr.contains("--pubsub-addr"),
        "{stderr}"
    );
    assert!(!dir.path().join("guarded").exists(), "nothing opened");
    let child = serve(&["--no-pubsub"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let printed = support::lines_until_ready_then_kill(child);
    assert!(
        !printed.iter().any(|l| l.contains("Pub/Sub")),
        "{printed:?}"
    );
}
