//! Dead letters through the `ferry` command against a real `ferry serve`: their own
//! permission, credential headers masked in `ferry dlq list/peek` (by the server and, on
//! request, by the client), real headers for consumers and redrives, and no payload or
//! header value in the server's log at debug level.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;
use support::Server;

const SECRET: &str = "Bearer sk-live-3f9a71c2";
const PAYLOAD: &str = "pan-4111111111111111";
const READER: &str = "reader-token-8c1e5a9f";
const DLQ: &str = "dlq-token-2b7d4f6a";
const ADMIN: &str = "admin-token-5e3c1a7b";

fn hash(token: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["token", "hash", token])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A config with a consumer of `jobs` (whose `jobs.#` matches `jobs.dlq`), a reader of
/// dead letters and an administrator.
fn write_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let path = dir.join("ferry.toml");
    let token = |name: &str, token: &str, perms: &str| {
        format!(
            "[[auth.tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\npermissions = {perms}\n",
            hash(token)
        )
    };
    let text = format!(
        "{extra}\n{}{}{}",
        token("reader", READER, r#"["consume:jobs.#", "publish:jobs"]"#),
        token("dlq", DLQ, r#"["dlq:jobs.dlq"]"#),
        token("admin", ADMIN, r##"["admin:#"]"##),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `jobs` with one message carrying the secret header, rejected into `jobs.dlq`.
fn dead_letter_one(server: &Server) {
    server.ok(&["--token", ADMIN, "queue", "create", "jobs"]);
    server.ok(&[
        "--token",
        READER,
        "publish",
        "jobs",
        PAYLOAD,
        "--header",
        &format!("Authorization={SECRET}"),
        "--header",
        "tenant=acme",
    ]);
    let out = server.ok(&[
        "--token", READER, "consume", "jobs", "--mode", "reject", "--count", "1", "--wait", "2s",
        "--json",
    ]);
    assert_eq!(out.lines().count(), 1, "{out}");
}

fn as_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn dlq_list_pages_on_past_pages_the_server_cut_short_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // Room for one of these letters per page.
    let config = write_config(dir.path(), "[limits]\nmax_read_bytes = 100\n");
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--no-pubsub", "--config", config.to_str().unwrap()],
    );
    server.ok(&["--token", ADMIN, "queue", "create", "jobs"]);
    for i in 0..3 {
        let payload = format!("{i}-{}", "x".repeat(80));
        server.ok(&["--token", READER, "publish", "jobs", &payload]);
    }
    let out = server.ok(&[
        "--token", READER, "consume", "jobs", "--mode", "reject", "--count", "3", "--wait", "2s",
        "--json",
    ]);
    assert_eq!(out.lines().count(), 3, "{out}");
    let letters = as_json(&server.ok(&["--token", DLQ, "dlq", "list", "jobs.dlq", "--json"]));
    assert_eq!(letters.as_array().unwrap().len(), 3, "{letters}");
}

#[test]
fn dead_letters_need_their_own_permission_and_peeks_mask_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--no-pubsub", "--config", config.to_str().unwrap()],
    );
    dead_letter_one(&server);

    // `consume:jobs.#` matches the name `jobs.dlq` but does not read it; `admin:#` neither.
    for token in [READER, ADMIN] {
        let stderr = server.fails(&["--token", token, "dlq", "list", "jobs.dlq"]);
        assert!(
            stderr.contains("dead_letters:jobs.dlq"),
            "says what to grant: {stderr}"
        );
        server.fails(&["--token", token, "dlq", "peek", "jobs.dlq"]);
    }
    server.fails(&[
        "--token", READER, "consume", "jobs.dlq", "--count", "1", "--wait", "1s",
    ]);
    // `dlq:jobs.dlq` does not consume `jobs`.
    server.fails(&[
        "--token", DLQ, "consume", "jobs", "--count", "1", "--wait", "1s",
    ]);

    let letters = as_json(&server.ok(&["--token", DLQ, "dlq", "list", "jobs.dlq", "--json"]));
    assert_eq!(letters[0]["headers"]["Authorization"], "***", "{letters}");
    assert_eq!(letters[0]["headers"]["tenant"], "acme");
    let peeked = server.ok(&["--token", DLQ, "dlq", "peek", "jobs.dlq"]);
    assert!(peeked.contains("Authorization=***"), "{peeked}");
    assert!(peeked.contains(PAYLOAD), "{peeked}");
    assert!(!peeked.contains(SECRET), "{peeked}");

    // Redrive: not with admin, yes with dlq; the message goes back with its real header.
    server.fails(&["--token", ADMIN, "dlq", "redrive", "jobs.dlq"]);
    let moved = as_json(&server.ok(&["--token", DLQ, "dlq", "redrive", "jobs.dlq", "--json"]));
    assert_eq!(moved["moved"], 1);
    let again = server.ok(&[
        "--token", READER, "consume", "jobs", "--mode", "ack", "--count", "1", "--wait", "2s",
        "--json",
    ]);
    let again = as_json(again.lines().next().expect("the redriven message"));
    assert_eq!(
        again["headers"]["Authorization"], SECRET,
        "consumers get it whole"
    );
}

