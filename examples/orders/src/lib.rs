//! The seeds' e-commerce order flow on Ferry, with every pattern at work:
//!
//! 1. the **order service** writes each order and its `OrderPlaced` event in one database
//!    transaction through the **transactional outbox**; a **relay** publishes the events to
//!    the `events` topic;
//! 2. **fan-out**: the saga starter, email and analytics each read every event on their
//!    own subscription;
//! 3. the **saga** `order` accepts the order, reserves inventory, charges payment and
//!    confirms — each step a command to a participant's queue, answered on the reply
//!    queue; a declined card runs the compensations in reverse (release the stock, cancel
//!    the order, which announces `OrderCancelled`);
//! 4. every participant and the email service are **idempotent consumers**: effect and
//!    inbox record commit together, so a redelivered message has no second effect;
//! 5. handlers run in the **middleware** stack (tracing, metrics, poison → dead letter,
//!    dedup, panic → retry);
//! 6. injected faults: a poison order no one can read (**dead-letter queues**), declined
//!    cards (**compensation**), an email worker that crashes between sending and acking
//!    and an analytics handler that panics (**redelivery**, duplicates suppressed), and a
//!    **broker restart** half-way.
//!
//! [`run`] returns a [`Summary`] after checking every invariant: each order confirmed or
//! compensated as planned with exactly its effects, one email per event, every poison
//! event in a dead-letter queue with its reason.

pub mod domain;
mod listeners;
mod participants;
pub mod shop;
pub mod topology;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use ferry::inbox::{MemoryDedupStore, SqliteInbox};
use ferry::middleware::{BoxHandler, DedupLayer, PoisonLayer, Worker, handler_fn, stack};
use ferry::outbox::{RelayConfig, RelayHandle, SqliteOutbox};
use ferry::saga::{
    Orchestrator, Running, SagaDefinition, SagaOptions, SagaStore, SqliteSagaStore, Step,
};
use ferry::{ConsumerOptions, Feature, Ferry, Source};
use sqlx::SqlitePool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use domain::{Fate, FaultPlan};
use listeners::{Analytics, Email};
use participants::{Participant, Role};
use shop::OrderService;
use topology::Names;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The transport's URL; `None` for the embedded broker in `data/broker`.
    pub transport: Option<String>,
    /// Where the embedded broker and the shop's SQLite database live.
    pub data: PathBuf,
    pub orders: u32,
    /// Restart the broker (embedded: close and reopen it from disk; other transports:
    /// reconnect) once half the orders are placed.
    pub restart_broker: bool,
    /// Longest wait for the flow to settle.
    pub timeout: Duration,
}

/// Counters the services keep as they go.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages an inbox recognised as processed already.
    pub duplicates_suppressed: AtomicU64,
    /// Email worker crashes between sending and acking.
    pub crashes_injected: AtomicU64,
    /// The orders whose email worker has crashed once already.
    pub crashed_orders: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Analytics handler panics.
    pub panics_injected: AtomicU64,
}

/// What a run did; every figure checked against the fault plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub transport: String,
    pub placed: u32,
    pub confirmed: u32,
    /// Declined payments: compensated (stock released, order cancelled).
    pub compensated: u32,
    /// Orders whose event no one could read.
    pub poison: u32,
    /// Dead letters by source, with their reasons.
    pub dead_letters: BTreeMap<String, Vec<String>>,
    pub duplicates_suppressed: u64,
    pub crashes_injected: u64,
    pub panics_injected: u64,
    pub broker_restarts: u32,
    pub emails_sent: u64,
    pub analytics_events: u64,
    pub payments_charged: u64,
    pub reservations_held: u64,
    pub elapsed_ms: u128,
}

