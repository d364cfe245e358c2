//! `ferry serve` serves the Amazon SQS endpoint beside gRPC and HTTP, over the same
//! queues, and stops it with the rest: a long poll in progress ends at once, empty.

use std::time::{Duration, Instant};

mod support;

use support::sqs_call;

#[test]
fn serve_answers_sqs_over_the_same_queues_and_stops_a_long_poll_with_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (grpc, sqs) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Amazon SQS on http://",
        |_| {},
    );
    let grpc = format!("ferry://{grpc}");
    let (status, created) = sqs_call(&sqs, "CreateQueue", r#"{"QueueName": "from-sqs"}"#);
    assert_eq!(status, 200, "{created}");
    assert!(
        created.contains(&format!("http://{sqs}/000000000000/from-sqs")),
        "{created}"
    );
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &grpc, "queue", "list"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("from-sqs"));
    // The front end keeps its state beside the broker's.
    assert!(dir.path().join("aws/receipt-key").exists());

    let poll = {
        let sqs = sqs.clone();
        std::thread::spawn(move || {
            let url = format!("http://{sqs}/000000000000/from-sqs");
            let body = format!(r#"{{"QueueUrl": "{url}", "WaitTimeSeconds": 20}}"#);
            sqs_call(&sqs, "ReceiveMessage", &body)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let stopping = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let (status, answer) = poll.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    assert!(!answer.contains("Messages"), "{answer}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopping.elapsed()
    );
}
