//! Google's own Python client for Pub/Sub (`google-cloud-pubsub`, from PyPI) against the
//! front end through `PUBSUB_EMULATOR_HOST`, as an application's tests would point it at
//! Google's emulator: `python/pubsub_client.py` creates topics and subscriptions, publishes
//! with ordering keys, reads with a streaming pull under flow control (each key in order),
//! pulls, hands back and acknowledges, checks the errors the client raises, and keeps a
//! topic to an Avro schema through `SchemaServiceClient`.
//!
//! CI installs the client (`scripts/python-packages.sh`); elsewhere, without it, the test
//! says so loudly and skips — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

mod support;

fn python_has_the_client() -> bool {
    Command::new("python3")
        .args(["-c", "from google.cloud import pubsub_v1"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_python_client_works_against_the_front_end() {
    if !python_has_the_client() {
        ferry_testkit::skip_or_fail(
            "python3 with google-cloud-pubsub is missing (python3 -m pip install google-cloud-pubsub)",
        );
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/pubsub_client.py");
    let mut client = Command::new("python3");
    client.arg(script);
    support::run_client("Python client", client).await;
}
