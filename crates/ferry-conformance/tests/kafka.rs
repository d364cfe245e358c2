//! The conformance suite on the `kafka://` transport: against Ferry's own Kafka listener
//! (`ferry-kafka` over a broker, served here on a free port and restarted mid-suite from
//! its directory), and against a real Kafka when `FERRY_KAFKA_URL` names one.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::BrokerConfig;
use ferry_conformance::{Restart, Target};
use ferry_kafka::{Kafka, KafkaConfig};

/// Every check this transport skips, and why: the features its capability table says No
/// to. Any other skip, or one of these passing, fails the test.
const SKIPPED: &[(&str, &str)] = &[
    (
        "an_expired_lease_goes_to_another_consumer",
        "kafka declares no lease expiry",
    ),
    (
        "extend_keeps_a_delivery_hidden",
        "kafka declares no lease extension",
    ),
    (
        "higher_priorities_are_delivered_first",
        "kafka declares no priorities",
    ),
    (
        "a_priority_above_the_queues_levels_is_invalid_and_stores_nothing",
        "kafka declares no priorities",
    ),
    (
        "an_expired_message_is_dead_lettered_not_delivered",
        "kafka declares no message TTL",
    ),
    (
        "a_default_ttl_applies_only_to_messages_without_one",
        "kafka declares no message TTL",
    ),
    (
        "duplicates_within_the_window_are_stored_once",
        "kafka declares no deduplication",
    ),
    (
        "a_dedup_id_on_a_queue_without_a_window_is_invalid_and_stores_nothing",
        "kafka declares no deduplication",
    ),
    (
        "settling_a_lease_taken_over_is_not_held",
        "kafka declares no lease expiry",
    ),
    (
        "a_full_queue_refuses_with_full",
        "kafka declares no max queue length",
    ),
    (
        "a_full_queue_keeps_what_it_holds_and_takes_more_once_drained",
        "kafka declares no max queue length",
    ),
];

fn url(addr: SocketAddr) -> String {
    format!("kafka://{addr}")
}

