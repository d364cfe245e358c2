//! Each handler-middleware layer on its own, called directly as a `tower::Service` (no
//! broker): what it does to the handler's calls and to the answer the worker settles by.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use ferry::inbox::{Claim, DedupStore, DedupWindow};
use ferry::middleware::breaker::BreakerLayer;
use ferry::middleware::concurrency::ConcurrencyLimitLayer;
use ferry::middleware::dedup::DedupLayer;
use ferry::middleware::panic::CatchPanicLayer;
use ferry::middleware::poison::PoisonLayer;
use ferry::middleware::rate_limit::RateLimitLayer;
use ferry::middleware::retry::RetryLayer;
use ferry::middleware::timeout::TimeoutLayer;
use ferry::middleware::{BoxHandler, HandlerContext, HandlerError, handler_fn, stack};
use ferry::{Backoff, Error, Received, Source};
use tower::{Layer, ServiceExt};

fn message(id: &str, attempt: u32) -> HandlerContext {
    message_from(id, attempt, &Source::queue("orders"))
}

fn message_from(id: &str, attempt: u32, source: &Source) -> HandlerContext {
    let received = Received {
        id: id.to_owned(),
        key: None,
        headers: BTreeMap::new(),
        payload: "{}".into(),
        priority: 0,
        published_at_ms: ferry::message::now_ms(),
        attempt,
        dead_letter: None,
    };
    HandlerContext::new(received, source)
}

/// A handler answering with `answers` in turn (the last one from then on), counting calls
/// and noting when each began.
#[derive(Clone)]
struct Scripted {
    answers: Arc<Vec<Result<(), HandlerError>>>,
    calls: Arc<Mutex<Vec<Instant>>>,
}

impl Scripted {
    fn new(answers: Vec<Result<(), HandlerError>>) -> Scripted {
        Scripted {
            answers: Arc::new(answers),
            calls: Arc::default(),
        }
    }
    fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
    fn call_times(&self) -> Vec<Instant> {
        self.calls.lock().unwrap().clone()
    }
    fn handler(&self) -> BoxHandler {
        let this = self.clone();
        BoxHandler::new(handler_fn(move |_ctx: HandlerContext| {
            let this = this.clone();
            async move {
                let n = {
                    let mut calls = this.calls.lock().unwrap();
                    calls.push(Instant::now());
                    calls.len()
                };
                this.answers[(n - 1).min(this.answers.len() - 1)].clone()
            }
        }))
    }
}

fn transient(error: &str) -> Result<(), HandlerError> {
    Err(HandlerError::transient(error))
}

fn backoff(base_ms: u64, jitter: f64) -> Backoff {
    Backoff {
        base: Duration::from_millis(base_ms),
        cap: Duration::from_secs(10),
        multiplier: 2.0,
        jitter,
    }
}

#[tokio::test]
async fn retry_calls_again_with_rising_delays_then_passes_the_last_failure_on() {
    let handler = Scripted::new(vec![transient("db down")]);
    let jitter = 0.25;
    let svc = RetryLayer::new(4, backoff(20, jitter))
        .unwrap()
        .layer(handler.handler());
    let answer = svc.oneshot(message("m1", 1)).await;
    assert_eq!(answer, transient("db down"));
    let times = handler.call_times();
    assert_eq!(times.len(), 4, "four calls in all");
    for (i, pair) in times.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        let nominal = Duration::from_millis(20 << i);
        // Jitter moves a delay by at most a quarter either way, so the shortest gap
        // after failure n+1 is longer than the longest after failure n: the gaps rise.
        assert!(
            gap >= nominal.mul_f64(1.0 - jitter),
            "gap {i} was {gap:?}, below the jitter bound of {nominal:?}"
        );
    }
}

fn lowest() -> f64 {
    0.0
}

