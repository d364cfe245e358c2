//! boto3, the most used SQS client, against the front end: `boto3/sqs_client.py` creates
//! queues, sends and receives with attributes of every type, batches, FIFO groups, long
//! polls, purges and deletes, checks the error codes boto3 raises and every MD5 digest
//! (botocore does not check them itself). CI installs boto3 (`.ci/run`); elsewhere,
//! without it, the test says so loudly and skips — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

use ferry_aws::{Sqs, SqsConfig};
use ferry_broker::{Broker, BrokerConfig};

fn python_has_boto3() -> bool {
    Command::new("python3")
        .args(["-c", "import boto3"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_drives_queues_messages_batches_and_fifo_and_every_digest_matches() {
    if !python_has_boto3() {
        ferry_testkit::skip_or_fail("python3 with boto3 is missing (python3 -m pip install boto3)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path().join("data"), BrokerConfig::default())
        .await
        .unwrap();
    let sqs = Sqs::open(broker, &dir.path().join("aws"), SqsConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(sqs.serve(listener, async move {
        let _ = stopped.await;
    }));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/boto3/sqs_client.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .arg(format!("http://{addr}"))
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    assert!(
        output.status.success(),
        "the boto3 client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("every check passed"));
}