/// Ferry's Kafka listener over the broker in `dir`.
fn kafka_listener() -> common::Start {
    Arc::new(|dir, listener, stopped| {
        Box::pin(async move {
            let broker = common::open_broker(&dir.join("data"), BrokerConfig::default).await;
            // No wait for more members before a group's first rebalance, as Kafka's own
            // `config/server.properties` sets for development and tests: every check opens
            // fresh groups, and 3 s each would add minutes to the suite (the delay has
            // tests of its own in ferry-kafka).
            let config = KafkaConfig {
                group_initial_rebalance_delay_ms: 0,
                ..KafkaConfig::default()
            };
            Kafka::new(broker, config)
                .serve(listener, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferrys_kafka_listener_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), kafka_listener()).await;
    let target = Target::new("kafka (Ferry's Kafka listener)", url(served.addr))
        .restart(served.restart_hook());
    let started = Instant::now();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_failed_exactly(&[]);
    report.assert_skipped_exactly(SKIPPED);
    served.stop().await;
}

/// A real Kafka, when `FERRY_KAFKA_URL` names one (`kafka://host:9092`); it outlives the
/// run, so the engine-restart check is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_kafka_passes_the_conformance_suite() {
    let Ok(url) = std::env::var("FERRY_KAFKA_URL") else {
        eprintln!(
            "\n!!! SKIPPED: FERRY_KAFKA_URL is not set; point it at a Kafka cluster \
             (kafka://host:9092) to run the suite against a real Kafka !!!\n"
        );
        return;
    };
    const CANNOT: &str = "a Kafka outside this process is not restarted by the test";
    let target = Target::new("kafka (FERRY_KAFKA_URL)", url).restart(Restart::Cannot(CANNOT));
    let report = ferry_conformance::run(&target).await;
    report.print();
    report.assert_failed_exactly(&[]);
    let mut skipped = SKIPPED.to_vec();
    // In the order the checks run: the restart check comes after the dedup checks.
    skipped.insert(
        8,
        (
            "nothing_acked_or_published_is_lost_across_an_engine_restart",
            CANNOT,
        ),
    );
    report.assert_skipped_exactly(&skipped);
}

/// What Kafka cannot keep is refused when declared (or, for a per-message field or a
/// settlement, when asked for), as `Unsupported`, and leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_kafka_cannot_keep_is_refused_when_declared_and_creates_nothing() {
    use ferry::{
        DeliveryPolicy, Destination, Error, Ferry, KeyOrdering, Message, QueueDecl, Source,
        TopicDecl,
    };

    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), kafka_listener()).await;
    let ferry = Ferry::connect(&url(served.addr)).await.unwrap();
    let unsupported = |what: &str, r: ferry::Result<()>| match r {
        Err(Error::Unsupported { .. }) => {}
        other => panic!("{what} answered {other:?}, not Unsupported"),
    };
    let name = ferry_testkit::fresh("kafka", "refused");
    let policy = |edit: fn(&mut DeliveryPolicy)| {
        let mut p = DeliveryPolicy::default();
        edit(&mut p);
        p
    };
    let refused = [
        (
            "a backoff cap of 2 days",
            policy(|p| p.backoff.cap = Duration::from_secs(2 * 86_400)),
        ),
        (
            "a max delay of 2 days",
            policy(|p| p.max_delay = Duration::from_secs(2 * 86_400)),
        ),
        (
            "a default TTL",
            policy(|p| p.default_ttl = Some(Duration::from_secs(60))),
        ),
        ("priorities", policy(|p| p.priority_levels = 3)),
    ];
    for (what, delivery) in refused {
        let decl = QueueDecl::new(&name).delivery(delivery);
        unsupported(what, ferry.declare_queue(&decl).await);
    }
    let window = QueueDecl::new(&name).dedup_window(Duration::from_secs(60));
    unsupported("a dedup window", ferry.declare_queue(&window).await);
    let bounded = QueueDecl::new(&name).max_length(10);
    unsupported("a max length", ferry.declare_queue(&bounded).await);
    // Nothing was made: the name is free.
    let found = ferry
        .consumer(Source::queue(&name), Default::default())
        .await;
    assert!(
        matches!(found, Err(Error::NotFound { .. })),
        "{:?}",
        found.err()
    );
    // The transport's own topic names are not queue names.
    for own in [format!("{name}.retry-5s"), "ferry-catalog".to_owned()] {
        let declared = ferry.declare_queue(&QueueDecl::new(&own)).await;
        assert!(
            matches!(declared, Err(Error::Invalid { .. })),
            "{own}: {declared:?}"
        );
    }

    // A delayed message on an ordered queue would overtake its key's earlier ones.
    let mut ordered = QueueDecl::new(&name);
    ordered.delivery.ordering = KeyOrdering::PerKey;
    ferry.declare_queue(&ordered).await.unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    let delayed = publisher
        .send(Message::new("later").with_delay(Duration::from_secs(1)))
        .await;
    assert!(
        matches!(delayed, Err(Error::Unsupported { .. })),
        "{delayed:?}"
    );
    let reserved = publisher
        .send(Message::new("x").with_header("x-ferry-attempt", "9"))
        .await;
    assert!(
        matches!(reserved, Err(Error::Invalid { .. })),
        "{reserved:?}"
    );

    // Extending a delivery, and rejecting a dead letter, are refused when asked for.
    publisher.send(Message::new("held")).await.unwrap();
    let mut c = ferry
        .consumer(Source::queue(&name), Default::default())
        .await
        .unwrap();
    let d = c
        .next_within(Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap();
    unsupported("extend", d.extend(Duration::from_secs(5)).await);
    d.reject("unreadable").await.unwrap();
    c.close().await.unwrap();
    let mut dead = ferry
        .consumer(Source::queue(&name).dead_letters(), Default::default())
        .await
        .unwrap();
    let d = dead
        .next_within(Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.payload, "held");
    assert_eq!(d.dead_letter.as_ref().unwrap().reason, "rejected");
    unsupported("rejecting a dead letter", d.reject("again").await);
    dead.close().await.unwrap();

    let topic = ferry_testkit::fresh("kafka", "refused-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let to_topic = ferry
        .publisher(Destination::topic(&topic))
        .send(Message::new("later").with_delay(Duration::from_secs(1)))
        .await;
    assert!(
        matches!(to_topic, Err(Error::Unsupported { .. })),
        "{to_topic:?}"
    );
    ferry.delete_topic(&topic).await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry
        .delete(&Source::queue(&name).dead_letters())
        .await
        .unwrap();
    ferry.close().await.unwrap();
    served.stop().await;
}

/// On a queue with per-key ordering a nack keeps the key's later messages back: the retry
/// comes first, not before its delay, and then the next message of the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_retry_comes_before_its_keys_later_messages() {
    use ferry::{Destination, Ferry, KeyOrdering, Message, QueueDecl, Source};

    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), kafka_listener()).await;
    let ferry = Ferry::connect(&url(served.addr)).await.unwrap();
    let name = ferry_testkit::fresh("kafka", "ordered-retry");
    let mut decl = QueueDecl::new(&name);
    decl.delivery.ordering = KeyOrdering::PerKey;
    ferry.declare_queue(&decl).await.unwrap();
    let ids = ferry
        .publisher(Destination::queue(&name))
        .send_batch(vec![
            Message::new("first").with_key("k"),
            Message::new("second").with_key("k"),
        ])
        .await
        .unwrap();
    let mut c = ferry
        .consumer(Source::queue(&name), Default::default())
        .await
        .unwrap();
    let wait = Duration::from_secs(15);
    let d = c.next_within(wait).await.unwrap().expect("the first");
    assert_eq!(d.id, ids[0]);
    let nacked = Instant::now();
    d.nack(Some(Duration::from_millis(500))).await.unwrap();
    let d = c.next_within(wait).await.unwrap().expect("the retry");
    assert_eq!((d.id.as_str(), d.attempt), (ids[0].as_str(), 2));
    assert!(
        nacked.elapsed() >= Duration::from_millis(500),
        "{:?}",
        nacked.elapsed()
    );
    d.ack().await.unwrap();
    let d = c.next_within(wait).await.unwrap().expect("the second");
    assert_eq!((d.id.as_str(), d.attempt), (ids[1].as_str(), 1));
    d.ack().await.unwrap();
    c.close().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
    served.stop().await;
}

