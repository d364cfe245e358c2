//! What the outbox tests share: a real `Transport` wrapper that can be switched off (a
//! broker outage), made to fail chosen rows, or stripped of dedup, and that logs what it
//! stored; crash hooks; and the scenarios every backend (SQLite, PostgreSQL) and broker
//! (embedded, Redis) must pass.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferry::breaker::{BreakerConfig, BreakerState};
use ferry::outbox::{Backlog, Fault, FaultPoint, OutboxEvent, Relay, RelayConfig, RelayHooks};
use ferry::transport::{ConsumerBackend, Transport};
use ferry::{
    Backoff, Capabilities, ConsumerOptions, Destination, Error, Feature, Ferry, Message, QueueDecl,
    Received, Source, SubscriptionDecl, Support, TopicDecl,
};
use ferry_testkit::fresh;

/// One outbox table in one database, as the scenarios drive it.
#[async_trait]
pub trait OutboxDb: Send + Sync {
    /// Enqueues `events` in one transaction, then commits it or rolls it back.
    async fn enqueue(&self, events: Vec<OutboxEvent>, commit: bool) -> Vec<String>;
    fn relay(
        &self,
        ferry: &Ferry,
        config: RelayConfig,
        hooks: Option<Arc<dyn RelayHooks>>,
    ) -> ferry::Result<Relay>;
    async fn backlog(&self) -> Backlog;
    /// Every row, published or not.
    async fn rows(&self) -> u64;
}

/// A published message as the transport stored it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub id: String,
    pub key: Option<String>,
    pub dedup_id: Option<String>,
}

/// A real transport around another: switched off it fails every publish as an unreachable
/// broker does; chosen ids fail a number of times; it can deny having dedup.
pub struct Switch {
    inner: Arc<dyn Transport>,
    capabilities: Capabilities,
    up: AtomicBool,
    failures_left: Mutex<HashMap<String, u32>>,
    pub attempts: AtomicUsize,
    pub log: Mutex<Vec<Stored>>,
}

