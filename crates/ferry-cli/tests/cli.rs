//! The `ferry` binary as a user runs it.

use std::process::Command;

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

/// `ferry bench storage`, quick and without the reopen phase, as a test can afford.
fn quick_storage_bench() -> Command {
    let mut command = ferry();
    command.args(["bench", "storage", "--quick", "--no-reopen"]);
    command
}

#[test]
fn storage_bench_runs_a_cell_and_prints_the_table_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let output = quick_storage_bench()
        .args(["--seconds", "0.2"])
        .args(["--only", "Fsync 128 B x1 threads", "--dir"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("4 KiB append + fdatasync"), "{stdout}");
    assert!(stdout.contains("128 B x1 threads"), "{stdout}");
    assert!(stdout.contains("check (3) threads"), "{stdout}");
    let json = std::fs::read_to_string(&json).unwrap();
    assert!(json.contains("\"records_per_append\""), "{json}");
    // The scratch directory is removed: only the JSON is left.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn unknown_cell_filter_is_an_error_not_an_empty_run() {
    let dir = tempfile::tempdir().unwrap();
    let output = quick_storage_bench()
        .args(["--only", "no such cell", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
}
