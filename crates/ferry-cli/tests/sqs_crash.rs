//! `ferry serve`'s SQS endpoint killed mid-stream: SendMessageBatch calls from two threads
//! and a consumer receiving and deleting (every other message, leaving the rest in flight)
//! run while the server is SIGKILLed, four times, and restarted on the same data directory.
//! Afterwards every message of a batch that was answered 200 is received — unless it was
//! deleted — and no message whose DeleteMessage was answered 200 before a kill comes back.
//! A delete the kill cut off, or answered after the visibility timeout (its handle may have
//! gone stale), counts neither way.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;

use support::AwsServer;

const KILLS: usize = 4;
const SENDERS: usize = 2;
const QUEUE: &str = "crash";
/// The consumer's visibility timeout: what it leaves in flight at a kill is received again
/// this long after it was received at the latest.
const VISIBILITY: Duration = Duration::from_secs(3);

/// One SQS JSON call, or `None` when the connection fails or closes without an answer (the
/// server was killed).
fn try_call(addr: &str, action: &str, body: &Value) -> Option<(u16, Value)> {
    let mut stream =
        TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let body = body.to_string();
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: {addr}\r\nX-Amz-Target: AmazonSQS.{action}\r\n\
         Content-Type: application/x-amz-json-1.0\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let json = serde_json::from_str(response.split("\r\n\r\n").nth(1)?).ok()?;
    Some((status, json))
}

#[derive(Default)]
struct Record {
    /// Bodies of batch entries answered as sent.
    acked: HashSet<String>,
    /// Bodies of every entry ever sent, answered or not.
    attempted: HashSet<String>,
    /// Bodies whose DeleteMessage was answered 200 within the visibility timeout.
    deleted: HashSet<String>,
    /// Bodies whose DeleteMessage got no answer (the kill came first), or was answered 200
    /// only after the visibility timeout (the handle may have gone stale, and a stale
    /// handle's delete succeeds and deletes nothing): deleted or not.
    unsure: HashSet<String>,
}

fn url(addr: &str) -> String {
    format!("http://{addr}/000000000000/{QUEUE}")
}

/// Sends batches of ten until the server stops answering.
fn sender(
    addr: String,
    round: usize,
    thread: usize,
    record: Arc<Mutex<Record>>,
    batches: Arc<AtomicUsize>,
) {
    for batch in 0.. {
        let bodies: Vec<String> = (0..10)
            .map(|i| format!("r{round}-t{thread}-b{batch}-e{i}"))
            .collect();
        let entries: Vec<Value> = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| json!({"Id": format!("e{i}"), "MessageBody": b}))
            .collect();
        record
            .lock()
            .unwrap()
            .attempted
            .extend(bodies.iter().cloned());
        let Some((status, answer)) = try_call(
            &addr,
            "SendMessageBatch",
            &json!({"QueueUrl": url(&addr), "Entries": entries}),
        ) else {
            return;
        };
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer
                .get("Failed")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            0,
            "{answer}"
        );
        let mut record = record.lock().unwrap();
        for ok in answer["Successful"].as_array().unwrap() {
            let i: usize = ok["Id"].as_str().unwrap()[1..].parse().unwrap();
            record.acked.insert(bodies[i].clone());
        }
        drop(record);
        batches.fetch_add(1, Ordering::SeqCst);
    }
}