#[test]
fn the_server_list_comes_from_the_config_and_the_client_can_mask_more() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[redaction]\nheaders = [\"tenant\"]\n");
    let check = support::config_check(&config).output().unwrap();
    let text = String::from_utf8(check.stdout).unwrap();
    assert!(
        text.contains("redaction.headers = tenant  (file)"),
        "{text}"
    );
    assert!(text.contains("dlq: dead_letters:jobs.dlq"), "{text}");
    let check = support::config_check(&config)
        .env("FERRY_REDACTION_HEADERS", "x-a,X-B")
        .output()
        .unwrap();
    let text = String::from_utf8(check.stdout).unwrap();
    assert!(
        text.contains("redaction.headers = x-a, x-b  (env FERRY_REDACTION_HEADERS)"),
        "{text}"
    );

    // The flag beats the file: the server masks nothing.
    let server = Server::start_with(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--config",
            config.to_str().unwrap(),
            "--redact-header",
            "none",
        ],
    );
    dead_letter_one(&server);
    let peek = |extra: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
        cmd.args(["--server", &server.grpc, "--token", DLQ, "dlq"])
            .args(extra)
            .arg("--json");
        if let Some(list) = env {
            cmd.env("FERRY_REDACT_HEADERS", list);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        as_json(&String::from_utf8(out.stdout).unwrap())
    };
    let open = peek(&["peek", "jobs.dlq"], None);
    assert_eq!(
        open["headers"]["Authorization"], SECRET,
        "the server masks nothing"
    );
    assert_eq!(open["headers"]["tenant"], "acme");
    let local = peek(
        &["peek", "jobs.dlq", "--redact-header", "authorization"],
        None,
    );
    assert_eq!(local["headers"]["Authorization"], "***");
    assert_eq!(local["headers"]["tenant"], "acme");
    let listed = peek(&["list", "jobs.dlq"], Some("TENANT,authorization"));
    assert_eq!(listed[0]["headers"]["Authorization"], "***");
    assert_eq!(listed[0]["headers"]["tenant"], "***");
    let bad = server.fails(&[
        "--token",
        DLQ,
        "dlq",
        "list",
        "jobs.dlq",
        "--redact-header",
        " ",
    ]);
    assert!(bad.contains("--redact-header"), "{bad}");
}

/// One HTTP/1.1 exchange on a fresh connection: the status and the whole response.
fn http(addr: &str, token: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let auth = format!("Authorization: Bearer {token}\r\n");
    support::http(addr, &auth, method, path, body)
}

#[test]
fn payloads_and_header_values_never_reach_the_servers_log() {
    let dir = tempfile::tempdir().unwrap();
    // A server that masks nothing: whatever keeps the secret out of the log is not the
    // redaction of peeks.
    let config = write_config(dir.path(), "[redaction]\nheaders = []\n");
    let log_path = dir.path().join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "serve",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--aws-addr",
            "127.0.0.1:0",
            "--no-kafka",
            "--no-pubsub",
            "--config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            all.push(line.clone());
            let _ = tx.send(line);
        }
        all
    });
    let (grpc, http_addr) = support::listening(
        &rx,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving HTTP on http://",
        |_| {},
    );
    let grpc = format!("ferry://{grpc}");
    let ferry = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["--server", &grpc])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };

    // Over gRPC: publish, dead-letter, peek, redrive, consume.
    ferry(&["--token", ADMIN, "queue", "create", "jobs"]);
    let header = format!("Authorization={SECRET}");
    ferry(&[
        "--token", READER, "publish", "jobs", PAYLOAD, "--header", &header,
    ]);
    ferry(&[
        "--token", READER, "consume", "jobs", "--mode", "reject", "--count", "1", "--wait", "2s",
    ]);
    let peeked = ferry(&["--token", DLQ, "dlq", "peek", "jobs.dlq"]);
    assert!(
        peeked.contains(SECRET) && peeked.contains(PAYLOAD),
        "the secret was there: {peeked}"
    );
    ferry(&["--token", DLQ, "dlq", "redrive", "jobs.dlq"]);
    // Over HTTP: the same, with the secret in a header and in the payload.
    let body = format!(
        r#"{{"messages": [{{"payload": "{PAYLOAD}", "headers": {{"x-api-key": "{SECRET}"}}}}]}}"#
    );
    let (status, raw) = http(
        &http_addr,
        READER,
        "POST",
        "/v1/queues/jobs/messages",
        &body,
    );
    assert_eq!(status, 200, "{raw}");
    let (status, raw) = http(
        &http_addr,
        READER,
        "POST",
        "/v1/queues/jobs/receive",
        r#"{"consumer": "w", "max": 10}"#,
    );
    assert_eq!(status, 200, "{raw}");
    let deliveries: Value = as_json(raw.split_once("\r\n\r\n").unwrap().1);
    for d in deliveries["deliveries"].as_array().unwrap() {
        let path = format!("/v1/queues/jobs/messages/{}/reject", d["seq"]);
        let body = format!(r#"{{"token": {}, "reason": "bad"}}"#, d["token"]);
        assert_eq!(http(&http_addr, READER, "POST", &path, &body).0, 200);
    }
    let (status, raw) = http(
        &http_addr,
        DLQ,
        "GET",
        "/v1/queues/jobs.dlq/dead-letters",
        "",
    );
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains(SECRET), "unmasked here: {raw}");
    let (status, raw) = http(&http_addr, DLQ, "POST", "/v1/queues/jobs.dlq/redrive", "{}");
    assert_eq!(status, 200, "{raw}");
    // A refused call, whose error names what was asked for.
    let (status, _) = http(
        &http_addr,
        READER,
        "GET",
        "/v1/queues/jobs.dlq/dead-letters",
        "",
    );
    assert_eq!(status, 403);

    // SAFETY: kill(2) on the child's pid; no memory is touched.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
    let stdout = reader.join().unwrap().join("\n");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.lines().count() > 10 && log.contains("DEBUG"),
        "the server logged at debug level, so the test can see a leak: {log}"
    );
    for secret in [SECRET, PAYLOAD, "sk-live"] {
        assert!(
            !log.contains(secret),
            "{secret:?} in the server's log:\n{log}"
        );
        assert!(
            !stdout.contains(secret),
            "{secret:?} on the server's stdout:\n{stdout}"
        );
    }
}