/// A connection keeps the catalog it has read and reads only what was added since: a
/// declaration or a deletion made through another connection is still seen by the next
/// call, whatever this one read before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_connections_declarations_and_deletions_are_seen_at_once() {
    use ferry::{Destination, Error, Ferry, Message, QueueDecl, Source, TopicDecl};

    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), kafka_listener()).await;
    let a = Ferry::connect(&url(served.addr)).await.unwrap();
    let b = Ferry::connect(&url(served.addr)).await.unwrap();
    let name = ferry_testkit::fresh("kafka", "catalog-seen");
    let send = |ferry: &Ferry, payload: &'static str| {
        let publisher = ferry.publisher(Destination::queue(&name));
        async move { publisher.send(Message::new(payload)).await }
    };

    // `a` reads the catalog before the queue exists...
    let early = send(&a, "early").await;
    assert!(matches!(early, Err(Error::NotFound { .. })), "{early:?}");
    // ...and sees it once `b` declares it, with `b`'s policy.
    b.declare_queue(&QueueDecl::new(&name)).await.unwrap();
    send(&a, "one").await.unwrap();
    let mut other = QueueDecl::new(&name);
    other.delivery.max_deliveries += 1;
    let conflict = a.declare_queue(&other).await;
    assert!(
        matches!(conflict, Err(Error::Conflict { .. })),
        "{conflict:?}"
    );

    // `b` deletes it: `a` finds it gone, and may use the name again.
    b.delete(&Source::queue(&name)).await.unwrap();
    b.delete(&Source::queue(&name).dead_letters())
        .await
        .unwrap();
    let gone = send(&a, "late").await;
    assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
    a.declare_topic(&TopicDecl::new(&name)).await.unwrap();
    let taken = b.declare_queue(&QueueDecl::new(&name)).await;
    assert!(matches!(taken, Err(Error::Conflict { .. })), "{taken:?}");

    a.delete_topic(&name).await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
    served.stop().await;
}

