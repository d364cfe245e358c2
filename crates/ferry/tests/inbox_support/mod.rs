//! What the inbox tests share: an embedded broker in a temporary directory, a queue that
//! redelivers at once, and fresh names.
#![allow(dead_code)] // Each test file uses its own part.

use std::time::Duration;

use ferry::{
    Backoff, Consumer, ConsumerOptions, Delivery, DeliveryPolicy, Ferry, QueueDecl, Source,
};
use ferry_testkit::fresh_ident;
use tempfile::TempDir;

/// An embedded broker; keep the directory alive as long as the broker.
pub async fn broker() -> (TempDir, Ferry) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .expect("embedded broker");
    (dir, ferry)
}

/// A queue that takes many deliveries and redelivers a nacked message within 10 ms.
pub async fn queue(ferry: &Ferry, what: &str) -> String {
    let decl = QueueDecl::new(fresh_ident("inbox", what)).delivery(DeliveryPolicy {
        max_deliveries: 50,
        backoff: Backoff {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(10),
            ..Backoff::default()
        },
        lease: Duration::from_secs(30),
        ..DeliveryPolicy::default()
    });
    ferry.declare_queue(&decl).await.expect("declare queue");
    decl.name
}

/// A consumer holding at most one delivery at a time, so two consumers share a queue.
pub async fn consumer(ferry: &Ferry, queue: &str) -> Consumer {
    let options = ConsumerOptions {
        prefetch: 1,
        poll: Duration::from_millis(50),
        ..ConsumerOptions::default()
    };
    ferry
        .consumer(Source::queue(queue), options)
        .await
        .expect("consumer")
}

/// The next delivery; fails the test if none comes within 5 s.
pub async fn next(consumer: &mut Consumer) -> Delivery {
    consumer
        .next_within(Duration::from_secs(5))
        .await
        .expect("fetch")
        .expect("a delivery within 5 s")
}

/// Nothing more is waiting.
pub async fn assert_drained(consumer: &mut Consumer) {
    let left = consumer
        .next_within(Duration::from_millis(200))
        .await
        .expect("fetch");
    assert!(left.is_none(), "unexpected delivery {left:?}");
}
