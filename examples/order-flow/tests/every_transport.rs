//! The order flow, unchanged, on every transport: only the URL differs.

use std::process::Command;

fn run(url: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_order-flow"))
        .arg(url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "order-flow on {url} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("every order where it belongs"), "{stdout}");
}

#[test]
fn the_order_flow_runs_on_the_embedded_broker() {
    let dir = tempfile::tempdir().unwrap();
    run(&format!("embedded:{}", dir.path().display()));
}