impl Summary {
    pub fn dead_letter_count(&self) -> usize {
        self.dead_letters.values().map(Vec::len).sum()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "orders on {} — summary", self.transport)?;
        writeln!(f, "  orders placed            {}", self.placed)?;
        writeln!(f, "  confirmed                {}", self.confirmed)?;
        writeln!(
            f,
            "  compensated              {}  (card declined: stock released, order cancelled)",
            self.compensated
        )?;
        writeln!(
            f,
            "  poison orders            {}  (unreadable event, dead-lettered by every reader)",
            self.poison
        )?;
        writeln!(f, "  dead-letter entries      {}", self.dead_letter_count())?;
        for (source, reasons) in &self.dead_letters {
            let mut counted: BTreeMap<&str, usize> = BTreeMap::new();
            for reason in reasons {
                *counted.entry(reason).or_default() += 1;
            }
            for (reason, n) in counted {
                writeln!(f, "    {source}: {n} × {reason}")?;
            }
        }
        writeln!(
            f,
            "  duplicates suppressed    {}  (inbox: redelivered events and re-sent commands)",
            self.duplicates_suppressed
        )?;
        writeln!(
            f,
            "  faults injected          {} email crashes before ack, {} analytics panics, {} broker restart(s)",
            self.crashes_injected, self.panics_injected, self.broker_restarts
        )?;
        writeln!(
            f,
            "  effects                  {} emails, {} analytics events, {} payments charged, {} reservations held",
            self.emails_sent, self.analytics_events, self.payments_charged, self.reservations_held
        )?;
        write!(
            f,
            "  every order where it belongs, one effect each ({} ms)",
            self.elapsed_ms
        )
    }
}

/// What outlives a broker restart: the database, the plan, the counters.
struct Shared {
    url: String,
    names: Names,
    pool: SqlitePool,
    orders: OrderService,
    plan: FaultPlan,
    stats: Arc<Stats>,
    analytics_counts: Arc<Mutex<BTreeMap<String, u64>>>,
    /// Analytics dedups in memory: records survive the broker restart, not the process.
    analytics_dedup: Arc<MemoryDedupStore>,
}

/// The running services of one connection to the broker.
struct Services {
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<ferry::Result<()>>>,
    relay: RelayHandle,
    saga: Running,
}

pub async fn run(config: Config) -> anyhow::Result<Summary> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.data)
        .with_context(|| format!("creating {}", config.data.display()))?;
    let url = match &config.transport {
        Some(url) => url.clone(),
        None => format!("embedded:{}", config.data.join("broker").display()),
    };
    let run = ferry::message::new_id().to_lowercase();
    let names = Names::new(&run);
    let plan = FaultPlan {
        orders: config.orders,
    };
    let pool = shop::open(&config.data.join(format!("shop-{run}.db"))).await?;
    let outbox = SqliteOutbox::with_table(pool.clone(), "outbox")?;
    outbox.install().await?;
    let orders = OrderService {
        pool: pool.clone(),
        outbox,
        events: names.events.clone(),
        run: run.clone(),
        plan,
    };
    let shared = Shared {
        url,
        names,
        pool,
        orders,
        plan,
        stats: Arc::new(Stats::default()),
        analytics_counts: Arc::default(),
        analytics_dedup: Arc::new(MemoryDedupStore::new()),
    };
    SqliteSagaStore::new(shared.pool.clone()).install().await?;
    for role in ["orders", "inventory", "payment", "email"] {
        inbox(role)?.install(&shared.pool).await?;
    }

    let mut ferry = Ferry::connect(&shared.url)
        .await
        .with_context(|| format!("connecting to {}", shared.url))?;
    let transport = ferry.capabilities().transport.to_string();
    topology::declare(&ferry, &shared.names).await?;
    let mut services = start(&shared, &ferry).await?;
    let mut broker_restarts = 0;

    for n in 1..=plan.orders {
        shared.orders.place(n).await?;
        if config.restart_broker && n == plan.orders / 2 {
            // Let some sagas get under way, so the restart lands mid-flow.
            tokio::time::sleep(Duration::from_millis(300)).await;
            services.stop().await?;
            ferry.close().await?;
            ferry = Ferry::connect(&shared.url).await?;
            services = start(&shared, &ferry).await?;
            broker_restarts += 1;
        }
    }

    let outcome = settle(&shared, config.timeout).await;
    services.stop().await?;
    let dead_letters = match outcome {
        Ok(()) => read_dead_letters(&shared, &ferry).await,
        Err(e) => Err(e),
    };
    let cleanup = topology::delete(&ferry, &shared.names).await;
    ferry.close().await?;
    let dead_letters = dead_letters?;
    cleanup?;
    let summary = check(&shared, transport, dead_letters, broker_restarts, started).await?;
    shared.pool.close().await;
    Ok(summary)
}