/// Every publish looks its destination up in the catalog. Each lookup used to read the
/// whole catalog again, and the fetch that reading left waiting at the catalog's end (500
/// ms, Kafka's default) held the next lookup's request behind it on the connection: one
/// publish after another took half a second each, and the order example's saga commands
/// timed out. Twenty publishes now take a small part of the bound below; ten seconds then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_one_after_another_do_not_wait_on_the_catalog() {
    use ferry::{Destination, Ferry, Message, QueueDecl, Source};

    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), kafka_listener()).await;
    let ferry = Ferry::connect(&url(served.addr)).await.unwrap();
    let name = ferry_testkit::fresh("kafka", "catalog-lookups");
    ferry.declare_queue(&QueueDecl::new(&name)).await.unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher.send(Message::new("first")).await.unwrap();
    let started = Instant::now();
    for n in 0..20 {
        publisher.send(Message::new(format!("{n}"))).await.unwrap();
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "20 publishes took {took:?}");

    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry
        .delete(&Source::queue(&name).dead_letters())
        .await
        .unwrap();
    ferry.close().await.unwrap();
    served.stop().await;
}

/// A consumer whose read-ahead is full has paused its partitions; when its group then
/// rebalances and gives some of them back to it, it reads them again. (librdkafka keeps an
/// application's pause across a reassignment, so a consumer that forgot its pauses at the
/// rebalance never fetched those partitions again: the rest of the queue stalled.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_paused_when_its_group_rebalances_reads_on() {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use ferry::{Destination, Ferry, Message, QueueDecl, Source};

    // More than the transport's read-ahead (256), in every partition.
    const MESSAGES: usize = 800;
    let dir = tempfile::tempdir().unwrap();
    let served = common::Served::start(dir.path(), kafka_listener()).await;
    let ferry = Ferry::connect(&url(served.addr)).await.unwrap();
    let name = ferry_testkit::fresh("kafka", "paused-rebalance");
    ferry.declare_queue(&QueueDecl::new(&name)).await.unwrap();
    let batch = (0..MESSAGES)
        .map(|i| Message::new(format!("{i}")).with_key(format!("k{i}")))
        .collect();
    ferry
        .publisher(Destination::queue(&name))
        .send_batch(batch)
        .await
        .unwrap();

    // The first consumer takes one delivery, then holds still while its read-ahead fills
    // and it pauses every partition it has.
    let mut first = ferry
        .consumer(Source::queue(&name), Default::default())
        .await
        .unwrap();
    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let d = first
        .next_within(Duration::from_secs(30))
        .await
        .unwrap()
        .expect("a first delivery");
    acked.lock().unwrap().insert(d.id.clone());
    d.ack().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A second consumer joins: the group rebalances, and the first gets some of its
    // paused partitions back.
    let second = ferry
        .consumer(Source::queue(&name), Default::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut tasks = Vec::new();
    for mut c in [first, second] {
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            while acked.lock().unwrap().len() < MESSAGES && Instant::now() < deadline {
                if let Some(d) = c.next_within(Duration::from_millis(200)).await.unwrap() {
                    let id = d.id.clone();
                    d.ack().await.unwrap();
                    acked.lock().unwrap().insert(id);
                }
            }
            c.close().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let got = acked.lock().unwrap().len();
    assert_eq!(got, MESSAGES, "{got} of {MESSAGES} acked within 90 s");
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
    served.stop().await;
}
