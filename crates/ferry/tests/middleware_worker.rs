//! The worker and the middleware stack end to end over the embedded broker: what reaches
//! the dead-letter queue and why, retry before poison, panics, duplicates, the breaker's
//! deferrals, and a graceful stop.

mod middleware_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use ferry::message::reason;
use ferry::middleware::{
    BoxHandler, BreakerLayer, ConcurrencyLimitLayer, DedupLayer, HandlerContext, HandlerError,
    PoisonLayer, RetryLayer, Worker, handler_fn, stack,
};
use ferry::{
    Backoff, ConsumerOptions, DeadLetterInfo, DeliveryPolicy, Destination, Envelope, Error, Ferry,
    Message, QueueDecl, Source,
};
use ferry_testkit::eventually;
use middleware_support::MemoryStore;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(10);

async fn embedded() -> (tempfile::TempDir, Ferry) {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .unwrap();
    (dir, ferry)
}

/// A queue with `max_deliveries`, quick broker backoff and a `lease`.
async fn queue(ferry: &Ferry, name: &str, max_deliveries: u32, lease: Duration) {
    let policy = DeliveryPolicy {
        max_deliveries,
        backoff: Backoff {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(50),
            multiplier: 2.0,
            jitter: 0.0,
        },
        lease,
        ..DeliveryPolicy::default()
    };
    ferry
        .declare_queue(&QueueDecl::new(name).delivery(policy))
        .await
        .unwrap();
}

async fn publish(ferry: &Ferry, queue: &str, messages: impl IntoIterator<Item = Message>) {
    let publisher = ferry.publisher(Destination::queue(queue));
    for message in messages {
        publisher.send(message).await.unwrap();
    }
}

fn options() -> ConsumerOptions {
    ConsumerOptions {
        prefetch: 4,
        poll: Duration::from_millis(50),
        ..ConsumerOptions::default()
    }
}

struct Running {
    stop: oneshot::Sender<()>,
    run: JoinHandle<ferry::Result<()>>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.run.await.unwrap().unwrap();
    }
}

async fn start(ferry: &Ferry, queue: &str, stack: BoxHandler, concurrency: usize) -> Running {
    let consumer = ferry
        .consumer(Source::queue(queue), options())
        .await
        .unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(
        Worker::new(consumer, stack)
            .concurrency(concurrency)
            .poll(Duration::from_millis(50))
            .run(async move {
                let _ = stopped.await;
            }),
    );
    Running { stop, run }
}

/// The next `n` dead letters of `queue`, acked, as (payload, metadata).
async fn dead_letters(ferry: &Ferry, queue: &str, n: usize) -> Vec<(String, DeadLetterInfo)> {
    let mut dlq = ferry
        .consumer(Source::queue(queue).dead_letters(), options())
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < n {
        let d = dlq.next_within(WAIT).await.unwrap().expect("a dead letter");
        let info = d.dead_letter.clone().expect("dead-letter metadata");
        got.push((String::from_utf8_lossy(&d.payload).into_owned(), info));
        d.ack().await.unwrap();
    }
    got.sort_by(|a, b| a.0.cmp(&b.0));
    got
}

/// Whether `queue` hands out anything within `wait`.
async fn anything_within(ferry: &Ferry, queue: &str, wait: Duration) -> Vec<String> {
    let mut c = ferry
        .consumer(Source::queue(queue), options())
        .await
        .unwrap();
    let mut got = Vec::new();
    let until = Instant::now() + wait;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match c.next_within(left).await.unwrap() {
            Some(d) => {
                got.push(String::from_utf8_lossy(&d.payload).into_owned());
                d.ack().await.unwrap();
            }
            None => break,
        }
    }
    c.close().await.unwrap();
    got
}

/// Calls per payload.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<HashMap<String, Vec<u32>>>>);