#[tokio::test]
async fn retry_jitter_comes_from_its_source_and_stays_within_the_bound() {
    // With the jitter source pinned at its lowest, each wait is exactly
    // base × 2^(n-1) × (1 - jitter): 30 ms, then 60 ms.
    let handler = Scripted::new(vec![transient("x"), transient("x"), Ok(())]);
    let svc = RetryLayer::new(3, backoff(40, 0.25))
        .unwrap()
        .jitter_source(lowest)
        .layer(handler.handler());
    assert_eq!(svc.oneshot(message("m1", 1)).await, Ok(()));
    let times = handler.call_times();
    assert_eq!(times.len(), 3, "recovered on the third call");
    assert!(times[1] - times[0] >= Duration::from_millis(30));
    assert!(times[2] - times[1] >= Duration::from_millis(60));
}

#[tokio::test]
async fn retry_leaves_refused_credentials_alone() {
    // The engine refuses the same credentials the same way on every call.
    for refused in [
        ferry::Error::unauthorized("no token"),
        ferry::Error::forbidden("no publish grant"),
    ] {
        let handler = Scripted::new(vec![Err(HandlerError::from(refused))]);
        let svc = RetryLayer::new(5, backoff(1, 0.0))
            .unwrap()
            .layer(handler.handler());
        let answer = svc.oneshot(message("m1", 1)).await;
        assert!(
            matches!(answer, Err(HandlerError::Permanent { .. })),
            "{answer:?}"
        );
        assert_eq!(handler.calls(), 1);
    }
}

#[tokio::test]
async fn retry_leaves_permanent_failures_and_handler_chosen_delays_alone() {
    let handler = Scripted::new(vec![Err(HandlerError::permanent("bad payload"))]);
    let svc = RetryLayer::new(5, backoff(1, 0.0))
        .unwrap()
        .layer(handler.handler());
    assert_eq!(
        svc.oneshot(message("m1", 1)).await,
        Err(HandlerError::permanent("bad payload"))
    );
    assert_eq!(handler.calls(), 1);

    let later = HandlerError::transient_after("429", Duration::from_secs(30));
    let handler = Scripted::new(vec![Err(later.clone())]);
    let svc = RetryLayer::new(5, backoff(1, 0.0))
        .unwrap()
        .layer(handler.handler());
    assert_eq!(svc.oneshot(message("m1", 1)).await, Err(later));
    assert_eq!(handler.calls(), 1, "the broker keeps the handler's delay");
}

#[test]
fn retry_refuses_settings_it_cannot_honour() {
    assert!(RetryLayer::new(0, Backoff::default()).is_err());
    let jitter = RetryLayer::new(3, backoff(10, 1.5)).unwrap_err();
    assert!(
        matches!(&jitter, ferry::Error::Invalid { what, .. } if what == "retry backoff.jitter"),
        "{jitter}"
    );
    let mut b = backoff(10, 0.1);
    b.cap = Duration::from_millis(1);
    assert!(RetryLayer::new(3, b).is_err());
    let mut b = backoff(10, 0.1);
    b.multiplier = 0.5;
    assert!(RetryLayer::new(3, b).is_err());
}

#[tokio::test]
async fn poison_rejects_permanent_failures_and_transient_ones_on_the_last_delivery() {
    let layer = PoisonLayer::new(3).unwrap();
    let handler = Scripted::new(vec![transient("db down")]);
    let svc = layer.layer(handler.handler());
    assert_eq!(
        svc.clone().oneshot(message("m1", 2)).await,
        transient("db down"),
        "deliveries left: nacked"
    );
    let last = svc.clone().oneshot(message("m1", 3)).await;
    let Err(HandlerError::Permanent { reason }) = last else {
        panic!("dead-lettered on the last delivery, got {last:?}")
    };
    assert_eq!(reason, "failed on delivery 3 of 3: db down");

    let handler = Scripted::new(vec![Err(HandlerError::permanent("unknown customer"))]);
    let answer = layer
        .layer(handler.handler())
        .oneshot(message("m2", 1))
        .await;
    assert_eq!(answer, Err(HandlerError::permanent("unknown customer")));
}