fn inbox(role: &str) -> ferry::Result<SqliteInbox> {
    SqliteInbox::new(&format!("inbox_{role}"))
}

fn consumer_options() -> ConsumerOptions {
    ConsumerOptions {
        prefetch: 8,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    }
}

async fn start(shared: &Shared, ferry: &Ferry) -> anyhow::Result<Services> {
    let names = &shared.names;
    let relay = shared
        .orders
        .outbox
        .relay(
            ferry,
            RelayConfig {
                poll_interval: Duration::from_millis(50),
                publish_timeout: Duration::from_secs(5),
                ..RelayConfig::default()
            },
        )?
        .spawn();

    let definition = SagaDefinition::new("order")
        .step(
            Step::new("accept-order", &names.order_commands).compensate_with(&names.order_commands),
        )
        .step(Step::new("reserve-inventory", &names.inventory).compensate_with(&names.inventory))
        .step(Step::new("charge-payment", &names.payment).compensate_with(&names.payment))
        .step(Step::new("confirm-order", &names.order_commands))
        .deadline(Duration::from_secs(120));
    let orchestrator = Orchestrator::new(
        ferry.clone(),
        SqliteSagaStore::new(shared.pool.clone()),
        definition,
        SagaOptions::new(&names.saga_replies)
            // Where the transport keeps a dedup window (the command queues are declared with
            // one), a re-sent command is stored once; elsewhere the participants' inboxes
            // absorb it.
            .dedup_ids(ferry.capabilities().supports(Feature::Deduplication))
            .step_timeout(Duration::from_secs(10))
            .sweep_interval(Duration::from_millis(250)),
    )?;
    let saga = orchestrator.run().await?;

    let max_deliveries = topology::policy().max_deliveries;
    let (stop, stopped) = watch::channel(false);
    let mut workers = Vec::new();
    let mut spawn = async |source: Source, handler: BoxHandler| -> anyhow::Result<()> {
        let consumer = ferry.consumer(source, consumer_options()).await?;
        let mut stopped = stopped.clone();
        let worker = Worker::new(consumer, handler).poll(Duration::from_millis(100));
        workers.push(tokio::spawn(worker.run(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })));
        Ok(())
    };

    let starter = orchestrator.clone();
    spawn(
        Source::subscription(&names.events, &names.saga_starter),
        stack()
            .poison(PoisonLayer::new(max_deliveries)?)
            .build(handler_fn(move |ctx| {
                listeners::start_saga(starter.clone(), ctx)
            })),
    )
    .await?;

    let email = Email {
        pool: shared.pool.clone(),
        inbox: inbox("email")?,
        plan: shared.plan,
        stats: shared.stats.clone(),
    };
    spawn(
        Source::subscription(&names.events, &names.email),
        stack()
            .poison(PoisonLayer::new(max_deliveries)?)
            .build(handler_fn(move |ctx| {
                let email = email.clone();
                async move { email.handle(ctx).await }
            })),
    )
    .await?;

    let analytics = Analytics {
        counts: shared.analytics_counts.clone(),
        plan: shared.plan,
        stats: shared.stats.clone(),
    };
    spawn(
        Source::subscription(&names.events, &names.analytics),
        stack()
            .poison(PoisonLayer::new(max_deliveries)?)
            .dedup(DedupLayer::new(shared.analytics_dedup.clone()))
            .build(handler_fn(move |ctx| {
                let analytics = analytics.clone();
                async move { analytics.handle(ctx).await }
            })),
    )
    .await?;

    for (role, queue, inbox_name) in [
        (Role::Orders, &names.order_commands, "orders"),
        (Role::Inventory, &names.inventory, "inventory"),
        (Role::Payment, &names.payment, "payment"),
    ] {
        let participant = Participant {
            role,
            ferry: ferry.clone(),
            pool: shared.pool.clone(),
            inbox: inbox(inbox_name)?,
            orders: shared.orders.clone(),
            plan: shared.plan,
            stats: shared.stats.clone(),
        };
        spawn(
            Source::queue(queue.as_str()),
            stack()
                .poison(PoisonLayer::new(max_deliveries)?)
                .build(handler_fn(move |ctx| {
                    let participant = participant.clone();
                    async move { participant.handle(ctx).await }
                })),
        )
        .await?;
    }
    Ok(Services {
        stop,
        workers,
        relay,
        saga,
    })
}

