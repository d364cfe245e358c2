//! The dedup stores (memory and Redis) under redeliveries, concurrent duplicates and failing
//! handlers: each message's effect happens once. Messages come from the embedded broker;
//! the Redis store runs against `FERRY_REDIS_URL` (default: the machine's Redis) under a
//! key prefix unique to the run (every key expires within a minute), skipping loudly when
//! nothing answers, and failing instead under `CI=true`.

mod inbox_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferry::inbox::{Claim, DedupStore, MemoryDedupStore};
use ferry::{Delivery, Destination, Message};
use inbox_support::{assert_drained, broker, consumer, next, queue};

const HOLD: Duration = Duration::from_secs(30);
const WINDOW: Duration = Duration::from_secs(60);

/// What the test's handler does with the claim it got.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// The effect, the record, and an ack.
    Succeed,
    /// The effect and the record, but the ack is lost: the message comes back.
    LoseTheAck,
    /// The handler fails before its effect: the claim is dropped and the message nacked.
    Fail,
}

/// Handles `delivery` once, deduplicated on `key`; returns the claim it found.
async fn handle(
    store: &dyn DedupStore,
    delivery: Delivery,
    key: &str,
    effects: &AtomicU32,
    then: Then,
) -> Claim {
    let claim = store.begin(key, HOLD).await.unwrap();
    match claim {
        Claim::Fresh if then == Then::Fail => {
            store.abandon(key).await.unwrap();
            delivery.nack(Some(Duration::ZERO)).await.unwrap();
        }
        Claim::Fresh => {
            effects.fetch_add(1, Ordering::SeqCst);
            // Give a concurrent duplicate time to find the claim.
            tokio::time::sleep(Duration::from_millis(50)).await;
            store.complete(key, WINDOW).await.unwrap();
            settle(delivery, then).await;
        }
        Claim::Done => settle(delivery, then).await,
        Claim::InProgress => delivery
            .nack(Some(Duration::from_millis(100)))
            .await
            .unwrap(),
    }
    claim
}

async fn settle(delivery: Delivery, then: Then) {
    if then == Then::LoseTheAck {
        delivery.nack(Some(Duration::ZERO)).await.unwrap();
    } else {
        delivery.ack().await.unwrap();
    }
}

async fn redelivered_ten_times_one_effect(store: Arc<dyn DedupStore>) {
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "redelivered").await;
    ferry
        .publisher(Destination::queue(&queue))
        .send(Message::new("email the receipt"))
        .await
        .unwrap();
    let mut consumer = consumer(&ferry, &queue).await;
    let effects = AtomicU32::new(0);
    let mut claims = Vec::new();
    for attempt in 1..=10 {
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.attempt, attempt);
        let then = if attempt < 10 {
            Then::LoseTheAck
        } else {
            Then::Succeed
        };
        let key = delivery.id.clone();
        claims.push(handle(&*store, delivery, &key, &effects, then).await);
    }
    assert_eq!(claims[0], Claim::Fresh);
    assert!(claims[1..].iter().all(|c| *c == Claim::Done), "{claims:?}");
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    assert_drained(&mut consumer).await;
}

async fn concurrent_duplicates_one_effect(store: Arc<dyn DedupStore>) {
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "concurrent").await;
    let publisher = ferry.publisher(Destination::queue(&queue));
    let business_key = format!("order-{}:reserve", ferry::message::new_id());
    for _ in 0..2 {
        publisher.send(Message::new("reserve")).await.unwrap();
    }
    let (mut first, mut second) = (
        consumer(&ferry, &queue).await,
        consumer(&ferry, &queue).await,
    );
    let (a, b) = (next(&mut first).await, next(&mut second).await);
    let effects = AtomicU32::new(0);
    let (x, y) = tokio::join!(
        handle(&*store, a, &business_key, &effects, Then::Succeed),
        handle(&*store, b, &business_key, &effects, Then::Succeed)
    );
    let mut claims = [x, y];
    claims.sort_by_key(|c| *c as u8);
    assert_eq!(claims, [Claim::Fresh, Claim::InProgress]);
    // The one left for later comes back after the first finished, and is skipped.
    let (mut again, mut from) = (None, None);
    for consumer in [&mut first, &mut second] {
        if let Some(d) = consumer
            .next_within(Duration::from_millis(500))
            .await
            .unwrap()
        {
            from = Some(consumer.name().to_owned());
            again = Some(d);
            break;
        }
    }
    let again = again.expect("the nacked duplicate comes back");
    assert_eq!(again.attempt, 2, "from {from:?}");
    let claim = handle(&*store, again, &business_key, &effects, Then::Succeed).await;
    assert_eq!(claim, Claim::Done);
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    assert_drained(&mut first).await;
    assert_drained(&mut second).await;
}

