//! `ferry topology import` and `convert`, run as a user would: a design converted to
//! AsyncAPI (checked by the official parser) and imported back unchanged, a third party's
//! AsyncAPI document and RabbitMQ definitions imported with their notes, and bad input
//! refused with exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn topology(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("topology")
        .args(args)
        .output()
        .unwrap()
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The official AsyncAPI parser's verdict on `file`, or `None` (skipped loudly; a failure
/// under `CI=true`) when scripts/asyncapi-packages.sh has not installed it.
fn parser_verdict(file: &Path) -> Option<Output> {
    let dir = repo("crates/ferry-topology/tests/asyncapi");
    if !dir
        .join("node_modules/@asyncapi/parser/package.json")
        .exists()
    {
        ferry_testkit::skip_or_fail(
            "the AsyncAPI parser is not installed (bash scripts/asyncapi-packages.sh)",
        );
        return None;
    }
    Some(
        Command::new("node")
            .arg("validate.mjs")
            .arg(file)
            .current_dir(dir)
            .output()
            .expect("node runs"),
    )
}

#[test]
fn a_design_converted_to_asyncapi_is_valid_and_imports_back_to_the_same_design() {
    let dir = tempfile::tempdir().unwrap();
    let design = repo("examples/topology/ecommerce.yaml");
    let design_arg = design.to_str().unwrap();
    let document = dir.path().join("ecommerce.asyncapi.json");
    ok(&topology(&[
        "convert",
        design_arg,
        "--to",
        "asyncapi-json",
        "-o",
        document.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&document).unwrap();
    assert!(text.starts_with("{\n  \"asyncapi\": \"3.0.0\""), "{text}");
    if let Some(verdict) = parser_verdict(&document) {
        assert!(
            verdict.status.success(),
            "the AsyncAPI parser refused the document: {}",
            String::from_utf8_lossy(&verdict.stdout)
        );
    }

    let imported = topology(&["import", "--from", "asyncapi", document.to_str().unwrap()]);
    let yaml = ok(&imported);
    assert_eq!(
        stderr(&imported),
        "",
        "its own document imports without a note"
    );
    let normalised = ok(&topology(&["convert", design_arg, "--to", "yaml"]));
    assert_eq!(yaml, normalised);

    // The YAML form of the document says the same.
    let yaml_document = ok(&topology(&["convert", design_arg, "--to", "asyncapi"]));
    assert!(
        yaml_document.starts_with("asyncapi: \"3.0.0\""),
        "{yaml_document}"
    );
    let yaml_path = dir.path().join("ecommerce.asyncapi.yaml");
    std::fs::write(&yaml_path, yaml_document).unwrap();
    let again = ok(&topology(&[
        "import",
        "--from",
        "asyncapi",
        yaml_path.to_str().unwrap(),
    ]));
    assert_eq!(again, normalised);
}

#[test]
fn a_third_party_asyncapi_document_imports_with_notes_and_lints() {
    let dir = tempfile::tempdir().unwrap();
    let document = repo("crates/ferry-topology/tests/data/asyncapi/streetlights-kafka.yaml");
    let out = dir.path().join("streetlights.yaml");
    let imported = topology(&[
        "import",
        "--from",
        "asyncapi",
        document.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&imported);
    assert!(
        stderr(&imported).lines().all(|l| l.starts_with("note: ")),
        "{}",
        stderr(&imported)
    );
    let design = std::fs::read_to_string(&out).unwrap();
    assert!(design.contains("broker: kafka"), "{design}");
    // The imported file is a topology file: lint reads it and judges it (0 or 1), not 2.
    let lint = topology(&["lint", out.to_str().unwrap()]);
    assert!(
        matches!(lint.status.code(), Some(0 | 1)),
        "{}",
        stderr(&lint)
    );
}

/// RabbitMQ definitions as `rabbitmqctl export_definitions` writes them: a work queue
/// dead-lettering through a direct exchange into its DLQ.
const DEFINITIONS: &str = r#"{
  "rabbit_version": "3.10.8",
  "vhosts": [{"name": "/"}],
  "queues": [
    {"name": "jobs", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "classic", "x-dead-letter-exchange": "dlx",
                   "x-dead-letter-routing-key": "jobs.dlq", "x-message-ttl": 60000,
                   "x-max-length": 1000}},
    {"name": "jobs.dlq", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "classic"}}
  ],
  "exchanges": [
    {"name": "dlx", "vhost": "/", "type": "direct", "durable": true, "auto_delete": false,
     "internal": false, "arguments": {}}
  ],
  "bindings": [
    {"source": "dlx", "vhost": "/", "destination": "jobs.dlq", "destination_type": "queue",
     "routing_key": "jobs.dlq", "arguments": {}}
  ],
  "policies": []
}"#;

#[test]
fn rabbitmq_definitions_import_with_their_dead_letter_queue() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("definitions.json");
    std::fs::write(&file, DEFINITIONS).unwrap();
    let design = ok(&topology(&[
        "import",
        "--from",
        "rabbitmq",
        file.to_str().unwrap(),
    ]));
    let imported = ferry_topology::Topology::from_yaml(&design).unwrap();
    let jobs = imported
        .queues
        .iter()
        .find(|q| q.name.as_str() == "jobs")
        .unwrap_or_else(|| panic!("no queue jobs in\n{design}"));
    assert_eq!(jobs.dead_letter.as_ref().unwrap().name, "jobs.dlq");
    assert_eq!(jobs.limits.as_ref().unwrap().max_length, Some(1000));

    let wrong_vhost = topology(&[
        "import",
        "--from",
        "rabbitmq",
        "--vhost",
        "nope",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        wrong_vhost.status.code(),
        Some(2),
        "{}",
        stderr(&wrong_vhost)
    );
}

#[test]
fn bad_input_is_refused_with_exit_code_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    std::fs::write(
        &old,
        "asyncapi: 2.6.0\ninfo: {title: t, version: '1'}\nchannels: {}\n",
    )
    .unwrap();
    let out = dir.path().join("out.yaml");
    let refused = topology(&[
        "import",
        "--from",
        "asyncapi",
        old.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("2.6.0"), "{}", stderr(&refused));
    assert!(!out.exists(), "nothing written");

    let vhost = topology(&[
        "import",
        "--from",
        "asyncapi",
        "--vhost",
        "/",
        old.to_str().unwrap(),
    ]);
    assert_eq!(vhost.status.code(), Some(2));
    assert!(stderr(&vhost).contains("--vhost"), "{}", stderr(&vhost));

    let missing = topology(&["convert", "no-such-file.yaml", "--to", "asyncapi"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read it"),
        "{}",
        stderr(&missing)
    );
}
