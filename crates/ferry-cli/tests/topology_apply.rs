//! `ferry topology plan | apply | export` against a real `ferry serve`: the e-commerce
//! design applied and read back, idempotence, refusing data loss, pruning, other brokers
//! and tokens.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::Server;

/// The e-commerce example, as a file of its own in `dir`.
fn ecommerce(dir: &Path) -> PathBuf {
    let text = include_str!("../../../examples/topology/ecommerce.yaml");
    write(dir, "ecommerce.yaml", text)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn topology(server: &Server, args: &[&str], file: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command.args(["--server", &server.grpc, "topology"]);
    command.args(&args[..1]).arg(file).args(&args[1..]);
    command.output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn exits(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

#[test]
fn the_ecommerce_design_is_applied_once_and_a_second_apply_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let file = ecommerce(dir.path());

    let plan = topology(&server, &["plan"], &file);
    exits(&plan, 1);
    let planned = stdout(&plan);
    let lines: Vec<&str> = planned.lines().collect();
    assert_eq!(lines[0], "+ topic ecommerce-order-events", "{planned}");
    let position = |line: &str| lines.iter().position(|l| *l == line).unwrap();
    assert!(
        position("+ queue inventory-reservation-dlq.fifo")
            < position("+ subscription inventory-reservation.fifo"),
        "{planned}"
    );

    let apply = topology(&server, &["apply"], &file);
    exits(&apply, 0);
    assert!(
        stdout(&apply).contains("applied 9 change(s)"),
        "{}",
        stdout(&apply)
    );

    let sub = server.json(&["sub", "describe", "inventory-reservation.fifo"]);
    assert_eq!(sub["topic"], "ecommerce-order-events");
    let spec = &sub["queue"]["spec"];
    assert_eq!(spec["max_deliveries"], 5, "{sub}");
    assert_eq!(spec["backoff_base_ms"], 1000, "{sub}");
    assert_eq!(spec["ordering"], "key-shared", "{sub}");
    // A subscription has no dedup window on the server: the file's is documentation.
    assert_eq!(spec["dedup_window_ms"], 0, "{sub}");
    assert_eq!(spec["default_ttl_ms"], 7 * 86_400_000u64, "{sub}");
    assert_eq!(
        spec["dead_letter"], "inventory-reservation-dlq.fifo",
        "{sub}"
    );
    let email = server.json(&["sub", "describe", "email-notifications"]);
    assert_eq!(email["filter"], "type = \"OrderPlaced\"", "{email}");
    let dlq = server.json(&["queue", "describe", "inventory-reservation-dlq.fifo"]);
    assert_eq!(dlq["spec"]["dead_letter"], serde_json::Value::Null, "{dlq}");
    let topic = server.json(&["topic", "describe", "ecommerce-order-events"]);
    assert_eq!(topic["retention_max_age_ms"], 7 * 86_400_000u64, "{topic}");

    let again = topology(&server, &["apply"], &file);
    exits(&again, 0);
    assert_eq!(stdout(&again).trim(), "no changes");
    exits(&topology(&server, &["plan"], &file), 0);
}

#[test]
fn an_export_reads_back_and_plans_no_changes_against_the_same_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    exits(&topology(&server, &["apply"], &ecommerce(dir.path())), 0);
    // Channels made by hand, with settings the file would not give.
    server.ok(&[
        "queue",
        "create",
        "jobs",
        "--max-deliveries",
        "9",
        "--ordering",
        "exclusive",
    ]);
    server.ok(&[
        "topic",
        "create",
        "clicks",
        "--partitions",
        "4",
        "--retention-age",
        "2d",
    ]);

    let exported = dir.path().join("exported.yaml");
    let export = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "--server",
            &server.grpc,
            "topology",
            "export",
            "--format",
            "yaml",
            "-o",
        ])
        .arg(&exported)
        .output()
        .unwrap();
    exits(&export, 0);
    let text = std::fs::read_to_string(&exported).unwrap();
    let design = ferry_topology::Topology::from_yaml(&text).unwrap();
    let jobs = design.queues.iter().find(|q| q.name == *"jobs").unwrap();
    assert_eq!(
        jobs.delivery.as_ref().unwrap().max_deliveries,
        Some(9),
        "{text}"
    );
    let clicks = design.topics.iter().find(|t| t.name == *"clicks").unwrap();
    assert_eq!(clicks.partitions, Some(4));
    let events = design
        .topics
        .iter()
        .find(|t| t.name == *"ecommerce-order-events")
        .unwrap();
    assert_eq!(events.subscriptions.len(), 4, "{text}");

    let plan = topology(&server, &["plan", "--prune"], &exported);
    exits(&plan, 0);
    assert_eq!(stdout(&plan).trim(), "no changes");
    assert_eq!(stderr(&plan), "", "nothing unmanaged");
}