#[tokio::test]
async fn poison_does_not_hand_over_a_message_delivered_more_often_than_allowed() {
    // Deliveries beyond the limit mean earlier ones never settled: the handler crashed.
    let handler = Scripted::new(vec![Ok(())]);
    let svc = PoisonLayer::new(3).unwrap().layer(handler.handler());
    let answer = svc.oneshot(message("m1", 4)).await;
    assert!(
        matches!(&answer, Err(HandlerError::Permanent { reason }) if reason.contains("never settled")),
        "{answer:?}"
    );
    assert_eq!(handler.calls(), 0);
}

#[tokio::test]
async fn poison_takes_the_limit_the_delivery_carries_unless_given_one() {
    let handler = Scripted::new(vec![transient("db down")]);
    let declared = PoisonLayer::from_declaration().layer(handler.handler());
    let of_three = |attempt| message("m1", attempt).with_max_deliveries(3);
    assert_eq!(
        declared.clone().oneshot(of_three(2)).await,
        transient("db down"),
        "deliveries left: nacked"
    );
    assert_eq!(
        declared.clone().oneshot(of_three(3)).await,
        Err(HandlerError::permanent(
            "failed on delivery 3 of 3: db down"
        ))
    );
    let calls = handler.calls();
    let beyond = declared.oneshot(of_three(4)).await;
    assert!(
        matches!(&beyond, Err(HandlerError::Permanent { reason }) if reason.contains("never settled")),
        "{beyond:?}"
    );
    assert_eq!(handler.calls(), calls, "not handed to the handler");

    // A limit given wins over the declared one.
    let given = PoisonLayer::new(2).unwrap().layer(handler.handler());
    let answer = given.oneshot(message("m1", 2).with_max_deliveries(5)).await;
    assert_eq!(
        answer,
        Err(HandlerError::permanent(
            "failed on delivery 2 of 2: db down"
        ))
    );
}

#[tokio::test]
async fn poison_without_a_known_limit_leaves_transient_failures_to_the_transport() {
    let handler = Scripted::new(vec![transient("db down")]);
    let svc = PoisonLayer::from_declaration().layer(handler.handler());
    assert_eq!(
        svc.oneshot(message("m1", 50)).await,
        transient("db down"),
        "nacked: the transport dead-letters at its own limit"
    );
    let handler = Scripted::new(vec![Err(HandlerError::permanent("unknown customer"))]);
    let svc = PoisonLayer::from_declaration().layer(handler.handler());
    assert_eq!(
        svc.oneshot(message("m2", 1)).await,
        Err(HandlerError::permanent("unknown customer"))
    );
}

#[tokio::test]
async fn poison_outside_retry_decides_only_after_the_retries_while_inside_it_gives_up_at_once() {
    // The documented order: retry inside poison. On the last delivery, a handler that
    // recovers on its second call is never dead-lettered.
    let handler = Scripted::new(vec![transient("blip"), Ok(())]);
    let retry = RetryLayer::new(3, backoff(1, 0.0)).unwrap();
    let svc = PoisonLayer::new(1)
        .unwrap()
        .layer(retry.layer(handler.handler()));
    assert_eq!(svc.oneshot(message("m1", 1)).await, Ok(()));
    assert_eq!(handler.calls(), 2);

    // The other way round, the first failure is already final: retries never run.
    let handler = Scripted::new(vec![transient("blip"), Ok(())]);
    let retry = RetryLayer::new(3, backoff(1, 0.0)).unwrap();
    let svc = retry.layer(PoisonLayer::new(1).unwrap().layer(handler.handler()));
    let answer = svc.oneshot(message("m1", 1)).await;
    assert!(matches!(answer, Err(HandlerError::Permanent { .. })));
    assert_eq!(handler.calls(), 1);
}

/// A dedup store in memory, with a count of each call.
#[derive(Default)]
struct MemoryStore {
    state: Mutex<HashMap<String, Claim>>,
    completes: AtomicU32,
    abandons: AtomicU32,
}

