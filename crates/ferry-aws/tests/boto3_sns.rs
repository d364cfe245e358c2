//! boto3 and the AWS CLI against the SNS endpoint: `boto3/sns_fanout.py` builds one SNS
//! topic fanned out to four SQS queues, two of them FIFO (an order-events topology), runs
//! the setup commands such a project's local environment uses, publishes as an outbox
//! relay does (group and deduplication ids), and checks what each queue receives, filter
//! policies, raw delivery, batches and the error codes. Without python3 and boto3 the
//! test says so loudly and skips — under `CI=true` that is a failure.

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
async fn boto3_fans_one_topic_out_to_four_queues_two_of_them_fifo() {
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/boto3/sns_fanout.py");
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
