//! The whole middleware stack through the SDK against a real engine, Redis Streams:
//! success, a duplicate, a recovering failure, a permanent one and a panicking handler,
//! each settled as the stack decides, with the dead letters read back from Redis.
//! Runs against `FERRY_REDIS_URL` (default `redis://127.0.0.1:6379/0`); skips loudly when
//! nothing answers, and fails instead under `CI=true`.

#![cfg(feature = "redis")]

mod middleware_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry::message::reason;
use ferry::middleware::{
    Backoff, BreakerConfig, BreakerLayer, CircuitBreaker, ConcurrencyLimitLayer, DedupLayer,
    HandlerContext, HandlerError, PoisonLayer, RateLimitLayer, RetryLayer, TimeoutLayer, Worker,
    handler_fn, stack,
};
use ferry::{ConsumerOptions, DeliveryPolicy, Destination, Ferry, Message, QueueDecl, Source};
use ferry_testkit::fresh;
use middleware_support::MemoryStore;

/// A connection, or `None` (said loudly) when no Redis answers outside CI.
async fn connect() -> Option<Ferry> {
    let url = ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0")?;
    Some(Ferry::connect(&url).await.expect("connect to Redis"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_stack_settles_each_message_as_it_decides_on_redis() {
    let Some(ferry) = connect().await else { return };
    let name = fresh("mwt", "stack");
    let quick = Backoff {
        base: Duration::from_millis(10),
        cap: Duration::from_millis(50),
        multiplier: 2.0,
        jitter: 0.0,
    };
    let policy = DeliveryPolicy {
        max_deliveries: 5,
        backoff: quick,
        lease: Duration::from_secs(5),
        ..DeliveryPolicy::default()
    };
    ferry
        .declare_queue(&QueueDecl::new(&name).delivery(policy))
        .await
        .unwrap();
    let publisher = ferry.publisher(Destination::queue(&name));
    for (payload, order) in [
        ("fine", "1"),
        ("fine again", "1"),
        ("flaky", "2"),
        ("bad", "3"),
        ("panics", "4"),
    ] {
        publisher
            .send(Message::new(payload).with_header("order-number", order))
            .await
            .unwrap();
    }

    let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            let payload = String::from_utf8_lossy(&ctx.payload).into_owned();
            let n = {
                let mut calls = calls.lock().unwrap();
                let n = calls.entry(payload.clone()).or_default();
                *n += 1;
                *n
            };
            async move {
                match payload.as_str() {
                    "flaky" if n == 1 => Err(HandlerError::transient("lock timeout")),
                    "bad" => Err(HandlerError::permanent("unknown sku")),
                    "panics" => panic!("index out of bounds in order 4"),
                    _ => Ok(()),
                }
            }
        })
    };
    let svc = stack()
        .poison(PoisonLayer::new(3).unwrap())
        .dedup(
            DedupLayer::new(Arc::new(MemoryStore::default()))
                .key(|ctx| format!("order:{}", ctx.header("order-number").unwrap_or_default())),
        )
        .breaker(
            BreakerLayer::new(Arc::new(CircuitBreaker::new(BreakerConfig {
                failure_threshold: 50,
                open_for: Duration::from_secs(1),
            })))
            .unwrap(),
        )
        .retry(RetryLayer::new(3, quick).unwrap())
        .concurrency_limit(ConcurrencyLimitLayer::new(2).unwrap())
        .rate_limit(RateLimitLayer::new(200, Duration::from_secs(1)).unwrap())
        .timeout(TimeoutLayer::new(Duration::from_secs(5)).unwrap())
        .build(handler);

    let options = ConsumerOptions {
        prefetch: 1,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    let consumer = ferry
        .consumer(Source::queue(&name), options.clone())
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // One at a time, so the duplicate finds the first copy done rather than in progress.
    let worker = tokio::spawn(
        Worker::new(consumer, svc)
            .concurrency(1)
            .poll(Duration::from_millis(100))
            .run(async move {
                let _ = stopped.await;
            }),
    );

    let mut dlq = ferry
        .consumer(Source::queue(&name).dead_letters(), options)
        .await
        .unwrap();
    let mut dead = Vec::new();
    while dead.len() < 2 {
        let d = dlq
            .next_within(Duration::from_secs(15))
            .await
            .unwrap()
            .expect("two dead letters");
        let info = d.dead_letter.clone().expect("dead-letter metadata");
        dead.push((String::from_utf8_lossy(&d.payload).into_owned(), info));
        d.ack().await.unwrap();
    }
    dead.sort_by(|a, b| a.0.cmp(&b.0));
    let until = Instant::now() + Duration::from_secs(10);
    while calls.lock().unwrap().get("flaky").copied() != Some(2) {
        assert!(Instant::now() < until, "the flaky message was not retried");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    worker.await.unwrap().unwrap();

    assert_eq!(dead[0].0, "bad");
    assert_eq!(dead[0].1.reason, reason::REJECTED);
    assert_eq!(dead[0].1.last_error.as_deref(), Some("unknown sku"));
    assert_eq!(dead[1].0, "panics");
    assert_eq!(dead[1].1.reason, reason::REJECTED);
    let error = dead[1].1.last_error.clone().unwrap_or_default();
    assert!(
        error.starts_with("failed on delivery 3 of 3: the handler panicked")
            && error.contains("index out of bounds in order 4"),
        "{error}"
    );
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.get("fine"), Some(&1));
    assert_eq!(calls.get("fine again"), None, "a duplicate by order number");
    assert_eq!(calls.get("bad"), Some(&1), "permanent: no retry");
    assert_eq!(
        calls.get("panics"),
        Some(&9),
        "three deliveries of three calls"
    );
    ferry.delete(&Source::queue(&name)).await.unwrap();
    let _ = ferry.delete(&Source::queue(&name).dead_letters()).await;
    ferry.close().await.unwrap();
}
