//! NATS JetStream behaviour the conformance suite does not cover: the SDK's emulations on
//! top of JetStream 2.9 (dead-lettering past MaxDeliver, delays, long extensions), name and
//! header mapping, and errors. Runs against `FERRY_NATS_URL` (else nats://127.0.0.1:4222);
//! skips loudly when nothing answers there, outside CI.
#![cfg(feature = "nats")]

use std::time::{Duration, Instant};

use ferry::message::reason;
use ferry::{
    Consumer, ConsumerOptions, Delivery, Destination, Error, Ferry, Message, QueueDecl, Source,
    SubscriptionDecl, TopicDecl,
};
use ferry_testkit::fresh;

const WAIT: Duration = Duration::from_secs(10);

async fn connect() -> Option<Ferry> {
    let url =
        ferry_testkit::url_or_skip("NATS JetStream", "FERRY_NATS_URL", "nats://127.0.0.1:4222")?;
    Some(Ferry::connect(&url).await.expect("connect"))
}

fn quick(name: &str) -> QueueDecl {
    let mut decl = QueueDecl::new(name);
    decl.delivery.backoff.base = Duration::from_millis(50);
    decl.delivery.backoff.cap = Duration::from_millis(100);
    decl.delivery.backoff.jitter = 0.0;
    decl
}

async fn consumer(ferry: &Ferry, source: Source) -> Consumer {
    let options = ConsumerOptions {
        prefetch: 4,
        poll: Duration::from_millis(200),
        ..ConsumerOptions::default()
    };
    ferry.consumer(source, options).await.expect("consumer")
}

async fn next(c: &mut Consumer, within: Duration) -> Delivery {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(d) = c
            .next_within(Duration::from_millis(300))
            .await
            .expect("receive")
        {
            return d;
        }
    }
    panic!("no delivery from {} within {within:?}", c.source());
}