impl Switch {
    pub fn new(inner: Arc<dyn Transport>, dedup: bool) -> Arc<Switch> {
        let mut capabilities = *inner.capabilities();
        if !dedup {
            for entry in capabilities.table.iter_mut() {
                if entry.0 == Feature::Deduplication {
                    entry.1 = Support::No("this test's transport keeps no dedup window");
                }
            }
        }
        Arc::new(Switch {
            inner,
            capabilities,
            up: AtomicBool::new(true),
            failures_left: Mutex::new(HashMap::new()),
            attempts: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, AtomicOrdering::SeqCst);
    }

    pub fn fail(&self, id: &str, times: u32) {
        self.failures_left
            .lock()
            .unwrap()
            .insert(id.to_owned(), times);
    }

    pub fn stored(&self) -> Vec<Stored> {
        self.log.lock().unwrap().clone()
    }

    fn unreachable(why: &str) -> Error {
        Error::Transport {
            transport: "switch",
            message: why.to_owned(),
            source: None,
        }
    }
}

#[async_trait]
impl Transport for Switch {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    async fn declare_queue(&self, decl: &QueueDecl) -> ferry::Result<()> {
        self.inner.declare_queue(decl).await
    }
    async fn declare_topic(&self, decl: &TopicDecl) -> ferry::Result<()> {
        self.inner.declare_topic(decl).await
    }
    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> ferry::Result<()> {
        self.inner.declare_subscription(decl).await
    }
    async fn delete(&self, source: &Source) -> ferry::Result<()> {
        self.inner.delete(source).await
    }
    async fn delete_topic(&self, name: &str) -> ferry::Result<()> {
        self.inner.delete_topic(name).await
    }
    /// Not switched: the switch cuts publishes, which is what the relay's breaker counts.
    async fn dedup_window(&self, queue: &str) -> ferry::Result<Option<std::time::Duration>> {
        self.inner.dedup_window(queue).await
    }
    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> ferry::Result<()> {
        self.attempts.fetch_add(1, AtomicOrdering::SeqCst);
        if !self.up.load(AtomicOrdering::SeqCst) {
            return Err(Switch::unreachable("broker unreachable (switched off)"));
        }
        for m in &batch {
            let id = m.id.clone().unwrap_or_default();
            if let Some(left) = self.failures_left.lock().unwrap().get_mut(&id)
                && *left > 0
            {
                *left -= 1;
                return Err(Switch::unreachable("this row's publish fails for now"));
            }
        }
        let stored: Vec<Stored> = batch
            .iter()
            .map(|m| Stored {
                id: m.id.clone().unwrap_or_default(),
                key: m
                    .key
                    .as_ref()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
                dedup_id: m.dedup_id.clone(),
            })
            .collect();
        self.inner.publish(destination, batch).await?;
        self.log.lock().unwrap().extend(stored);
        Ok(())
    }
    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> ferry::Result<Box<dyn ConsumerBackend>> {
        self.inner.open_consumer(source, options).await
    }
    async fn close(&self) -> ferry::Result<()> {
        self.inner.close().await
    }
}

/// Kills the relay the first time it reaches `point` for the `nth` row (1-based).
pub struct CrashAt {
    point: FaultPoint,
    nth: usize,
    seen: AtomicUsize,
    pub fired: AtomicBool,
    pub victim: Mutex<Option<String>>,
}

impl CrashAt {
    pub fn new(point: FaultPoint, nth: usize) -> Arc<CrashAt> {
        Arc::new(CrashAt {
            point,
            nth,
            seen: AtomicUsize::new(0),
            fired: AtomicBool::new(false),
            victim: Mutex::new(None),
        })
    }
}

impl RelayHooks for CrashAt {
    fn at(&self, point: FaultPoint, row_id: &str) -> Fault {
        if point != self.point || self.fired.load(AtomicOrdering::SeqCst) {
            return Fault::Continue;
        }
        if self.seen.fetch_add(1, AtomicOrdering::SeqCst) + 1 == self.nth {
            self.fired.store(true, AtomicOrdering::SeqCst);
            *self.victim.lock().unwrap() = Some(row_id.to_owned());
            return Fault::Die;
        }
        Fault::Continue
    }
}

/// Settings small enough for tests: a 1 s lease, fast retries, a breaker opening after 3
/// failures for 300 ms.
pub fn quick() -> RelayConfig {
    RelayConfig {
        batch_size: 8,
        lease: Duration::from_secs(1),
        publish_timeout: Duration::from_millis(450),
        poll_interval: Duration::from_millis(50),
        backoff: Backoff {
            base: Duration::from_millis(30),
            cap: Duration::from_millis(200),
            multiplier: 2.0,
            jitter: 0.25,
        },
        breaker: BreakerConfig {
            failure_threshold: 3,
            open_for: Duration::from_millis(300),
        },
        ..RelayConfig::default()
    }
}

/// A broker behind a [`Switch`], with one declared queue.
pub struct Broker {
    pub ferry: Ferry,
    pub switch: Arc<Switch>,
    pub queue: String,
    /// The transport stores a repeated id once (the queue has a dedup window).
    pub dedup: bool,
}

impl Broker {
    /// Declares a fresh queue on `inner` (with a dedup window when `dedup`) and wraps it.
    pub async fn new(inner: Arc<dyn Transport>, dedup: bool) -> Broker {
        let queue = fresh("obx", "q");
        let mut decl = QueueDecl::new(&queue);
        if dedup {
            decl = decl.dedup_window(Duration::from_secs(120));
        }
        Ferry::with_transport(inner.clone())
            .declare_queue(&decl)
            .await
            .expect("declare the queue");
        let switch = Switch::new(inner, dedup);
        Broker {
            ferry: Ferry::with_transport(switch.clone()),
            switch,
            queue,
            dedup,
        }
    }

    pub fn stored(&self) -> Vec<Stored> {
        self.switch.stored()
    }

    pub fn destination(&self) -> Destination {
        Destination::queue(&self.queue)
    }

    pub fn event(&self, aggregate: &str, payload: &str) -> OutboxEvent {
        OutboxEvent::new(
            self.destination(),
            Message::new(payload.to_owned()).with_key(aggregate.to_owned()),
        )
    }

    /// Everything delivered until `distinct` different ids came, then whatever else
    /// arrives within a short wait (a duplicate would).
    pub async fn drain(&self, distinct: usize) -> Vec<Received> {
        let options = ConsumerOptions {
            prefetch: 64,
            poll: Duration::from_millis(100),
            ..ConsumerOptions::default()
        };
        let mut consumer = self
            .ferry
            .consumer(Source::queue(&self.queue), options)
            .await
            .expect("consumer");
        let mut got = Vec::new();
        let mut ids = HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(15);
        while ids.len() < distinct && Instant::now() < deadline {
            if let Some(d) = consumer
                .next_within(Duration::from_millis(200))
                .await
                .expect("fetch")
            {
                ids.insert(d.message().id.clone());
                got.push(d.message().clone());
                d.ack().await.expect("ack");
            }
        }
        assert_eq!(ids.len(), distinct, "not every event arrived in time");
        while let Some(d) = consumer
            .next_within(Duration::from_millis(600))
            .await
            .expect("fetch")
        {
            got.push(d.message().clone());
            d.ack().await.expect("ack");
        }
        consumer.close().await.ok();
        got
    }

