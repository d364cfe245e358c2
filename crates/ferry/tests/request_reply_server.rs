//! Request/reply over a Ferry server (`ferry://`) on loopback: the suite's behaviours, with
//! the reply queue a temporary queue the server binds to the requester's consume stream —
//! and a requester process killed mid-request, whose reply queue the server deletes.
#![cfg(feature = "server")]

mod request_reply_support;

use std::ops::Deref;
use std::time::{Duration, Instant};

use ferry::request_reply::Requester;
use ferry::{Ferry, Message};
use ferry_broker::{Broker, BrokerConfig};
use ferry_server::{LocalServer, Server};
use ferry_testkit::killed_child::{Kill, run_and_kill, say};
use tempfile::TempDir;

/// A Ferry connected to a server of its own, which lives as long as this does.
struct Served {
    ferry: Ferry,
    broker: Broker,
    _server: LocalServer,
    _dir: TempDir,
}

impl Deref for Served {
    type Target = Ferry;
    fn deref(&self) -> &Ferry {
        &self.ferry
    }
}

async fn serve() -> Option<Served> {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = Server::new(broker.clone()).start_local().await.unwrap();
    let ferry = Ferry::connect(&format!("ferry://{}", server.grpc_addr()))
        .await
        .expect("connect to the server");
    Some(Served {
        ferry,
        broker,
        _server: server,
        _dir: dir,
    })
}

request_reply_tests!(serve());

/// Set in the child process: the server's URL and the request queue.
const CHILD_URL: &str = "FERRY_RR_CHILD_URL";
const CHILD_QUEUE: &str = "FERRY_RR_CHILD_QUEUE";

/// A requester in another process is killed while its request waits: the server deletes
/// its reply queue once the connection is gone, with nobody calling `close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requester_killed_mid_request_leaves_no_reply_queue_behind() {
    if let (Ok(url), Ok(queue)) = (std::env::var(CHILD_URL), std::env::var(CHILD_QUEUE)) {
        return requester_to_be_killed(&url, &queue).await;
    }
    let served = serve().await.unwrap();
    let queue = request_reply_support::request_queue(&served, "killed").await;
    let envs = [
        (CHILD_URL, format!("ferry://{}", served._server.grpc_addr())),
        (CHILD_QUEUE, queue.clone()),
    ];
    let killed = tokio::task::spawn_blocking(move || {
        run_and_kill(
            "a_requester_killed_mid_request_leaves_no_reply_queue_behind",
            &envs,
            // The request is published right after READY: killed while it waits.
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
    assert!(
        killed.lines.iter().any(|line| line == "READY"),
        "{}",
        killed.stderr
    );
    // Generous: the server sees the socket close at once, but the machine may be loaded.
    let deadline = Instant::now() + Duration::from_secs(30);
    while served
        .broker
        .list_queues()
        .iter()
        .any(|q| q.as_str() == reply_queue)
    {
        assert!(
            Instant::now() < deadline,
            "the reply queue {reply_queue} of the killed requester is still there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The request itself is still there for a responder, which will find it expired.
    assert!(served.broker.describe_queue(&queue).is_ok());
}

/// The child: opens a requester, says its reply queue, and waits on a request nobody
/// answers until it is killed.
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
