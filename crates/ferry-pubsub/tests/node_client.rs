//! Google's own Node.js client for Pub/Sub (`@google-cloud/pubsub`, from the npm registry)
//! against the front end through `PUBSUB_EMULATOR_HOST`: `node/pubsub_client.mjs` creates
//! a topic and an ordered subscription, checks the errors the client raises, publishes with
//! ordering keys and reads with a streaming pull under flow control, each key in order.
//!
//! CI installs the client (`scripts/pubsub-packages.sh`); elsewhere, without it, the test
//! says so loudly and skips — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

use ferry_broker::{Broker, BrokerConfig};
use ferry_pubsub::PubSub;

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
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(PubSub::new(broker).serve(listener, async move {
        let _ = stopped.await;
    }));
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("pubsub_client.mjs")
            .current_dir(dir_of_script)
            .env("PUBSUB_EMULATOR_HOST", addr.to_string())
            // No Google metadata server to look for here.
            .env("METADATA_SERVER_DETECTION", "none")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    assert!(
        output.status.success(),
        "the Node.js client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("every check passed"));
}
