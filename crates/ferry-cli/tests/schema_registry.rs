//! Confluent's Python client (`confluent_kafka.schema_registry`, confluent-kafka from
//! PyPI, pinned in `scripts/python-packages.sh`) against the schema registry of a real
//! `ferry serve`: it registers, fetches by id, checks compatibility, is refused a breaking
//! change with 409 / 40901, and sends a record through Confluent's Avro serializer
//! (`schema_registry/confluent_client.py`). With tokens configured, the client's HTTP
//! Basic credentials carry the token; without one the registry answers 401.
//!
//! Without python3, confluent-kafka's schema-registry extras and fastavro the tests say
//! so loudly and skip — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

mod support;

use support::Server;

fn client_installed() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import confluent_kafka.schema_registry.avro, fastavro, httpx",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the client script against `url` (with `user_info` as its Basic credentials) and
/// returns what it printed, panicking with its output unless every check passed.
fn run_client(url: &str, user_info: Option<&str>) -> String {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schema_registry/confluent_client.py");
    let mut command = Command::new("python3");
    command.arg(script).arg(url);
    if let Some(user_info) = user_info {
        command.arg(user_info);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("every check passed"),
        "the Confluent client failed against the schema registry:\n{stdout}\n{stderr}"
    );
    stdout
}

#[test]
fn confluent_client_registers_fetches_checks_and_serializes_and_the_registry_survives_a_restart() {
    if !client_installed() {
        ferry_testkit::skip_or_fail(
            "python3 with confluent-kafka[avro] is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let printed = run_client(&format!("http://{}/schema-registry", server.http), None);
    let ids = printed
        .lines()
        .find_map(|l| l.strip_prefix("ids "))
        .expect("the script prints the ids");
    let first_id = ids.split(' ').next().unwrap();
    drop(server);

    // Everything registered is still there after a restart.
    let server = Server::start(dir.path());
    let (status, response) = support::http(
        &server.http,
        "",
        "GET",
        &format!("/schema-registry/schemas/ids/{first_id}"),
        "",
    );
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("OrderPlaced"), "{response}");
    let (status, response) = support::http(
        &server.http,
        "",
        "GET",
        "/schema-registry/subjects/orders-value/versions",
        "",
    );
    assert_eq!(status, 200, "{response}");
    assert!(response.ends_with("[1,2]"), "{response}");
}

#[test]
fn with_tokens_the_registry_takes_the_token_as_basic_password_or_bearer_and_refuses_without() {
    if !client_installed() {
        ferry_testkit::skip_or_fail(
            "python3 with confluent-kafka[avro] is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    const TOKEN: &str = "registry-token-8d2f61";
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    std::fs::write(
        &config,
        format!(
            "[[auth.tokens]]\nname = \"schemas\"\nsha256 = \"{}\"\npermissions = [\"admin:#\"]\n",
            support::sha256_hex(TOKEN)
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start_with(
        &data,
        &["--no-pubsub", "--config", config.to_str().unwrap()],
    );
    let url = format!("http://{}/schema-registry", server.http);

    let (status, response) =
        support::http(&server.http, "", "GET", "/schema-registry/subjects", "");
    assert_eq!(status, 401, "{response}");
    assert!(response.contains("\"error_code\":401"), "{response}");
    let wrong = "Authorization: Basic d2hvOndyb25n\r\n"; // who:wrong
    let (status, _) = support::http(&server.http, wrong, "GET", "/schema-registry/subjects", "");
    assert_eq!(status, 401);
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let (status, response) = support::http(
        &server.http,
        &bearer,
        "GET",
        "/schema-registry/subjects",
        "",
    );
    assert_eq!(status, 200, "{response}");

    run_client(&url, Some(&format!("orders-service:{TOKEN}")));
}