impl Services {
    /// Stops everything: workers finish what they hold and settle it.
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.send_replace(true);
        let mut first_error = None;
        for worker in self.workers {
            if let Err(e) = worker.await? {
                first_error.get_or_insert(anyhow::Error::from(e));
            }
        }
        self.saga.stop().await;
        self.relay.shutdown().await?;
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Waits until every order is settled as planned and every event handled.
async fn settle(shared: &Shared, timeout: Duration) -> anyhow::Result<()> {
    let plan = shared.plan;
    let want_confirmed = i64::from(plan.count(Fate::Confirmed));
    let want_cancelled = i64::from(plan.count(Fate::Declined));
    let valid = u64::from(plan.orders - plan.count(Fate::Poison));
    let give_up = Instant::now() + timeout;
    loop {
        let confirmed = shared.orders.count("CONFIRMED").await?;
        let cancelled = shared.orders.count("CANCELLED").await?;
        let emails = emails_sent(&shared.pool).await?;
        let analytics = analytics_events(shared);
        if confirmed == want_confirmed
            && cancelled == want_cancelled
            && emails >= 2 * valid
            && analytics >= 2 * valid
        {
            return Ok(());
        }
        if Instant::now() >= give_up {
            bail!(
                "not settled after {timeout:?}: {confirmed}/{want_confirmed} confirmed, \
                 {cancelled}/{want_cancelled} cancelled, {emails}/{} emails, {analytics}/{} \
                 analytics events, outbox backlog {:?}",
                2 * valid,
                2 * valid,
                shared.orders.outbox.backlog().await?
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn emails_sent(pool: &SqlitePool) -> anyhow::Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM emails")
        .fetch_one(pool)
        .await?;
    Ok(n as u64)
}

fn analytics_events(shared: &Shared) -> u64 {
    shared
        .analytics_counts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .sum()
}

/// Reads (and clears) the dead-letter queues of the event subscriptions: every poison
/// event is in each, with the reason it died.
async fn read_dead_letters(
    shared: &Shared,
    ferry: &Ferry,
) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let names = &shared.names;
    let poison = shared.plan.count(Fate::Poison) as usize;
    let mut found = BTreeMap::new();
    for subscription in names.subscriptions() {
        let source = Source::subscription(&names.events, subscription).dead_letters();
        let mut consumer = ferry.consumer(source, consumer_options()).await?;
        let mut reasons = Vec::new();
        while reasons.len() < poison {
            let Some(delivery) = consumer.next_within(Duration::from_secs(10)).await? else {
                bail!(
                    "{subscription}: {} of {poison} poison events dead-lettered",
                    reasons.len()
                );
            };
            let info = delivery
                .dead_letter
                .clone()
                .context("a dead letter without its metadata")?;
            reasons.push(format!(
                "{} at delivery {}: {}",
                info.reason,
                info.deliveries,
                info.last_error.as_deref().unwrap_or("-")
            ));
            delivery.ack().await?;
        }
        consumer.close().await?;
        let label = subscription
            .strip_suffix(&format!("-{}", names.run))
            .unwrap_or(subscription)
            .to_owned();
        found.insert(format!("{label}.dlq"), reasons);
    }
    Ok(found)
}

/// Checks every effect against the plan, and builds the summary.
async fn check(
    shared: &Shared,
    transport: String,
    dead_letters: BTreeMap<String, Vec<String>>,
    broker_restarts: u32,
    started: Instant,
) -> anyhow::Result<Summary> {
    let plan = shared.plan;
    let pool = &shared.pool;
    let valid = u64::from(plan.orders - plan.count(Fate::Poison));
    for n in 1..=plan.orders {
        let id = domain::order_id(&shared.names.run, n);
        let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE id = ?1")
            .bind(&id)
            .fetch_one(pool)
            .await?;
        let reservation: Option<String> =
            sqlx::query_scalar("SELECT status FROM reservations WHERE order_id = ?1")
                .bind(&id)
                .fetch_optional(pool)
                .await?;
        let payment: Option<String> =
            sqlx::query_scalar("SELECT status FROM payments WHERE order_id = ?1")
                .bind(&id)
                .fetch_optional(pool)
                .await?;
        let (want_status, want_reservation, want_payment) = match plan.fate(n) {
            Fate::Confirmed => ("CONFIRMED", Some("RESERVED"), Some("CHARGED")),
            Fate::Declined => ("CANCELLED", Some("RELEASED"), Some("DECLINED")),
            Fate::Poison => ("PLACED", None, None),
        };
        ensure!(
            (status.as_str(), reservation.as_deref(), payment.as_deref())
                == (want_status, want_reservation, want_payment),
            "order {id}: {status}, reservation {reservation:?}, payment {payment:?}; \
             expected {want_status}, {want_reservation:?}, {want_payment:?}"
        );
    }
    // Stock: exactly the held reservations are taken out.
    let held = u64::from(plan.count(Fate::Confirmed));
    for sku in shop::SKUS {
        let available: i64 = sqlx::query_scalar("SELECT available FROM stock WHERE sku = ?1")
            .bind(sku)
            .fetch_one(pool)
            .await?;
        let mut taken = 0;
        for n in (1..=plan.orders).filter(|&n| plan.fate(n) == Fate::Confirmed) {
            let order = domain::placed(&shared.names.run, n);
            taken += order
                .lines
                .iter()
                .filter(|l| l.sku == sku)
                .map(|l| l.quantity)
                .sum::<i64>();
        }
        ensure!(
            available == shop::INITIAL_STOCK - taken,
            "{sku}: {available} in stock, expected {}",
            shop::INITIAL_STOCK - taken
        );
    }
    let emails = emails_sent(pool).await?;
    ensure!(
        emails == 2 * valid,
        "{emails} emails for {valid} readable orders (2 each)"
    );
    let analytics = analytics_events(shared);
    ensure!(
        analytics == 2 * valid,
        "{analytics} analytics events for {valid} readable orders (2 each)"
    );
    let poison = plan.count(Fate::Poison);
    let dead = dead_letters.values().map(Vec::len).sum::<usize>();
    ensure!(
        dead == 3 * poison as usize,
        "{dead} dead letters for {poison} poison orders on 3 subscriptions"
    );
    let stats = &shared.stats;
    let duplicates = stats.duplicates_suppressed.load(Ordering::Relaxed);
    let crashes = stats.crashes_injected.load(Ordering::Relaxed);
    ensure!(
        duplicates >= crashes,
        "{crashes} email crashes but only {duplicates} duplicates suppressed"
    );
    let payments_charged: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM payments WHERE status = 'CHARGED'")
            .fetch_one(pool)
            .await?;
    Ok(Summary {
        transport,
        placed: plan.orders,
        confirmed: plan.count(Fate::Confirmed),
        compensated: plan.count(Fate::Declined),
        poison,
        dead_letters,
        duplicates_suppressed: duplicates,
        crashes_injected: crashes,
        panics_injected: stats.panics_injected.load(Ordering::Relaxed),
        broker_restarts,
        emails_sent: emails,
        analytics_events: analytics,
        payments_charged: payments_charged as u64,
        reservations_held: held,
        elapsed_ms: started.elapsed().as_millis(),
    })
}
