//! Request/reply over RabbitMQ: the suite's behaviours, with the reply queue an exclusive
//! queue of the requester's connection — and a requester process killed mid-request, whose
//! reply queue RabbitMQ deletes with its connection. Runs against `FERRY_AMQP_URL`
//! (default: the machine's server); skips loudly when nothing answers, and fails instead
//! under `CI=true`.
#![cfg(feature = "amqp")]

mod request_reply_support;

use std::time::{Duration, Instant};

use ferry::request_reply::Requester;
use ferry::{Error, Ferry, Message, Source};
use ferry_testkit::killed_child::{Kill, run_and_kill, say};

fn url() -> Option<String> {
    ferry_testkit::url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    )
}

async fn connect() -> Option<Ferry> {
    Some(Ferry::connect(&url()?).await.expect("connect to RabbitMQ"))
}

request_reply_tests!(connect());

/// Set in the child process: the request queue.
const CHILD_QUEUE: &str = "FERRY_RR_CHILD_QUEUE";

/// A requester in another process is killed while its request waits: RabbitMQ deletes its
/// exclusive reply queue with the connection, with nobody calling `close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requester_killed_mid_request_leaves_no_reply_queue_behind() {
    let Some(url) = url() else { return };
    if let Ok(queue) = std::env::var(CHILD_QUEUE) {
        return requester_to_be_killed(&url, &queue).await;
    }
    let ferry = Ferry::connect(&url).await.unwrap();
    let queue = request_reply_support::request_queue(&ferry, "killed").await;
    let envs = [(CHILD_QUEUE, queue.clone())];
    let killed = tokio::task::spawn_blocking(move || {
        run_and_kill(
            "a_requester_killed_mid_request_leaves_no_reply_queue_behind",
            &envs,
            Kill::AfterReady(Duration::from_millis(300)),
        )
    })
    .await
    .unwrap();
    let reply_queue = killed
        .lines
        .iter()
        .find_map(|line| line.strip_prefix("REPLY_QUEUE "))
        .unwrap_or_else(|| panic!("the child named its reply queue: {}", killed.stderr))
        .to_owned();
    // While the queue exists it is exclusive to the dead connection, and opening a consumer
    // on it is refused otherwise; once RabbitMQ has closed that connection it is NotFound.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match ferry
            .consumer(Source::queue(&reply_queue), Default::default())
            .await
        {
            Err(Error::NotFound { .. }) => break,
            other => {
                let state = match other {
                    Ok(_) => "open to anyone".to_owned(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    Instant::now() < deadline,
                    "the reply queue {reply_queue} of the killed requester is still there: {state}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    request_reply_support::delete_queue(&ferry, &queue).await;
}

async fn requester_to_be_killed(url: &str, queue: &str) {
    let ferry = Ferry::connect(url).await.expect("child connects");
    let requester = Requester::open(&ferry, "killed").await.expect("open");
    // After a newline: the test harness's own line ("test ... ") has none yet.
    say(&format!("\nREPLY_QUEUE {}\n", requester.reply_queue()));
    say("READY\n");
    let _ = requester
        .request(
            queue,
            Message::new("never answered"),
            Duration::from_secs(60),
        )
        .await;
}
