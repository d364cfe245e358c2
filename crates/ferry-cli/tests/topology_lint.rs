//! `ferry topology lint` run as CI would: the example designs in
//! `examples/topology/`, exit codes, and both output formats.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/topology")
        .join(name)
}

fn lint(file: &Path, format: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["topology", "lint"])
        .arg(file)
        .args(["--format", format])
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// What `examples/topology/bad.yaml` breaks: `id severity element`, in lint order
/// (rule by rule, then file order).
const BAD_FINDINGS: &[&str] = &[
    "FT001 error queue payments",
    "FT002 error queue payments",
    "FT002 error subscription user-events/welcome-email",
    "FT003 error queue payments",
    "FT003 error subscription user-events/welcome-email",
    "FT003 error subscription user-events/welcome-email",
    "FT003 error subscription user-events/welcome-email",
    "FT004 error message UserCreated",
    "FT005 error message PaymentTaken",
    "FT006 error message UserCreated",
    "FT007 error message PaymentTaken",
    "FT007 error message UserCreated",
    "FT008 error message AuditNote",
    "FT009 error message UserCreated",
    "FT009 error message UserCreated",
    "FT010 error message PaymentTaken field card_number",
    "FT010 error message UserCreated field email",
    "FT011 error queue payments",
    "FT012 error queue payments",
    "FT012 error subscription user-events/welcome-email",
    "FT013 error queue payments",
    "FT013 error topic user-events",
    "FT014 error topic user-events",
    "FT015 error queue payments",
    "FT016 error consumer-group user-events/crm-sync",
    "FT016 error consumer-group user-events/analytics",
    "FT017 warning subscription user-events/welcome-email",
    "FT018 warning consumer-group user-events/crm-sync",
    "FT019 warning subscription user-events/welcome-email",
    "FT020 error topic user-events",
    "FT021 error message AuditNote",
    "FT022 error consumer-group user-events/analytics",
    "FT023 error queue payments",
];

#[test]
fn the_ecommerce_design_passes_with_no_finding() {
    let file = example("ecommerce.yaml");
    let text = lint(&file, "text");
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    assert_eq!(stdout(&text), "");
    assert!(stderr(&text).ends_with("0 error(s), 0 warning(s)\n"));
    let json = lint(&file, "json");
    assert_eq!(json.status.code(), Some(0));
    assert_eq!(stdout(&json), "[]\n");
}

#[test]
fn the_bad_design_fails_with_every_finding_on_its_own_line() {
    let file = example("bad.yaml");
    let output = lint(&file, "text");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let prefix = format!("{}: ", file.display());
    let mut heads = Vec::new();
    for line in stdout(&output).lines() {
        let rest = line
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{line}"));
        let (head, tail) = rest.split_once(": ").unwrap_or_else(|| panic!("{line}"));
        let (message, fix) = tail
            .split_once(" (fix: ")
            .unwrap_or_else(|| panic!("{line}"));
        assert!(!message.is_empty() && fix.ends_with(')'), "{line}");
        heads.push(head.to_owned());
    }
    assert_eq!(heads, BAD_FINDINGS);
}

#[test]
fn the_bad_design_as_json_is_an_array_of_findings() {
    let file = example("bad.yaml");
    let output = lint(&file, "json");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let findings: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let design = std::fs::read_to_string(&file).unwrap();
    let design: Vec<&str> = design.lines().collect();
    let heads: Vec<String> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["file"], file.display().to_string());
            assert!(!f["message"].as_str().unwrap().is_empty(), "{f}");
            assert!(!f["fix"].as_str().unwrap().is_empty(), "{f}");
            // The line is where the element's own name is written; for a reference to
            // nothing, where the reference is.
            let line = f["line"].as_u64().unwrap_or_else(|| panic!("no line: {f}"));
            let element = f["element"].as_str().unwrap();
            let name = element.rsplit([' ', '/']).next().unwrap();
            let expected = match f["id"].as_str().unwrap() {
                "FT020" => "UserDeleted".to_owned(),
                _ => format!("name: {name}"),
            };
            assert!(
                design[line as usize - 1].contains(&expected),
                "{f}: line {line} is {:?}",
                design[line as usize - 1]
            );
            format!(
                "{} {} {}",
                f["id"].as_str().unwrap(),
                f["severity"].as_str().unwrap(),
                f["element"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(heads, BAD_FINDINGS);
}

#[test]
fn warnings_alone_do_not_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("warned.yaml");
    let design = std::fs::read_to_string(example("ecommerce.yaml"))
        .unwrap()
        .replacen(
            "{ name: analytics-ingest-dlq, retention: 14d }",
            "{ name: analytics-ingest-dlq, retention: 7d }",
            1,
        );
    std::fs::write(&file, design).unwrap();
    let output = lint(&file, "text");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains(
        "FT017 warning subscription ecommerce-order-events/analytics-ingest: dead-letter queue"
    ));
}

#[test]
fn an_unknown_field_exits_2_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    std::fs::write(
        &file,
        "version: 1\nname: typo\nqueues:\n  - name: q\n    broker: ferry\n    type: queue\n    dead_leter: { name: q.dlq }\n",
    )
    .unwrap();
    for format in ["text", "json"] {
        let output = lint(&file, format);
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(
            stdout(&output),
            "",
            "nothing is checked in a file that is not read"
        );
        let err = stderr(&output);
        assert!(
            err.contains("typo.yaml: line 7, column 5: unknown field `dead_leter`"),
            "{err}"
        );
    }
}

#[test]
fn a_missing_file_exits_2() {
    let output = lint(Path::new("/nonexistent/topology.yaml"), "text");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/nonexistent/topology.yaml: cannot read it"));
}

#[test]
fn lint_takes_no_server_flags_since_it_talks_to_no_server() {
    let help = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["topology", "lint", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--format"), "{help}");
    assert!(!help.contains("--server"), "{help}");
    let refused = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["topology", "lint", "--server", "ferry://127.0.0.1:1"])
        .arg(example("ecommerce.yaml"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("talk to a server"),
        "{}",
        stderr(&refused)
    );
}