/// Receives and deletes until the server stops answering; deletes every other message it
/// receives and leaves the rest in flight, to come back after the restart.
fn consumer(
    addr: String,
    record: Arc<Mutex<Record>>,
    deletes: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let mut keep = false;
    while !stop.load(Ordering::SeqCst) {
        let receiving = Instant::now();
        let Some((status, answer)) = try_call(
            &addr,
            "ReceiveMessage",
            &json!({
                "QueueUrl": url(&addr),
                "MaxNumberOfMessages": 10,
                "VisibilityTimeout": VISIBILITY.as_secs(),
            }),
        ) else {
            return;
        };
        assert_eq!(status, 200, "{answer}");
        for m in answer["Messages"].as_array().into_iter().flatten() {
            keep = !keep;
            if keep {
                continue;
            }
            let body = m["Body"].as_str().unwrap().to_owned();
            record.lock().unwrap().unsure.insert(body.clone());
            let Some((status, deleted)) = try_call(
                &addr,
                "DeleteMessage",
                &json!({"QueueUrl": url(&addr), "ReceiptHandle": m["ReceiptHandle"]}),
            ) else {
                return;
            };
            assert_eq!(status, 200, "{deleted}");
            if receiving.elapsed() < VISIBILITY {
                let mut record = record.lock().unwrap();
                record.unsure.remove(&body);
                record.deleted.insert(body);
            }
            deletes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn messages_answered_200_survive_sigkill_and_deleted_ones_stay_deleted() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let record = Arc::new(Mutex::new(Record::default()));
    for round in 0..KILLS {
        let server = AwsServer::start(&data);
        if round == 0 {
            let (status, created) =
                try_call(&server.aws, "CreateQueue", &json!({"QueueName": QUEUE}))
                    .expect("CreateQueue answered");
            assert_eq!(status, 200, "{created}");
        }
        let batches = Arc::new(AtomicUsize::new(0));
        let deletes = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for thread in 0..SENDERS {
            let (addr, record, batches) = (server.aws.clone(), record.clone(), batches.clone());
            threads.push(std::thread::spawn(move || {
                sender(addr, round, thread, record, batches)
            }));
        }
        {
            let (addr, record, deletes, stop) = (
                server.aws.clone(),
                record.clone(),
                deletes.clone(),
                stop.clone(),
            );
            threads.push(std::thread::spawn(move || {
                consumer(addr, record, deletes, stop)
            }));
        }
        // Killed mid-stream: once batches were answered and deletes made, at a moment
        // that differs from round to round.
        let running = Instant::now();
        let least = Duration::from_millis(150 + 100 * round as u64);
        while running.elapsed() < least
            || batches.load(Ordering::SeqCst) < 3
            || deletes.load(Ordering::SeqCst) < 1
        {
            assert!(
                running.elapsed() < Duration::from_secs(15),
                "round {round}: {} batches answered, {} deletes in 15 s",
                batches.load(Ordering::SeqCst),
                deletes.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        eprintln!(
            "round {round}: killed after {:?} ({:?} since the start)",
            running.elapsed(),
            started.elapsed()
        );
        server.kill();
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().unwrap();
        }
    }

    // Restarted once more: everything answered and not deleted is there, once the leases
    // of the messages in flight at the kills are gone.
    let server = AwsServer::start(&data);
    let restarted = Instant::now();
    let mut received = Vec::new();
    let mut empty = 0;
    while empty < 2 || restarted.elapsed() < VISIBILITY + Duration::from_secs(1) {
        // Received under a long visibility timeout and not deleted: each message once.
        let (status, answer) = try_call(
            &server.aws,
            "ReceiveMessage",
            &json!({
                "QueueUrl": url(&server.aws),
                "MaxNumberOfMessages": 10,
                "WaitTimeSeconds": 1,
                "VisibilityTimeout": 300,
            }),
        )
        .expect("ReceiveMessage answered");
        assert_eq!(status, 200, "{answer}");
        let messages = answer["Messages"].as_array().cloned().unwrap_or_default();
        empty = if messages.is_empty() { empty + 1 } else { 0 };
        received.extend(
            messages
                .iter()
                .map(|m| m["Body"].as_str().unwrap().to_owned()),
        );
    }
    server.kill();

    let record = record.lock().unwrap();
    let received_set: HashSet<&String> = received.iter().collect();
    assert_eq!(
        received_set.len(),
        received.len(),
        "a message came back twice"
    );
    let lost: Vec<&String> = record
        .acked
        .iter()
        .filter(|b| {
            !record.deleted.contains(*b) && !record.unsure.contains(*b) && !received_set.contains(b)
        })
        .collect();
    assert!(
        lost.is_empty(),
        "{} answered messages lost: {lost:?}",
        lost.len()
    );
    let resurrected: Vec<&&String> = received_set
        .iter()
        .filter(|b| record.deleted.contains(**b))
        .collect();
    assert!(
        resurrected.is_empty(),
        "{} deleted messages came back: {resurrected:?}",
        resurrected.len()
    );
    let unknown: Vec<&&String> = received_set
        .iter()
        .filter(|b| !record.attempted.contains(**b))
        .collect();
    assert!(unknown.is_empty(), "messages never sent: {unknown:?}");
    assert!(record.deleted.iter().all(|b| record.attempted.contains(b)));
    assert!(
        record.acked.len() >= 30 * KILLS && record.deleted.len() >= KILLS,
        "too little happened to tell: {} answered, {} deleted",
        record.acked.len(),
        record.deleted.len()
    );
    eprintln!(
        "{KILLS} kills: {} entries answered, {} deleted ({} more unsure), {} received after the \
         last restart ({} of them sent without an answer), in {:?}",
        record.acked.len(),
        record.deleted.len(),
        record.unsure.len(),
        received.len(),
        received_set
            .iter()
            .filter(|b| !record.acked.contains(**b))
            .count(),
        started.elapsed()
    );
}
