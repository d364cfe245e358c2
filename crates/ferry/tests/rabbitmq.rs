//! The RabbitMQ transport's own cases, beyond the conformance suite: its emulations (leases,
//! delayed retries, dead-lettering by republish) at their edges, and how engine refusals
//! come back. Each test uses fresh names and deletes what it made.
#![cfg(feature = "amqp")]

use std::time::{Duration, Instant};

use ferry::message::reason;
use ferry::{
    Backoff, Consumer, ConsumerOptions, Delivery, DeliveryPolicy, Destination, Error, Ferry,
    Message, QueueDecl, Source, SubscriptionDecl, TopicDecl,
};
use ferry_testkit::fresh;

const WAIT: Duration = Duration::from_secs(10);

/// The RabbitMQ URL, or `None` (loudly) when nothing answers outside CI.
fn url() -> Option<String> {
    ferry_testkit::url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    )
}

fn quick() -> DeliveryPolicy {
    DeliveryPolicy {
        max_deliveries: 5,
        backoff: Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(200),
            multiplier: 2.0,
            jitter: 0.0,
        },
        ..DeliveryPolicy::default()
    }
}

async fn queue(ferry: &Ferry, what: &str, edit: impl FnOnce(&mut QueueDecl)) -> String {
    let mut decl = QueueDecl::new(fresh("rt", what)).delivery(quick());
    edit(&mut decl);
    ferry.declare_queue(&decl).await.unwrap();
    decl.name
}

