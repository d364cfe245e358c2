//! The conformance suite on Redis Streams, against the machine's Redis server.

use ferry_conformance::{Restart, Target};
use ferry_testkit::url_or_skip;

const RESTART: &str =
    "the machine's Redis Streams service is shared; this suite does not restart it";

/// Every check this transport skips, and why: the feature its capability table says No to
/// (or the restart the harness does not do). Any other skip, or one of these passing,
/// fails the test.
const SKIPPED: &[(&str, &str)] = &[
    (
        "higher_priorities_are_delivered_first",
        "redis declares no priorities",
    ),
    (
        "a_priority_above_the_queues_levels_is_invalid_and_stores_nothing",
        "redis declares no priorities",
    ),
    (
        "per_key_order_holds_under_concurrency",
        "redis declares no ordering keys",
    ),
    (
        "nothing_acked_or_published_is_lost_across_an_engine_restart",
        RESTART,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_streams_pass_the_conformance_suite() {
    let Some(url) = url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0") else {
        return;
    };
    let target = Target::new("Redis Streams", url).restart(Restart::Cannot(RESTART));
    let started = std::time::Instant::now();
    let started_ms = ferry::message::now_ms();
    let report = ferry_conformance::run(&target).await;
    remove_keys_made_since(&target.url, started_ms).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_passed();
    report.assert_skipped_exactly(SKIPPED);
}

/// Deletes the keys of the queues, topics and subscriptions this run made: the suite names
/// them `cf-<ms>-...`, with the time they were made, and leaves some behind.
async fn remove_keys_made_since(url: &str, since_ms: i64) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let mut cursor = 0u64;
    let mut ours = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("ferry:*cf-*")
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut con)
            .await
            .unwrap();
        ours.extend(keys.into_iter().filter(|key| {
            key.split_once("cf-")
                .and_then(|(_, rest)| rest.split('-').next())
                .and_then(|ms| ms.parse::<i64>().ok())
                .is_some_and(|ms| ms >= since_ms)
        }));
        if next == 0 {
            break;
        }
        cursor = next;
    }
    for chunk in ours.chunks(500) {
        redis::cmd("DEL")
            .arg(chunk)
            .query_async::<()>(&mut con)
            .await
            .unwrap();
    }
}

/// A topic's stream is shared by its subscriptions, so acks cannot delete from it: fetches
/// trim now and then what every subscription has acked, and a closing consumer holding
/// nothing leaves its group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_stream_keeps_only_what_some_subscription_still_needs() {
    use std::time::Duration;

    use ferry::{
        ConsumerOptions, Destination, Ferry, Message, Source, SubscriptionDecl, TopicDecl,
    };

    let Some(url) = url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0") else {
        return;
    };
    let ferry = Ferry::connect(&url).await.unwrap();
    let topic = ferry_testkit::fresh("rt", "trim");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let (a, b) = (format!("{topic}-a"), format!("{topic}-b"));
    for name in [&a, &b] {
        ferry
            .declare_subscription(&SubscriptionDecl::new(&topic, name))
            .await
            .unwrap();
    }
    let batch = (0..10).map(|i| Message::new(format!("{i}"))).collect();
    ferry
        .publisher(Destination::topic(&topic))
        .send_batch(batch)
        .await
        .unwrap();
    let options = || ConsumerOptions {
        prefetch: 1,
        ..ConsumerOptions::default()
    };
    let mut ca = ferry
        .consumer(Source::subscription(&topic, &a), options())
        .await
        .unwrap();
    let mut cb = ferry
        .consumer(Source::subscription(&topic, &b), options())
        .await
        .unwrap();
    for _ in 0..10 {
        let d = ca
            .next_within(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        d.ack().await.unwrap();
    }
    for _ in 0..5 {
        let d = cb
            .next_within(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        d.ack().await.unwrap();
    }
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let stream = format!("ferry:t:{topic}");
    let len = |mut con: redis::aio::MultiplexedConnection| {
        let stream = stream.clone();
        async move {
            redis::cmd("XLEN")
                .arg(&stream)
                .query_async::<usize>(&mut con)
                .await
                .unwrap()
        }
    };
    assert_eq!(len(con.clone()).await, 10);
    // Past the housekeeping interval, the next fetch trims.
    tokio::time::sleep(Duration::from_millis(5200)).await;
    assert!(
        ca.next_within(Duration::from_millis(100))
            .await
            .unwrap()
            .is_none()
    );
    let left = len(con.clone()).await;
    assert!(
        (5..=6).contains(&left),
        "{left} entries left where b has 5 to read"
    );
    ca.close().await.unwrap();
    let consumers: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(&stream)
        .arg(&a)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(consumers.is_empty(), "a closed consumer stays listed");
    for _ in 0..5 {
        let d = cb
            .next_within(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        d.ack().await.unwrap();
    }
    cb.close().await.unwrap();
    for name in [&a, &b] {
        ferry
            .delete(&ferry::Source::subscription(&topic, name))
            .await
            .unwrap();
    }
    ferry.delete_topic(&topic).await.unwrap();
}
