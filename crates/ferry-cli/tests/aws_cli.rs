//! The AWS CLI runs the order-events design's local setup against `ferry serve`:
//! `examples/aws-order-events/local-setup.sh` — the design's LocalStack init commands
//! unchanged, the one AWS refuses (a FIFO queue subscribed to a standard topic) refused
//! with AWS's error, then the FIFO topic and the four queues with their dead-letter queues
//! — with two CLIs, each against a fresh server:
//!
//! - `awslocal` (PyPI `awscli-local` over PyPI `awscli` v1, which sends SQS's JSON
//!   protocol), reading the endpoint from `AWS_ENDPOINT_URL`;
//! - Debian's `awscli` package (`/usr/bin/aws`, AWS CLI 2.9, whose SQS model is the query
//!   protocol), with `--endpoint-url`.
//!
//! The result is checked through the API, not the CLI: the topics, the subscriptions, each
//! queue's attributes, and a publish reaching the four queues.
//!
//! `scripts/python-packages.sh` installs the PyPI packages and `scripts/debian-packages.sh`
//! the Debian one; without them a test says so loudly and skips — under `CI=true` that is
//! a failure.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod support;

use support::{AwsServer, sns_call, sqs_call};

const ACCOUNT: &str = "000000000000";
const STANDARD_TOPIC: &str = "arn:aws:sns:us-east-1:000000000000:ecommerce-order-events";
const FIFO_TOPIC: &str = "arn:aws:sns:us-east-1:000000000000:ecommerce-order-events.fifo";

