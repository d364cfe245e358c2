//! `ferry serve`'s SNS fan-out killed mid-stream: Publish calls from two threads to a topic
//! with four subscribed SQS queues (two of them behind a filter policy) run while the
//! server is SIGKILLed, three times, and restarted on the same data directory. Afterwards
//! every publish answered 200 is in every queue whose filter takes it — exactly once,
//! rendered as SNS's envelope — and in no other. The queues hold references to the topic's
//! one copy: a kill between the topic write and the references is what the broker's
//! catch-up on open repairs, with the SNS filter evaluated by the broker.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;

use support::AwsServer;

const KILLS: usize = 3;
const PUBLISHERS: usize = 2;
const TOPIC_ARN: &str = "arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3Afanout";
/// The queues, and whether each takes only even-numbered messages (its filter policy).
const QUEUES: [(&str, bool); 4] = [
    ("all-a", false),
    ("all-b", false),
    ("even-a", true),
    ("even-b", true),
];

/// One HTTP call, or `None` when the connection fails or closes without an answer (the
/// server was killed).
fn try_http(addr: &str, headers: &str, body: &str) -> Option<(u16, String)> {
    let mut stream =
        TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split("\r\n\r\n").nth(1)?.to_owned();
    Some((status, body))
}

fn try_sns(addr: &str, form: &str) -> Option<(u16, String)> {
    try_http(
        addr,
        "Content-Type: application/x-www-form-urlencoded\r\n",
        &format!("{form}&Version=2010-03-31"),
    )
}

fn sqs(addr: &str, action: &str, body: &Value) -> Value {
    let (status, answer) = try_http(
        addr,
        &format!(
            "X-Amz-Target: AmazonSQS.{action}\r\nContent-Type: application/x-amz-json-1.0\r\n"
        ),
        &body.to_string(),
    )
    .unwrap_or_else(|| panic!("{action} answered"));
    assert_eq!(status, 200, "{action}: {answer}");
    serde_json::from_str(&answer).unwrap()
}

fn sns_ok(addr: &str, form: &str) -> String {
    let (status, answer) = try_sns(addr, form).expect("SNS answered");
    assert_eq!(status, 200, "{form}: {answer}");
    answer
}

fn set_up(addr: &str) {
    sns_ok(addr, "Action=CreateTopic&Name=fanout");
    for (queue, even) in QUEUES {
        sqs(addr, "CreateQueue", &json!({"QueueName": queue}));
        let mut form = format!(
            "Action=Subscribe&TopicArn={TOPIC_ARN}&Protocol=sqs\
             &Endpoint=arn%3Aaws%3Asqs%3Aus-east-1%3A000000000000%3A{queue}"
        );
        if even {
            form.push_str(
                "&Attributes.entry.1.key=FilterPolicy\
                 &Attributes.entry.1.value=%7B%22parity%22%3A%5B%22even%22%5D%7D",
            );
        }
        sns_ok(addr, &form);
    }
}

/// Publishes until the server stops answering; records each message answered 200.
fn publisher(
    addr: String,
    round: usize,
    thread: usize,
    acked: Arc<Mutex<HashSet<String>>>,
    attempted: Arc<Mutex<HashSet<String>>>,
    count: Arc<AtomicUsize>,
) {
    for n in 0.. {
        let message = format!("r{round}-t{thread}-n{n}");
        let parity = if n % 2 == 0 { "even" } else { "odd" };
        attempted.lock().unwrap().insert(message.clone());
        let form = format!(
            "Action=Publish&TopicArn={TOPIC_ARN}&Message={message}\
             &MessageAttributes.entry.1.Name=parity\
             &MessageAttributes.entry.1.Value.DataType=String\
             &MessageAttributes.entry.1.Value.StringValue={parity}"
        );
        let Some((status, answer)) = try_sns(&addr, &form) else {
            return;
        };
        assert_eq!(status, 200, "{answer}");
        acked.lock().unwrap().insert(message);
        count.fetch_add(1, Ordering::SeqCst);
    }
}

fn even(message: &str) -> bool {
    let n: u64 = message.rsplit("-n").next().unwrap().parse().unwrap();
    n.is_multiple_of(2)
}

#[test]
fn publishes_answered_200_reach_every_subscribed_queue_through_sigkills() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let attempted = Arc::new(Mutex::new(HashSet::new()));
    for round in 0..KILLS {
        let server = AwsServer::start(&data);
        if round == 0 {
            set_up(&server.aws);
        }
        let count = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..PUBLISHERS)
            .map(|thread| {
                let (addr, acked, attempted, count) = (
                    server.aws.clone(),
                    acked.clone(),
                    attempted.clone(),
                    count.clone(),
                );
                std::thread::spawn(move || publisher(addr, round, thread, acked, attempted, count))
            })
            .collect();
        // Killed mid-stream, at a moment that differs from round to round.
        let running = Instant::now();
        let least = Duration::from_millis(200 + 150 * round as u64);
        while running.elapsed() < least || count.load(Ordering::SeqCst) < 10 {
            assert!(
                running.elapsed() < Duration::from_secs(20),
                "round {round}: {} publishes answered in 20 s",
                count.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        server.kill();
        for t in threads {
            t.join().unwrap();
        }
        eprintln!(
            "round {round}: killed after {:?}, {} publishes answered",
            running.elapsed(),
            count.load(Ordering::SeqCst)
        );
    }

    let server = AwsServer::start(&data);
    let mut by_queue: HashMap<&str, Vec<String>> = HashMap::new();
    for (queue, _) in QUEUES {
        let url = format!("http://{}/000000000000/{queue}", server.aws);
        let got = by_queue.entry(queue).or_default();
        let mut empty = 0;
        while empty < 2 {
            let answer = sqs(
                &server.aws,
                "ReceiveMessage",
                &json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1,
                        "VisibilityTimeout": 300}),
            );
            let messages = answer["Messages"].as_array().cloned().unwrap_or_default();
            empty = if messages.is_empty() { empty + 1 } else { 0 };
            for m in messages {
                let envelope: Value =
                    serde_json::from_str(m["Body"].as_str().unwrap()).expect("an SNS envelope");
                assert_eq!(envelope["Type"], "Notification");
                got.push(envelope["Message"].as_str().unwrap().to_owned());
            }
        }
    }
    server.kill();

    let acked = acked.lock().unwrap();
    let attempted = attempted.lock().unwrap();
    for (queue, only_even) in QUEUES {
        let got = &by_queue[queue];
        let set: HashSet<&String> = got.iter().collect();
        assert_eq!(set.len(), got.len(), "{queue}: a message came twice");
        let lost: Vec<&String> = acked
            .iter()
            .filter(|m| (!only_even || even(m)) && !set.contains(m))
            .collect();
        assert!(
            lost.is_empty(),
            "{queue}: {} answered publishes lost: {lost:?}",
            lost.len()
        );
        let strays: Vec<&&String> = set
            .iter()
            .filter(|m| !attempted.contains(**m) || (only_even && !even(m)))
            .collect();
        assert!(strays.is_empty(), "{queue}: not for it: {strays:?}");
    }
    assert!(acked.len() >= 10 * KILLS, "too little happened to tell");
    eprintln!(
        "{KILLS} kills: {} publishes answered ({} attempted), received {:?}, in {:?}",
        acked.len(),
        attempted.len(),
        QUEUES
            .iter()
            .map(|(q, _)| (q, by_queue[q].len()))
            .collect::<Vec<_>>(),
        started.elapsed()
    );
}
