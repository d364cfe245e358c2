//! `ferry serve` answers Amazon SNS on the SQS endpoint: a topic made through SNS is a
//! Ferry topic, and a publish reaches a subscribed SQS queue.

mod support;

use support::{sns_call, sqs_call};

#[test]
fn serve_answers_sns_and_a_publish_reaches_a_subscribed_sqs_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (grpc, aws) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Amazon SQS on http://",
        |line| {
            if line.starts_with("ferry: serving Amazon SQS on http://") {
                assert!(line.contains("SNS"), "{line}");
            }
        },
    );
    let grpc = format!("ferry://{grpc}");
    let (status, created) = sqs_call(&aws, "CreateQueue", r#"{"QueueName": "inbox"}"#);
    assert_eq!(status, 200, "{created}");
    let (status, topic) = sns_call(&aws, "Action=CreateTopic&Name=news");
    assert_eq!(status, 200, "{topic}");
    assert!(
        topic.contains("arn:aws:sns:us-east-1:000000000000:news"),
        "{topic}"
    );
    let topics = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &grpc, "topic", "list"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&topics.stdout).contains("news"),
        "{}",
        String::from_utf8_lossy(&topics.stderr)
    );
    let (status, subscribed) = sns_call(
        &aws,
        "Action=Subscribe&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3Anews\
         &Protocol=sqs&Endpoint=arn%3Aaws%3Asqs%3Aus-east-1%3A000000000000%3Ainbox",
    );
    assert_eq!(status, 200, "{subscribed}");
    let (status, published) = sns_call(
        &aws,
        "Action=Publish&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3Anews&Message=hello",
    );
    assert_eq!(status, 200, "{published}");
    let url = format!("http://{aws}/000000000000/inbox");
    let (status, received) = sqs_call(
        &aws,
        "ReceiveMessage",
        &format!(r#"{{"QueueUrl": "{url}", "WaitTimeSeconds": 5}}"#),
    );
    assert_eq!(status, 200, "{received}");
    assert!(
        received.contains(r#"\"Type\":\"Notification\""#),
        "{received}"
    );
    assert!(received.contains(r#"\"Message\":\"hello\""#), "{received}");
    // The SNS records live beside the SQS ones.
    assert!(dir.path().join("aws/sns.json").exists());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