/// Runs the setup script against a fresh `ferry serve` with `cli` (the command and how it
/// is told the endpoint), then checks what it made.
fn setup_with(cli: impl FnOnce(&mut Command, &str)) {
    let dir = tempfile::tempdir().unwrap();
    let server = AwsServer::start(&dir.path().join("data"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/aws-order-events/local-setup.sh");
    let mut command = Command::new("bash");
    command
        .arg(script)
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_CLI")
        .env_remove("AWS_PROFILE")
        .env("AWS_CONFIG_FILE", dir.path().join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.path().join("no-aws-credentials"),
        );
    cli(&mut command, &server.endpoint());
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "local-setup.sh failed:\n{stdout}\n{stderr}"
    );
    // The design's third command, refused as AWS refuses it.
    assert!(stdout.contains("refused as AWS refuses it"), "{stdout}");
    assert!(
        stdout.contains(
            "An error occurred (InvalidParameter) when calling the Subscribe operation: \
             Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not \
             be subscribed to standard SNS topics"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("local setup done"), "{stdout}");
    check_setup(&server.aws);
    server.kill();
}

fn json_body(response: &str) -> Value {
    serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {response}"))
}

fn queue_url(aws: &str, queue: &str) -> String {
    format!("http://{aws}/{ACCOUNT}/{queue}")
}

fn attributes(aws: &str, queue: &str) -> Value {
    let (status, body) = sqs_call(
        aws,
        "GetQueueAttributes",
        &format!(
            r#"{{"QueueUrl": "{}", "AttributeNames": ["All"]}}"#,
            queue_url(aws, queue)
        ),
    );
    assert_eq!(status, 200, "{queue}: {body}");
    json_body(&body)["Attributes"].clone()
}

/// `(dead-letter queue, maxReceiveCount)` of a queue's RedrivePolicy.
fn redrive(attributes: &Value) -> Option<(String, String)> {
    let policy: Value = serde_json::from_str(attributes["RedrivePolicy"].as_str()?).unwrap();
    let target = policy["deadLetterTargetArn"].as_str().unwrap();
    let count = match &policy["maxReceiveCount"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some((
        target
            .strip_prefix(&format!("arn:aws:sqs:us-east-1:{ACCOUNT}:"))
            .unwrap()
            .to_owned(),
        count,
    ))
}

fn subscribed_endpoints(aws: &str, topic: &str) -> Vec<String> {
    let (status, body) = sns_call(
        aws,
        &format!(
            "Action=ListSubscriptionsByTopic&TopicArn={}",
            topic.replace(':', "%3A")
        ),
    );
    assert_eq!(status, 200, "{body}");
    let mut endpoints: Vec<String> = body
        .split("<Endpoint>")
        .skip(1)
        .map(|rest| rest.split("</Endpoint>").next().unwrap().to_owned())
        .collect();
    endpoints.sort();
    endpoints
}

fn check_setup(aws: &str) {
    let (status, topics) = sns_call(aws, "Action=ListTopics");
    assert_eq!(status, 200, "{topics}");
    for topic in [STANDARD_TOPIC, FIFO_TOPIC] {
        assert!(
            topics.contains(&format!("<TopicArn>{topic}</TopicArn>")),
            "{topics}"
        );
    }
    assert_eq!(
        subscribed_endpoints(aws, STANDARD_TOPIC),
        Vec::<String>::new()
    );
    let queues = [
        "analytics-ingest",
        "email-notifications",
        "inventory-reservation.fifo",
        "payment-processing.fifo",
    ];
    assert_eq!(
        subscribed_endpoints(aws, FIFO_TOPIC),
        queues
            .iter()
            .map(|q| format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{q}"))
            .collect::<Vec<_>>()
    );

    // The design's init command's queue, as it made it: FIFO, no content-based dedup, no
    // dead-letter queue.
    let inventory = attributes(aws, "inventory-reservation.fifo");
    assert_eq!(inventory["FifoQueue"], "true", "{inventory}");
    assert_eq!(
        inventory["ContentBasedDeduplication"], "false",
        "{inventory}"
    );
    assert_eq!(redrive(&inventory), None, "{inventory}");
    // The queue table's rows: visibility, retention, DLQ, max receives.
    for (queue, visibility, retention, dlq, max) in [
        (
            "payment-processing.fifo",
            "60",
            "604800",
            "payment-processing-dlq.fifo",
            "3",
        ),
        (
            "email-notifications",
            "30",
            "345600",
            "email-notifications-dlq",
            "5",
        ),
        (
            "analytics-ingest",
            "120",
            "1209600",
            "analytics-ingest-dlq",
            "10",
        ),
    ] {
        let a = attributes(aws, queue);
        assert_eq!(a["VisibilityTimeout"], visibility, "{queue}: {a}");
        assert_eq!(a["MessageRetentionPeriod"], retention, "{queue}: {a}");
        assert_eq!(
            redrive(&a),
            Some((dlq.to_owned(), max.to_owned())),
            "{queue}: {a}"
        );
        let fifo = queue.ends_with(".fifo");
        assert_eq!(a.get("FifoQueue").is_some_and(|v| v == "true"), fifo, "{a}");
        let d = attributes(aws, dlq);
        assert_eq!(d["MessageRetentionPeriod"], "1209600", "{dlq}: {d}");
        assert_eq!(d.get("FifoQueue").is_some_and(|v| v == "true"), fifo, "{d}");
    }

    // A publish to the FIFO topic reaches all four queues.
    let (status, published) = sns_call(
        aws,
        &format!(
            "Action=Publish&TopicArn={}&Message=%7B%22type%22%3A%22OrderPlaced%22%7D\
             &MessageGroupId=ord_1&MessageDeduplicationId=row-1",
            FIFO_TOPIC.replace(':', "%3A")
        ),
    );
    assert_eq!(status, 200, "{published}");
    for queue in queues {
        let (status, received) = sqs_call(
            aws,
            "ReceiveMessage",
            &format!(
                r#"{{"QueueUrl": "{}", "WaitTimeSeconds": 5}}"#,
                queue_url(aws, queue)
            ),
        );
        assert_eq!(status, 200, "{received}");
        let messages = json_body(&received)["Messages"].clone();
        assert_eq!(
            messages.as_array().map(Vec::len),
            Some(1),
            "{queue}: {received}"
        );
        let envelope: Value = serde_json::from_str(messages[0]["Body"].as_str().unwrap()).unwrap();
        assert_eq!(envelope["TopicArn"], FIFO_TOPIC, "{envelope}");
        assert_eq!(
            envelope["Message"], r#"{"type":"OrderPlaced"}"#,
            "{envelope}"
        );
    }
}

fn runs(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    })
}

#[test]
fn awslocal_runs_the_local_setup_and_ferry_refuses_what_aws_refuses() {
    let Some(version) = runs("awslocal", &["--version"]) else {
        ferry_testkit::skip_or_fail(
            "awslocal is missing (scripts/python-packages.sh installs awscli-local and awscli)",
        );
        return;
    };
    assert!(version.contains("aws-cli/1."), "{version}");
    setup_with(|command, endpoint| {
        command
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("DISABLE_DEPRECATION_NOTICE", "1");
    });
}

#[test]
fn debians_aws_cli_runs_the_local_setup_and_ferry_refuses_what_aws_refuses() {
    // Debian's package, not whichever `aws` comes first in PATH.
    const DEBIAN_AWS: &str = "/usr/bin/aws";
    let Some(version) = runs(DEBIAN_AWS, &["--version"]) else {
        ferry_testkit::skip_or_fail(
            "Debian's awscli is missing at /usr/bin/aws (scripts/debian-packages.sh installs it)",
        );
        return;
    };
    assert!(
        version.contains("aws-cli/2.") && version.contains("debian"),
        "{version}"
    );
    setup_with(|command, endpoint| {
        command.env("AWS_CLI", format!("{DEBIAN_AWS} --endpoint-url {endpoint}"));
    });
}
