//! [`Relay`]: publishes committed outbox rows, at least once, in order per aggregate.
//!
//! One round: claim due rows under a lease, publish each through the breaker, mark it
//! published or failed (with a backoff), release what the breaker kept back. The crash
//! windows, and why each is safe:
//!
//! - died after claiming, before publishing: the rows stay claimed until the lease ends,
//!   then any relay claims them again. Nothing was published; nothing is lost.
//! - died after publishing, before marking: the row is claimed again after the lease and
//!   published again with the same id and dedup id. A deduplicating transport stores it
//!   once; otherwise the consumer's inbox sees the id twice and applies it once.
//! - died after marking: nothing to redo.
//!
//! Later rows of an aggregate are not claimable while an earlier one is unpublished (see
//! [`Store::claim`]), so a crash or a failing row holds its aggregate back, never reorders
//! it.
//!
//! The trade-off: a round takes at most one row per aggregate (its oldest unpublished
//! one), so one busy aggregate drains at a row per round — rounds run back to back while
//! there is work — and many aggregates drain a batch per round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::breaker::CircuitBreaker;
use crate::capability::Feature;
use crate::error::{Error, Result};
use crate::ferry::Ferry;
use crate::message::{now_ms, truncate_error};

use super::backlog::{Backlog, PUBLISH_FAILURES, PUBLISHED};
use super::config::RelayConfig;
use super::hooks::{Fault, FaultPoint, RelayHooks};
use super::row::ClaimedRow;
use super::store::Store;

/// Rows deleted per statement by the retention cleanup, so one cleanup never holds a long
/// lock on a large table.
const PURGE_CHUNK: usize = 1000;

/// How often the backlog gauges are refreshed by a running relay.
const BACKLOG_EVERY: Duration = Duration::from_secs(1);

/// How long the relay trusts what it learnt of a queue's dedup window.
const WINDOW_KEPT: Duration = Duration::from_secs(60);

/// Publishes the rows of one outbox table through one [`Ferry`]. Clones share one breaker
/// and one relay name: run one loop ([`spawn`](Relay::spawn) or
/// [`run_once`](Relay::run_once)) per relay, and build another relay for more.
#[derive(Clone)]
pub struct Relay {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    ferry: Ferry,
    config: RelayConfig,
    breaker: CircuitBreaker,
    dedup: bool,
    /// Whether each destination queue has a dedup window, and when that was learnt: a
    /// dedup id goes only where a window acts on it (elsewhere it is refused).
    windows: Mutex<HashMap<String, (bool, Instant)>>,
    hooks: Option<Arc<dyn RelayHooks>>,
    last_cleanup: Mutex<Option<Instant>>,
    last_backlog: Mutex<Option<Instant>>,
}

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Round {
    pub claimed: usize,
    pub published: usize,
    pub failed: usize,
    /// Claimed but handed back untried: the breaker opened, or too little of the lease
    /// was left to publish them within it.
    pub released: usize,
    /// The breaker refused the round before anything was claimed.
    pub breaker_open: bool,
    /// Published rows deleted past their retention.
    pub purged: u64,
}

/// Why a round stopped early.
enum Stop {
    /// A hook asked the relay to die.
    Died,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Failed(e)
    }
}

