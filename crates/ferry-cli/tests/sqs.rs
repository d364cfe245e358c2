//! `ferry serve` serves the Amazon SQS endpoint beside gRPC and HTTP, over the same
//! queues, and stops it with the rest: a long poll in progress ends at once, empty.

use std::time::{Duration, Instant};

mod support;

fn sqs_call(addr: &str, action: &str, body: &str) -> (u16, String) {
    let headers =
        format!("X-Amz-Target: AmazonSQS.{action}\r\nContent-Type: application/x-amz-json-1.0\r\n");
    support::http(addr, &headers, "POST", "/", body)
}

#[test]
fn serve_answers_sqs_over_the_same_queues_and_stops_a_long_poll_with_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (mut grpc, mut sqs) = (None, None);
    while grpc.is_none() || sqs.is_none() {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("ferry serve printed its addresses");
        if let Some(rest) = line.strip_prefix("ferry: serving gRPC (ferry.v1) on ") {
            grpc = Some(format!("ferry://{}", rest.split(',').next().unwrap()));
        } else if let Some(rest) = line.strip_prefix("ferry: serving Amazon SQS on http://") {
            sqs = Some(rest.split(' ').next().unwrap().to_owned());
        }
    }
    let (grpc, sqs) = (grpc.unwrap(), sqs.unwrap());
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
