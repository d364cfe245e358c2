//! The client against a real server on a socket: admin, the batching producer (a batch id
//! per call, so a retried batch is stored once), the streaming consumer (prefetch, lease
//! extension while a delivery is held, redelivery of what is dropped), and a reconnect
//! across a server restart on the same directory with no acknowledged message lost.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, ConsumerConfig, Message, ProducerConfig, proto};
use tokio::sync::oneshot;

struct Server {
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
    addr: SocketAddr,
}

async fn start(dir: &Path, addr: SocketAddr) -> Server {
    // A restart may come while the stopped server's last stream task still holds its broker
    // (and so the directory's lock): it lets go as soon as that task ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let broker = loop {
        match Broker::open(dir, BrokerConfig::default()).await {
            Err(ferry_broker::BrokerError::Storage(ferry_broker::StorageError::Locked {
                ..
            })) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => break other.unwrap(),
        }
    };
    let listener = ferry_server::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        ferry_server::serve(broker, listener, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Server { stop, done, addr }
}

impl Server {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.done)
            .await
            .expect("stops in time")
            .unwrap();
    }
}

fn spec(lease_ms: u64) -> proto::QueueSpec {
    proto::QueueSpec {
        lease_ms: Some(lease_ms),
        retry: Some(proto::RetryPolicy {
            max_deliveries: Some(10),
            backoff: None,
        }),
        ..Default::default()
    }
}

