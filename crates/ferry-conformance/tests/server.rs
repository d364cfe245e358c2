//! The conformance suite on a Ferry server: the SDK's `ferry://` transport against
//! `ferry-server` on a real TCP socket, restarted mid-stream from the same directory; and
//! one consumer living through a restart, which the suite (reconnecting from scratch)
//! does not cover.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ferry::{
    ConsumerOptions, DeliveryPolicy, Destination, Error, Ferry, Message, QueueDecl, Source,
};
use ferry_broker::BrokerConfig;
use ferry_conformance::Target;

/// A Ferry server (gRPC) over the broker in `dir`.
fn ferry_server() -> common::Start {
    Arc::new(|dir, listener, stopped| {
        Box::pin(async move {
            let broker = common::open_broker(&dir, BrokerConfig::default).await;
            ferry_server::serve(broker, listener, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ferry_server_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), ferry_server()).await;
    let target = Target::new("ferry server", format!("ferry://{}", served.addr))
        .restart(served.restart_hook());
    let report = ferry_conformance::run(&target).await;
    report.print();
    report.assert_passed();
    // A Ferry server supports every feature and the harness restarts it.
    report.assert_skipped_exactly(&[]);
    served.stop().await;
}

/// A consumer opened before a restart goes on after it: its stream reconnects, what it
/// held comes back, and a settle of a delivery from before the restart answers `NotHeld`
/// rather than hanging or settling the new delivery's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_keeps_going_across_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), ferry_server()).await;
    let ferry = Ferry::connect(&format!("ferry://{}", served.addr))
        .await
        .unwrap();
    let delivery = DeliveryPolicy {
        lease: Duration::from_secs(2),
        ..DeliveryPolicy::default()
    };
    let queue = "across-restart";
    ferry
        .declare_queue(&QueueDecl::new(queue).delivery(delivery))
        .await
        .unwrap();
    let publisher = ferry.publisher(Destination::queue(queue));
    let batch = |from: usize| {
        (from..from + 10)
            .map(|i| Message::new(format!("{i}")))
            .collect()
    };
    let mut sent: HashSet<String> = publisher
        .send_batch(batch(0))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let options = ConsumerOptions {
        prefetch: 4,
        ..ConsumerOptions::default()
    };
    let mut c = ferry.consumer(Source::queue(queue), options).await.unwrap();
    let wait = Duration::from_secs(10);
    let mut acked = HashSet::new();
    for _ in 0..3 {
        let d = c.next_within(wait).await.unwrap().expect("a delivery");
        acked.insert(d.id.clone());
        d.ack().await.unwrap();
    }
    let mut held = Some(c.next_within(wait).await.unwrap().expect("a delivery"));

    served.restart().await;
    sent.extend(publisher.send_batch(batch(10)).await.unwrap());

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while acked.len() < sent.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {} acked after the restart",
            acked.len(),
            sent.len()
        );
        let Some(d) = c.next_within(Duration::from_millis(500)).await.unwrap() else {
            continue;
        };
        if let Some(old) = held.take_if(|old| old.id == d.id) {
            match old.ack().await {
                Err(Error::NotHeld { .. }) => {}
                other => panic!("an ack from before the restart answered {other:?}"),
            }
        }
        let id = d.id.clone();
        match d.ack().await {
            Ok(()) => assert!(acked.insert(id.clone()), "{id} came back after its ack"),
            // Fetched ahead before the restart: the server gave it back, and it comes again.
            Err(Error::NotHeld { .. }) => {}
            Err(e) => panic!("ack after the restart: {e}"),
        }
    }
    assert!(
        held.is_none(),
        "the delivery held at the restart never came back"
    );
    assert_eq!(acked, sent);
    c.close().await.unwrap();
    served.stop().await;
}

/// Publishes from many tasks at once go over publish streams the transport keeps open
/// between them: each message is stored once and delivered once. A queue deleted and
/// declared again takes publishes at once (its idle streams went with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_from_many_tasks_are_each_stored_once_and_outlive_a_deleted_queue() {
    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), ferry_server()).await;
    let ferry = Ferry::connect(&format!("ferry://{}", served.addr))
        .await
        .unwrap();
    let queue = "many-publishers";
    ferry.declare_queue(&QueueDecl::new(queue)).await.unwrap();
    let publisher = Arc::new(ferry.publisher(Destination::queue(queue)));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..24 {
        let publisher = Arc::clone(&publisher);
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for round in 0..5 {
                let batch = (0..10)
                    .map(|i| Message::new(format!("{task}-{round}-{i}")))
                    .collect();
                ids.extend(publisher.send_batch(batch).await.unwrap());
            }
            ids
        });
    }
    let mut sent = HashSet::new();
    while let Some(ids) = tasks.join_next().await {
        for id in ids.unwrap() {
            assert!(sent.insert(id), "an id answered twice");
        }
    }
    assert_eq!(sent.len(), 24 * 5 * 10);
    let received = drain(&ferry, queue, sent.len()).await;
    assert_eq!(received, sent);

    ferry.delete(&Source::queue(queue)).await.unwrap();
    ferry.declare_queue(&QueueDecl::new(queue)).await.unwrap();
    let again: HashSet<String> = publisher
        .send_batch(vec![Message::new("again")])
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(drain(&ferry, queue, 1).await, again);
    served.stop().await;
}

/// Consumes and acks `count` messages of `queue`, then checks that nothing more comes;
/// returns their ids.
async fn drain(ferry: &Ferry, queue: &str, count: usize) -> HashSet<String> {
    let mut c = ferry
        .consumer(Source::queue(queue), ConsumerOptions::default())
        .await
        .unwrap();
    let mut ids = HashSet::new();
    while ids.len() < count {
        let d = c
            .next_within(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("a delivery in time");
        assert!(ids.insert(d.id.clone()), "{} delivered twice", d.id);
        d.ack().await.unwrap();
    }
    assert!(
        c.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none(),
        "more than was published"
    );
    c.close().await.unwrap();
    ids
}
