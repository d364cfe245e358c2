//! A cross-section of google-cloud-pubsub's own system tests against `ferry serve`'s Pub/Sub
//! endpoint: the tests listed in `scripts/compat/pubsub-python-ci-subset.txt`, run by
//! `scripts/compat/pubsub-python.sh` (which installs google-cloud-pubsub 2.44.0 and the
//! tests' requirements from PyPI into a virtualenv of its cache directory, downloads the same
//! version's source distribution for `tests/system.py` and starts this build's `ferry` with
//! its Pub/Sub endpoint on a free port, reached through `PUBSUB_EMULATOR_HOST`). It needs
//! bash and python3 with `venv`: without them it fails under `CI=true` and says so loudly and
//! skips elsewhere. The whole suite: `scripts/compat/pubsub-python.sh`; the record:
//! `docs/compat/pubsub-python-tests.md`.

use std::path::Path;
use std::process::Command;

fn read_ids(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('#').next().unwrap().trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

fn has_python_venv() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new("bash")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

#[test]
fn pubsub_python_system_tests_of_the_ci_subset_pass_against_ferry_serve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let compat = root.join("scripts/compat");
    let allowed = read_ids(&compat.join("pubsub-python-allowlist.txt"));
    let subset = read_ids(&compat.join("pubsub-python-ci-subset.txt"));
    // Publishing, administration and a synchronous pull: one test of each at least.
    assert!(subset.len() >= 3, "the subset is too small");
    for id in &subset {
        assert!(
            allowed.contains(id),
            "{id} is in the CI subset but not allowlisted"
        );
    }
    if !has_python_venv() {
        ferry_testkit::skip_or_fail(
            "bash and python3 with venv are needed for google-cloud-pubsub's system tests",
        );
        return;
    }
    let report = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new("bash")
        .arg(compat.join("pubsub-python.sh"))
        .arg("--ferry")
        .arg(env!("CARGO_BIN_EXE_ferry"))
        .arg("--report")
        .arg(report.path())
        .args(&subset)
        .output()
        .expect("running scripts/compat/pubsub-python.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "google-cloud-pubsub's system tests failed against ferry serve:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Each test of the subset ran and passed: not collected-nothing, not skipped.
    let outcomes = std::fs::read_to_string(report.path()).unwrap();
    for id in &subset {
        assert!(
            outcomes
                .lines()
                .any(|l| l.starts_with("passed\t") && l.split('\t').nth(1) == Some(id)),
            "{id} did not pass:\n{outcomes}"
        );
    }
    let summary = format!("pubsub-python: {} passed, 0 failed", subset.len());
    assert!(stdout.contains(&summary), "expected {summary:?}:\n{stdout}");
}