async fn failing_handler_leaves_it_to_the_redelivery(store: Arc<dyn DedupStore>) {
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "failing").await;
    ferry
        .publisher(Destination::queue(&queue))
        .send(Message::new("charge"))
        .await
        .unwrap();
    let mut consumer = consumer(&ferry, &queue).await;
    let effects = AtomicU32::new(0);
    let delivery = next(&mut consumer).await;
    let key = delivery.id.clone();
    let claim = handle(&*store, delivery, &key, &effects, Then::Fail).await;
    assert_eq!((claim, effects.load(Ordering::SeqCst)), (Claim::Fresh, 0));
    let delivery = next(&mut consumer).await;
    assert_eq!(delivery.attempt, 2);
    // Abandoned, not in progress: the redelivery runs at once.
    let claim = handle(&*store, delivery, &key, &effects, Then::Succeed).await;
    assert_eq!((claim, effects.load(Ordering::SeqCst)), (Claim::Fresh, 1));
    assert_drained(&mut consumer).await;
}

#[tokio::test]
async fn memory_store_a_message_redelivered_ten_times_has_one_effect() {
    redelivered_ten_times_one_effect(Arc::new(MemoryDedupStore::new())).await;
}

#[tokio::test]
async fn memory_store_concurrent_duplicates_on_two_consumers_have_one_effect() {
    concurrent_duplicates_one_effect(Arc::new(MemoryDedupStore::new())).await;
}

#[tokio::test]
async fn memory_store_a_failing_handler_leaves_the_message_to_its_redelivery() {
    failing_handler_leaves_it_to_the_redelivery(Arc::new(MemoryDedupStore::new())).await;
}

#[cfg(feature = "redis")]
mod redis_store {
    use super::*;
    use ferry::inbox::RedisDedupStore;

    const DEFAULT_URL: &str = "redis://127.0.0.1:6379/0";

    fn url() -> String {
        std::env::var("FERRY_REDIS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
    }

    /// A store under a prefix of its own, or `None` (said loudly) when no Redis answers
    /// outside CI.
    async fn store() -> Option<RedisDedupStore> {
        let url = ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", DEFAULT_URL)?;
        let prefix = format!("ferry-test:{}:", ferry_testkit::fresh("dedup", "store"));
        Some(
            RedisDedupStore::connect(&url)
                .await
                .expect("connect to Redis")
                .with_prefix(prefix),
        )
    }

    async fn raw() -> redis::aio::MultiplexedConnection {
        redis::Client::open(url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn redis_store_a_message_redelivered_ten_times_has_one_effect() {
        if let Some(store) = store().await {
            redelivered_ten_times_one_effect(Arc::new(store)).await;
        }
    }

    #[tokio::test]
    async fn redis_store_concurrent_duplicates_on_two_consumers_have_one_effect() {
        if let Some(store) = store().await {
            concurrent_duplicates_one_effect(Arc::new(store)).await;
        }
    }

    #[tokio::test]
    async fn redis_store_a_failing_handler_leaves_the_message_to_its_redelivery() {
        if let Some(store) = store().await {
            failing_handler_leaves_it_to_the_redelivery(Arc::new(store)).await;
        }
    }

    #[tokio::test]
    async fn redis_keys_carry_the_prefix_and_expire_with_the_hold_then_the_window() {
        let Some(store) = store().await else { return };
        let key = format!("{}m1", store.prefix());
        let mut redis = raw().await;
        assert_eq!(
            store.begin("m1", Duration::from_millis(300)).await.unwrap(),
            Claim::Fresh
        );
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!((1..=300).contains(&ttl), "claim ttl {ttl}");
        // A crashed handler's claim lapses: the redelivery may claim it again.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(store.begin("m1", HOLD).await.unwrap(), Claim::Fresh);
        store.complete("m1", WINDOW).await.unwrap();
        let (value, ttl): (String, i64) = redis::pipe()
            .cmd("GET")
            .arg(&key)
            .cmd("PTTL")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert_eq!(value, "done");
        assert!(ttl > 50_000 && ttl <= 60_000, "record ttl {ttl}");
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn abandon_drops_only_this_stores_unfinished_claim() {
        let Some(mine) = store().await else { return };
        let other = RedisDedupStore::connect(&url())
            .await
            .unwrap()
            .with_prefix(mine.prefix());
        assert_eq!(mine.begin("m2", HOLD).await.unwrap(), Claim::Fresh);
        // Another consumer cannot drop my claim...
        other.abandon("m2").await.unwrap();
        assert_eq!(other.begin("m2", HOLD).await.unwrap(), Claim::InProgress);
        // ...and abandoning after completing keeps the record.
        mine.complete("m2", WINDOW).await.unwrap();
        mine.abandon("m2").await.unwrap();
        assert_eq!(other.begin("m2", HOLD).await.unwrap(), Claim::Done);
        mine.abandon("m3").await.unwrap();
        assert_eq!(mine.begin("m3", HOLD).await.unwrap(), Claim::Fresh);
        mine.abandon("m3").await.unwrap();
        assert_eq!(other.begin("m3", HOLD).await.unwrap(), Claim::Fresh);
        let mut redis = raw().await;
        let _: () = redis::cmd("DEL")
            .arg(format!("{}m2", mine.prefix()))
            .arg(format!("{}m3", mine.prefix()))
            .query_async(&mut redis)
            .await
            .unwrap();
    }
}