impl Relay {
    /// Decides here, once, whether messages carry a dedup id: only where the transport
    /// deduplicates. Elsewhere the relay publishes without one — duplicates after a crash
    /// are then left to the consumer's inbox — and says so in a warning, or refuses to be
    /// built when `require_dedup` is set.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        ferry: &Ferry,
        config: RelayConfig,
        hooks: Option<Arc<dyn RelayHooks>>,
    ) -> Result<Relay> {
        config.validate()?;
        let capabilities = ferry.capabilities();
        let dedup = capabilities.supports(Feature::Deduplication);
        if !dedup {
            if config.require_dedup {
                capabilities.require(Feature::Deduplication)?;
            }
            tracing::warn!(
                table = %store.table(),
                transport = capabilities.transport,
                "the outbox relay publishes without dedup ids: this transport cannot \
                 deduplicate, so a publish repeated after a crash reaches consumers twice \
                 (their inbox must absorb it)"
            );
        }
        Ok(Relay {
            inner: Arc::new(Inner {
                store,
                ferry: ferry.clone(),
                breaker: CircuitBreaker::new(config.breaker),
                config,
                dedup,
                windows: Mutex::new(HashMap::new()),
                hooks,
                last_cleanup: Mutex::new(None),
                last_backlog: Mutex::new(None),
            }),
        })
    }

    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    /// Whether published messages carry a dedup id (the transport deduplicates).
    pub fn dedups(&self) -> bool {
        self.inner.dedup
    }

    pub fn breaker(&self) -> &CircuitBreaker {
        &self.inner.breaker
    }

    /// Unpublished rows and the age of the oldest; also refreshes the gauges.
    pub async fn backlog(&self) -> Result<Backlog> {
        let backlog = self.inner.store.backlog(now_ms()).await?;
        backlog.record(self.inner.store.table());
        Ok(backlog)
    }

    /// Deletes published rows older than the retention now; returns how many.
    pub async fn purge_published(&self) -> Result<u64> {
        let before = now_ms().saturating_sub(
            i64::try_from(self.inner.config.retention.as_millis()).unwrap_or(i64::MAX),
        );
        let mut total = 0;
        loop {
            let n = self
                .inner
                .store
                .purge_published(before, PURGE_CHUNK)
                .await?;
            total += n;
            if n < PURGE_CHUNK as u64 {
                return Ok(total);
            }
        }
    }

    /// One round: cleanup when due, then claim, publish and mark one batch. A hook that
    /// kills the relay makes this return [`Error::Closed`] with the round's rows left as
    /// a crash would leave them.
    pub async fn run_once(&self) -> Result<Round> {
        match self.round().await {
            Ok(round) => Ok(round),
            Err(Stop::Died) => Err(Error::Closed),
            Err(Stop::Failed(e)) => Err(e),
        }
    }

    /// Runs rounds until [`RelayHandle::shutdown`]: back to back while there is work, else
    /// waiting for a notification (PostgreSQL), the poll interval, or the breaker. Database
    /// and broker errors are logged and retried; only a hook's [`Fault::Die`] ends it early.
    pub fn spawn(self) -> RelayHandle {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(self.run(stopped));
        RelayHandle { stop, task }
    }

    async fn run(self, mut stopped: watch::Receiver<bool>) -> Result<()> {
        let mut wakeups = match self.inner.store.wakeups().await {
            Ok(wakeups) => wakeups,
            Err(e) => {
                tracing::warn!(error = %e, "outbox relay cannot listen for new rows; polling");
                None
            }
        };
        loop {
            if *stopped.borrow() {
                return Ok(());
            }
            let more = match self.round().await {
                // Rows were claimed: the next ones of their aggregates may be due now, and
                // rows handed back for want of lease are due at once — unless the breaker
                // opened, which the wait below honours.
                Ok(round) => round.claimed > 0 && self.inner.breaker.wait().is_zero(),
                Err(Stop::Died) => return Err(Error::Closed),
                Err(Stop::Failed(e)) => {
                    tracing::warn!(error = %e, table = %self.inner.store.table(), "outbox relay round failed");
                    false
                }
            };
            self.refresh_backlog().await;
            if more {
                continue;
            }
            let mut wait = self.inner.config.poll_interval;
            let breaker_wait = self.inner.breaker.wait();
            if !breaker_wait.is_zero() {
                wait = wait.min(breaker_wait);
            }
            tokio::select! {
                _ = stopped.changed() => return Ok(()),
                _ = async {
                    match wakeups.as_mut() {
                        Some(w) => w.wait(wait).await,
                        None => tokio::time::sleep(wait).await,
                    }
                } => {}
            }
        }
    }

    async fn round(&self) -> Result<Round, Stop> {
        let inner = &*self.inner;
        let mut round = Round {
            purged: self.cleanup_if_due().await?,
            ..Round::default()
        };
        // An open breaker skips the round. Once its time is up, rows are claimed first and
        // the breaker asked per row below, so the half-open trial is always a real publish
        // (a round with nothing due must not pass for a successful trial).
        if !inner.breaker.wait().is_zero() {
            round.breaker_open = true;
            return Ok(round);
        }
        let now = now_ms();
        let lease_ends = now.saturating_add(inner.config.lease_ms());
        let rows = inner
            .store
            .claim(&inner.config.name, now, lease_ends, inner.config.batch_size)
            .await?;
        round.claimed = rows.len();
        let publish_timeout_ms =
            i64::try_from(inner.config.publish_timeout.as_millis()).unwrap_or(i64::MAX);
        for (i, row) in rows.iter().enumerate() {
            // The lease covers the whole batch, but the rows go out one after another: a
            // row whose publish could outlast the lease would be claimable by another
            // relay while this one still publishes it (a duplicate, and its aggregate's
            // next row could overtake it). Such rows are handed back untried instead. The
            // lease is checked first: `allow` may grant the half-open trial, which must
            // then be spent on a real publish.
            let lease_left = lease_ends.saturating_sub(now_ms());
            if lease_left < publish_timeout_ms || !inner.breaker.allow() {
                let untried: Vec<String> = rows[i..].iter().map(|r| r.id.clone()).collect();
                inner.store.release(&inner.config.name, &untried).await?;
                round.released = untried.len();
                break;
            }
            if self.publish(row).await? {
                round.published += 1;
            } else {
                round.failed += 1;
            }
        }
        Ok(round)
    }

    /// Whether `row` is published with a dedup id: where the transport deduplicates and its
    /// destination queue has a dedup window (a topic has none).
    async fn dedup_for(&self, row: &ClaimedRow) -> Result<bool> {
        let inner = &*self.inner;
        if !inner.dedup || row.destination_kind != "queue" {
            return Ok(false);
        }
        let queue = &row.destination;
        let known = {
            let windows = inner.windows.lock().unwrap_or_else(|e| e.into_inner());
            windows
                .get(queue)
                .filter(|(_, at)| at.elapsed() < WINDOW_KEPT)
                .map(|(has, _)| *has)
        };
        if let Some(has) = known {
            return Ok(has);
        }
        let has = inner.ferry.dedup_window(queue).await?.is_some();
        inner
            .windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(queue.clone(), (has, Instant::now()));
        Ok(has)
    }

    /// Publishes one claimed row and records the outcome; `Ok(false)` when it failed and
    /// was scheduled for a retry.
    async fn publish(&self, row: &ClaimedRow) -> Result<bool, Stop> {
        let inner = &*self.inner;
        self.fault(FaultPoint::Claimed, &row.id)?;
        let label = inner.store.table().as_str().to_owned();
        let outcome = match self.dedup_for(row).await {
            Ok(dedup) => row.to_message(dedup),
            Err(e) => Err(e),
        };
        let outcome = match outcome {
            Ok((destination, message)) => {
                let timeout = inner.config.publish_timeout;
                let publisher = inner.ferry.publisher(destination);
                match tokio::time::timeout(timeout, publisher.send(message)).await {
                    Ok(result) => result.map(drop),
                    Err(_) => Err(Error::Timeout(timeout)),
                }
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                inner.breaker.record_success();
                self.fault(FaultPoint::Published, &row.id)?;
                inner.store.mark_published(&row.id, now_ms()).await?;
                metrics::counter!(PUBLISHED, "table" => label).increment(1);
                Ok(true)
            }
            Err(e) => {
                // Only an unreachable or failing broker counts against the breaker; a
                // refusal (`Invalid`, `Unsupported`, `NotFound`) is an answer, and says
                // the broker is up.
                if e.is_transient() {
                    inner.breaker.record_failure();
                } else {
                    inner.breaker.record_success();
                }
                let attempts = row.attempts.saturating_add(1);
                let delay = inner
                    .config
                    .backoff
                    .delay(attempts.max(1) as u32, fastrand::f64());
                let next = now_ms().saturating_add(delay.as_millis() as i64);
                tracing::warn!(
                    table = %label, id = %row.id, attempts, retry_in = ?delay, error = %e,
                    "outbox publish failed"
                );
                inner
                    .store
                    .mark_failed(
                        &inner.config.name,
                        &row.id,
                        attempts,
                        next,
                        &truncate_error(&e.to_string()),
                    )
                    .await?;
                metrics::counter!(PUBLISH_FAILURES, "table" => label).increment(1);
                Ok(false)
            }
        }
    }

    fn fault(&self, point: FaultPoint, id: &str) -> Result<(), Stop> {
        match &self.inner.hooks {
            Some(hooks) if hooks.at(point, id) == Fault::Die => {
                tracing::warn!(?point, id, "outbox relay stopped by a fault hook");
                Err(Stop::Died)
            }
            _ => Ok(()),
        }
    }

    async fn cleanup_if_due(&self) -> Result<u64> {
        let due = {
            let mut last = lock(&self.inner.last_cleanup);
            let due = last.is_none_or(|at| at.elapsed() >= self.inner.config.cleanup_interval);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            self.purge_published().await
        } else {
            Ok(0)
        }
    }

    async fn refresh_backlog(&self) {
        {
            let mut last = lock(&self.inner.last_backlog);
            if last.is_some_and(|at| at.elapsed() < BACKLOG_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.backlog().await {
            tracing::warn!(error = %e, "outbox backlog query failed");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running relay. Dropping the handle also stops it, at its next wait between rounds.
pub struct RelayHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<()>>,
}

impl RelayHandle {
    /// Stops after the current round (never midway through a row) and waits for it.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.join().await
    }

    /// Waits for the relay to end: `Err(Closed)` when a hook killed it.
    pub async fn join(self) -> Result<()> {
        match self.task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Error::Closed),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}