async fn ready(client: &Client, queue: &str) -> u64 {
    client
        .describe_queue(queue)
        .await
        .unwrap()
        .stats
        .unwrap()
        .ready
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_and_consumer_move_every_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let client = Client::connect(&format!("ferry://{}", server.addr))
        .await
        .unwrap();
    client.create_queue("jobs", spec(30_000)).await.unwrap();
    assert_eq!(client.list_queues().await.unwrap(), ["jobs", "jobs.dlq"]);

    let producer = std::sync::Arc::new(client.producer("jobs", ProducerConfig::default()));
    let sends: Vec<_> = (0..300)
        .map(|i| {
            let producer = std::sync::Arc::clone(&producer);
            tokio::spawn(async move { producer.send(Message::new(format!("job-{i}"))).await })
        })
        .collect();
    let mut ids = Vec::new();
    for send in sends {
        ids.push(send.await.unwrap().unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 300);
    let info = client.describe_queue("jobs").await.unwrap().stats.unwrap();
    assert_eq!(info.published, 300);
    assert!(info.published < 300 || info.ready == 300);

    // A call sent again with its batch id (a retry after a lost answer): stored once, and
    // answered with the same ids.
    let call = || (0..5).map(|i| Message::new(format!("again-{i}"))).collect();
    let batch_id = "01HZX3J9Q5W6B2F8N4K7M1R0TA";
    let first = client
        .publish_with_batch_id("jobs", batch_id, call())
        .await
        .unwrap();
    let retried = client
        .publish_with_batch_id("jobs", batch_id, call())
        .await
        .unwrap();
    assert_eq!(retried, first);
    // Messages with ids of their own are deduplicated by them, across calls too.
    let chosen = || vec![Message::new("mine").with_id("01HZX3J9Q5W6B2F8N4K7M1R0TB")];
    client.publish("jobs", chosen()).await.unwrap();
    client.publish("jobs", chosen()).await.unwrap();
    assert_eq!(
        client
            .describe_queue("jobs")
            .await
            .unwrap()
            .stats
            .unwrap()
            .published,
        306
    );

    let mut consumer = client
        .consumer(
            "jobs",
            "worker",
            ConsumerConfig {
                prefetch: 16,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 306 {
        let d = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a delivery in time")
            .unwrap()
            .unwrap();
        assert!(seen.insert(d.id().to_owned()), "delivered once");
        d.ack().await.unwrap();
    }
    let stats = client.describe_queue("jobs").await.unwrap().stats.unwrap();
    assert_eq!((stats.acked, stats.ready, stats.in_flight), (306, 0, 0));
    drop(consumer);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_deliveries_keep_their_lease_and_dropped_ones_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let client = Client::connect(&format!("ferry://{}", server.addr))
        .await
        .unwrap();
    client.create_queue("slow", spec(1_000)).await.unwrap();
    client
        .publish(
            "slow",
            vec![Message::new("long job"), Message::new("dropped")],
        )
        .await
        .unwrap();
    let mut consumer = client
        .consumer(
            "slow",
            "w",
            ConsumerConfig {
                prefetch: 2,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let long = consumer.next().await.unwrap().unwrap();
    let dropped = consumer.next().await.unwrap().unwrap();
    assert_eq!(dropped.payload(), b"dropped");
    drop(dropped);
    // Three lease lengths: without extension the lease would have ended.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let again = tokio::time::timeout(Duration::from_secs(5), consumer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(again.payload(), b"dropped");
    assert_eq!(again.attempt(), 2);
    assert_eq!(long.attempt(), 1);
    long.ack().await.expect("still leased: extended while held");
    again.ack().await.unwrap();
    let stats = client.describe_queue("slow").await.unwrap().stats.unwrap();
    assert_eq!(
        (stats.acked, stats.nacked),
        (2, 1),
        "the drop was one failed attempt"
    );
    drop(consumer);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_reconnects_after_a_server_restart_and_nothing_acked_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.addr;
    let client = Client::connect(&format!("ferry://{addr}")).await.unwrap();
    client.create_queue("q", spec(30_000)).await.unwrap();
    let batch: Vec<Message> = (0..20).map(|i| Message::new(format!("m{i}"))).collect();
    client.publish("q", batch).await.unwrap();
    let mut consumer = client
        .consumer(
            "q",
            "w",
            ConsumerConfig {
                prefetch: 4,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut acked = std::collections::BTreeSet::new();
    for _ in 0..8 {
        let d = consumer.next().await.unwrap().unwrap();
        acked.insert(d.payload().to_vec());
        d.ack().await.unwrap();
    }
    let held = consumer.next().await.unwrap().unwrap();
    server.stop().await;
    let server = start(dir.path(), addr).await;
    // A delivery of the old stream cannot be settled any more; the server gave it back.
    let settled = tokio::time::timeout(Duration::from_secs(30), held.ack())
        .await
        .expect("the settle of a dead stream's delivery is answered");
    assert!(settled.is_err());
    let mut rest = std::collections::BTreeSet::new();
    while acked.len() + rest.len() < 20 {
        let d = tokio::time::timeout(Duration::from_secs(20), consumer.next())
            .await
            .expect("the consumer reconnects")
            .unwrap()
            .unwrap();
        assert!(!acked.contains(d.payload()), "an acked message came back");
        rest.insert(d.payload().to_vec());
        d.ack().await.unwrap();
    }
    assert_eq!(ready(&client, "q").await, 0);
    drop(consumer);
    server.stop().await;
}

/// The payload of message `index` under ordering key `key`: `k<key>-<index>`.
fn keyed(key: usize, index: usize) -> Message {
    Message::new(format!("k{key}-{index}")).with_key(format!("k{key}"))
}

fn key_and_index(delivery: &ferry_client::Delivery) -> (usize, usize) {
    let text = std::str::from_utf8(delivery.payload()).unwrap();
    let (key, index) = text[1..].split_once('-').unwrap();
    (key.parse().unwrap(), index.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_buffered_from_a_failed_stream_are_never_handed_out() {
    const KEYS: usize = 4;
    const PER_KEY: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.addr;
    let client = Client::connect(&format!("ferry://{addr}")).await.unwrap();
    let ordered = proto::QueueSpec {
        ordering: proto::OrderingMode::KeyShared as i32,
        ..spec(30_000)
    };
    client.create_queue("orders", ordered).await.unwrap();
    let batch: Vec<Message> = (0..PER_KEY)
        .flat_map(|index| (0..KEYS).map(move |key| keyed(key, index)))
        .collect();
    client.publish("orders", batch).await.unwrap();

    // Key-shared: one message per key in flight, so a prefetch of KEYS fills the buffer
    // with the first message of every key.
    let config = ConsumerConfig {
        prefetch: KEYS as u32,
        ..Default::default()
    };
    let mut first = client.consumer("orders", "first", config).await.unwrap();
    let mut failures = first.stream_failures();
    let held = first.next().await.unwrap().unwrap();
    assert_eq!(key_and_index(&held).1, 0);
    // The rest of the buffer: leased by the server, received but not handed out.
    while client
        .describe_queue("orders")
        .await
        .unwrap()
        .stats
        .unwrap()
        .in_flight
        < KEYS as u64
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    server.stop().await;
    tokio::time::timeout(Duration::from_secs(10), failures.wait_for(|&n| n >= 1))
        .await
        .expect("the failure is seen")
        .unwrap();
    // The server is down, so no new stream can deliver: anything `next` returns now was
    // buffered from the failed stream. A zero timeout polls `next` once.
    let handed_out = tokio::time::timeout(Duration::ZERO, first.next()).await;
    assert!(
        handed_out.is_err(),
        "a delivery of the failed stream was handed out: {:?}",
        handed_out.map(|d| d.map(|d| d.map(|d| d.message.clone())))
    );
    assert_eq!(first.stale_dropped(), KEYS as u64 - 1);

    let server = start(dir.path(), addr).await;
    // Handed out before the failure: its settle fails with the typed error.
    let lost = held.ack().await.unwrap_err();
    assert_eq!(lost.code(), Some(tonic::Code::FailedPrecondition));
    assert!(lost.to_string().contains("connection was lost"), "{lost}");

    // Both consumers take the keys from here; every key goes on in order from its first
    // message (none was acked), and every delivery handed out acks.
    let mut second = client.consumer("orders", "second", config).await.unwrap();
    let mut next_index = [0usize; KEYS];
    let mut acked = 0;
    while acked < KEYS * PER_KEY {
        let delivery = tokio::time::timeout(Duration::from_secs(20), async {
            tokio::select! {
                d = first.next() => d,
                d = second.next() => d,
            }
        })
        .await
        .expect("a delivery in time")
        .unwrap()
        .unwrap();
        let (key, index) = key_and_index(&delivery);
        assert_eq!(index, next_index[key], "key {key} out of order");
        if index == 0 {
            assert!(
                delivery.attempt() >= 2,
                "a first message again: redelivered"
            );
        }
        delivery
            .ack()
            .await
            .expect("a delivery of a live stream acks");
        next_index[key] += 1;
        acked += 1;
    }
    assert_eq!(next_index, [PER_KEY; KEYS]);
    assert_eq!(ready(&client, "orders").await, 0);
    drop((first, second));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed_and_bad_addresses_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let client = Client::connect(&format!("ferry://{}", server.addr))
        .await
        .unwrap();
    let missing = client
        .publish("nope", vec![Message::new("x")])
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some(tonic::Code::NotFound));
    assert!(!missing.is_transient());
    assert!(
        client
            .consumer("nope", "w", ConsumerConfig::default())
            .await
            .is_err()
    );
    assert!(Client::connect("nats://127.0.0.1:1").await.is_err());
    server.stop().await;
    let gone = Client::connect(&format!("ferry://{}", "127.0.0.1:1")).await;
    assert!(matches!(
        gone,
        Err(ferry_client::ClientError::Connect { .. })
    ));
    // The message names the address as given and the root cause, each once.
    let text = gone.err().unwrap().to_string();
    assert!(
        text.starts_with("could not connect to ferry://127.0.0.1:1: "),
        "{text}"
    );
    assert!(text.contains("Connection refused"), "{text}");
    assert!(!text.contains("http://"), "{text}");
    assert_eq!(text.matches("Connection refused").count(), 1, "{text}");
    let unknown = Client::connect("ferry://no-such-host.invalid:7070")
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        unknown.contains("ferry://no-such-host.invalid:7070"),
        "{unknown}"
    );
    assert!(unknown.contains("dns error"), "{unknown}");
}

async fn in_flight(client: &Client, queue: &str) -> u64 {
    client
        .describe_queue(queue)
        .await
        .unwrap()
        .stats
        .unwrap()
        .in_flight
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_dropped_with_a_failed_stream_are_reported_with_their_attempts() {
    const PREFETCH: usize = 2;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.addr;
    let client = Client::connect(&format!("ferry://{addr}")).await.unwrap();
    client.create_queue("q", spec(30_000)).await.unwrap();
    let batch: Vec<Message> = (0..2 * PREFETCH)
        .map(|i| Message::new(format!("m{i}")))
        .collect();
    client.publish("q", batch).await.unwrap();
    let config = ConsumerConfig {
        prefetch: PREFETCH as u32,
        ..Default::default()
    };
    let mut consumer = client.consumer("q", "c", config).await.unwrap();
    let mut failures = consumer.stream_failures();

    // The first stream's deliveries wait for `next`, which is not called: they fill the
    // consumer's channel.
    while in_flight(&client, "q").await < PREFETCH as u64 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop().await;
    tokio::time::timeout(Duration::from_secs(10), failures.wait_for(|&n| n >= 1))
        .await
        .expect("the first failure is seen")
        .unwrap();
    // The second stream's deliveries find the channel still full of the first's, so they
    // stay queued in the session until that stream fails too.
    let server = start(dir.path(), addr).await;
    tokio::time::timeout(Duration::from_secs(30), async {
        while in_flight(&client, "q").await < PREFETCH as u64 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the consumer reconnects and is delivered to");
    // Leased is not yet received: a generous margin for the loopback hop.
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.stop().await;
    tokio::time::timeout(Duration::from_secs(10), failures.wait_for(|&n| n >= 2))
        .await
        .expect("the second failure is seen")
        .unwrap();
    // The server is down: `next` can only drop what the first stream left in the channel.
    let handed_out = tokio::time::timeout(Duration::ZERO, consumer.next()).await;
    assert!(
        handed_out.is_err(),
        "a delivery of a failed stream was handed out"
    );
    assert_eq!(consumer.stale_dropped(), PREFETCH as u64);

    let dropped = consumer.take_dropped();
    // The first stream's deliveries are always reported (dropped by `next`); whether the
    // second stream's reached the session's queue before the stop depends on when the
    // reconnected stream got its credit, so they may or may not be among them.
    assert!(
        (PREFETCH..=2 * PREFETCH).contains(&dropped.len()),
        "{dropped:?}"
    );
    // The first stream's were first deliveries; each one reported carries the attempt
    // number it was delivered with, which the server's later deliveries go beyond.
    let first_stream: Vec<_> = dropped.iter().filter(|d| d.attempt == 1).collect();
    assert!(first_stream.len() >= PREFETCH, "{dropped:?}");
    assert!(consumer.take_dropped().is_empty(), "taken once");

    let server = start(dir.path(), addr).await;
    let mut acked = std::collections::HashSet::new();
    while acked.len() < 2 * PREFETCH {
        let d = tokio::time::timeout(Duration::from_secs(30), consumer.next())
            .await
            .expect("the consumer reconnects")
            .unwrap()
            .unwrap();
        for earlier in dropped.iter().filter(|e| e.id == d.id()) {
            assert!(
                d.attempt() > earlier.attempt,
                "{} delivered at attempt {} after a dropped attempt {}",
                d.id(),
                d.attempt(),
                earlier.attempt
            );
        }
        acked.insert(d.id().to_owned());
        d.ack().await.unwrap();
    }
    // Every message was dropped once or twice, by id.
    let ids: std::collections::HashSet<_> = dropped.iter().map(|d| d.id.clone()).collect();
    assert!(ids.is_subset(&acked), "{ids:?} {acked:?}");
    drop(consumer);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_batch_arrives_with_every_field_and_its_chosen_ids() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let client = Client::connect(&format!("ferry://{}", server.addr))
        .await
        .unwrap();
    client.create_queue("fields", spec(30_000)).await.unwrap();

    // Larger than the codec's first buffer in all, so the request is encoded past it.
    let big = |i: usize| vec![b'a' + (i % 26) as u8; 4096 + i];
    let chosen = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let mut batch = vec![
        Message::new("first")
            .with_key("k")
            .with_header("tenant", "acme")
            .with_header("trace", "t-1")
            .with_id(chosen),
    ];
    batch.extend((0..20).map(|i| Message::new(big(i))));
    let ids = client.publish("fields", batch).await.unwrap();
    assert_eq!(ids.len(), 21);
    assert_eq!(ids[0], chosen);
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 21, "each message its own id");

    let got = client
        .receive("fields", "reader", 100, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(got.len(), 21);
    let by_id: std::collections::HashMap<_, _> = got.iter().map(|d| (d.id.as_str(), d)).collect();
    let first = by_id[chosen];
    assert_eq!(&first.payload[..], b"first");
    assert_eq!(first.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(first.headers.len(), 2);
    assert_eq!(first.headers["tenant"], "acme");
    assert_eq!(first.headers["trace"], "t-1");
    for (i, id) in ids[1..].iter().enumerate() {
        let d = by_id[id.as_str()];
        assert_eq!(d.payload, big(i), "payload {i}");
        assert!(d.key.is_none() && d.headers.is_empty());
    }
    server.stop().await;
}

/// The ids each payload of `queue` was stored under, consumed and acked.
async fn ids_by_payload(
    client: &Client,
    queue: &str,
    expected: usize,
) -> std::collections::BTreeMap<String, String> {
    let mut consumer = client
        .consumer(queue, "reader", ConsumerConfig::default())
        .await
        .unwrap();
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < expected {
        let d = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a delivery in time")
            .unwrap()
            .unwrap();
        let payload = String::from_utf8(d.payload().to_vec()).unwrap();
        assert!(
            seen.insert(payload, d.id().to_owned()).is_none(),
            "stored once"
        );
        d.ack().await.unwrap();
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_stream_answers_each_batch_with_its_own_ids_through_errors_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.addr;
    let client = Client::connect(&format!("ferry://{addr}"))
        .await
        .unwrap()
        .with_retry(ferry_client::RetryPolicy {
            attempts: 50,
            base: Duration::from_millis(20),
            cap: Duration::from_millis(200),
        });
    client.create_queue("s", spec(30_000)).await.unwrap();
    let batch = |name: &str, n: usize| -> Vec<Message> {
        (0..n)
            .map(|i| Message::new(format!("{name}-{i}")))
            .collect()
    };
    let mut stream = client.publish_stream("s");
    assert_eq!(stream.queue(), "s");
    let mut answered = std::collections::BTreeMap::new();
    let mut remember = |name: &str, ids: Vec<String>| {
        for (i, id) in ids.into_iter().enumerate() {
            answered.insert(format!("{name}-{i}"), id);
        }
    };
    for name in ["a", "b", "c"] {
        let ids = stream.publish(batch(name, 10)).await.unwrap();
        assert_eq!(ids.len(), 10);
        remember(name, ids);
    }

    // A batch the server refuses is an error of its own, not retried; the stream it ended
    // is replaced for the next batch.
    let refused = stream
        .publish(vec![Message::new("bad").with_header("ferry-nope", "1")])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(tonic::Code::InvalidArgument));
    remember("d", stream.publish(batch("d", 3)).await.unwrap());

    // A caller that stops waiting after its batch went out leaves that batch's answer on
    // the way: the next batch must get its own answer, not that one.
    // Polled once (which sends the batch), then dropped.
    {
        let mut abandoned = std::pin::pin!(stream.publish(batch("abandoned", 4)));
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(abandoned.as_mut(), cx))
        })
        .await;
        assert!(first.is_pending(), "the answer cannot be there at once");
    }
    remember("e", stream.publish(batch("e", 5)).await.unwrap());

    // The server restarts under the stream: the next batch goes on a new stream.
    server.stop().await;
    let server = start(dir.path(), addr).await;
    remember("f", stream.publish(batch("f", 6)).await.unwrap());

    // Every answered id is the one its message was stored under, and each message is
    // stored once. The abandoned batch is stored whole or not at all, as its stream was
    // dropped before or after it went out.
    let published = client
        .describe_queue("s")
        .await
        .unwrap()
        .stats
        .unwrap()
        .published as usize;
    assert!([44, 48].contains(&published), "{published}");
    let stored = ids_by_payload(&client, "s", published).await;
    for (payload, id) in &answered {
        assert_eq!(stored.get(payload), Some(id), "{payload}");
    }
    assert_eq!(
        stored
            .keys()
            .filter(|p| p.starts_with("abandoned-"))
            .count(),
        published - 44
    );
    server.stop().await;
}
