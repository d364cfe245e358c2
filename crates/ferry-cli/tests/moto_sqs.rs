//! A cross-section of moto's own SQS test suite against `ferry serve`: the tests listed in
//! `crates/ferry-aws/tests/compat/moto-sqs-ci-subset.txt`, run by
//! `scripts/compat/moto-sqs.sh` (which installs moto and pytest from PyPI into a
//! virtualenv of its work directory and downloads moto's tests) against this build's
//! `ferry` binary. It needs python3 and PyPI, so it runs under `CI=true` only — where
//! anything missing fails it — and otherwise says so and skips. The whole suite:
//! `scripts/compat/moto-sqs.sh`.

use std::path::Path;
use std::process::Command;

#[test]
fn moto_sqs_tests_of_the_ci_subset_pass_against_ferry_serve() {
    if !ferry_testkit::ci::under_ci() {
        eprintln!(
            "SKIPPED: moto's SQS tests run under CI=true only (they install moto from PyPI); \
             run scripts/compat/moto-sqs.sh for the whole suite"
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let compat = root.join("crates/ferry-aws/tests/compat");
    let read = |name: &str| -> Vec<String> {
        std::fs::read_to_string(compat.join(name))
            .unwrap()
            .lines()
            .map(|l| l.split('#').next().unwrap().trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let allowed = read("moto-sqs-allowlist.txt");
    let subset = read("moto-sqs-ci-subset.txt");
    assert!(subset.len() >= 10, "the subset is too small");
    for id in &subset {
        assert!(
            allowed.contains(id),
            "{id} is in the CI subset but not allowlisted"
        );
    }
    // A free port for the SQS endpoint: the subset avoids the tests that expect moto's
    // default port in queue URLs.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let work = std::env::temp_dir().join("ferry-moto-sqs-ci");
    let output = Command::new("bash")
        .arg(root.join("scripts/compat/moto-sqs.sh"))
        .args(&subset)
        .env("FERRY_BIN", env!("CARGO_BIN_EXE_ferry"))
        .env("FERRY_MOTO_PORT", port.to_string())
        .env("FERRY_MOTO_WORK", &work)
        .output()
        .expect("running scripts/compat/moto-sqs.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "moto's SQS tests failed against ferry serve:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = format!("moto-sqs: {} passed, 0 failed", subset.len());
    assert!(stdout.contains(&summary), "expected {summary:?}:\n{stdout}");
}
