//! A cross-section of librdkafka's own test suite against `ferry serve`: the tests listed
//! in `scripts/compat/librdkafka-ci-subset.txt`, run by `scripts/compat/librdkafka.sh`
//! against this build's `ferry` binary. The script downloads librdkafka's source (the
//! `rdkafka-sys` crate, from crates.io) and builds it and its test runner with gcc, g++
//! and make in a cache directory outside the repository (`FERRY_COMPAT_CACHE`, default
//! `~/.cache/ferry-compat`): the first run pays for the build, later runs only run the
//! tests. Without those tools it says so loudly and skips — under `CI=true` that is a
//! failure. The whole suite: `scripts/compat/librdkafka.sh`; its record:
//! `docs/compat/kafka-librdkafka.md`.

use std::path::Path;
use std::process::Command;

fn has(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn listed(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('#').next().unwrap().trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn librdkafka_tests_of_the_ci_subset_pass_against_ferry_serve() {
    let missing: Vec<&str> = ["gcc", "g++", "make", "curl"]
        .into_iter()
        .filter(|tool| !has(tool))
        .collect();
    if !missing.is_empty() {
        ferry_testkit::skip_or_fail(&format!(
            "librdkafka's test suite needs {} to build (bash scripts/debian-packages.sh)",
            missing.join(", ")
        ));
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let compat = root.join("scripts/compat");
    let allowed = listed(&compat.join("librdkafka-allowlist.txt"));
    let subset = listed(&compat.join("librdkafka-ci-subset.txt"));
    assert!(subset.len() >= 8, "the subset is too small");
    for name in &subset {
        assert!(
            allowed.contains(name),
            "{name} is in the CI subset but not allowlisted"
        );
    }
    let work = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg(compat.join("librdkafka.sh"))
        .arg("--subset")
        .arg(compat.join("librdkafka-ci-subset.txt"))
        .env("FERRY_BIN", env!("CARGO_BIN_EXE_ferry"))
        .env("FERRY_LIBRDKAFKA_WORK", work.path())
        .output()
        .expect("running scripts/compat/librdkafka.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}");
    assert!(
        output.status.success(),
        "librdkafka's tests failed against ferry serve:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = format!("librdkafka: {} passed, 0 failed, 0 skipped", subset.len());
    assert!(stdout.contains(&summary), "expected {summary:?}:\n{stdout}");
}
