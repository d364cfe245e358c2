//! boto3 (and the AWS CLI) against the front end, one Python script per test in `boto3/`,
//! each run against a front end of its own on a fresh broker:
//!
//! - `sqs_client.py` creates queues, sends and receives with attributes of every type,
//!   batches, FIFO groups, long polls, purges and deletes, checks the error codes boto3
//!   raises and every MD5 digest (botocore does not check them itself);
//! - `sns_fanout.py` builds one SNS topic fanned out to four SQS queues, two of them FIFO
//!   (an order-events topology), runs the setup commands such a project's local
//!   environment uses, publishes as an outbox relay does (group and deduplication ids), and
//!   checks what each queue receives, filter policies, raw delivery, batches and the error
//!   codes;
//! - `auth_keys.py` signs with botocore against an endpoint with access keys: the right
//!   secret works, a wrong one, an unknown key and no signature are refused with the codes
//!   botocore raises, each key does what its permissions allow (SQS, SNS) and STS
//!   GetCallerIdentity names it.
//!
//! CI installs boto3 (`scripts/python-packages.sh`); elsewhere, without it, a test says so
//! loudly and skips — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

use ferry_aws::sigv4::AccessKey;
use ferry_aws::{Sqs, SqsConfig};
use ferry_broker::{Broker, BrokerConfig};

fn python_has_boto3() -> bool {
    Command::new("python3")
        .args(["-c", "import boto3"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `tests/boto3/<script>` against a front end on a fresh broker; it must end with
/// "every check passed".
async fn run_script(script: &str) {
    run_script_with(script, SqsConfig::default()).await;
}

/// The same, with the front end configured by `config`.
async fn run_script_with(script: &str, config: SqsConfig) {
    if !python_has_boto3() {
        ferry_testkit::skip_or_fail("python3 with boto3 is missing (python3 -m pip install boto3)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path().join("data"), served_config())
        .await
        .unwrap();
    let sqs = Sqs::open(broker, &dir.path().join("aws"), config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(sqs.serve(listener, async move {
        let _ = stopped.await;
    }));
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/boto3")
        .join(script);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_drives_queues_messages_batches_and_fifo_and_every_digest_matches() {
    run_script("sqs_client.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_fans_one_topic_out_to_four_queues_two_of_them_fifo() {
    run_script("sns_fanout.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_signs_with_configured_keys_and_is_refused_with_wrong_ones() {
    let key = |id: &str, secret: &str, name: Option<&str>, permissions: &[&str]| AccessKey {
        id: id.into(),
        secret: secret.into(),
        name: name.map(str::to_owned),
        account_id: None,
        permissions: permissions.iter().map(|p| p.parse().unwrap()).collect(),
    };
    // The keys auth_keys.py signs with.
    let config = SqsConfig {
        access_keys: vec![
            key(
                "AKIDADMIN",
                "admin-secret",
                None,
                &["admin:#", "publish:#", "consume:#", "dlq:#"],
            ),
            key(
                "AKIDPUBLISHER",
                "publisher-secret",
                Some("orders-publisher"),
                &["publish:orders", "publish:news"],
            ),
        ],
        ..SqsConfig::default()
    };
    run_script_with("auth_keys.py", config).await;
}

/// The broker's config as `ferry serve` makes it for this front end: with the SNS
/// subscription filter registered.
fn served_config() -> BrokerConfig {
    let mut config = BrokerConfig::default();
    ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
    config
}