async fn consumer(ferry: &Ferry, source: Source) -> Consumer {
    let options = ConsumerOptions {
        prefetch: 4,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    ferry.consumer(source, options).await.unwrap()
}

async fn next(c: &mut Consumer) -> Delivery {
    c.next_within(WAIT)
        .await
        .unwrap()
        .expect("a delivery within the wait")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaring_again_with_other_settings_is_a_conflict() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "conflict", |_| {}).await;
    let same = QueueDecl::new(&name).delivery(quick());
    ferry.declare_queue(&same).await.unwrap();
    // A setting only the SDK keeps (the lease), seen by another connection too.
    let other = Ferry::connect(&url).await.unwrap();
    let mut longer = same.clone();
    longer.delivery.lease = Duration::from_secs(99);
    let err = other.declare_queue(&longer).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    other.declare_queue(&same).await.unwrap();

    let topic = fresh("rt", "conflict-topic");
    let second = fresh("rt", "conflict-topic2");
    for t in [&topic, &second] {
        ferry.declare_topic(&TopicDecl::new(t)).await.unwrap();
    }
    let sub = SubscriptionDecl::new(&topic, fresh("rt", "conflict-sub")).delivery(quick());
    ferry.declare_subscription(&sub).await.unwrap();
    let moved = SubscriptionDecl::new(&second, &sub.name).delivery(quick());
    let err = ferry.declare_subscription(&moved).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    let mut partitioned = TopicDecl::new(fresh("rt", "partitioned"));
    partitioned.partitions = 3;
    let err = ferry.declare_topic(&partitioned).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    let missing = SubscriptionDecl::new(fresh("rt", "no-topic"), fresh("rt", "orphan"));
    let err = ferry.declare_subscription(&missing).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    ferry
        .delete(&Source::subscription(&topic, &sub.name))
        .await
        .unwrap();
    for t in [&topic, &second] {
        ferry.delete_topic(t).await.unwrap();
    }
    ferry.delete(&Source::queue(&name)).await.unwrap();
    let err = ferry.delete(&Source::queue(&name)).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let err = ferry.delete_topic(&topic).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    other.close().await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_keeps_rising_across_delayed_retries() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "retry-hop", |q| q.delivery.max_deliveries = 4).await;
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("again").with_key(&b"\xffk"[..]))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let mut nacked_at = Instant::now();
    let mut waited = Duration::ZERO;
    // A delayed retry (a republish that resets RabbitMQ's count), a plain requeue (counted
    // by RabbitMQ), then a delayed retry again.
    for (attempt, delay) in [(1, 300), (2, 0), (3, 300)] {
        let d = next(&mut c).await;
        assert!(nacked_at.elapsed() >= waited, "came back early");
        assert_eq!((d.id.as_str(), d.attempt), (id.as_str(), attempt));
        assert_eq!(d.key.as_deref(), Some(&b"\xffk"[..]), "the key survives");
        nacked_at = Instant::now();
        waited = Duration::from_millis(delay);
        d.nack(Some(Duration::from_millis(delay))).await.unwrap();
    }
    let d = next(&mut c).await;
    assert!(
        nacked_at.elapsed() >= Duration::from_millis(300),
        "came back early"
    );
    assert_eq!(d.attempt, 4);
    d.nack_with_error(None, "still broken").await.unwrap();
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let dead = next(&mut dlq).await;
    let info = dead.dead_letter.clone().unwrap();
    assert_eq!(info.reason, reason::MAX_DELIVERIES);
    assert_eq!(info.deliveries, 4);
    assert_eq!(info.last_error.as_deref(), Some("still broken"));
    assert_eq!(
        dead.attempt, 1,
        "a dead letter's own deliveries start again"
    );
    dead.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_dies_returns_its_deliveries_and_the_limit_still_holds() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "crash", |q| q.delivery.max_deliveries = 2).await;
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("crashes its consumer"))
        .await
        .unwrap();
    for attempt in 1..=2 {
        // A process that dies: its connection goes with the delivery unsettled.
        let doomed = Ferry::connect(&url).await.unwrap();
        let mut c = consumer(&doomed, Source::queue(&name)).await;
        let d = next(&mut c).await;
        assert_eq!((d.id.as_str(), d.attempt), (id.as_str(), attempt));
        doomed.close().await.unwrap();
        let err = d.ack().await.unwrap_err();
        assert!(matches!(err, Error::Closed), "{err}");
    }
    // Two deliveries used up without a settlement: it is dead-lettered, not delivered.
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    assert!(
        c.next_within(Duration::from_secs(1))
            .await
            .unwrap()
            .is_none()
    );
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    let dead = next(&mut dlq).await;
    assert_eq!(dead.id, id);
    let info = dead.dead_letter.clone().unwrap();
    assert_eq!(info.reason, reason::MAX_DELIVERIES);
    assert_eq!(info.origin, name);
    dead.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_cannot_be_settled_or_extended() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "lease-end", |q| {
        q.delivery.lease = Duration::from_millis(300)
    })
    .await;
    ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("slow"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let held = next(&mut c).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let err = held.extend(Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    let err = held.nack(None).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    let again = next(&mut c).await;
    assert_eq!(again.attempt, 2);
    again.ack().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_limits_come_back_as_sdk_errors() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "limits", |q| {
        q.max_length = Some(2);
        q.delivery.max_delay = Duration::from_secs(1);
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher
        .send_batch(vec![Message::new("1"), Message::new("2")])
        .await
        .unwrap();
    let err = publisher.send(Message::new("3")).await.unwrap_err();
    assert!(matches!(err, Error::Full { .. }), "{err}");
    let err = publisher
        .send(Message::new("late").with_delay(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let err = publisher
        .send(Message::new("x").with_header("x-death", "forged"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let err = ferry
        .publisher(Destination::queue(fresh("rt", "absent")))
        .send(Message::new("lost?"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let topic = fresh("rt", "delay-topic");
    ferry.declare_topic(&TopicDecl::new(&topic)).await.unwrap();
    let err = ferry
        .publisher(Destination::topic(&topic))
        .send(Message::new("later").with_delay(Duration::from_millis(10)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    ferry.delete_topic(&topic).await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    let single = queue(&ferry, "limit-one", |q| q.max_length = Some(1)).await;
    let publisher = ferry.publisher(Destination::queue(&single));
    publisher.send(Message::new("1")).await.unwrap();
    let err = publisher.send(Message::new("2")).await.unwrap_err();
    assert!(matches!(err, Error::Full { .. }), "{err}");
    ferry.delete(&Source::queue(&single)).await.unwrap();
    ferry.close().await.unwrap();

    let err = Ferry::connect("amqp://guest:guest@127.0.0.1:1/%2f")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err}");
    let err = Ferry::connect("amqp://guest:guest@127.0.0.1:notaport/%2f")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadUrl { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_message_is_dead_lettered_by_the_engine_with_its_reason() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    // One message with a TTL of its own, one with the queue's default.
    let name = queue(&ferry, "ttl", |q| {
        q.delivery.default_ttl = Some(Duration::from_millis(150))
    })
    .await;
    let publisher = ferry.publisher(Destination::queue(&name));
    let own = publisher
        .send(Message::new("stale").with_ttl(Duration::from_millis(100)))
        .await
        .unwrap();
    let default = publisher.send(Message::new("stale too")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    let mut dlq = consumer(&ferry, Source::queue(&name).dead_letters()).await;
    // RabbitMQ expires a message at the head of the queue, when it is next looked at.
    assert!(
        c.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    let mut died = Vec::new();
    for _ in 0..2 {
        let dead = next(&mut dlq).await;
        let info = dead.dead_letter.clone().unwrap();
        assert_eq!(info.reason, reason::EXPIRED);
        assert_eq!(info.origin, name);
        died.push(dead.id.clone());
        dead.ack().await.unwrap();
    }
    assert_eq!(died, [own, default]);
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_that_arrive_together_spare_a_delivery_still_held_and_all_count() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "bulk-acks", |q| {
        q.delivery.lease = Duration::from_secs(60)
    })
    .await;
    let messages = (0..10).map(|i| Message::new(format!("{i}"))).collect();
    ferry
        .publisher(Destination::queue(&name))
        .send_batch(messages)
        .await
        .unwrap();
    let options = ConsumerOptions {
        prefetch: 10,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    let mut c = ferry.consumer(Source::queue(&name), options).await.unwrap();

    let mut held = Vec::new();
    while held.len() < 10 {
        held.push(next(&mut c).await);
    }
    // Every ack but the fourth's, all at once: those below it can go as one `multiple`
    // ack, which must not take the fourth with it.
    let kept = held.remove(3);
    let mut acks = tokio::task::JoinSet::new();
    for d in held {
        acks.spawn(d.ack());
    }
    while let Some(acked) = acks.join_next().await {
        acked.unwrap().unwrap();
    }
    // Still held: a nack of it works (an already acked tag would close the channel) and
    // it comes back, counted.
    let id = kept.id.clone();
    kept.nack(Some(Duration::ZERO)).await.unwrap();
    let again = next(&mut c).await;
    assert_eq!((again.id.as_str(), again.attempt), (id.as_str(), 2));
    again.ack().await.unwrap();
    if let Some(d) = c.next_within(Duration::from_millis(500)).await.unwrap() {
        panic!("{} came back after its ack", d.id);
    }
    c.close().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stopped_fetching_holds_back_nothing_published_later() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "idle-holds-none", |_| {}).await;
    let options = || ConsumerOptions {
        prefetch: 16,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    let mut idle = ferry
        .consumer(Source::queue(&name), options())
        .await
        .unwrap();
    let mut busy = ferry
        .consumer(Source::queue(&name), options())
        .await
        .unwrap();
    // Both have subscribed; then the first stops asking.
    assert!(
        idle.next_within(Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        busy.next_within(Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    let sent = ferry
        .publisher(Destination::queue(&name))
        .send_batch((0..40).map(|i| Message::new(format!("{i}"))).collect())
        .await
        .unwrap();
    let started = Instant::now();
    let mut got = std::collections::HashSet::new();
    while got.len() < sent.len() && started.elapsed() < Duration::from_secs(3) {
        if let Some(d) = busy.next_within(Duration::from_millis(100)).await.unwrap() {
            // None was pushed into the consumer that is not asking.
            assert_eq!(d.attempt, 1, "{} was delivered before", d.id);
            got.insert(d.id.clone());
            d.ack().await.unwrap();
        }
    }
    assert_eq!(
        got.len(),
        sent.len(),
        "the fetching consumer got {} of {} within {:?}",
        got.len(),
        sent.len(),
        started.elapsed()
    );
    assert!(
        idle.next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    idle.close().await.unwrap();
    busy.close().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_lost_while_subscriptions_come_and_go_under_a_steady_stream() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    // Sessions that end send back what they had not handed out, counted as deliveries.
    let name = queue(&ferry, "churn", |q| q.delivery.max_deliveries = 1000).await;
    let publisher = {
        let publisher = ferry.publisher(Destination::queue(&name));
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for round in 0..40 {
                let batch = (0..10)
                    .map(|i| Message::new(format!("{round}.{i}")))
                    .collect();
                ids.extend(publisher.send_batch(batch).await.unwrap());
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            ids
        })
    };
    // Two consumers that keep pausing longer than a session outlives its last fetch, so
    // their subscriptions are cancelled and opened again while messages keep coming.
    let churn = |mut c: Consumer| {
        tokio::spawn(async move {
            let mut got = Vec::new();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(2) {
                while let Some(d) = c.next_within(Duration::from_millis(30)).await.unwrap() {
                    got.push(d.id.clone());
                    d.ack().await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            c.close().await.unwrap();
            got
        })
    };
    let options = || ConsumerOptions {
        prefetch: 32,
        poll: Duration::from_millis(30),
        ..ConsumerOptions::default()
    };
    let first = churn(
        ferry
            .consumer(Source::queue(&name), options())
            .await
            .unwrap(),
    );
    let second = churn(
        ferry
            .consumer(Source::queue(&name), options())
            .await
            .unwrap(),
    );
    let sent = publisher.await.unwrap();
    let mut got = first.await.unwrap();
    got.extend(second.await.unwrap());
    // What is left reaches a consumer that keeps asking, promptly: nothing is held by a
    // subscription that was cancelled.
    let mut rest = ferry
        .consumer(Source::queue(&name), options())
        .await
        .unwrap();
    let started = Instant::now();
    let all: std::collections::HashSet<String> = sent.iter().cloned().collect();
    let mut seen: std::collections::HashSet<String> = got.iter().cloned().collect();
    assert_eq!(seen.len(), got.len(), "an acked message came back");
    while seen.len() < all.len() && started.elapsed() < Duration::from_secs(5) {
        if let Some(d) = rest.next_within(Duration::from_millis(100)).await.unwrap() {
            assert!(
                seen.insert(d.id.clone()),
                "{} came back after its ack",
                d.id
            );
            d.ack().await.unwrap();
        }
    }
    assert_eq!(seen, all, "missing after {:?}", started.elapsed());
    rest.close().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_in_flight_when_a_consumer_closes_reach_the_next_one() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "in-flight", |q| q.delivery.max_deliveries = 1000).await;
    let publisher = ferry.publisher(Destination::queue(&name));
    let mut all = std::collections::HashSet::new();
    for round in 0..10 {
        let batch = (0..200)
            .map(|i| Message::new(format!("{round}.{i}")))
            .collect();
        all.extend(publisher.send_batch(batch).await.unwrap());
    }
    let options = || ConsumerOptions {
        prefetch: 200,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    let mut seen = std::collections::HashSet::new();
    // Each consumer closes as soon as its first deliveries came, while RabbitMQ is still
    // pushing the rest of its prefetch: some of those can arrive after the cancel is
    // confirmed, for a subscription the client no longer knows. Then one consumer drains
    // the rest, acking quickly: its subscription ends while it works through what it
    // fetched, and the channel closes after its last acks, which must hold.
    for _ in 0..40 {
        let mut c = ferry
            .consumer(Source::queue(&name), options())
            .await
            .unwrap();
        let d = c.next_within(WAIT).await.unwrap().expect("a delivery");
        assert!(
            seen.insert(d.id.clone()),
            "{} came back after its ack",
            d.id
        );
        d.ack().await.unwrap();
        c.close().await.unwrap();
    }
    let mut rest = ferry
        .consumer(Source::queue(&name), options())
        .await
        .unwrap();
    let started = Instant::now();
    while seen.len() < all.len() && started.elapsed() < Duration::from_secs(5) {
        if let Some(d) = rest.next_within(Duration::from_millis(100)).await.unwrap() {
            assert!(
                seen.insert(d.id.clone()),
                "{} came back after its ack",
                d.id
            );
            d.ack().await.unwrap();
        }
    }
    assert_eq!(
        all.len() - seen.len(),
        0,
        "missing after {:?}",
        started.elapsed()
    );
    rest.close().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_busy_with_what_they_fetched_send_nothing_back() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    // Two deliveries: a message sent back unseen once would use up half of them.
    let name = queue(&ferry, "busy", |q| q.delivery.max_deliveries = 2).await;
    let sent = ferry
        .publisher(Destination::queue(&name))
        .send_batch((0..40).map(|i| Message::new(format!("{i}"))).collect())
        .await
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let options = ConsumerOptions {
            prefetch: 4,
            poll: Duration::from_millis(100),
            ..ConsumerOptions::default()
        };
        let mut c = ferry.consumer(Source::queue(&name), options).await.unwrap();
        let done = done.clone();
        let total = sent.len();
        // Each message takes longer than a session outlives a fetch or a settlement with
        // nothing held: what RabbitMQ pushes meanwhile waits for the next fetch.
        workers.push(tokio::spawn(async move {
            let mut attempts = Vec::new();
            let started = Instant::now();
            while done.load(std::sync::atomic::Ordering::SeqCst) < total
                && started.elapsed() < Duration::from_secs(20)
            {
                if let Some(d) = c.next_within(Duration::from_millis(100)).await.unwrap() {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    attempts.push((d.id.clone(), d.attempt));
                    d.ack().await.unwrap();
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            c.close().await.unwrap();
            attempts
        }));
    }
    let mut got = std::collections::HashSet::new();
    for worker in workers {
        for (id, attempt) in worker.await.unwrap() {
            assert_eq!(attempt, 1, "{id} was sent back unseen");
            assert!(got.insert(id.clone()), "{id} came back after its ack");
        }
    }
    assert_eq!(got.len(), sent.len());
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_that_does_not_wait_still_takes_what_is_ready() {
    let Some(url) = url() else { return };
    let ferry = Ferry::connect(&url).await.unwrap();
    let name = queue(&ferry, "no-wait", |_| {}).await;
    ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("ready"))
        .await
        .unwrap();
    let mut c = consumer(&ferry, Source::queue(&name)).await;
    // The first fetch opens the subscription: what is ready is pushed a moment later.
    let got = c
        .next_within(Duration::ZERO)
        .await
        .unwrap()
        .expect("the ready message, without waiting");
    assert_eq!(&got.payload[..], b"ready");
    got.ack().await.unwrap();
    c.close().await.unwrap();
    ferry.delete(&Source::queue(&name)).await.unwrap();
    ferry.close().await.unwrap();
}
