//! Google's own Node.js client for Pub/Sub (`@google-cloud/pubsub`, from the npm registry)
//! against the front end through `PUBSUB_EMULATOR_HOST`: `node/pubsub_client.mjs` creates
//! a topic and an ordered subscription, checks the errors the client raises, publishes with
//! ordering keys and reads with a streaming pull under flow control, each key in order.
//!
//! CI installs the client (`scripts/pubsub-packages.sh`); elsewhere, without it, the test
//! says so loudly and skips — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_node_client_works_against_the_front_end() {
    let dir_of_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node");
    let installed = dir_of_script
        .join("node_modules/@google-cloud/pubsub")
        .is_dir();
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(installed && node) {
        ferry_testkit::skip_or_fail(
            "node or @google-cloud/pubsub is missing (scripts/pubsub-packages.sh installs it)",
        );
        return;
    }
    let mut client = Command::new("node");
    client
        .arg("pubsub_client.mjs")
        .current_dir(dir_of_script)
        // No Google metadata server to look for here.
        .env("METADATA_SERVER_DETECTION", "none");
    support::run_client("Node.js client", client).await;
}
