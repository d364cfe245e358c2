//! The client against a real server on a socket: admin, the batching producer (ids chosen
//! client-side, so a retried batch is stored once), the streaming consumer (prefetch, lease
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
    let broker = Broker::open(dir, BrokerConfig::default()).await.unwrap();
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

    // The same ids again (a retry after a lost answer): stored once.
    let again: Vec<Message> = ids[..5]
        .iter()
        .map(|id| Message::new("again").with_id(id.clone()))
        .collect();
    client.publish("jobs", again).await.unwrap();
    assert_eq!(
        client
            .describe_queue("jobs")
            .await
            .unwrap()
            .stats
            .unwrap()
            .published,
        300
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
    while seen.len() < 300 {
        let d = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a delivery in time")
            .unwrap()
            .unwrap();
        assert!(seen.insert(d.id().to_owned()), "delivered once");
        d.ack().await.unwrap();
    }
    let stats = client.describe_queue("jobs").await.unwrap().stats.unwrap();
    assert_eq!((stats.acked, stats.ready, stats.in_flight), (300, 0, 0));
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
    assert!(held.ack().await.is_err());
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
}