#[async_trait::async_trait]
impl DedupStore for MemoryStore {
    async fn begin(&self, key: &str, _hold: Duration) -> ferry::Result<Claim> {
        let mut state = self.state.lock().unwrap();
        match state.get(key) {
            Some(Claim::Done) => Ok(Claim::Done),
            Some(_) => Ok(Claim::InProgress),
            None => {
                state.insert(key.to_owned(), Claim::InProgress);
                Ok(Claim::Fresh)
            }
        }
    }
    async fn complete(&self, key: &str, _window: Duration) -> ferry::Result<()> {
        self.completes.fetch_add(1, Ordering::SeqCst);
        self.state
            .lock()
            .unwrap()
            .insert(key.to_owned(), Claim::Done);
        Ok(())
    }
    async fn abandon(&self, key: &str) -> ferry::Result<()> {
        self.abandons.fetch_add(1, Ordering::SeqCst);
        self.state.lock().unwrap().remove(key);
        Ok(())
    }
}

#[tokio::test]
async fn dedup_skips_a_second_delivery_of_a_processed_message() {
    let store = Arc::new(MemoryStore::default());
    let handler = Scripted::new(vec![Ok(())]);
    let svc = DedupLayer::new(store.clone()).layer(handler.handler());
    assert_eq!(svc.clone().oneshot(message("m1", 1)).await, Ok(()));
    assert_eq!(svc.clone().oneshot(message("m1", 2)).await, Ok(()), "acked");
    assert_eq!(handler.calls(), 1, "the handler ran once");
    assert_eq!(store.completes.load(Ordering::SeqCst), 1);
    // The same id in another subscription of the topic is that subscription's to process.
    let other = Source::subscription("orders", "billing");
    assert_eq!(svc.oneshot(message_from("m1", 1, &other)).await, Ok(()));
    assert_eq!(handler.calls(), 2);
}

#[test]
fn dedup_refuses_a_zero_hold_or_put_off_and_takes_its_window_as_a_checked_dedup_window() {
    let layer = || DedupLayer::new(Arc::new(MemoryStore::default()));
    assert!(matches!(
        layer().hold(Duration::ZERO),
        Err(ferry::Error::Invalid { .. })
    ));
    assert!(matches!(
        layer().retry_in_progress_after(Duration::ZERO),
        Err(ferry::Error::Invalid { .. })
    ));
    assert!(layer().hold(Duration::from_secs(60)).is_ok());
    // A window shorter than the queue's redeliveries cannot even be built.
    let policy = ferry::DeliveryPolicy::default();
    assert!(DedupWindow::checked(Duration::from_secs(1), &policy).is_err());
    let _ = layer().window(DedupWindow::for_policy(&policy));
}

#[tokio::test]
async fn dedup_abandons_the_claim_on_failure_so_a_retry_runs() {
    let store = Arc::new(MemoryStore::default());
    let handler = Scripted::new(vec![transient("db down"), Ok(())]);
    let svc = DedupLayer::new(store.clone()).layer(handler.handler());
    assert_eq!(
        svc.clone().oneshot(message("m1", 1)).await,
        transient("db down")
    );
    assert_eq!(store.abandons.load(Ordering::SeqCst), 1);
    assert_eq!(svc.oneshot(message("m1", 2)).await, Ok(()));
    assert_eq!(handler.calls(), 2);
}

#[tokio::test]
async fn dedup_puts_off_a_message_another_consumer_is_processing() {
    let store = Arc::new(MemoryStore::default());
    assert_eq!(
        store
            .begin("order-7", Duration::from_secs(60))
            .await
            .unwrap(),
        Claim::Fresh
    );
    let handler = Scripted::new(vec![Ok(())]);
    let svc = DedupLayer::new(store.clone())
        .key(|ctx| format!("order-{}", ctx.id))
        .retry_in_progress_after(Duration::from_millis(700))
        .unwrap()
        .layer(handler.handler());
    let answer = svc.oneshot(message("7", 1)).await;
    assert!(
        matches!(answer, Err(HandlerError::Deferred { delay, .. }) if delay == Duration::from_millis(700)),
        "{answer:?}"
    );
    assert_eq!(handler.calls(), 0);
    assert_eq!(store.abandons.load(Ordering::SeqCst), 0, "not ours to drop");
}