#[test]
fn settings_change_in_place_and_a_data_losing_change_is_refused_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let queue_file = |delivery: &str| {
        write(
            dir.path(),
            "orders.yaml",
            &format!(
                "version: 1\nname: t\nqueues:\n  - name: orders\n    broker: ferry\n    type: queue\n    delivery: {{ {delivery} }}\n"
            ),
        )
    };
    exits(
        &topology(
            &server,
            &["apply"],
            &queue_file("max_deliveries: 5, ttl: 1d"),
        ),
        0,
    );
    server.ok(&["publish", "orders", "kept"]);

    // The retry policy and the TTL change in place: no flag needed, nothing lost.
    let in_place = topology(
        &server,
        &["apply"],
        &queue_file("max_deliveries: 7, ttl: 1h"),
    );
    exits(&in_place, 0);
    assert!(
        stdout(&in_place).contains("~ queue orders: max_deliveries 5 → 7\n"),
        "{}",
        stdout(&in_place)
    );
    let queue = server.json(&["queue", "describe", "orders"]);
    assert_eq!(queue["spec"]["max_deliveries"], 7);
    assert_eq!(
        queue["stats"]["ready"], 1,
        "changed in place: the message is kept"
    );
    exits(
        &topology(
            &server,
            &["plan"],
            &queue_file("max_deliveries: 7, ttl: 1h"),
        ),
        0,
    );

    // The ordering mode is fixed at creation: changing it recreates the queue.
    let changed = queue_file("max_deliveries: 7, ttl: 1h, ordering: { mode: key-shared }");
    let refused = topology(&server, &["apply"], &changed);
    exits(&refused, 3);
    assert!(
        stdout(&refused)
            .contains("~ queue orders: ordering.mode \"shared\" → \"key-shared\" (loses data"),
        "{}",
        stdout(&refused)
    );
    assert!(
        stderr(&refused).contains("--allow-data-loss"),
        "{}",
        stderr(&refused)
    );
    let queue = server.json(&["queue", "describe", "orders"]);
    assert_eq!(queue["spec"]["ordering"], "shared", "nothing changed");
    assert_eq!(queue["stats"]["ready"], 1, "nothing lost");

    let json = topology(&server, &["plan", "--format", "json"], &changed);
    exits(&json, 1);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(plan["changes"][0]["loses_data"], "recreates", "{plan}");

    exits(
        &topology(&server, &["apply", "--allow-data-loss"], &changed),
        0,
    );
    let queue = server.json(&["queue", "describe", "orders"]);
    assert_eq!(queue["spec"]["ordering"], "key-shared");
    assert_eq!(
        queue["spec"]["max_deliveries"], 7,
        "the other settings kept"
    );
    assert_eq!(queue["stats"]["ready"], 0, "recreated, as the plan said");

    let fewer = |n: u32| {
        format!(
            "version: 1\nname: t\ntopics:\n  - name: events\n    broker: kafka\n    type: topic\n    partitions: {n}\n"
        )
    };
    exits(
        &topology(&server, &["apply"], &write(dir.path(), "t.yaml", &fewer(2))),
        0,
    );
    let grown = topology(&server, &["apply"], &write(dir.path(), "t.yaml", &fewer(5)));
    exits(&grown, 0);
    assert!(
        stdout(&grown).contains("~ topic events: partitions 2 → 5\n"),
        "{}",
        stdout(&grown)
    );
    let topic = server.json(&["topic", "describe", "events"]);
    assert_eq!(topic["partitions"].as_array().unwrap().len(), 5);
    // A shorter retention of a topic changes in place, and expires records already
    // stored: refused without the flag.
    let bounded = write(
        dir.path(),
        "t.yaml",
        &format!("{}    retention: 3d\n", fewer(5)),
    );
    exits(&topology(&server, &["apply"], &bounded), 3);
    let applied = topology(&server, &["apply", "--allow-data-loss"], &bounded);
    exits(&applied, 0);
    assert!(
        stdout(&applied).contains("(loses data: what is stored expires sooner)"),
        "{}",
        stdout(&applied)
    );
    let topic = server.json(&["topic", "describe", "events"]);
    assert_eq!(topic["retention_max_age_ms"], 3 * 86_400_000u64, "{topic}");
    assert_eq!(topic["partitions"].as_array().unwrap().len(), 5, "{topic}");
    let shrink = topology(
        &server,
        &["apply", "--allow-data-loss"],
        &write(dir.path(), "t.yaml", &fewer(3)),
    );
    exits(&shrink, 2);
    assert!(
        stderr(&shrink).contains("topic events: partitions cannot go from 5 down to 3"),
        "{}",
        stderr(&shrink)
    );
}

