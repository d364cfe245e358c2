//! The Redis Streams transport's own edge cases: what it emulates on top of streams and the
//! conformance suite does not reach (delayed hops that must carry the attempt count, TTL,
//! length limits, dedup by id, extensions beyond the lease, per-subscription redelivery).
//! Runs against the machine's Redis (`FERRY_REDIS_URL`, default `redis://127.0.0.1:6379/0`).

#![cfg(feature = "redis")]

use std::time::{Duration, Instant};

use ferry::message::reason;
use ferry::{
    Backoff, Consumer, ConsumerOptions, Delivery, DeliveryPolicy, Destination, Error, Ferry,
    Message, QueueDecl, Source, SubscriptionDecl, TopicDecl,
};
use ferry_testkit::fresh;

/// A connection, or `None` (said loudly) when no Redis answers outside CI.
async fn connect() -> Option<Ferry> {
    let url = ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0")?;
    Some(Ferry::connect(&url).await.expect("connect to Redis"))
}

fn policy() -> DeliveryPolicy {
    DeliveryPolicy {
        max_deliveries: 5,
        backoff: Backoff {
            base: Duration::from_millis(50),
            cap: Duration::from_millis(100),
            multiplier: 2.0,
            jitter: 0.0,
        },
        lease: Duration::from_secs(1),
        ..DeliveryPolicy::default()
    }
}

async fn queue(ferry: &Ferry, what: &str, edit: impl FnOnce(&mut QueueDecl)) -> String {
    let mut decl = QueueDecl::new(fresh("rt", what)).delivery(policy());
    edit(&mut decl);
    ferry.declare_queue(&decl).await.unwrap();
    decl.name
}

async fn consumer(ferry: &Ferry, source: Source) -> Consumer {
    let options = ConsumerOptions {
        prefetch: 1,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    ferry.consumer(source, options).await.unwrap()
}

async fn next(c: &mut Consumer, within: Duration) -> Delivery {
    c.next_within(within)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("nothing from {} within {within:?}", c.source()))
}

async fn nothing(c: &mut Consumer, within: Duration) {
    if let Some(d) = c.next_within(within).await.unwrap() {
        panic!("unexpected delivery {} attempt {}", d.id, d.attempt);
    }
}

async fn send(ferry: &Ferry, to: Destination, message: Message) -> ferry::Result<String> {
    ferry.publisher(to).send(message).await
}

