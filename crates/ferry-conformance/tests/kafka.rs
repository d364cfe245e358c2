//! The conformance suite on the `kafka://` transport: against Ferry's own Kafka listener
//! (`ferry-kafka` over a broker, served here on a free port and restarted mid-suite from
//! its directory), and against a real Kafka when `FERRY_KAFKA_URL` names one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_broker::{Broker, BrokerConfig};
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

struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Opens the broker in `dir` and serves the Kafka front end on `addr`; the lock of a
/// broker just stopped may take a moment to go.
async fn start(dir: &Path, addr: SocketAddr) -> (SocketAddr, Running) {
    let mut tries = 0;
    let broker = loop {
        match Broker::open(dir.join("data"), BrokerConfig::default()).await {
            Ok(broker) => break broker,
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("reopen the broker: {e}"),
        }
    };
    let front = Kafka::new(broker, KafkaConfig::default());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(front.serve(listener, async move {
        let _ = stopped.await;
    }));
    (addr, Running { stop, served })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferrys_kafka_listener_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let data: PathBuf = dir.path().to_owned();
    let (addr, running) = start(&data, "127.0.0.1:0".parse().unwrap()).await;
    let running = Arc::new(Mutex::new(Some(running)));
    let restart = {
        let running = running.clone();
        Restart::Hook(Arc::new(move || {
            let (running, data) = (running.clone(), data.clone());
            Box::pin(async move {
                let old = running.lock().unwrap().take().expect("a running listener");
                let _ = old.stop.send(());
                old.served.await.unwrap().unwrap();
                let (_, new) = start(&data, addr).await;
                *running.lock().unwrap() = Some(new);
            })
        }))
    };
    let target = Target::new("kafka (Ferry's Kafka listener)", url(addr)).restart(restart);
    let started = Instant::now();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_failed_exactly(&[]);
    report.assert_skipped_exactly(SKIPPED);
    let last = running.lock().unwrap().take().unwrap();
    let _ = last.stop.send(());
    last.served.await.unwrap().unwrap();
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
    let (addr, running) = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let ferry = Ferry::connect(&url(addr)).await.unwrap();
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
    let _ = running.stop.send(());
    running.served.await.unwrap().unwrap();
}

/// On a queue with per-key ordering a nack keeps the key's later messages back: the retry
/// comes first, not before its delay, and then the next message of the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_retry_comes_before_its_keys_later_messages() {
    use ferry::{Destination, Ferry, KeyOrdering, Message, QueueDecl, Source};

    let dir = tempfile::tempdir().unwrap();
    let (addr, running) = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let ferry = Ferry::connect(&url(addr)).await.unwrap();
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
    let _ = running.stop.send(());
    running.served.await.unwrap().unwrap();
}