#[test]
fn channels_missing_from_the_file_are_deleted_only_with_prune() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    // No dead_letter: the server gives `orders` its default `orders.dlq`.
    let file = write(
        dir.path(),
        "orders.yaml",
        "version: 1\nname: t\nqueues:\n  - name: orders\n    broker: ferry\n    type: queue\n",
    );
    exits(&topology(&server, &["apply"], &file), 0);
    server.ok(&["queue", "create", "stray"]);

    let plan = topology(&server, &["apply"], &file);
    exits(&plan, 0);
    assert!(
        stderr(&plan).contains(
            "queue stray: on the server, not in the file; left as it is (--prune deletes it)"
        ),
        "{}",
        stderr(&plan)
    );
    let refused = topology(&server, &["apply", "--prune"], &file);
    exits(&refused, 3);
    assert!(
        stdout(&refused).contains("- queue stray (loses data"),
        "{}",
        stdout(&refused)
    );

    // A request/reply client's temporary queue is no part of the design.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let temporary = runtime.block_on(async {
        let client = ferry_client::Client::connect(&server.grpc).await.unwrap();
        let (name, _) = client
            .create_temporary_queue("replies", None)
            .await
            .unwrap();
        name
    });
    exits(
        &topology(&server, &["apply", "--prune", "--allow-data-loss"], &file),
        0,
    );
    let queues = server.json(&["queue", "list"]);
    // `stray.dlq` went with it; `orders.dlq`, where `orders` sends, stays.
    assert_eq!(
        queues,
        serde_json::json!(["orders", "orders.dlq", temporary])
    );
}

#[test]
fn channels_on_other_brokers_are_refused_by_name_or_skipped_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let file = write(
        dir.path(),
        "mixed.yaml",
        "version: 1\nname: t\nqueues:\n  - name: orders\n    broker: sqs\n    type: queue\n  - name: jobs\n    broker: rabbitmq\n    type: queue\n",
    );
    let refused = topology(&server, &["apply"], &file);
    exits(&refused, 2);
    assert!(
        stderr(&refused).contains("does not serve the broker of queue jobs (broker: rabbitmq)")
            && stderr(&refused).contains("--skip-other-brokers"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(server.json(&["queue", "list"]), serde_json::json!([]));

    let skipped = topology(&server, &["apply", "--skip-other-brokers"], &file);
    exits(&skipped, 0);
    assert!(
        stderr(&skipped)
            .contains("skipped queue jobs (broker: rabbitmq): not served by the Ferry server"),
        "{}",
        stderr(&skipped)
    );
    assert_eq!(
        server.json(&["queue", "list"]),
        serde_json::json!(["orders", "orders.dlq"])
    );
}

#[test]
fn plan_and_apply_use_the_token_of_the_other_remote_commands() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "ferry.toml",
        &format!(
            "[[auth.tokens]]\nname = \"ops\"\nsha256 = \"{}\"\npermissions = [\"admin:#\"]\n",
            support::sha256_hex("s3cret-token")
        ),
    );
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--no-pubsub", "--config", config.to_str().unwrap()],
    );
    let file = ecommerce(dir.path());

    let refused = topology(&server, &["apply"], &file);
    exits(&refused, 2);
    assert!(stderr(&refused).contains("--token"), "{}", stderr(&refused));

    let applied = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &server.grpc, "topology", "apply"])
        .arg(&file)
        .env("FERRY_TOKEN", "s3cret-token")
        .output()
        .unwrap();
    exits(&applied, 0);
    let plan = topology(&server, &["plan", "--token", "s3cret-token"], &file);
    exits(&plan, 0);
}

#[test]
fn lint_reads_a_file_only_and_refuses_the_server_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["topology", "lint", "--server", "ferry://127.0.0.1:1"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/topology/ecommerce.yaml"
        ))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`ferry topology lint`"),
        "{}",
        stderr(&out)
    );
}
