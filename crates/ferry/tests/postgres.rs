//! The PostgreSQL transport's own behaviour, beyond the conformance suite: what it does in
//! SQL for priorities, TTL, length limits, dedup windows, per-key order and stale leases.
//! Runs against `FERRY_POSTGRES_URL` (default: the machine's server, trust auth); skips
//! loudly when nothing answers, and fails instead under `CI=true`.
#![cfg(feature = "postgres")]

use std::time::Duration;

use ferry::message::reason;
use ferry::{
    Consumer, ConsumerOptions, DeliveryPolicy, Destination, Error, Ferry, KeyOrdering, Message,
    QueueDecl, Source, SubscriptionDecl, TopicDecl,
};
use ferry_testkit::fresh;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

async fn connect() -> Option<Ferry> {
    let url = ferry_testkit::url_or_skip("PostgreSQL", "FERRY_POSTGRES_URL", DEFAULT_URL)?;
    Some(Ferry::connect(&url).await.expect("connect"))
}

fn quick() -> DeliveryPolicy {
    DeliveryPolicy {
        lease: Duration::from_secs(30),
        ..DeliveryPolicy::default()
    }
}

async fn queue(ferry: &Ferry, what: &str, edit: impl FnOnce(&mut QueueDecl)) -> String {
    let mut decl = QueueDecl::new(fresh("pgt", what)).delivery(quick());
    edit(&mut decl);
    ferry.declare_queue(&decl).await.expect("declare");
    decl.name
}

