//! The web console (`/ui`) of a real `ferry serve` in a real browser: Debian's Chromium
//! driven by Playwright from `tests/console/console.mjs`, which signs in (and is refused
//! with a wrong token), reads the overview and the dead letters, redrives them and sees the
//! overview change without a reload, audits each page with axe-core, signs out, and watches
//! the browser's console for errors. This file sets up the server and its content, runs the
//! script with Node.js and asserts its result.
//!
//! With `FERRY_CONSOLE_SCREENSHOTS=DIR` (an absolute path) the script also saves a
//! 1280x800 PNG of each page there: `scripts/console-screenshots.sh` makes the docs' ones so.
//!
//! Chromium, and the npm packages the script imports, are installed by
//! `scripts/console-packages.sh`; without them (or without `node`) the test says so loudly
//! and skips — under `CI=true` that is a failure.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::Server;

const TOKEN: &str = "console-token-4f2a9c1e";
const QUEUE: &str = "orders";
const DLQ: &str = "orders.dlq";
const TOPIC: &str = "events";
/// The checks `console.mjs` runs: fewer passing means one was left out.
const CHECKS: usize = 12;

const INSTALL: &str = "bash scripts/console-packages.sh";

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console")
}

/// What the browser test needs that this machine lacks, each with why.
fn missing() -> Vec<String> {
    let mut missing = Vec::new();
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        missing.push("node (Node.js 20 or later)".to_owned());
    }
    if !Path::new("/usr/bin/chromium").exists() {
        missing.push("/usr/bin/chromium (Debian's chromium)".to_owned());
    }
    for package in ["playwright-core", "@axe-core/playwright", "axe-core"] {
        let manifest = scripts()
            .join("node_modules")
            .join(package)
            .join("package.json");
        if !manifest.exists() {
            missing.push(format!("the npm package {package}"));
        }
    }
    missing
}

/// A token that may do everything the console offers, dead letters included (neither
/// `admin` nor `consume` reads them).
fn write_config(dir: &Path) -> PathBuf {
    let path = dir.join("ferry.toml");
    let text = format!(
        "[[auth.tokens]]\nname = \"console\"\nsha256 = \"{}\"\n\
         permissions = [\"admin:#\", \"publish:#\", \"consume:#\", \"dead_letters:#\"]\n",
        support::sha256_hex(TOKEN)
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// One call to the HTTP API with the token; the answer's JSON, after asserting a 200.
fn api(server: &Server, method: &str, path: &str, body: &str) -> Value {
    let auth = format!("Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n");
    let (status, raw) = support::http(&server.http, &auth, method, path, body);
    assert_eq!(status, 200, "{method} {path}: {raw}");
    let body = raw.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `orders` (one delivery, then dead-lettered) with one letter in `orders.dlq`, dead-lettered
/// by a nack over HTTP, and two ready messages; a topic with records and a subscription, so
/// the topic and topology pages have something to draw.
fn fill(server: &Server) {
    let admin = |args: &[&str]| {
        let mut with = vec!["--token", TOKEN];
        with.extend_from_slice(args);
        server.ok(&with);
    };
    admin(&["queue", "create", QUEUE, "--max-deliveries", "1"]);
    let publish = |payload: &str| {
        let body = serde_json::json!({"messages": [{
            "payload": payload,
            "key": "customer-42",
            "headers": {"content-type": "application/json", "tenant": "acme"},
        }]});
        api(
            server,
            "POST",
            &format!("/v1/queues/{QUEUE}/messages"),
            &body.to_string(),
        );
    };
    publish(r#"{"order": 7, "total": "12.50", "currency": "EUR"}"#);
    let received = api(
        server,
        "POST",
        &format!("/v1/queues/{QUEUE}/receive"),
        r#"{"consumer": "billing-worker-1", "max": 1, "wait_ms": 2000}"#,
    );
    let delivery = &received["deliveries"][0];
    let settled = api(
        server,
        "POST",
        &format!("/v1/queues/{QUEUE}/messages/{}/nack", delivery["seq"]),
        &serde_json::json!({"token": delivery["token"], "error": "payment service timed out"})
            .to_string(),
    );
    assert!(
        settled["dead_lettered"].is_string(),
        "one delivery is all `--max-deliveries 1` allows: {settled}"
    );
    publish(r#"{"order": 8, "total": "3.20", "currency": "EUR"}"#);
    publish(r#"{"order": 9, "total": "40.00", "currency": "EUR"}"#);

    admin(&["topic", "create", TOPIC, "--partitions", "3"]);
    admin(&["sub", "create", "events.audit", "--topic", TOPIC]);
    let records = serde_json::json!({"messages": [
        {"payload": "signed-up", "key": "user-1"},
        {"payload": "signed-in", "key": "user-2"},
    ]});
    api(
        server,
        "POST",
        &format!("/v1/topics/{TOPIC}/messages"),
        &records.to_string(),
    );

    let ready = |queue: &str| {
        api(server, "GET", &format!("/v1/queues/{queue}"), "")["stats"]["ready"].clone()
    };
    assert_eq!(ready(QUEUE), 2, "two ready messages");
    assert_eq!(ready(DLQ), 1, "one dead letter");
}

#[test]
fn the_console_signs_in_shows_dead_letters_redrives_them_live_and_passes_axe() {
    let missing = missing();
    if !missing.is_empty() {
        ferry_testkit::skip_or_fail(&format!(
            "the console's browser test needs {} (install with: {INSTALL})",
            missing.join(", ")
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start_with(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--config",
            config.to_str().unwrap(),
            "--console-sample-interval",
            "200ms",
        ],
    );
    fill(&server);

    let output = Command::new("node")
        .arg("console.mjs")
        .current_dir(scripts())
        .env("FERRY_URL", format!("http://{}", server.http))
        .env("FERRY_TOKEN", TOKEN)
        .env("FERRY_QUEUE", QUEUE)
        .env("FERRY_DLQ", DLQ)
        .env("FERRY_TOPIC", TOPIC)
        .output()
        .expect("running node tests/console/console.mjs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the console's checks failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    eprintln!("{stdout}{stderr}");
    let summary = format!("console: {CHECKS} passed, 0 failed");
    assert!(stdout.contains(&summary), "expected {summary:?}:\n{stdout}");
}