async fn none_within(c: &mut Consumer, window: Duration) {
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        if let Some(d) = c
            .next_within(Duration::from_millis(200))
            .await
            .expect("receive")
        {
            panic!("unexpected delivery {} (attempt {})", d.id, d.attempt);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_delivery_whose_lease_ran_out_is_dead_lettered_not_stranded() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "lease-last");
    let mut decl = quick(&name);
    decl.delivery.max_deliveries = 2;
    decl.delivery.lease = Duration::from_secs(1);
    ferry.declare_queue(&decl).await.unwrap();
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("slow"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    // Two deliveries whose leases run out: the engine offers a third (MaxDeliver is
    // unlimited) and the SDK dead-letters it instead of handing it over.
    for attempt in 1..=2 {
        let d = next(&mut c, WAIT).await;
        assert_eq!(d.attempt, attempt);
        drop(d);
    }
    none_within(&mut c, Duration::from_millis(2500)).await;
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let d = next(&mut dlq, WAIT).await;
    assert_eq!(d.id, id);
    let info = d.dead_letter.clone().expect("metadata");
    assert_eq!(info.reason, reason::MAX_DELIVERIES);
    assert_eq!(info.deliveries, 2);
    assert_eq!(info.origin, name);
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

/// The engine's own view of a queue's streams, to take its dead-letter stream away.
async fn jetstream() -> async_nats::jetstream::Context {
    let url = std::env::var("FERRY_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    async_nats::jetstream::new(async_nats::connect(&url).await.expect("connect to NATS"))
}

/// A Ferry name as the transport escapes it into stream names (`_` → `__`, `.` → `_d`).
fn escaped(name: &str) -> String {
    name.replace('_', "__").replace('.', "_d")
}

/// Deliveries the engine made from a queue's shared consumer, redeliveries included.
async fn deliveries_made(js: &async_nats::jetstream::Context, queue: &str) -> u64 {
    js.get_stream(format!("ferry_q_{}", escaped(queue)))
        .await
        .expect("the queue's stream")
        .consumer_info("ferry")
        .await
        .expect("the queue's consumer")
        .delivered
        .consumer_sequence
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_that_cannot_be_written_is_retried_until_it_is_never_stranded() {
    let Some(ferry) = connect().await else { return };
    let js = jetstream().await;
    let name = fresh("nt", "dlq-down");
    let mut decl = quick(&name);
    decl.delivery.max_deliveries = 1;
    decl.delivery.lease = Duration::from_secs(1);
    ferry.declare_queue(&decl).await.unwrap();
    // The dead-letter stream goes away: every republish into it fails.
    js.delete_stream(format!("ferry_qdlq_{}", escaped(&name)))
        .await
        .expect("delete the dead-letter stream");
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("poison"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, WAIT).await;
    assert_eq!((d.id.as_str(), d.attempt), (id.as_str(), 1));
    let err = d.nack_with_error(None, "boom").await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    // The engine offers it again (its deliveries are used up, so the SDK tries the dead
    // letter once more instead of handing it over, and fails again) — wait for that
    // redelivery to be fetched, with a deadline far beyond the 1 s lease and retry.
    let deadline = Instant::now() + Duration::from_secs(30);
    while deliveries_made(&js, &name).await < 2 && Instant::now() < deadline {
        if let Some(d) = c
            .next_within(Duration::from_millis(300))
            .await
            .expect("receive")
        {
            panic!(
                "a delivery past max_deliveries was handed over: attempt {}",
                d.attempt
            );
        }
    }
    assert!(
        deliveries_made(&js, &name).await >= 2,
        "the engine never offered the message again"
    );
    // The dead-letter stream comes back; the next time the message is offered it dies.
    ferry.declare_queue(&decl).await.unwrap();
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let dead = loop {
        assert!(
            Instant::now() < deadline,
            "stranded: neither delivered nor dead-lettered 30 s after the dead-letter stream came back"
        );
        if let Some(d) = c
            .next_within(Duration::from_millis(300))
            .await
            .expect("receive")
        {
            panic!(
                "a delivery past max_deliveries was handed over: attempt {}",
                d.attempt
            );
        }
        if let Some(d) = dlq
            .next_within(Duration::from_millis(300))
            .await
            .expect("receive")
        {
            break d;
        }
    };
    assert_eq!(dead.id, id);
    let info = dead.dead_letter.clone().expect("metadata");
    assert_eq!(info.reason, reason::MAX_DELIVERIES);
    assert_eq!(info.deliveries, 1);
    assert_eq!(info.origin, name);
    dead.ack().await.unwrap();
    // Dead-lettered once, and gone from the queue.
    none_within(&mut dlq, Duration::from_millis(600)).await;
    none_within(&mut c, Duration::from_millis(2500)).await;
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

/// Queues declared when MaxDeliver was bounded (max_deliveries + 1) would strand a failed
/// dead letter; declaring them again lifts the bound in place, keeping what they hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaring_again_lifts_an_earlier_bound_on_deliveries() {
    use async_nats::jetstream::consumer::pull;

    let Some(ferry) = connect().await else { return };
    let js = jetstream().await;
    let name = fresh("nt", "max-deliver");
    let decl = quick(&name);
    ferry.declare_queue(&decl).await.unwrap();
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("kept"))
        .await
        .unwrap();
    let stream = js
        .get_stream(format!("ferry_q_{}", escaped(&name)))
        .await
        .unwrap();
    let max_deliver = |stream: async_nats::jetstream::stream::Stream| async move {
        stream
            .consumer_info("ferry")
            .await
            .unwrap()
            .config
            .max_deliver
    };
    // As an earlier version left it.
    let mut bounded = stream.consumer_info("ferry").await.unwrap().config;
    bounded.max_deliver = i64::from(decl.delivery.max_deliveries) + 1;
    stream
        .create_consumer(pull::Config {
            durable_name: bounded.durable_name.clone(),
            ack_policy: bounded.ack_policy,
            ack_wait: bounded.ack_wait,
            max_deliver: bounded.max_deliver,
            max_ack_pending: bounded.max_ack_pending,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(max_deliver(stream.clone()).await, 6);
    ferry.declare_queue(&decl).await.unwrap();
    assert_eq!(max_deliver(stream).await, -1, "the bound is still there");
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, WAIT).await;
    assert_eq!(d.id, id);
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_starts_at_attempt_one_and_counts_from_there() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "delay-attempts");
    ferry.declare_queue(&quick(&name)).await.unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let start = Instant::now();
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(
            Message::new("later")
                .with_key("k1")
                .with_header("x-a", "1")
                .with_delay(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let d = next(&mut c, WAIT).await;
    assert!(start.elapsed() >= Duration::from_secs(1), "early");
    assert_eq!(d.id, id);
    assert_eq!(
        d.attempt, 1,
        "waiting for the delay must not count as attempts"
    );
    assert_eq!(d.key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(d.header("x-a"), Some("1"));
    assert!(
        d.age() >= Duration::from_secs(1),
        "published_at is the publish, not the move"
    );
    d.nack(Some(Duration::ZERO)).await.unwrap();
    let d = next(&mut c, WAIT).await;
    assert_eq!(d.attempt, 2);
    d.ack().await.unwrap();
    none_within(&mut c, Duration::from_millis(600)).await;
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sooner_delay_is_not_stuck_behind_a_backlog_of_later_ones() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "delay-backlog");
    ferry.declare_queue(&quick(&name)).await.unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    // More far-off messages than the mover looks at in one pass.
    let later = (0..600)
        .map(|i| Message::new(format!("later {i}")).with_delay(Duration::from_secs(30)))
        .collect();
    publisher.send_batch(later).await.unwrap();
    let start = Instant::now();
    let soon = publisher
        .send(Message::new("soon").with_delay(Duration::from_secs(1)))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, WAIT).await;
    let waited = start.elapsed();
    assert_eq!(d.id, soon);
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(4)).contains(&waited),
        "a 1 s delay came after {waited:?}"
    );
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_beyond_max_delay_and_on_topics_are_refused() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "delay-limits");
    let mut decl = quick(&name);
    decl.delivery.max_delay = Duration::from_secs(5);
    ferry.declare_queue(&decl).await.unwrap();
    let err = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("x").with_delay(Duration::from_secs(6)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let topic = fresh("nt", "delay-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let err = ferry
        .publisher(Destination::topic(&topic))
        .send(Message::new("x").with_delay(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.delete_topic(&topic).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_longer_than_the_lease_holds_then_ends() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "long-extend");
    let mut decl = quick(&name);
    decl.delivery.lease = Duration::from_secs(1);
    ferry.declare_queue(&decl).await.unwrap();
    ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("job"))
        .await
        .unwrap();
    let mut first = consumer(&ferry, Source::queue(&name)).await;
    let mut second = consumer(&ferry, Source::queue(&name)).await;
    let held = next(&mut first, WAIT).await;
    let extended_at = Instant::now();
    held.extend(Duration::from_secs(3)).await.unwrap();
    none_within(&mut second, Duration::from_millis(2800)).await;
    // The extension covers 3 s and no more: then the lease runs out as usual.
    let d = next(&mut second, WAIT).await;
    let waited = extended_at.elapsed();
    assert!(waited >= Duration::from_secs(3), "back after {waited:?}");
    assert!(waited < Duration::from_secs(6), "held for {waited:?}");
    assert_eq!(d.attempt, 2);
    d.ack().await.unwrap();
    drop(held);
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_ack_after_the_lease_moved_on_is_not_held_and_quick() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "late-ack");
    let mut decl = quick(&name);
    decl.delivery.lease = Duration::from_secs(1);
    ferry.declare_queue(&decl).await.unwrap();
    ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("job"))
        .await
        .unwrap();
    let mut first = consumer(&ferry, Source::queue(&name)).await;
    let mut second = consumer(&ferry, Source::queue(&name)).await;
    let held = next(&mut first, WAIT).await;
    let d = next(&mut second, WAIT).await;
    d.ack().await.unwrap();
    let started = Instant::now();
    match held.ack().await {
        Ok(()) | Err(Error::NotHeld { .. }) => {}
        Err(e) => panic!("late ack answered {e}"),
    }
    eprintln!("late ack took {:?}", started.elapsed());
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redeclaring_is_idempotent_and_other_settings_conflict() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "redeclare");
    ferry.declare_queue(&quick(&name)).await.unwrap();
    ferry.declare_queue(&quick(&name)).await.unwrap();
    let mut other = quick(&name);
    other.delivery.max_deliveries = 9;
    let err = ferry.declare_queue(&other).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");

    let topic = fresh("nt", "redeclare-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let sub = SubscriptionDecl::new(&topic, format!("{topic}-s"));
    ferry.declare_subscription(&sub).await.unwrap();
    ferry.declare_subscription(&sub).await.unwrap();
    let mut changed = sub.clone();
    changed.delivery.lease = Duration::from_secs(7);
    let err = ferry.declare_subscription(&changed).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    let err = ferry
        .declare_subscription(&SubscriptionDecl::new(fresh("nt", "no-topic"), "s"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let mut partitioned = TopicDecl::new(&topic);
    partitioned.partitions = 4;
    let err = ferry.declare_topic(&partitioned).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");

    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry
        .delete(&Source::subscription(&topic, &sub.name))
        .await
        .unwrap();
    ferry.delete_topic(&topic).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_things_are_not_found() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "absent");
    for source in [
        Source::queue(&name),
        Source::subscription(&name, "s"),
        Source::queue(&name).dead_letters(),
    ] {
        let err = ferry.delete(&source).await.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{source}: {err}");
        match ferry.consumer(source.clone(), Default::default()).await {
            Err(Error::NotFound { .. }) => {}
            Err(e) => panic!("{source}: {e}"),
            Ok(_) => panic!("{source} can be consumed"),
        }
    }
    let err = ferry.delete_topic(&name).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let err = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_publishes_until_one_is_acked() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "full");
    ferry
        .declare_queue(&quick(&name).max_length(2))
        .await
        .unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher.send(Message::new("1")).await.unwrap();
    publisher.send(Message::new("2")).await.unwrap();
    let err = publisher.send(Message::new("3")).await.unwrap_err();
    assert!(matches!(err, Error::Full { .. }), "{err}");
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    next(&mut c, WAIT).await.ack().await.unwrap();
    publisher.send(Message::new("3")).await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_id_is_stored_once_and_dotted_names_work() {
    let Some(ferry) = connect().await else { return };
    // Dots and underscores are escaped in stream names; these two must not collide.
    let a = format!("{}.a_b", fresh("nt", "dedup"));
    let b = a.replace(".a_b", "_a.b");
    for name in [&a, &b] {
        ferry
            .declare_queue(&quick(name).dedup_window(Duration::from_secs(60)))
            .await
            .unwrap();
    }
    let publisher = ferry.publisher(Destination::queue(&a));
    let id = ferry::message::new_id();
    for _ in 0..2 {
        publisher
            .send(Message::new("once").with_id(&id))
            .await
            .unwrap();
    }
    let mut c = consumer(&ferry, Source::queue(&a)).await;
    let d = next(&mut c, WAIT).await;
    assert_eq!(d.id, id);
    d.ack().await.unwrap();
    none_within(&mut c, Duration::from_millis(600)).await;
    let mut other = consumer(&ferry, Source::queue(&b)).await;
    none_within(&mut other, Duration::from_millis(300)).await;
    for name in [&a, &b] {
        ferry.delete(&Source::queue(name)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_dedup_window_a_repeated_id_is_stored_again() {
    // As on the Ferry broker: a redrive may republish a message under its id.
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "no-dedup");
    ferry.declare_queue(&quick(&name)).await.unwrap();
    let id = ferry::message::new_id();
    let publisher = ferry.publisher(Destination::queue(&name));
    for _ in 0..2 {
        publisher
            .send(Message::new("again").with_id(&id))
            .await
            .unwrap();
        // Past the shortest window the engine keeps (100 ms), which stands for none.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    for _ in 0..2 {
        let d = next(&mut c, WAIT).await;
        assert_eq!(d.id, id);
        d.ack().await.unwrap();
    }
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_close_calls_and_settlements_are_closed() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "closed");
    ferry.declare_queue(&quick(&name)).await.unwrap();
    ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("x"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, WAIT).await;
    ferry.close().await.unwrap();
    ferry.close().await.unwrap();
    assert!(matches!(d.ack().await, Err(Error::Closed)));
    assert!(matches!(
        c.next_within(Duration::from_millis(50)).await,
        Err(Error::Closed)
    ));
    let err = ferry.declare_queue(&quick(&name)).await.unwrap_err();
    assert!(matches!(err, Error::Closed), "{err}");
    let again = connect().await.unwrap();
    again.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_keys_round_trip_and_headers_nats_would_alter_are_invalid() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("nt", "codec");
    ferry.declare_queue(&quick(&name)).await.unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    for header in [("x", "two\nlines"), ("x", " padded"), ("Nats-Msg-Id", "m")] {
        let err = publisher
            .send(Message::new("x").with_header(header.0, header.1))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid { .. }), "{header:?}: {err}");
    }
    publisher
        .send(Message::new("bin").with_key(&b"\x00\xffkey"[..]))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let d = next(&mut c, WAIT).await;
    assert_eq!(d.key.as_deref(), Some(&b"\x00\xffkey"[..]));
    assert!(
        d.headers.is_empty(),
        "internal headers leaked: {:?}",
        d.headers
    );
    // A multi-line error survives the trip into the dead letter.
    d.reject("line 1\nline 2").await.unwrap();
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let d = next(&mut dlq, WAIT).await;
    let info = d.dead_letter.clone().unwrap();
    assert_eq!(info.reason, reason::REJECTED);
    assert_eq!(info.last_error.as_deref(), Some("line 1\nline 2"));
    assert_eq!(d.key.as_deref(), Some(&b"\x00\xffkey"[..]));
    d.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_dead_letters_into_its_own_queue_named_after_it() {
    let Some(ferry) = connect().await else { return };
    let topic = fresh("nt", "sub-dlq");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let mut decls = Vec::new();
    for s in ["a", "b"] {
        let mut decl = SubscriptionDecl::new(&topic, format!("{topic}-{s}"));
        decl.delivery.max_deliveries = 1;
        ferry.declare_subscription(&decl).await.unwrap();
        decls.push(decl);
    }
    let id = ferry
        .publisher(Destination::topic(&topic))
        .send(Message::new("event"))
        .await
        .unwrap();
    // `a` fails it once (its only delivery); `b` acks it.
    let a = Source::subscription(&topic, &decls[0].name);
    let b = Source::subscription(&topic, &decls[1].name);
    let mut ca = consumer(&ferry, a.clone()).await;
    next(&mut ca, WAIT)
        .await
        .nack_with_error(None, "boom")
        .await
        .unwrap();
    let mut cb = consumer(&ferry, b.clone()).await;
    next(&mut cb, WAIT).await.ack().await.unwrap();
    let mut dlq = consumer(&ferry, a.clone().dead_letters()).await;
    let d = next(&mut dlq, WAIT).await;
    assert_eq!(d.id, id);
    let info = d.dead_letter.clone().unwrap();
    assert_eq!(
        (info.reason.as_str(), info.deliveries, info.origin.as_str()),
        (reason::MAX_DELIVERIES, 1, decls[0].name.as_str())
    );
    d.ack().await.unwrap();
    let mut dlq_b = consumer(&ferry, b.clone().dead_letters()).await;
    none_within(&mut dlq_b, Duration::from_millis(300)).await;
    ferry.delete(&a).await.unwrap();
    // A topic with a subscription is refused, as on every transport.
    let refused = ferry.delete_topic(&topic).await;
    assert!(
        matches!(refused, Err(Error::Conflict { .. })),
        "{refused:?}"
    );
    ferry.delete(&b).await.unwrap();
    // Deleting the topic takes its subscriptions' remaining dead letters with it.
    ferry.delete_topic(&topic).await.unwrap();
    match ferry.consumer(b.dead_letters(), Default::default()).await {
        Err(Error::NotFound { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a deleted topic's subscription still has dead letters"),
    }
}