#[tokio::test]
async fn a_nack_delayed_past_the_lease_comes_back_later_with_its_attempt_count() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "long-nack", |q| q.delivery.max_deliveries = 3).await;
    let id = send(&ferry, Destination::queue(&name), Message::new("x"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, Duration::from_secs(5)).await;
    assert_eq!(d.attempt, 1);
    let nacked_at = Instant::now();
    // Twice the 1 s lease: the entry leaves the stream for the delayed set.
    d.nack_with_error(Some(Duration::from_secs(2)), "first")
        .await
        .unwrap();
    nothing(&mut c, Duration::from_millis(1500)).await;
    let d = next(&mut c, Duration::from_secs(5)).await;
    assert!(nacked_at.elapsed() >= Duration::from_secs(2));
    assert_eq!((d.id.as_str(), d.attempt), (id.as_str(), 2));
    d.nack_with_error(Some(Duration::ZERO), "second")
        .await
        .unwrap();
    let d = next(&mut c, Duration::from_secs(5)).await;
    assert_eq!(d.attempt, 3);
    d.nack_with_error(None, "third").await.unwrap();
    nothing(&mut c, Duration::from_millis(500)).await;
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let dead = next(&mut dlq, Duration::from_secs(5)).await;
    let info = dead.dead_letter.clone().unwrap();
    assert_eq!(info.reason, reason::MAX_DELIVERIES);
    assert_eq!(info.deliveries, 3);
    assert_eq!(info.last_error.as_deref(), Some("third"));
    assert!(info.first_failure_ms.unwrap() <= info.last_failure_ms.unwrap());
    assert_eq!(dead.header("ferry-dlq-reason"), Some("max_deliveries"));
    assert!(matches!(
        dead.reject("again").await,
        Err(Error::Invalid { .. })
    ));
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn an_expired_message_is_dead_lettered_and_never_delivered() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "ttl", |q| {
        q.delivery.default_ttl = Some(Duration::from_millis(400))
    })
    .await;
    let to = Destination::queue(&name);
    let short = send(
        &ferry,
        to.clone(),
        Message::new("short").with_ttl(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let by_default = send(&ferry, to.clone(), Message::new("default"))
        .await
        .unwrap();
    let long = send(
        &ferry,
        to.clone(),
        Message::new("long").with_ttl(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, Duration::from_secs(5)).await;
    assert_eq!(d.id, long);
    d.ack().await.unwrap();
    nothing(&mut c, Duration::from_millis(300)).await;
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let mut dead = Vec::new();
    for _ in 0..2 {
        let d = next(&mut dlq, Duration::from_secs(5)).await;
        let info = d.dead_letter.clone().unwrap();
        assert_eq!(
            (info.reason.as_str(), info.deliveries),
            (reason::EXPIRED, 0)
        );
        assert_eq!(info.origin, name);
        dead.push(d.id.clone());
        d.ack().await.unwrap();
    }
    dead.sort();
    let mut want = vec![short, by_default];
    want.sort();
    assert_eq!(dead, want);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn publishes_past_max_length_are_refused_whole_and_nothing_is_trimmed() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "max-length", |q| q.max_length = Some(3)).await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher
        .send(Message::new("later").with_delay(Duration::from_secs(30)))
        .await
        .unwrap();
    publisher
        .send_batch(vec![Message::new("a"), Message::new("b")])
        .await
        .unwrap();
    // The delayed message counts: the queue is full.
    assert!(matches!(
        publisher.send(Message::new("c")).await,
        Err(Error::Full { .. })
    ));
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, Duration::from_secs(5)).await;
    assert_eq!(d.payload, "a");
    d.ack().await.unwrap();
    // One place is free; a batch of two is refused with nothing stored.
    assert!(matches!(
        publisher
            .send_batch(vec![Message::new("d"), Message::new("e")])
            .await,
        Err(Error::Full { .. })
    ));
    publisher.send(Message::new("f")).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..2 {
        let d = next(&mut c, Duration::from_secs(5)).await;
        got.push(String::from_utf8_lossy(&d.payload).into_owned());
        d.ack().await.unwrap();
    }
    assert_eq!(got, ["b", "f"]);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_retried_publish_of_one_id_is_stored_once_within_the_window() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "dedup-id", |q| {
        q.dedup_window = Some(Duration::from_secs(60))
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    let m = Message::new("once").with_id(ferry::message::new_id());
    publisher.send(m.clone()).await.unwrap();
    publisher
        .send_batch(vec![m.clone(), m.clone()])
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    next(&mut c, Duration::from_secs(5))
        .await
        .ack()
        .await
        .unwrap();
    nothing(&mut c, Duration::from_millis(500)).await;

    let plain = queue(&ferry, "no-window", |_| {}).await;
    let refused = send(
        &ferry,
        Destination::queue(&plain),
        Message::new("x").with_dedup_id("d"),
    )
    .await;
    assert!(matches!(refused, Err(Error::Invalid { .. })), "{refused:?}");
    for q in [name, plain] {
        ferry.delete(&Source::queue(&q)).await.unwrap();
    }
}

#[tokio::test]
async fn declarations_that_differ_conflict_and_deleted_sources_are_not_found() {
    let Some(ferry) = connect().await else { return };
    let mut decl = QueueDecl::new(fresh("rt", "declare")).delivery(policy());
    ferry.declare_queue(&decl).await.unwrap();
    ferry.declare_queue(&decl).await.unwrap();
    decl.delivery.max_deliveries = 9;
    assert!(matches!(
        ferry.declare_queue(&decl).await,
        Err(Error::Conflict { .. })
    ));
    let topic = fresh("rt", "declare-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let mut two = TopicDecl::new(&topic);
    two.partitions = 2;
    assert!(matches!(
        ferry.declare_topic(&two).await,
        Err(Error::Invalid { .. })
    ));
    // A queue's name cannot be taken by a subscription.
    let clash = SubscriptionDecl::new(&topic, &decl.name).delivery(policy());
    assert!(matches!(
        ferry.declare_subscription(&clash).await,
        Err(Error::Conflict { .. })
    ));
    let orphan =
        SubscriptionDecl::new(fresh("rt", "no-topic"), fresh("rt", "sub")).delivery(policy());
    assert!(matches!(
        ferry.declare_subscription(&orphan).await,
        Err(Error::NotFound { .. })
    ));
    let sub = SubscriptionDecl::new(&topic, fresh("rt", "sub")).delivery(policy());
    ferry.declare_subscription(&sub).await.unwrap();

    ferry.delete(&Source::queue(&decl.name)).await.unwrap();
    assert!(matches!(
        ferry.delete(&Source::queue(&decl.name)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        send(&ferry, Destination::queue(&decl.name), Message::new("x")).await,
        Err(Error::NotFound { .. })
    ));
    // A topic with a subscription is refused, as on every transport; then it goes.
    let refused = ferry.delete_topic(&topic).await;
    assert!(
        matches!(refused, Err(Error::Conflict { .. })),
        "{refused:?}"
    );
    ferry
        .delete(&Source::subscription(&topic, &sub.name))
        .await
        .unwrap();
    ferry.delete_topic(&topic).await.unwrap();
    let gone = ferry
        .consumer(
            Source::subscription(&topic, &sub.name),
            ConsumerOptions::default(),
        )
        .await;
    assert!(matches!(gone, Err(Error::NotFound { .. })));
    assert!(matches!(
        ferry.delete_topic(&topic).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_subscriptions_delayed_redelivery_reaches_that_subscription_alone() {
    let Some(ferry) = connect().await else { return };
    let topic = fresh("rt", "sub-delay");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    // Published before any subscription: nobody gets it.
    send(&ferry, Destination::topic(&topic), Message::new("early"))
        .await
        .unwrap();
    let (a, b) = (format!("{topic}-a"), format!("{topic}-b"));
    for name in [&a, &b] {
        let decl = SubscriptionDecl::new(&topic, name).delivery(policy());
        ferry.declare_subscription(&decl).await.unwrap();
    }
    let id = send(&ferry, Destination::topic(&topic), Message::new("event"))
        .await
        .unwrap();
    let mut ca = consumer(&ferry, Source::subscription(&topic, &a)).await;
    let mut cb = consumer(&ferry, Source::subscription(&topic, &b)).await;
    let d = next(&mut ca, Duration::from_secs(5)).await;
    assert_eq!(d.id, id);
    d.nack(Some(Duration::from_millis(1500))).await.unwrap();
    let d = next(&mut cb, Duration::from_secs(5)).await;
    assert_eq!((d.id.as_str(), d.attempt), (id.as_str(), 1));
    d.ack().await.unwrap();
    let d = next(&mut ca, Duration::from_secs(5)).await;
    assert_eq!((d.id.as_str(), d.attempt), (id.as_str(), 2));
    d.ack().await.unwrap();
    nothing(&mut cb, Duration::from_millis(2000)).await;
    nothing(&mut ca, Duration::from_millis(300)).await;
    for name in [&a, &b] {
        ferry
            .delete(&Source::subscription(&topic, name))
            .await
            .unwrap();
    }
    ferry.delete_topic(&topic).await.unwrap();
}

#[tokio::test]
async fn delayed_topic_publishes_reach_each_subscription_once_with_many_movers() {
    let Some(ferry) = connect().await else { return };
    let topic = fresh("rt", "topic-delay");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let subs = [format!("{topic}-a"), format!("{topic}-b")];
    for name in &subs {
        let decl = SubscriptionDecl::new(&topic, name).delivery(policy());
        ferry.declare_subscription(&decl).await.unwrap();
    }
    let started = Instant::now();
    let ids = ferry
        .publisher(Destination::topic(&topic))
        .send_batch(
            (0..20)
                .map(|i| Message::new(format!("{i}")).with_delay(Duration::from_millis(800)))
                .collect(),
        )
        .await
        .unwrap();
    for name in &subs {
        // Three consumers on one subscription, all moving due entries as they fetch.
        let mut consumers = Vec::new();
        for _ in 0..3 {
            consumers.push(consumer(&ferry, Source::subscription(&topic, name)).await);
        }
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < ids.len() && Instant::now() < deadline {
            for c in &mut consumers {
                if let Some(d) = c.next_within(Duration::from_millis(50)).await.unwrap() {
                    assert!(started.elapsed() >= Duration::from_millis(800));
                    got.push(d.id.clone());
                    d.ack().await.unwrap();
                }
            }
        }
        for c in &mut consumers {
            nothing(c, Duration::from_millis(300)).await;
        }
        got.sort();
        let mut want = ids.clone();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
    for name in &subs {
        ferry
            .delete(&Source::subscription(&topic, name))
            .await
            .unwrap();
    }
    ferry.delete_topic(&topic).await.unwrap();
}

#[tokio::test]
async fn a_lease_running_out_on_the_last_delivery_dead_letters_it() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "last-lease", |q| q.delivery.max_deliveries = 2).await;
    send(&ferry, Destination::queue(&name), Message::new("x"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    next(&mut c, Duration::from_secs(5))
        .await
        .nack_with_error(Some(Duration::ZERO), "flaky")
        .await
        .unwrap();
    let held = next(&mut c, Duration::from_secs(5)).await;
    assert_eq!(held.attempt, 2);
    // Neither settled nor extended: after the lease the next fetch dead-letters it.
    nothing(&mut c, Duration::from_millis(1500)).await;
    assert!(matches!(held.ack().await, Err(Error::NotHeld { .. })));
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let info = next(&mut dlq, Duration::from_secs(5))
        .await
        .dead_letter
        .clone()
        .unwrap();
    assert_eq!(info.reason, reason::MAX_DELIVERIES);
    assert_eq!(info.deliveries, 2);
    // As on the Ferry broker: the last failure was the lease running out.
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));
    assert!(info.first_failure_ms < info.last_failure_ms);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn an_extension_past_the_lease_holds_then_ends() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "long-extend", |_| {}).await;
    send(&ferry, Destination::queue(&name), Message::new("x"))
        .await
        .unwrap();
    let mut first = consumer(&ferry, Source::queue(&name)).await;
    let mut second = consumer(&ferry, Source::queue(&name)).await;
    let held = next(&mut first, Duration::from_secs(5)).await;
    let extended_at = Instant::now();
    held.extend(Duration::from_secs(3)).await.unwrap();
    nothing(&mut second, Duration::from_millis(2500)).await;
    let d = next(&mut second, Duration::from_secs(5)).await;
    assert!(extended_at.elapsed() >= Duration::from_secs(3));
    assert_eq!(d.attempt, 2);
    assert!(matches!(
        held.extend(Duration::from_secs(1)).await,
        Err(Error::NotHeld { .. })
    ));
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_delay_past_the_declared_max_is_refused() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "max-delay", |q| {
        q.delivery.max_delay = Duration::from_secs(1)
    })
    .await;
    let refused = send(
        &ferry,
        Destination::queue(&name),
        Message::new("x").with_delay(Duration::from_secs(2)),
    )
    .await;
    assert!(matches!(refused, Err(Error::Invalid { .. })), "{refused:?}");
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_closed_connection_refuses_calls_and_settlements() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "closed", |_| {}).await;
    send(&ferry, Destination::queue(&name), Message::new("x"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, Duration::from_secs(5)).await;
    ferry.close().await.unwrap();
    assert!(matches!(d.ack().await, Err(Error::Closed)));
    assert!(matches!(
        send(&ferry, Destination::queue(&name), Message::new("y")).await,
        Err(Error::Closed)
    ));
    let again = connect().await.unwrap();
    again.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    let Some(_) = connect().await else { return };
    // Nothing listens on port 1.
    match Ferry::connect("redis://127.0.0.1:1/0").await {
        Err(e @ Error::Transport { .. }) => assert!(e.is_transient()),
        other => panic!("connecting to nothing answered {other:?}"),
    }
}

/// Consumers settling at random — ack, nack with short and long delays, extend, reject, or
/// hang until the lease ends — never see a message acked twice or an attempt count that
/// fails to rise, and every message ends acked or dead-lettered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_settlements_lose_nothing_and_duplicate_nothing() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    let Some(ferry) = connect().await else { return };
    const MESSAGES: usize = 60;
    const MAX: u32 = 4;
    let seed = fastrand::u64(..);
    eprintln!("seed {seed}");
    let name = queue(&ferry, "random", |q| {
        q.delivery.max_deliveries = MAX;
        q.delivery.lease = Duration::from_millis(500);
    })
    .await;
    let sent: Vec<String> = ferry
        .publisher(Destination::queue(&name))
        .send_batch(
            (0..MESSAGES)
                .map(|i| Message::new(format!("{i}")))
                .collect(),
        )
        .await
        .unwrap();

    #[derive(Default)]
    struct Seen {
        last_attempt: HashMap<String, u32>,
        acked: HashMap<String, u32>,
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut tasks = Vec::new();
    for worker in 0..3u64 {
        let ferry = ferry.clone();
        let name = name.clone();
        let seen = seen.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(seed + worker);
            let mut c = consumer(&ferry, Source::queue(&name)).await;
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut quiet_since = Instant::now();
            while Instant::now() < deadline && quiet_since.elapsed() < Duration::from_secs(3) {
                let Some(d) = c.next_within(Duration::from_millis(100)).await.unwrap() else {
                    continue;
                };
                quiet_since = Instant::now();
                {
                    let mut seen = seen.lock().unwrap();
                    let last = seen.last_attempt.insert(d.id.clone(), d.attempt);
                    assert!(
                        last.is_none_or(|l| l < d.attempt),
                        "{} came with attempt {} after {last:?}",
                        d.id,
                        d.attempt
                    );
                    assert!(d.attempt <= MAX, "attempt {} past {MAX}", d.attempt);
                }
                match rng.u8(0..10) {
                    0..=2 => {
                        let id = d.id.clone();
                        if d.ack().await.is_ok() {
                            *seen.lock().unwrap().acked.entry(id).or_default() += 1;
                        }
                    }
                    3 => {
                        let _ = d.nack(Some(Duration::ZERO)).await;
                    }
                    4 => {
                        let _ = d.nack(Some(Duration::from_millis(200))).await;
                    }
                    5 => {
                        // Past the lease: through the delayed set.
                        let _ = d.nack(Some(Duration::from_millis(700))).await;
                    }
                    6 => {
                        let _ = d.extend(Duration::from_millis(800)).await;
                        let id = d.id.clone();
                        if d.ack().await.is_ok() {
                            *seen.lock().unwrap().acked.entry(id).or_default() += 1;
                        }
                    }
                    7 => {
                        let _ = d.reject("bad").await;
                    }
                    _ => drop(d), // hangs: the lease runs out
                }
            }
            c.close().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let acked = std::mem::take(&mut seen.lock().unwrap().acked);
    assert!(acked.values().all(|n| *n == 1), "acked twice");
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let mut dead = HashMap::new();
    while let Some(d) = dlq.next_within(Duration::from_millis(500)).await.unwrap() {
        *dead.entry(d.id.clone()).or_insert(0) += 1;
        let info = d.dead_letter.clone().unwrap();
        assert!(
            info.reason == reason::REJECTED
                || (info.reason == reason::MAX_DELIVERIES && info.deliveries == MAX),
            "{info:?}"
        );
        d.ack().await.unwrap();
    }
    for id in &sent {
        let acked = acked.get(id).copied().unwrap_or(0);
        let died = dead.get(id).copied().unwrap_or(0);
        assert_eq!(acked + died, 1, "{id}: acked {acked}, dead-lettered {died}");
    }
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

/// The commands the server runs, as MONITOR prints them (those of Lua scripts too), read on
/// a thread of its own from a connection that does nothing else.
struct Monitor {
    address: String,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _connection: std::net::TcpStream,
}

impl Monitor {
    fn start() -> Monitor {
        use std::io::{BufRead, BufReader, Write};
        let url = std::env::var("FERRY_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379/0".to_owned());
        let address = url
            .trim_start_matches("redis://")
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        let mut connection = std::net::TcpStream::connect(&address).unwrap();
        connection.write_all(b"MONITOR\r\n").unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (reader, sink) = (connection.try_clone().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { return };
                sink.lock().unwrap().push(line);
            }
        });
        Monitor {
            address,
            lines,
            _connection: connection,
        }
    }

    /// The commands run so far (each as its name, then its whole line) that name `key`.
    /// Redis runs one command at a time, so everything before a marker command is printed
    /// before the marker.
    fn commands_naming(&self, key: &str) -> Vec<(String, String)> {
        use std::io::{Read, Write};
        let mark = format!("monitor-mark-{:016x}", fastrand::u64(..));
        let mut client = std::net::TcpStream::connect(&self.address).unwrap();
        client
            .write_all(format!("ECHO {mark}\r\n").as_bytes())
            .unwrap();
        let _ = client.read(&mut [0; 64]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            {
                let lines = self.lines.lock().unwrap();
                if let Some(end) = lines.iter().position(|l| l.contains(&mark)) {
                    let quoted = format!("\"{key}\"");
                    return lines[..end]
                        .iter()
                        .filter(|l| l.contains(&quoted))
                        .filter_map(|l| {
                            let (_, command) = l.split_once("] \"")?;
                            let name = command.split('"').next()?.to_uppercase();
                            Some((name, l.clone()))
                        })
                        .collect();
                }
            }
            assert!(Instant::now() < deadline, "MONITOR never printed {mark}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn count(&self, key: &str, command: &str) -> usize {
        self.commands_naming(key)
            .iter()
            .filter(|(name, _)| name == command)
            .count()
    }
}

#[tokio::test]
async fn acks_that_arrive_together_are_one_xack_and_a_stale_one_is_still_refused() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "batched-acks", |_| {}).await;
    let key = format!("ferry:q:{name}");
    let messages = (0..20).map(|i| Message::new(format!("{i}"))).collect();
    ferry
        .publisher(Destination::queue(&name))
        .send_batch(messages)
        .await
        .unwrap();
    // One consumer takes all 20, lets their 1 s leases run out and takes them again: it
    // holds 20 stale deliveries and 20 current ones of the same entries.
    let options = ConsumerOptions {
        prefetch: 20,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    let mut c = ferry.consumer(Source::queue(&name), options).await.unwrap();
    let mut held = Vec::new();
    while held.len() < 40 {
        let d = next(&mut c, Duration::from_secs(10)).await;
        assert_eq!(d.attempt, if held.len() < 20 { 1 } else { 2 });
        held.push(d);
    }
    let monitor = Monitor::start();
    let before = monitor.count(&key, "XACK");

    // All 40 acks at once. On this single-threaded test runtime every one of them is queued
    // before the first reaches the server.
    let mut acks = tokio::task::JoinSet::new();
    for d in held {
        let attempt = d.attempt;
        acks.spawn(async move { (attempt, d.ack().await) });
    }
    let mut refused = 0;
    while let Some(joined) = acks.join_next().await {
        match joined.unwrap() {
            (1, Err(Error::NotHeld { .. })) => refused += 1,
            (2, Ok(())) => {}
            (attempt, other) => panic!("an ack of attempt {attempt} answered {other:?}"),
        }
    }
    assert_eq!(refused, 20, "every stale ack is refused");
    let xacks = monitor.count(&key, "XACK") - before;
    assert!(xacks <= 2, "40 acks at once took {xacks} XACK calls");
    nothing(&mut c, Duration::from_millis(1500)).await;
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn an_idle_fetch_waits_in_a_blocking_read_and_wakes_for_a_publish() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "idle", |_| {}).await;
    let key = format!("ferry:q:{name}");
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let monitor = Monitor::start();

    // Idle for a second: one look (the fetch script) and one blocking read, however long
    // the wait — not a read per poll interval.
    nothing(&mut c, Duration::from_secs(1)).await;
    let reads: Vec<String> = monitor
        .commands_naming(&key)
        .into_iter()
        .filter(|(name, _)| name == "XREADGROUP")
        .map(|(_, line)| line)
        .collect();
    assert!(
        reads.len() <= 3,
        "an idle second took {} reads",
        reads.len()
    );
    assert!(
        reads.iter().any(|l| l.contains("\"BLOCK\"")),
        "no blocking read among {reads:#?}"
    );

    // A publish while the consumer waits ends that same blocking read: the delivery comes
    // from it, with no second look.
    let before = monitor.count(&key, "XREADGROUP");
    let publisher = {
        let ferry = ferry.clone();
        let name = name.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            send(&ferry, Destination::queue(&name), Message::new("woken")).await
        })
    };
    let d = next(&mut c, Duration::from_secs(30)).await;
    assert_eq!(&d.payload[..], b"woken");
    publisher.await.unwrap().unwrap();
    let reads = monitor.count(&key, "XREADGROUP") - before;
    assert!(reads <= 2, "a wait ended by a publish took {reads} reads");
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_blocking_read_ends_when_a_delayed_message_comes_due() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "due", |_| {}).await;
    let key = format!("ferry:q:{name}");
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let monitor = Monitor::start();
    send(
        &ferry,
        Destination::queue(&name),
        Message::new("later").with_delay(Duration::from_millis(400)),
    )
    .await
    .unwrap();
    // A wait of 30 s gets it once due: the blocking read lasts until the due time the
    // fetch script reported, not to the end of the wait (a new entry in the stream would
    // not end it: the delayed one is moved in by the script).
    let d = next(&mut c, Duration::from_secs(30)).await;
    assert_eq!(&d.payload[..], b"later");
    let blocks: Vec<u64> = monitor
        .commands_naming(&key)
        .iter()
        .filter(|(name, _)| name == "XREADGROUP")
        .filter_map(|(_, line)| {
            let (_, rest) = line.split_once("\"BLOCK\" \"")?;
            rest.split('"').next()?.parse().ok()
        })
        .collect();
    assert!(!blocks.is_empty(), "the wait had no blocking read");
    // Due 1 ms after its delay (the millisecond Redis's clock drops, see `due_after` in
    // the scripts): a read in the publish's own millisecond blocks for 401 ms.
    assert!(
        blocks.iter().all(|&ms| ms <= 401),
        "blocked for {blocks:?} ms with a message due in 401 ms"
    );
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}