#[tokio::test]
async fn a_handler_over_its_timeout_is_a_transient_failure() {
    let slow = handler_fn(|_ctx: HandlerContext| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(())
    });
    let started = Instant::now();
    let answer = TimeoutLayer::new(Duration::from_millis(50))
        .unwrap()
        .layer(slow)
        .oneshot(message("m1", 1))
        .await;
    assert!(
        matches!(&answer, Err(HandlerError::Transient { error, .. }) if error.contains("timeout")),
        "{answer:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let fast = Scripted::new(vec![Ok(())]);
    let answer = TimeoutLayer::new(Duration::from_secs(5))
        .unwrap()
        .layer(fast.handler())
        .oneshot(message("m1", 1))
        .await;
    assert_eq!(answer, Ok(()));
    assert!(TimeoutLayer::new(Duration::ZERO).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_limit_is_never_exceeded() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (in_flight, most) = (in_flight.clone(), most.clone());
        handler_fn(move |_ctx: HandlerContext| {
            let (in_flight, most) = (in_flight.clone(), most.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let svc = stack()
        .without_tracing()
        .without_metrics()
        .concurrency_limit(ConcurrencyLimitLayer::new(2).unwrap())
        .build(handler);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..12 {
        calls.spawn(svc.clone().oneshot(message(&format!("m{i}"), 1)));
    }
    while let Some(answer) = calls.join_next().await {
        assert_eq!(answer.unwrap(), Ok(()));
    }
    assert_eq!(most.load(Ordering::SeqCst), 2, "two at once, never more");
    let zero = ConcurrencyLimitLayer::new(0).unwrap_err();
    assert!(matches!(zero, Error::Invalid { .. }), "{zero}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_spaces_calls_evenly_across_clones() {
    let handler = Scripted::new(vec![Ok(())]);
    // 20 per second: one every 50 ms.
    let layer = RateLimitLayer::new(20, Duration::from_secs(1)).unwrap();
    let svc = layer.layer(handler.handler());
    let start = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..6 {
        calls.spawn(svc.clone().oneshot(message(&format!("m{i}"), 1)));
    }
    while let Some(answer) = calls.join_next().await {
        assert_eq!(answer.unwrap(), Ok(()));
    }
    let mut times = handler.call_times();
    times.sort();
    // The n-th call to start cannot start before the n-th slot.
    for (n, at) in times.iter().enumerate() {
        assert!(
            *at - start >= Duration::from_millis(50) * n as u32,
            "call {n} started after {:?}",
            *at - start
        );
    }
    assert!(RateLimitLayer::new(0, Duration::from_secs(1)).is_err());
}

#[tokio::test]
async fn the_breaker_opens_puts_messages_off_without_calling_the_handler_then_closes() {
    let breaker = Arc::new(CircuitBreaker::new(BreakerConfig {
        failure_threshold: 2,
        open_for: Duration::from_millis(300),
    }));
    let handler = Scripted::new(vec![transient("api down"), transient("api down"), Ok(())]);
    let svc = BreakerLayer::new(breaker.clone())
        .unwrap()
        .layer(handler.handler());
    for _ in 0..2 {
        assert_eq!(
            svc.clone().oneshot(message("m1", 1)).await,
            transient("api down")
        );
    }
    assert!(matches!(breaker.state(), BreakerState::Open { .. }));

    let answer = svc.clone().oneshot(message("m2", 1)).await;
    let Err(HandlerError::Deferred { delay, why }) = answer else {
        panic!("put off while open, got {answer:?}")
    };
    assert!(why.contains("circuit breaker open"));
    assert!(
        delay > Duration::ZERO && delay <= Duration::from_millis(300),
        "about the time left open: {delay:?}"
    );
    assert_eq!(handler.calls(), 2, "the handler was not called");

    tokio::time::sleep(breaker.wait()).await;
    assert_eq!(
        svc.oneshot(message("m2", 2)).await,
        Ok(()),
        "the trial call"
    );
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(handler.calls(), 3);
}

#[tokio::test]
async fn a_permanent_failure_does_not_open_the_breaker() {
    let breaker = Arc::new(CircuitBreaker::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(60),
    }));
    let handler = Scripted::new(vec![Err(HandlerError::permanent("bad order"))]);
    let svc = BreakerLayer::new(breaker.clone())
        .unwrap()
        .layer(handler.handler());
    let _ = svc.clone().oneshot(message("m1", 1)).await;
    let _ = svc.oneshot(message("m2", 1)).await;
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(handler.calls(), 2);
}

#[tokio::test]
async fn a_panic_becomes_a_transient_failure_with_its_message_and_the_service_goes_on() {
    let calls = Arc::new(AtomicU32::new(0));
    let handler = {
        let calls = calls.clone();
        handler_fn(move |ctx: HandlerContext| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            // The first panics before the handler's future exists, the second inside it.
            if n == 0 {
                panic!("no future for {}", ctx.id);
            }
            async move {
                if n == 1 {
                    panic!("cannot parse order {}", ctx.id);
                }
                Ok(())
            }
        })
    };
    let svc = CatchPanicLayer.layer(handler);
    for expected in ["no future for m1", "cannot parse order m2"] {
        let id = if expected.contains("m1") { "m1" } else { "m2" };
        let answer = svc.clone().oneshot(message(id, 1)).await;
        assert!(
            matches!(&answer, Err(HandlerError::Transient { error, .. }) if error.contains(expected)),
            "{answer:?}"
        );
    }
    assert_eq!(svc.oneshot(message("m3", 1)).await, Ok(()));
}

#[tokio::test]
async fn the_built_stack_acks_a_duplicate_even_while_the_breaker_is_open() {
    // Dedup sits outside the breaker: a message already processed needs no downstream.
    let store = Arc::new(MemoryStore::default());
    let breaker = Arc::new(CircuitBreaker::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(60),
    }));
    let handler = Scripted::new(vec![Ok(())]);
    let svc = stack()
        .dedup(DedupLayer::new(store.clone()))
        .breaker(BreakerLayer::new(breaker.clone()).unwrap())
        .build(handler.handler());
    assert_eq!(svc.clone().oneshot(message("m1", 1)).await, Ok(()));
    breaker.record_failure();
    assert_eq!(
        svc.clone().oneshot(message("m1", 2)).await,
        Ok(()),
        "a duplicate"
    );
    let fresh = svc.oneshot(message("m2", 1)).await;
    assert!(
        matches!(fresh, Err(HandlerError::Deferred { .. })),
        "{fresh:?}"
    );
    assert_eq!(handler.calls(), 1);
    assert_eq!(
        store.abandons.load(Ordering::SeqCst),
        1,
        "m2's claim dropped"
    );
}

#[test]
fn every_layer_refuses_a_setting_under_which_it_cannot_work_as_invalid() {
    let never_closes = Arc::new(CircuitBreaker::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::ZERO,
    }));
    let refusals = [
        PoisonLayer::new(0).map(drop),
        RetryLayer::new(0, Backoff::default()).map(drop),
        TimeoutLayer::new(Duration::ZERO).map(drop),
        RateLimitLayer::new(0, Duration::from_secs(1)).map(drop),
        RateLimitLayer::new(1, Duration::ZERO).map(drop),
        ConcurrencyLimitLayer::new(0).map(drop),
        BreakerLayer::new(never_closes).map(drop),
        DedupLayer::new(Arc::new(MemoryStore::default()))
            .hold(Duration::ZERO)
            .map(drop),
        DedupLayer::new(Arc::new(MemoryStore::default()))
            .retry_in_progress_after(Duration::ZERO)
            .map(drop),
    ];
    for (i, refused) in refusals.into_iter().enumerate() {
        assert!(
            matches!(refused, Err(Error::Invalid { .. })),
            "#{i}: {refused:?}"
        );
    }
}