impl Calls {
    /// Notes a call and says how many calls this payload has had, this one included.
    fn note(&self, ctx: &HandlerContext) -> usize {
        let mut calls = self.0.lock().unwrap();
        let seen = calls
            .entry(String::from_utf8_lossy(&ctx.payload).into_owned())
            .or_default();
        seen.push(ctx.attempt);
        seen.len()
    }
    /// The delivery attempt of each call of `payload`.
    fn of(&self, payload: &str) -> Vec<u32> {
        self.0
            .lock()
            .unwrap()
            .get(payload)
            .cloned()
            .unwrap_or_default()
    }
    fn total(&self) -> usize {
        self.0.lock().unwrap().values().map(Vec::len).sum()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_is_dead_lettered_at_once_with_its_reason() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    publish(&ferry, "orders", [Message::new("order 42")]).await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async { Err(HandlerError::permanent("customer 42 does not exist")) }
        })
    };
    let worker = start(
        &ferry,
        "orders",
        stack().poison(PoisonLayer::new(5).unwrap()).build(handler),
        4,
    )
    .await;
    let dead = dead_letters(&ferry, "orders", 1).await;
    worker.stop().await;
    let (payload, info) = &dead[0];
    assert_eq!(payload, "order 42");
    assert_eq!(info.reason, reason::REJECTED);
    assert_eq!(
        info.last_error.as_deref(),
        Some("customer 42 does not exist")
    );
    assert_eq!(info.origin, "orders");
    assert_eq!(calls.of("order 42"), vec![1], "one delivery, one call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_on_the_last_delivery_is_dead_lettered_with_the_error() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 3, Duration::from_secs(30)).await;
    publish(&ferry, "orders", [Message::new("order 7")]).await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async { Err(HandlerError::transient("inventory service unavailable")) }
        })
    };
    let worker = start(
        &ferry,
        "orders",
        stack().poison(PoisonLayer::new(3).unwrap()).build(handler),
        4,
    )
    .await;
    let dead = dead_letters(&ferry, "orders", 1).await;
    worker.stop().await;
    let info = &dead[0].1;
    assert_eq!(
        info.reason,
        reason::REJECTED,
        "the poison layer rejected it"
    );
    assert_eq!(
        info.last_error.as_deref(),
        Some("failed on delivery 3 of 3: inventory service unavailable")
    );
    assert_eq!(
        calls.of("order 7"),
        vec![1, 2, 3],
        "nacked twice, then rejected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_run_before_poison_decides_end_to_end() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    publish(
        &ferry,
        "orders",
        [Message::new("doomed"), Message::new("recovers")],
    )
    .await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            let n = calls.note(&ctx);
            let recovered = &ctx.payload[..] == b"recovers" && n == 3;
            async move {
                if recovered {
                    Ok(())
                } else {
                    Err(HandlerError::transient("deadlock detected"))
                }
            }
        })
    };
    let retry = RetryLayer::new(
        3,
        Backoff {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(20),
            multiplier: 2.0,
            jitter: 0.25,
        },
    )
    .unwrap();
    // Poison gives up on the second delivery; three calls in process per delivery.
    let svc = stack()
        .poison(PoisonLayer::new(2).unwrap())
        .retry(retry)
        .build(handler);
    let worker = start(&ferry, "orders", svc, 4).await;
    let dead = dead_letters(&ferry, "orders", 1).await;
    eventually("the recovering message", || calls.of("recovers").len() == 3).await;
    worker.stop().await;

    assert_eq!(dead[0].0, "doomed");
    assert_eq!(
        dead[0].1.last_error.as_deref(),
        Some("failed on delivery 2 of 2: deadlock detected")
    );
    assert_eq!(
        calls.of("doomed"),
        vec![1, 1, 1, 2, 2, 2],
        "all retries of each delivery ran before poison decided"
    );
    assert_eq!(
        calls.of("recovers"),
        vec![1, 1, 1],
        "recovered within its first delivery's retries"
    );
    assert!(
        anything_within(&ferry, "orders", Duration::from_millis(200))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_nacked_with_the_panic_text_and_the_worker_goes_on() {
    let (_dir, ferry) = embedded().await;
    // One delivery allowed: the nack dead-letters it, which shows the error it carried.
    queue(&ferry, "orders", 1, Duration::from_secs(30)).await;
    publish(
        &ferry,
        "orders",
        [Message::new("bad"), Message::new("good")],
    )
    .await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async move {
                if &ctx.payload[..] == b"bad" {
                    panic!("cannot parse order `bad`");
                }
                Ok(())
            }
        })
    };
    let worker = start(&ferry, "orders", stack().build(handler), 1).await;
    let dead = dead_letters(&ferry, "orders", 1).await;
    eventually("the next message", || calls.of("good").len() == 1).await;
    worker.stop().await;
    let (payload, info) = &dead[0];
    assert_eq!(payload, "bad");
    assert_eq!(info.reason, reason::MAX_DELIVERIES, "nacked, not rejected");
    let error = info.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("cannot parse order `bad`"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_is_acked_without_calling_the_handler() {
    let (_dir, ferry) = embedded().await;
    // A short lease: a delivery left unsettled would be back within the check below.
    queue(&ferry, "orders", 5, Duration::from_millis(300)).await;
    let order = |n: &str, copy: &str| {
        Message::new(format!("order {n} ({copy})")).with_header("order-number", n)
    };
    publish(
        &ferry,
        "orders",
        [
            order("7", "first"),
            order("7", "resent"),
            order("8", "first"),
        ],
    )
    .await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async { Ok(()) }
        })
    };
    let dedup = DedupLayer::new(Arc::new(MemoryStore::default()))
        .key(|ctx| format!("order:{}", ctx.header("order-number").unwrap_or_default()));
    // One at a time, so the resent copy finds the first one done, not in progress.
    let worker = start(&ferry, "orders", stack().dedup(dedup).build(handler), 1).await;
    eventually("both orders", || calls.total() == 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    worker.stop().await;
    assert_eq!(calls.of("order 7 (first)"), vec![1]);
    assert_eq!(calls.of("order 8 (first)"), vec![1]);
    assert!(
        calls.of("order 7 (resent)").is_empty(),
        "never handed to the handler"
    );
    let left = anything_within(&ferry, "orders", Duration::from_millis(800)).await;
    assert!(left.is_empty(), "all three acked, got back {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_puts_deliveries_off_without_calling_the_handler_until_it_closes() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 10, Duration::from_secs(30)).await;
    let breaker = Arc::new(CircuitBreaker::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_millis(400),
    }));
    breaker.record_failure();
    let opened = Instant::now();
    publish(&ferry, "orders", [Message::new("order 9")]).await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async { Ok(()) }
        })
    };
    let worker = start(
        &ferry,
        "orders",
        stack()
            .breaker(BreakerLayer::new(breaker.clone()).unwrap())
            .build(handler),
        4,
    )
    .await;
    eventually("the handler", || calls.total() == 1).await;
    worker.stop().await;
    let attempts = calls.of("order 9");
    assert_eq!(
        attempts.len(),
        1,
        "called once, after the breaker let it through"
    );
    assert!(attempts[0] >= 2, "the first delivery was nacked unhandled");
    assert!(opened.elapsed() >= Duration::from_millis(400));
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_lets_the_handler_in_flight_finish_and_returns_what_was_fetched_ahead() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_millis(500)).await;
    publish(&ferry, "orders", ["a", "b", "c"].map(Message::new)).await;
    let started = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (started, finished) = (started.clone(), finished.clone());
        handler_fn(move |_ctx: HandlerContext| {
            let (started, finished) = (started.clone(), finished.clone());
            async move {
                started.notify_one();
                tokio::time::sleep(Duration::from_millis(300)).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let worker = start(&ferry, "orders", stack().build(handler), 1).await;
    started.notified().await;
    worker.stop().await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the one in flight finished"
    );
    // Acked, so it does not come back when its lease would have ended; the two fetched
    // ahead went back at once.
    let mut left = anything_within(&ferry, "orders", Duration::from_millis(1200)).await;
    left.sort();
    assert_eq!(left, ["b", "c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_limit_holds_under_a_wider_worker() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    publish(
        &ferry,
        "orders",
        (0..10).map(|i| Message::new(format!("{i}"))),
    )
    .await;
    let (in_flight, most, done) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let handler = {
        let (in_flight, most, done) = (in_flight.clone(), most.clone(), done.clone());
        handler_fn(move |_ctx: HandlerContext| {
            let (in_flight, most, done) = (in_flight.clone(), most.clone(), done.clone());
            async move {
                most.fetch_max(
                    in_flight.fetch_add(1, Ordering::SeqCst) + 1,
                    Ordering::SeqCst,
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let svc = stack()
        .concurrency_limit(ConcurrencyLimitLayer::new(2).unwrap())
        .build(handler);
    let worker = start(&ferry, "orders", svc, 8).await;
    eventually("all ten", || done.load(Ordering::SeqCst) == 10).await;
    worker.stop().await;
    assert!(most.load(Ordering::SeqCst) <= 2, "{most:?} at once");
}

#[tokio::test]
async fn a_worker_refuses_a_concurrency_of_zero() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    let handler = handler_fn(|_ctx: HandlerContext| async { Ok(()) });
    let run = Worker::new(consumer, stack().build(handler))
        .concurrency(0)
        .run(std::future::pending())
        .await;
    assert!(matches!(run, Err(Error::Invalid { .. })), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_queue_is_deleted_stops_with_the_error() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    let handler = handler_fn(|_ctx: HandlerContext| async { Ok(()) });
    let run = tokio::spawn(
        Worker::new(consumer, stack().build(handler))
            .poll(Duration::from_millis(50))
            .run(std::future::pending()),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    ferry.delete(&Source::queue("orders")).await.unwrap();
    let ended = tokio::time::timeout(WAIT, run)
        .await
        .expect("the worker stopped");
    let error = ended.unwrap().unwrap_err();
    assert!(!error.is_transient(), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_until_idle_returns_once_every_message_is_acked_and_leaves_nothing_unsettled() {
    let (_dir, ferry) = embedded().await;
    // A short lease: a delivery left unsettled would be back within the check below.
    queue(&ferry, "orders", 5, Duration::from_millis(500)).await;
    publish(
        &ferry,
        "orders",
        (0..20).map(|i| Message::new(format!("{i}"))),
    )
    .await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(())
            }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    let started = Instant::now();
    tokio::time::timeout(
        WAIT,
        Worker::new(consumer, stack().build(handler))
            .concurrency(4)
            .run_until_idle(Duration::from_millis(200)),
    )
    .await
    .expect("the worker stopped by itself")
    .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(calls.total(), 20, "every message handled once");
    let left = anything_within(&ferry, "orders", Duration::from_millis(1200)).await;
    assert!(left.is_empty(), "all twenty acked, got back {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_until_idle_waits_for_a_handler_slower_than_the_idle_time() {
    let (_dir, ferry) = embedded().await;
    // Both are fetched at once and handled one after the other: the lease covers both.
    queue(&ferry, "orders", 5, Duration::from_millis(1000)).await;
    publish(&ferry, "orders", ["a", "b"].map(Message::new)).await;
    let finished = Arc::new(AtomicUsize::new(0));
    let handler = {
        let finished = finished.clone();
        handler_fn(move |_ctx: HandlerContext| {
            let finished = finished.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    Worker::new(consumer, stack().build(handler))
        .concurrency(1)
        .run_until_idle(Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), 2, "both ran to the end");
    let left = anything_within(&ferry, "orders", Duration::from_millis(1500)).await;
    assert!(left.is_empty(), "both acked, got back {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_nacked_before_the_worker_goes_idle_is_handled_again_before_it_stops() {
    let (_dir, ferry) = embedded().await;
    // The broker's backoff is 10 ms: well inside the idle time.
    queue(&ferry, "orders", 5, Duration::from_millis(500)).await;
    publish(&ferry, "orders", [Message::new("flaky")]).await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            let first = calls.note(&ctx) == 1;
            async move {
                if first {
                    Err(HandlerError::transient("connection reset"))
                } else {
                    Ok(())
                }
            }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    Worker::new(consumer, stack().build(handler))
        .run_until_idle(Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(calls.of("flaky"), vec![1, 2], "nacked, then acked");
    let left = anything_within(&ferry, "orders", Duration::from_millis(1200)).await;
    assert!(left.is_empty(), "acked, got back {left:?}");
}

#[tokio::test]
async fn a_worker_refuses_an_idle_time_of_zero() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    let handler = handler_fn(|_ctx: HandlerContext| async { Ok(()) });
    let run = Worker::new(consumer, stack().build(handler))
        .run_until_idle(Duration::ZERO)
        .await;
    assert!(matches!(run, Err(Error::Invalid { .. })), "{run:?}");
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct OrderPlaced {
    order: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_reads_the_typed_envelope_and_a_message_without_one_is_dead_lettered() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_secs(30)).await;
    let event = Envelope::new("OrderPlaced", OrderPlaced { order: 7 })
        .source("shop")
        .correlation_id("flow-7");
    publish(
        &ferry,
        "orders",
        [event.to_message().unwrap(), Message::new("no envelope")],
    )
    .await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let seen = seen.clone();
        handler_fn(move |ctx: HandlerContext| {
            let seen = seen.clone();
            async move {
                let event = ctx.envelope::<OrderPlaced>()?;
                seen.lock().unwrap().push(event);
                Ok(())
            }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    Worker::new(consumer, stack().build(handler))
        .run_until_idle(Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![event]);
    let dead = dead_letters(&ferry, "orders", 1).await;
    assert_eq!(dead[0].0, "no envelope");
    assert_eq!(dead[0].1.reason, reason::REJECTED);
    let error = dead[0].1.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("no `type` header"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_every_layer_is_built_from_the_middleware_module_alone() {
    // Every layer and what its constructor takes, from one module.
    use ferry::middleware as mw;

    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 5, Duration::from_millis(500)).await;
    publish(
        &ferry,
        "orders",
        (0..10).map(|i| Message::new(format!("{i}"))),
    )
    .await;
    let policy = DeliveryPolicy {
        lease: Duration::from_millis(500),
        ..DeliveryPolicy::default()
    };
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        mw::handler_fn(move |ctx: mw::HandlerContext| {
            calls.note(&ctx);
            async { Ok::<(), mw::HandlerError>(()) }
        })
    };
    let backoff = mw::Backoff {
        base: Duration::from_millis(5),
        ..mw::Backoff::default()
    };
    let breaker = Arc::new(mw::CircuitBreaker::new(mw::BreakerConfig::default()));
    let store = Arc::new(mw::MemoryDedupStore::new());
    let _always_on = (mw::TraceLayer, mw::MetricsLayer, mw::CatchPanicLayer);
    let service = mw::stack()
        .poison(mw::PoisonLayer::new(5).unwrap())
        .dedup(mw::DedupLayer::new(store).window(mw::DedupWindow::for_policy(&policy)))
        .breaker(mw::BreakerLayer::new(breaker).unwrap())
        .retry(mw::RetryLayer::new(3, backoff).unwrap())
        .concurrency_limit(mw::ConcurrencyLimitLayer::new(2).unwrap())
        .rate_limit(mw::RateLimitLayer::new(1000, Duration::from_secs(1)).unwrap())
        .timeout(mw::TimeoutLayer::new(Duration::from_secs(5)).unwrap())
        .build(handler);
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    mw::Worker::new(consumer, service)
        .run_until_idle(Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(calls.total(), 10);
    let left = anything_within(&ferry, "orders", Duration::from_millis(1200)).await;
    assert!(left.is_empty(), "all ten acked, got back {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poison_layer_dead_letters_on_the_last_delivery_the_queue_was_declared_with() {
    let (_dir, ferry) = embedded().await;
    queue(&ferry, "orders", 3, Duration::from_secs(30)).await;
    publish(&ferry, "orders", [Message::new("order 7")]).await;
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async { Err(HandlerError::transient("inventory service unavailable")) }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    assert_eq!(
        consumer.delivery_policy().map(|p| p.max_deliveries),
        Some(3)
    );
    let service = stack()
        .poison(PoisonLayer::from_declaration())
        .build(handler);
    Worker::new(consumer, service)
        .run_until_idle(Duration::from_millis(300))
        .await
        .unwrap();
    let dead = dead_letters(&ferry, "orders", 1).await;
    let info = &dead[0].1;
    assert_eq!(info.reason, reason::REJECTED, "the poison layer decided");
    assert_eq!(
        info.last_error.as_deref(),
        Some("failed on delivery 3 of 3: inventory service unavailable")
    );
    assert_eq!(calls.of("order 7"), vec![1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poison_layer_knows_the_limit_of_a_queue_declared_through_another_handle() {
    let (dir, first) = embedded().await;
    queue(&first, "orders", 2, Duration::from_secs(30)).await;
    publish(&first, "orders", [Message::new("order 7")]).await;
    first.close().await.unwrap();
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .unwrap();
    let calls = Calls::default();
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            calls.note(&ctx);
            async { Err(HandlerError::transient("inventory service unavailable")) }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), options())
        .await
        .unwrap();
    assert_eq!(consumer.delivery_policy(), None, "declared elsewhere");
    assert_eq!(consumer.max_deliveries(), Some(2), "as the broker keeps it");
    let service = stack()
        .poison(PoisonLayer::from_declaration())
        .build(handler);
    Worker::new(consumer, service)
        .run_until_idle(Duration::from_millis(300))
        .await
        .unwrap();
    let dead = dead_letters(&ferry, "orders", 1).await;
    let info = &dead[0].1;
    assert_eq!(info.reason, reason::REJECTED, "the poison layer decided");
    assert_eq!(
        info.last_error.as_deref(),
        Some("failed on delivery 2 of 2: inventory service unavailable")
    );
    assert_eq!(calls.of("order 7"), vec![1, 2]);
}