async fn consumer(ferry: &Ferry, source: Source, prefetch: usize) -> Consumer {
    let options = ConsumerOptions {
        prefetch,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    ferry.consumer(source, options).await.expect("consumer")
}

async fn payloads(c: &mut Consumer, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    while got.len() < n {
        let d = c
            .next_within(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a delivery");
        got.push(String::from_utf8_lossy(&d.payload).into_owned());
        d.ack().await.unwrap();
    }
    got
}

#[tokio::test]
async fn priorities_come_highest_first_and_above_a_queues_levels_are_refused() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "priority", |q| q.delivery.priority_levels = 3).await;
    let publisher = ferry.publisher(Destination::queue(&name));
    for (payload, priority) in [("a", 0), ("b", 2), ("c", 1), ("d", 2)] {
        publisher
            .send(Message::new(payload).with_priority(priority))
            .await
            .unwrap();
    }
    // A level the queue does not declare is a mistaken publish, refused before any row of
    // its batch is stored — as the Ferry broker refuses it.
    let refused = publisher
        .send_batch(vec![
            Message::new("in range").with_priority(1),
            Message::new("above").with_priority(9),
        ])
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::Invalid { .. }), "{refused}");
    assert!(refused.to_string().contains("0 to 2"), "{refused}");
    let mut c = consumer(&ferry, Source::queue(&name), 8).await;
    let first = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((&first.payload[..], first.priority), (&b"b"[..], 2));
    first.ack().await.unwrap();
    let rest = payloads(&mut c, 3).await;
    assert_eq!(rest, ["d", "c", "a"]);
    assert!(
        c.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none(),
        "nothing of the refused batch was stored"
    );
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_topic_publish_above_a_subscriptions_levels_counts_as_its_highest() {
    let Some(ferry) = connect().await else { return };
    let topic = fresh("pgt", "prio-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let mut policy = quick();
    policy.priority_levels = 3;
    let sub = SubscriptionDecl::new(&topic, fresh("pgt", "prio-sub")).delivery(policy);
    ferry.declare_subscription(&sub).await.unwrap();
    let publisher = ferry.publisher(Destination::topic(&topic));
    // A topic's publish cannot know each subscription's levels: 9 is queued at 2, the
    // highest of three, in publish order after `b`.
    for (payload, priority) in [("a", 0), ("b", 2), ("e", 9)] {
        publisher
            .send(Message::new(payload).with_priority(priority))
            .await
            .unwrap();
    }
    let source = Source::subscription(&topic, &sub.name);
    let mut c = consumer(&ferry, source.clone(), 8).await;
    assert_eq!(payloads(&mut c, 3).await, ["b", "e", "a"]);
    ferry.delete(&source).await.unwrap();
    ferry.delete_topic(&topic).await.unwrap();
}

#[tokio::test]
async fn expired_messages_are_dead_lettered_with_reason_expired() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "ttl", |q| {
        q.delivery.default_ttl = Some(Duration::from_millis(200))
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    let by_default = publisher.send(Message::new("default ttl")).await.unwrap();
    let own = publisher
        .send(Message::new("own ttl").with_ttl(Duration::from_millis(100)))
        .await
        .unwrap();
    let kept = publisher
        .send(Message::new("long ttl").with_ttl(Duration::from_secs(60)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut c = consumer(&ferry, Source::queue(&name), 8).await;
    let d = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.id, kept, "only the unexpired message is delivered");
    d.ack().await.unwrap();
    assert!(
        c.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters(), 8).await;
    let mut dead = Vec::new();
    for _ in 0..2 {
        let d = dlq
            .next_within(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        let info = d.dead_letter.clone().expect("dead-letter metadata");
        assert_eq!(info.reason, reason::EXPIRED);
        assert_eq!(info.deliveries, 0);
        assert_eq!(info.origin, name);
        dead.push(d.id.clone());
        d.ack().await.unwrap();
    }
    dead.sort();
    let mut want = vec![by_default, own];
    want.sort();
    assert_eq!(dead, want);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_full_queue_refuses_the_whole_batch_until_acks_make_room() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "full", |q| q.max_length = Some(3)).await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher
        .send_batch(vec![Message::new("1"), Message::new("2")])
        .await
        .unwrap();
    let err = publisher
        .send_batch(vec![Message::new("3"), Message::new("4")])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Full { .. }), "{err}");
    assert!(err.is_transient());
    publisher.send(Message::new("3")).await.unwrap();
    assert!(matches!(
        publisher.send(Message::new("4")).await,
        Err(Error::Full { .. })
    ));
    let mut c = consumer(&ferry, Source::queue(&name), 1).await;
    assert_eq!(payloads(&mut c, 1).await, ["1"]);
    publisher.send(Message::new("4")).await.unwrap();
    assert_eq!(payloads(&mut c, 3).await, ["2", "3", "4"]);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_dedup_id_is_accepted_again_once_its_window_passed() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "dedup-window", |q| {
        q.dedup_window = Some(Duration::from_millis(300))
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher
        .send(Message::new("first").with_dedup_id("x"))
        .await
        .unwrap();
    publisher
        .send(Message::new("duplicate").with_dedup_id("x"))
        .await
        .unwrap();
    // Without a dedup id the message id is the key, so a retried publish is stored once.
    let retried = Message::new("by id").with_id("01JBYID0000000000000000000");
    publisher.send(retried.clone()).await.unwrap();
    publisher.send(retried).await.unwrap();
    // Duplicates within one batch count too.
    publisher
        .send_batch(vec![
            Message::new("in batch").with_dedup_id("y"),
            Message::new("in batch again").with_dedup_id("y"),
        ])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    publisher
        .send(Message::new("after the window").with_dedup_id("x"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name), 8).await;
    let got = payloads(&mut c, 4).await;
    assert_eq!(got, ["first", "by id", "in batch", "after the window"]);
    assert!(
        c.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn settings_a_queue_cannot_keep_are_refused_not_ignored() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "refused", |q| {
        q.delivery.max_delay = Duration::from_secs(1)
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    let err = publisher
        .send(Message::new("late").with_delay(Duration::from_secs(2)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let err = publisher
        .send(Message::new("dup").with_dedup_id("d"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let err = ferry
        .declare_topic(&TopicDecl {
            name: fresh("pgt", "partitioned"),
            partitions: 4,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    // Nothing of the refused batch was stored.
    let mut c = consumer(&ferry, Source::queue(&name), 8).await;
    assert!(
        c.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn redeclaring_with_other_settings_is_a_conflict() {
    let Some(ferry) = connect().await else { return };
    let mut decl = QueueDecl::new(fresh("pgt", "conflict")).delivery(quick());
    decl.delivery.backoff.multiplier = 1.7;
    decl.delivery.backoff.jitter = 0.1;
    ferry.declare_queue(&decl).await.unwrap();
    ferry.declare_queue(&decl).await.unwrap();
    let mut other = decl.clone();
    other.delivery.lease = Duration::from_secs(5);
    let err = ferry.declare_queue(&other).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");

    let topic = fresh("pgt", "conflict-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let clash = SubscriptionDecl::new(&topic, &decl.name);
    let err = ferry.declare_subscription(&clash).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    let err = ferry
        .declare_subscription(&SubscriptionDecl::new(
            fresh("pgt", "no-topic"),
            fresh("pgt", "s"),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    ferry.delete(&Source::queue(&decl.name)).await.unwrap();
    ferry.delete_topic(&topic).await.unwrap();
}

#[tokio::test]
async fn a_settlement_after_the_lease_went_to_another_consumer_is_not_held() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "stale", |q| {
        q.delivery.lease = Duration::from_millis(300)
    })
    .await;
    ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("slow"))
        .await
        .unwrap();
    let mut first = consumer(&ferry, Source::queue(&name), 1).await;
    let mut second = consumer(&ferry, Source::queue(&name), 1).await;
    let stale = first
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let fresh = second
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fresh.attempt, 2);
    assert!(matches!(
        stale.extend(Duration::from_secs(5)).await,
        Err(Error::NotHeld { .. })
    ));
    assert!(matches!(stale.ack().await, Err(Error::NotHeld { .. })));
    fresh.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_key_waits_behind_its_nacked_head_while_other_keys_flow() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "key-head", |q| {
        q.delivery.ordering = KeyOrdering::PerKey
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher
        .send_batch(vec![
            Message::new("k0").with_key("k"),
            Message::new("k1").with_key("k"),
            Message::new("j0").with_key("j"),
            Message::new("j1").with_key("j"),
        ])
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name), 8).await;
    let head = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&head.payload[..], b"k0");
    head.nack(Some(Duration::from_millis(500))).await.unwrap();
    // Key j goes on in order; k1 may not pass its waiting head.
    assert_eq!(payloads(&mut c, 2).await, ["j0", "j1"]);
    let again = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&again.payload[..], b"k0");
    assert_eq!(again.attempt, 2);
    again.ack().await.unwrap();
    assert_eq!(payloads(&mut c, 1).await, ["k1"]);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_subscriptions_dead_letters_name_it_and_a_topic_outlives_no_subscription() {
    let Some(ferry) = connect().await else { return };
    let topic = fresh("pgt", "topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let sub = SubscriptionDecl::new(&topic, fresh("pgt", "sub")).delivery(quick());
    ferry.declare_subscription(&sub).await.unwrap();
    let source = Source::subscription(&topic, &sub.name);
    ferry
        .publisher(Destination::topic(&topic))
        .send(Message::new("event"))
        .await
        .unwrap();
    let err = ferry.delete_topic(&topic).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    let mut c = consumer(&ferry, source.clone(), 1).await;
    c.next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap()
        .reject("bad event")
        .await
        .unwrap();
    let mut dlq = consumer(&ferry, source.clone().dead_letters(), 1).await;
    let d = dlq
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let info = d.dead_letter.clone().unwrap();
    assert_eq!(info.origin, sub.name);
    assert_eq!(info.reason, reason::REJECTED);
    assert_eq!(info.consumer.as_deref(), Some(c.name()));
    d.ack().await.unwrap();
    ferry.delete(&source).await.unwrap();
    ferry.delete_topic(&topic).await.unwrap();
    assert!(matches!(
        ferry.delete_topic(&topic).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        ferry
            .publisher(Destination::topic(&topic))
            .send(Message::new("x"))
            .await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn concurrent_connects_migrate_once_and_close_twice() {
    let Some(first) = connect().await else { return };
    let connects = (0..4).map(|_| tokio::spawn(connect()));
    for handle in connects {
        let ferry = handle.await.unwrap().unwrap();
        ferry.close().await.unwrap();
        ferry.close().await.unwrap();
        assert!(matches!(
            ferry
                .declare_queue(&QueueDecl::new(fresh("pgt", "closed")))
                .await,
            Err(Error::Closed)
        ));
    }
    first.close().await.unwrap();
    let url = std::env::var("FERRY_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let long_scheme = url.replacen("postgres://", "postgresql://", 1);
    Ferry::connect(&long_scheme)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_waiting_consumer_is_woken_by_the_publish_not_by_its_poll() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "wake", |_| {}).await;
    // A poll far longer than the latency asked for: only a notification can be that quick.
    let options = ConsumerOptions {
        prefetch: 1,
        poll: Duration::from_secs(10),
        ..ConsumerOptions::default()
    };
    let mut c = ferry.consumer(Source::queue(&name), options).await.unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    let mut latencies = Vec::new();
    for i in 0..5 {
        let waiting = tokio::spawn(async move {
            let d = c.next_within(Duration::from_secs(10)).await;
            (c, d, std::time::Instant::now())
        });
        // Let the consumer find the queue empty and start waiting.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let sent = std::time::Instant::now();
        publisher.send(Message::new(format!("{i}"))).await.unwrap();
        let (back, d, at) = waiting.await.unwrap();
        c = back;
        d.unwrap().expect("a delivery").ack().await.unwrap();
        latencies.push(at.saturating_duration_since(sent));
    }
    latencies.sort();
    // The fallback poll runs every 250 ms, so a median well under it means NOTIFY woke us.
    assert!(
        latencies[2] < Duration::from_millis(150),
        "publish-to-delivery latencies {latencies:?}"
    );
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn deleting_the_dead_letters_keeps_the_queue() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "purge-dlq", |_| {}).await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher.send(Message::new("dies")).await.unwrap();
    let mut c = consumer(&ferry, Source::queue(&name), 1).await;
    c.next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap()
        .reject("no")
        .await
        .unwrap();
    ferry
        .delete(&Source::queue(&name).dead_letters())
        .await
        .unwrap();
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters(), 1).await;
    assert!(
        dlq.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    publisher.send(Message::new("lives")).await.unwrap();
    assert_eq!(payloads(&mut c, 1).await, ["lives"]);
    ferry.delete(&Source::queue(&name)).await.unwrap();
    assert!(matches!(
        ferry.delete(&Source::queue(&name).dead_letters()).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error_and_a_bad_url_says_so() {
    let err = Ferry::connect("postgres://postgres@127.0.0.1:1/test")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err}");
    assert!(err.is_transient());
    let err = Ferry::connect("postgresql://postgres@127.0.0.1:notaport/test")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadUrl { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_key_order_holds_with_nacks_and_one_delivery_per_key_in_flight() {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    const KEYS: usize = 10;
    const PER_KEY: usize = 30;
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "key-stress", |q| {
        q.delivery.ordering = KeyOrdering::PerKey;
        q.delivery.max_deliveries = 100;
    })
    .await;
    let mut batch = Vec::new();
    for n in 0..PER_KEY {
        for key in 0..KEYS {
            batch.push(Message::new(n.to_string()).with_key(format!("k{key}")));
        }
    }
    ferry
        .publisher(Destination::queue(&name))
        .send_batch(batch)
        .await
        .unwrap();
    #[derive(Default)]
    struct Seen {
        in_flight: BTreeMap<String, usize>,
        acked: BTreeMap<String, Vec<usize>>,
        total: usize,
    }
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let mut c = consumer(&ferry, Source::queue(&name), 3).await;
        let seen = seen.clone();
        tasks.push(tokio::spawn(async move {
            while seen.lock().unwrap().total < KEYS * PER_KEY {
                let Some(d) = c.next_within(Duration::from_millis(200)).await.unwrap() else {
                    continue;
                };
                let key = String::from_utf8_lossy(d.key.as_deref().unwrap()).into_owned();
                let n: usize = std::str::from_utf8(&d.payload).unwrap().parse().unwrap();
                {
                    let mut seen = seen.lock().unwrap();
                    let flying = seen.in_flight.entry(key.clone()).or_default();
                    assert_eq!(*flying, 0, "two deliveries of key {key} in flight");
                    *flying += 1;
                }
                tokio::time::sleep(Duration::from_millis(fastrand::u64(0..3))).await;
                let nack = fastrand::u8(..5) == 0;
                {
                    // Out of flight before settling: once settled the next may come at once.
                    let mut seen = seen.lock().unwrap();
                    *seen.in_flight.get_mut(&key).unwrap() -= 1;
                    if !nack {
                        seen.acked.entry(key).or_default().push(n);
                        seen.total += 1;
                    }
                }
                if nack {
                    d.nack(Some(Duration::ZERO)).await.unwrap();
                } else {
                    d.ack().await.unwrap();
                }
            }
            c.close().await.unwrap();
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("consumers finish")
            .unwrap();
    }
    let want: Vec<usize> = (0..PER_KEY).collect();
    for (key, order) in &seen.lock().unwrap().acked {
        assert_eq!(*order, want, "key {key}");
    }
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn a_held_delivery_comes_back_after_the_connection_closes_and_acked_ones_do_not() {
    let Some(ferry) = connect().await else { return };
    let name = queue(&ferry, "reconnect", |q| {
        q.delivery.lease = Duration::from_millis(500)
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    let acked = publisher.send(Message::new("acked")).await.unwrap();
    let held = publisher.send(Message::new("held")).await.unwrap();
    let mut c = consumer(&ferry, Source::queue(&name), 1).await;
    let d = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.id, acked);
    d.ack().await.unwrap();
    let d = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.id, held);
    ferry.close().await.unwrap();
    assert!(matches!(d.ack().await, Err(Error::Closed)));

    let ferry = connect().await.unwrap();
    let mut c = consumer(&ferry, Source::queue(&name), 1).await;
    let d = c
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((d.id.as_str(), d.attempt), (held.as_str(), 2));
    d.ack().await.unwrap();
    assert!(
        c.next_within(Duration::from_millis(700))
            .await
            .unwrap()
            .is_none()
    );
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test]
async fn consumers_and_publishers_recover_when_the_server_drops_their_connections() {
    let Some(ferry) = connect().await else { return };
    drop(ferry);
    // Our own connections only, told apart by their application name.
    let app = format!("ferry-test-{:08x}", fastrand::u32(..));
    let base = std::env::var("FERRY_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let sep = if base.contains('?') { '&' } else { '?' };
    let ferry = Ferry::connect(&format!("{base}{sep}application_name={app}"))
        .await
        .unwrap();
    let name = queue(&ferry, "dropped", |_| {}).await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher.send(Message::new("before")).await.unwrap();
    let mut c = consumer(&ferry, Source::queue(&name), 1).await;
    assert_eq!(payloads(&mut c, 1).await, ["before"]);

    let admin = sqlx::PgPool::connect(&base).await.unwrap();
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1) t",
    )
    .bind(&app)
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(killed >= 2, "killed {killed} connections");
    admin.close().await;

    // The pool replaces dropped connections; a publish may need one retry at most.
    let mut sent = false;
    for _ in 0..3 {
        match publisher.send(Message::new("after")).await {
            Ok(_) => {
                sent = true;
                break;
            }
            Err(e) => assert!(e.is_transient(), "{e}"),
        }
    }
    assert!(
        sent,
        "no publish went through after the connections dropped"
    );
    assert_eq!(payloads(&mut c, 1).await, ["after"]);
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

/// A database of the test's own (nothing else writes there), with a statement-level
/// trigger that records how many rows each `DELETE` on the messages table removed; dropped
/// by [`CountedDeletes::drop_database`].
struct CountedDeletes {
    admin: sqlx::PgPool,
    counter: sqlx::PgPool,
    database: String,
    url: String,
}

impl CountedDeletes {
    async fn create(base: &str, ferry_url: impl FnOnce(&str) -> String) -> CountedDeletes {
        let admin = sqlx::PgPool::connect(base).await.unwrap();
        let database = ferry_testkit::fresh_ident("pgt", "deletes").to_lowercase();
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&admin)
            .await
            .unwrap();
        let (server, _) = base.rsplit_once('/').expect("a database in the URL");
        let url = ferry_url(&format!("{server}/{database}"));
        // The transport makes the schema; the trigger goes on its table afterwards.
        Ferry::connect(&url).await.unwrap().close().await.unwrap();
        let counter = sqlx::PgPool::connect(&url).await.unwrap();
        for statement in [
            "CREATE TABLE public.deletes (id serial PRIMARY KEY, rows int8 NOT NULL)",
            "CREATE FUNCTION public.count_deletes() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN INSERT INTO public.deletes (rows) SELECT count(*) FROM gone; RETURN NULL; END $$",
            "CREATE TRIGGER count_deletes AFTER DELETE ON ferry.messages \
             REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.count_deletes()",
        ] {
            sqlx::query(statement).execute(&counter).await.unwrap();
        }
        CountedDeletes {
            admin,
            counter,
            database,
            url,
        }
    }

    /// The rows each DELETE statement so far removed, in order.
    async fn deletes(&self) -> Vec<i64> {
        sqlx::query_scalar("SELECT rows FROM public.deletes ORDER BY id")
            .fetch_all(&self.counter)
            .await
            .unwrap()
    }

    async fn drop_database(self) {
        self.counter.close().await;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.database
        ))
        .execute(&self.admin)
        .await
        .unwrap();
        self.admin.close().await;
    }
}

#[tokio::test]
async fn acks_that_arrive_together_are_one_delete_and_a_stale_one_is_still_refused() {
    let Some(base) = ferry_testkit::url_or_skip("PostgreSQL", "FERRY_POSTGRES_URL", DEFAULT_URL)
    else {
        return;
    };
    let counted = CountedDeletes::create(&base, str::to_owned).await;
    let ferry = Ferry::connect(&counted.url).await.unwrap();
    let name = queue(&ferry, "batched-acks", |q| {
        q.delivery.lease = Duration::from_secs(1)
    })
    .await;
    let messages = (0..40).map(|i| Message::new(format!("{i}"))).collect();
    ferry
        .publisher(Destination::queue(&name))
        .send_batch(messages)
        .await
        .unwrap();
    // One consumer takes all 40, lets their leases run out, and takes them again: it holds
    // 40 stale deliveries and 40 current ones of the same rows.
    let mut c = consumer(&ferry, Source::queue(&name), 40).await;
    let mut held = Vec::new();
    while held.len() < 80 {
        let d = c
            .next_within(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("every message, then each again once its lease ended");
        assert_eq!(d.attempt, if held.len() < 40 { 1 } else { 2 });
        held.push(d);
    }
    let before = counted.deletes().await.len();

    // All 80 acks at once. On this single-threaded test runtime every one of them is queued
    // before the first gets to the database.
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
    assert_eq!(refused, 40, "every stale ack is refused");
    let deletes = counted.deletes().await.split_off(before);
    assert_eq!(deletes.iter().sum::<i64>(), 40, "{deletes:?}");
    assert!(
        deletes.len() <= 2,
        "80 acks at once took {} DELETE statements",
        deletes.len()
    );
    nothing_left(&ferry, &name).await;
    ferry.close().await.unwrap();
    counted.drop_database().await;
}

/// The queue is empty: nothing acked comes back.
async fn nothing_left(ferry: &Ferry, name: &str) {
    let mut c = consumer(ferry, Source::queue(name), 8).await;
    if let Some(d) = c.next_within(Duration::from_millis(500)).await.unwrap() {
        panic!("{} came back after its ack", d.id);
    }
}
