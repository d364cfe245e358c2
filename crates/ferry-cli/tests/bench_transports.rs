//! `ferry bench transports` on kafka://: measured against `ferry serve`'s own Kafka listener
//! in builds with the `kafka` feature, refused up front with the feature to enable in builds
//! without it. A few hundred messages: the suite's path end to end, not its figures.

use std::process::Command;

mod support;

#[cfg(not(feature = "kafka"))]
#[test]
fn a_kafka_url_is_refused_naming_the_cargo_feature() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["bench", "transports", "--messages", "10"])
        .args(["--url", "kafka=kafka://127.0.0.1:9092"])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("`kafka` cargo feature") && stderr.contains("--features kafka"),
        "{stderr}"
    );
    // Refused before anything ran: nothing was measured, nothing left in the directory.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("msgs/s"), "{stdout}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[cfg(feature = "kafka")]
#[test]
fn bench_transports_measures_kafka_against_ferry_serve() {
    let data = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(data.path(), &[]);
    let (_grpc, kafka) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Kafka on ",
        |_| {},
    );
    let scratch = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["bench", "transports", "--messages", "300", "--batch", "50"])
        .args(["--publishers", "2", "--consumers", "2"])
        .args(["--url", &format!("kafka=kafka://{kafka}")])
        .arg("--dir")
        .arg(scratch.path())
        .output()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // The table's kafka row, with both figures above zero.
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| kafka "))
        .unwrap_or_else(|| panic!("no kafka row in\n{stdout}"));
    let figures: Vec<f64> = row
        .split('|')
        .skip(2)
        .take(2)
        .map(|cell| cell.trim().replace(',', "").parse().unwrap())
        .collect();
    assert!(figures.iter().all(|f| *f > 0.0), "{row}");
}