    pub async fn delete_queue(&self) {
        self.ferry.delete(&Source::queue(&self.queue)).await.ok();
    }
}

/// Runs rounds until nothing is left unpublished.
pub async fn run_until_published(db: &dyn OutboxDb, relay: &Relay) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        relay.run_once().await.expect("a round");
        if db.backlog().await.rows == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the relay did not catch up in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `condition` holds.
pub async fn eventually(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The inbox's view: how many effects the deliveries cause when each id applies once.
pub fn effects(received: &[Received]) -> usize {
    let mut processed = HashSet::new();
    received
        .iter()
        .filter(|m| processed.insert(m.id.clone()))
        .count()
}

fn payload(m: &Received) -> String {
    String::from_utf8_lossy(&m.payload).into_owned()
}

// ---- Scenarios ----

pub async fn rollback_is_never_published(db: &dyn OutboxDb, broker: &Broker) {
    let kept = db
        .enqueue(vec![broker.event("order-1", "committed")], true)
        .await;
    let dropped = db
        .enqueue(vec![broker.event("order-2", "rolled back")], false)
        .await;
    assert_eq!(db.backlog().await.rows, 1, "only the committed row exists");
    let relay = db.relay(&broker.ferry, quick(), None).unwrap();
    run_until_published(db, &relay).await;
    let got = broker.drain(1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, kept[0]);
    assert_eq!(payload(&got[0]), "committed");
    assert!(broker.stored().iter().all(|s| s.id != dropped[0]));
}

/// Dies after publishing the 3rd row and before marking it; a fresh relay publishes
/// every event, the 3rd twice. With dedup, the broker stores it once.
pub async fn crash_after_publish_before_mark_publishes_again(db: &dyn OutboxDb, broker: &Broker) {
    let events = (0..5)
        .map(|i| broker.event(&format!("order-{i}"), &format!("event {i}")))
        .collect();
    let ids = db.enqueue(events, true).await;
    let crash = CrashAt::new(FaultPoint::Published, 3);
    let dying = db
        .relay(&broker.ferry, quick(), Some(crash.clone()))
        .unwrap();
    assert_eq!(dying.dedups(), broker.dedup);
    assert!(matches!(dying.run_once().await, Err(Error::Closed)));
    let victim = crash
        .victim
        .lock()
        .unwrap()
        .clone()
        .expect("the crash fired");
    assert!(
        db.backlog().await.rows >= 3,
        "the victim was not marked published"
    );

    let fresh_relay = db.relay(&broker.ferry, quick(), None).unwrap();
    run_until_published(db, &fresh_relay).await;

    let published = broker.stored();
    assert_eq!(
        published.iter().filter(|s| s.id == victim).count(),
        2,
        "the victim is published again after the restart"
    );
    for s in &published {
        if broker.dedup {
            assert_eq!(
                s.dedup_id.as_deref(),
                Some(s.id.as_str()),
                "dedup id = row id"
            );
        } else {
            assert_eq!(
                s.dedup_id, None,
                "no dedup id where the transport has no dedup"
            );
        }
    }
    let got = broker.drain(ids.len()).await;
    let distinct: HashSet<&str> = got.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(distinct, ids.iter().map(String::as_str).collect());
    assert_eq!(
        effects(&got),
        ids.len(),
        "each event has exactly one effect"
    );
    if broker.dedup {
        assert_eq!(got.len(), ids.len(), "the repeated publish is stored once");
    } else {
        assert_eq!(
            got.len(),
            ids.len() + 1,
            "without dedup the repeat is delivered, and the inbox absorbs it"
        );
    }
}

/// Dies after claiming the 2nd row, before publishing it; once the lease lapses a fresh
/// relay publishes everything, each event once.
pub async fn crash_after_claim_before_publish_loses_nothing(db: &dyn OutboxDb, broker: &Broker) {
    let events = (0..4)
        .map(|i| broker.event(&format!("cart-{i}"), &format!("event {i}")))
        .collect();
    let ids = db.enqueue(events, true).await;
    let crash = CrashAt::new(FaultPoint::Claimed, 2);
    let dying = db
        .relay(&broker.ferry, quick(), Some(crash.clone()))
        .unwrap();
    assert!(matches!(dying.run_once().await, Err(Error::Closed)));
    assert_eq!(
        broker.stored().len(),
        1,
        "only the row before the crash went out"
    );

    // The dead relay's claims hold the other rows until the lease ends.
    let fresh_relay = db.relay(&broker.ferry, quick(), None).unwrap();
    let round = fresh_relay.run_once().await.unwrap();
    assert_eq!(
        round.claimed, 0,
        "claimed rows are not taken before their lease ends"
    );
    run_until_published(db, &fresh_relay).await;
    let got = broker.drain(ids.len()).await;
    assert_eq!(got.len(), ids.len(), "each event exactly once");
    assert_eq!(broker.stored().len(), ids.len());
}

/// Two relays on one table: each row published once, each aggregate in enqueue order.
pub async fn two_relays_publish_each_row_once_in_aggregate_order(
    db: &dyn OutboxDb,
    broker: &Broker,
) {
    let aggregates = ["a", "b", "c", "d", "e"];
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for round in 0..4 {
        let events: Vec<OutboxEvent> = (0..10)
            .map(|i| {
                let aggregate = aggregates[(i + round) % aggregates.len()];
                broker.event(aggregate, &format!("{aggregate}-{round}-{i}"))
            })
            .collect();
        let keys: Vec<String> = events
            .iter()
            .map(|e| String::from_utf8_lossy(e.message.key.as_ref().unwrap()).into_owned())
            .collect();
        let ids = db.enqueue(events, true).await;
        for (key, id) in keys.into_iter().zip(ids) {
            expected.entry(key).or_default().push(id);
        }
    }
    let total: usize = expected.values().map(Vec::len).sum();
    // Each relay has its own name (the default config makes a fresh one each time).
    let config = || RelayConfig {
        batch_size: 3,
        ..quick()
    };
    let one = db.relay(&broker.ferry, config(), None).unwrap().spawn();
    let two = db.relay(&broker.ferry, config(), None).unwrap().spawn();
    eventually("the backlog to drain", async || {
        db.backlog().await.rows == 0
    })
    .await;
    one.shutdown().await.unwrap();
    two.shutdown().await.unwrap();

    let stored = broker.stored();
    assert_eq!(stored.len(), total, "each row published exactly once");
    let mut by_aggregate: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in stored {
        by_aggregate
            .entry(s.key.clone().unwrap())
            .or_default()
            .push(s.id.clone());
    }
    assert_eq!(by_aggregate, expected, "per-aggregate order kept");
    let got = broker.drain(total).await;
    assert_eq!(got.len(), total, "each row delivered exactly once");
}

/// A row that keeps failing holds back the later rows of its aggregate — through its
/// retry backoff — and nothing else.
pub async fn a_failing_row_holds_back_its_aggregate_only(db: &dyn OutboxDb, broker: &Broker) {
    let ids = db
        .enqueue(
            vec![
                broker.event("x", "x1"),
                broker.event("x", "x2"),
                broker.event("y", "y1"),
            ],
            true,
        )
        .await;
    broker.switch.fail(&ids[0], 3);
    let relay = db.relay(&broker.ferry, quick(), None).unwrap();
    let first = relay.run_once().await.unwrap();
    assert_eq!((first.claimed, first.published, first.failed), (2, 1, 1));
    assert_eq!(broker.stored()[0].id, ids[2], "y1 is not held back by x");
    run_until_published(db, &relay).await;
    let order: Vec<String> = broker.stored().into_iter().map(|s| s.id).collect();
    assert_eq!(order, vec![ids[2].clone(), ids[0].clone(), ids[1].clone()]);
}

/// The broker goes away: the breaker opens, the relay stops calling, rows pile up (the
/// backlog rises), and once the broker is back everything is published by itself.
pub async fn broker_outage_opens_the_breaker_and_recovery_publishes_all(
    db: &dyn OutboxDb,
    broker: &Broker,
) {
    broker.switch.set_up(false);
    let config = quick();
    let relay = db.relay(&broker.ferry, config.clone(), None).unwrap();
    let running = relay.clone().spawn();
    let mut ids = db
        .enqueue(vec![broker.event("p", "before outage noticed")], true)
        .await;
    eventually("the breaker to open", async || {
        matches!(relay.breaker().state(), BreakerState::Open { .. })
    })
    .await;
    let attempts_at_open = broker.switch.attempts.load(AtomicOrdering::SeqCst);
    let opened = Instant::now();
    for i in 0..3 {
        ids.extend(
            db.enqueue(
                (0..3)
                    .map(|j| broker.event(&format!("k{j}"), &format!("during outage {i}.{j}")))
                    .collect(),
                true,
            )
            .await,
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let backlog = relay.backlog().await.unwrap();
    assert_eq!(
        backlog.rows,
        ids.len() as u64,
        "rows accumulate in the table"
    );
    assert!(backlog.oldest_age >= Duration::from_millis(500));
    // While open, the breaker lets one trial through per `open_for`: the relay does not
    // hammer the dead broker.
    let trials = broker.switch.attempts.load(AtomicOrdering::SeqCst) - attempts_at_open;
    let windows = opened.elapsed().as_millis() / config.breaker.open_for.as_millis() + 1;
    assert!(
        trials as u128 <= windows,
        "{trials} publish attempts in {windows} breaker windows"
    );
    assert!(broker.stored().is_empty());

    broker.switch.set_up(true);
    eventually("the backlog to drain after recovery", async || {
        db.backlog().await.rows == 0
    })
    .await;
    assert_eq!(relay.breaker().state(), BreakerState::Closed);
    running.shutdown().await.unwrap();
    let got = broker.drain(ids.len()).await;
    assert_eq!(got.len(), ids.len());
}

/// Published rows stay for the retention, then the cleanup deletes them; unpublished rows
/// are never deleted.
pub async fn retention_cleanup_deletes_only_published_rows_past_retention(
    db: &dyn OutboxDb,
    broker: &Broker,
) {
    let ids = db
        .enqueue(vec![broker.event("r", "1"), broker.event("s", "2")], true)
        .await;
    broker.switch.fail(&ids[1], 1000);
    let config = RelayConfig {
        retention: Duration::from_millis(300),
        cleanup_interval: Duration::from_millis(1),
        ..quick()
    };
    let relay = db.relay(&broker.ferry, config, None).unwrap();
    let round = relay.run_once().await.unwrap();
    assert_eq!((round.published, round.failed), (1, 1));
    assert_eq!(
        db.rows().await,
        2,
        "a published row is kept during its retention"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let round = relay.run_once().await.unwrap();
    assert_eq!(round.purged, 1);
    assert_eq!(db.rows().await, 1, "the unpublished row stays");
    assert_eq!(db.backlog().await.rows, 1);
}

/// Without dedup on the transport, `require_dedup` refuses to build the relay.
pub async fn require_dedup_refuses_a_transport_without_dedup(db: &dyn OutboxDb, broker: &Broker) {
    assert!(!broker.dedup);
    let config = RelayConfig {
        require_dedup: true,
        ..quick()
    };
    let err = db
        .relay(&broker.ferry, config, None)
        .err()
        .expect("refused");
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(!db.relay(&broker.ferry, quick(), None).unwrap().dedups());
}

/// Takes `per_row` before each row's publish, as a slow broker would.
pub struct SlowPublish {
    pub per_row: Duration,
}

impl RelayHooks for SlowPublish {
    fn at(&self, point: FaultPoint, _row_id: &str) -> Fault {
        if point == FaultPoint::Claimed {
            // Blocking on purpose: the hook is synchronous, and the test runtime has a
            // second worker thread.
            std::thread::sleep(self.per_row);
        }
        Fault::Continue
    }
}

/// A batch whose rows take longer to publish than its lease lasts: the rows the lease can
/// no longer cover are handed back untried, so another relay may take them at once and
/// never publishes a row this relay is still publishing.
pub async fn rows_the_lease_cannot_cover_are_handed_back_untried(
    db: &dyn OutboxDb,
    broker: &Broker,
) {
    let events = (0..4)
        .map(|i| broker.event(&format!("slow-{i}"), &format!("event {i}")))
        .collect();
    let ids = db.enqueue(events, true).await;
    // A 1 s lease and a 450 ms publish timeout: with 300 ms per row, the third row starts
    // at least 600 ms into the lease, with less than the publish timeout left.
    let slow = db
        .relay(
            &broker.ferry,
            quick(),
            Some(Arc::new(SlowPublish {
                per_row: Duration::from_millis(300),
            })),
        )
        .unwrap();
    let round = slow.run_once().await.unwrap();
    assert_eq!(round.claimed, 4);
    assert!(round.released >= 2, "{round:?}");
    assert_eq!(round.published + round.released, 4, "{round:?}");

    // Handed back, not left under a lease: another relay takes them now.
    let other = db.relay(&broker.ferry, quick(), None).unwrap();
    let taken = other.run_once().await.unwrap();
    assert_eq!(taken.claimed, round.released, "{taken:?}");
    assert_eq!(taken.published, round.released, "{taken:?}");
    assert_eq!(db.backlog().await.rows, 0);
    let got = broker.drain(ids.len()).await;
    assert_eq!(got.len(), ids.len(), "each event exactly once");
    assert_eq!(broker.stored().len(), ids.len());
}
