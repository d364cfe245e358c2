//! The orchestrator: starts sagas, consumes their replies, sweeps for deadlines and
//! unanswered commands, and resumes unfinished sagas when it starts.
//!
//! The invariant everything rests on: a transition is committed to the store before the
//! command it makes pending is sent, and a reply is acked only after the transition it
//! causes is committed. Every crash window therefore leaves either a pending command not
//! yet sent (re-sent on start, or after the step timeout) or a reply not yet acked
//! (redelivered, and ignored if the saga has moved on) — never a sent command the store
//! does not know about.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::clock::{Clock, SystemClock};
use super::command::{Command, Kind, Reply};
use super::crash::{CrashHook, CrashSite, Point};
use super::definition::SagaDefinition;
use super::state::{Decision, Event, SagaState, Status, decide};
use super::store::SagaStore;
use crate::capability::Feature;
use crate::consumer::{Consumer, Delivery};
use crate::error::{Error, Result};
use crate::ferry::Ferry;
use crate::spec::{Destination, Source, validate_name};
use crate::transport::ConsumerOptions;

/// How an orchestrator runs.
#[derive(Clone)]
pub struct SagaOptions {
    /// The queue participants answer on; one per saga type.
    pub reply_queue: String,
    /// A pending command unanswered this long is sent again (same command id).
    pub step_timeout: Duration,
    /// How often the sweeper looks for passed deadlines and unanswered commands.
    pub sweep_interval: Duration,
    /// Whether commands and replies carry dedup ids (see [`dedup_ids`](Self::dedup_ids)).
    pub dedup_ids: bool,
    /// The reply consumer's options.
    pub consumer: ConsumerOptions,
    pub clock: Arc<dyn Clock>,
    pub crash_hook: Option<CrashHook>,
}

impl std::fmt::Debug for SagaOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SagaOptions")
            .field("reply_queue", &self.reply_queue)
            .field("step_timeout", &self.step_timeout)
            .field("sweep_interval", &self.sweep_interval)
            .field("dedup_ids", &self.dedup_ids)
            .field("crash_hook", &self.crash_hook.is_some())
            .finish()
    }
}

impl SagaOptions {
    /// Replies on `reply_queue`; a 30 s step timeout, a sweep every second.
    pub fn new(reply_queue: impl Into<String>) -> SagaOptions {
        SagaOptions {
            reply_queue: reply_queue.into(),
            step_timeout: Duration::from_secs(30),
            sweep_interval: Duration::from_secs(1),
            dedup_ids: true,
            consumer: ConsumerOptions {
                prefetch: 16,
                poll: Duration::from_millis(200),
                ..ConsumerOptions::default()
            },
            clock: Arc::new(SystemClock),
            crash_hook: None,
        }
    }

    pub fn step_timeout(mut self, timeout: Duration) -> SagaOptions {
        self.step_timeout = timeout;
        self
    }

    pub fn sweep_interval(mut self, interval: Duration) -> SagaOptions {
        self.sweep_interval = interval;
        self
    }

    /// On (the default), commands carry their command id as dedup id and replies one
    /// derived from it, so a re-sent command or a repeated reply is stored once: the
    /// command and reply queues then need a dedup window (a dedup id on a queue without
    /// one is refused, on every transport). Off, every re-send is stored and participants see more
    /// duplicates — which they tolerate anyway, deduplicating by command id.
    pub fn dedup_ids(mut self, on: bool) -> SagaOptions {
        self.dedup_ids = on;
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> SagaOptions {
        self.clock = clock;
        self
    }

    /// Kills the orchestrator where `hook` says (see [`CrashHook`]); for crash tests.
    pub fn crash_hook(mut self, hook: CrashHook) -> SagaOptions {
        self.crash_hook = Some(hook);
        self
    }
}

/// Runs the sagas of one [`SagaDefinition`]; cheap to clone.
#[derive(Clone)]
pub struct Orchestrator {
    inner: Arc<Inner>,
}

struct Inner {
    ferry: Ferry,
    store: Arc<dyn SagaStore>,
    definition: SagaDefinition,
    options: SagaOptions,
    /// Set when the crash hook fired: the orchestrator is dead.
    crashed: AtomicBool,
    /// Wakes the running tasks when it dies.
    died: watch::Sender<bool>,
}

/// What an event did to one saga.
enum Applied {
    Moved,
    Ignored(&'static str),
    Retry(String),
    Unknown,
}

impl Orchestrator {
    /// An orchestrator for `definition`, keeping state in `store` (call
    /// [`SagaStore::install`] once first). Refuses a definition or options it could not run.
    pub fn new(
        ferry: Ferry,
        store: impl SagaStore + 'static,
        definition: SagaDefinition,
        options: SagaOptions,
    ) -> Result<Orchestrator> {
        definition.validate()?;
        validate_name(&options.reply_queue)?;
        if options.step_timeout.is_zero() || options.sweep_interval.is_zero() {
            return Err(Error::invalid(
                "saga options",
                "the step timeout and the sweep interval must be longer than zero",
            ));
        }
        if options.dedup_ids {
            ferry.capabilities().require(Feature::Deduplication)?;
        }
        Ok(Orchestrator {
            inner: Arc::new(Inner {
                ferry,
                store: Arc::new(store),
                definition,
                options,
                crashed: AtomicBool::new(false),
                died: watch::channel(false).0,
            }),
        })
    }

    pub fn definition(&self) -> &SagaDefinition {
        &self.inner.definition
    }

    /// Whether the crash hook killed this orchestrator.
    pub fn is_crashed(&self) -> bool {
        self.inner.crashed.load(Ordering::SeqCst)
    }

    /// Starts a saga with a fresh id; returns the id once the saga is stored and its first
    /// command sent.
    pub async fn start(&self, payload: impl Serialize) -> Result<String> {
        self.start_with_id(crate::message::new_id(), payload).await
    }

    /// Starts the saga `id` unless it exists: starting one id twice starts one saga (the
    /// second call returns the id and sends nothing). An id of another saga type is a
    /// [`Error::Conflict`].
    pub async fn start_with_id(
        &self,
        id: impl Into<String>,
        payload: impl Serialize,
    ) -> Result<String> {
        let id = id.into();
        validate_saga_id(&id)?;
        self.alive()?;
        let inner = &self.inner;
        let state = SagaState::new(
            &inner.definition,
            id.clone(),
            serde_json::to_value(payload)?,
            inner.options.clock.now_ms(),
        );
        if !inner.store.insert(&state).await? {
            let existing = inner.store.load(&id).await?;
            if let Some(existing) = existing
                && existing.saga_type != inner.definition.name
            {
                return Err(Error::Conflict {
                    kind: "saga",
                    name: id,
                    problem: format!("it is a `{}` saga", existing.saga_type),
                });
            }
            tracing::debug!(saga = %id, "the saga exists already; starting it again does nothing");
            return Ok(id);
        }
        metrics::counter!("ferry_saga_started_total", "saga" => inner.definition.name.clone())
            .increment(1);
        self.send_pending(&state).await?;
        Ok(id)
    }

    /// The saga `id` as stored, if it exists.
    pub async fn status(&self, id: &str) -> Result<Option<SagaState>> {
        self.inner.store.load(id).await
    }

    /// Waits until the saga `id` is COMPLETED or FAILED, up to `timeout` (then
    /// [`Error::Timeout`]), reading the store every 20 ms: for tests and tools.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<SagaState> {
        let now = tokio::time::Instant::now();
        let give_up = now
            .checked_add(timeout)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        loop {
            match self.inner.store.load(id).await? {
                Some(state) if state.status.is_terminal() => return Ok(state),
                Some(_) => {}
                None => {
                    return Err(Error::NotFound {
                        kind: "saga",
                        name: id.to_owned(),
                    });
                }
            }
            if tokio::time::Instant::now() >= give_up {
                return Err(Error::Timeout(timeout));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Resumes every unfinished saga (re-sending its pending command), then consumes
    /// replies and sweeps in the background until [`Running::stop`].
    pub async fn run(&self) -> Result<Running> {
        self.alive()?;
        // The consumer first: a missing reply queue fails here, before anything is sent.
        let consumer = self
            .inner
            .ferry
            .consumer(
                Source::queue(&self.inner.options.reply_queue),
                self.inner.options.consumer.clone(),
            )
            .await?;
        self.sweep(true).await?;
        let (stop, stopping) = watch::channel(false);
        let replies = tokio::spawn(self.clone().consume(consumer, stopping.clone()));
        let sweeper = tokio::spawn(self.clone().sweep_loop(stopping));
        Ok(Running {
            stop,
            tasks: vec![replies, sweeper],
        })
    }

    fn alive(&self) -> Result<()> {
        if self.is_crashed() {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Asks the crash hook; dies if it says so.
    fn checkpoint(&self, point: Point, step: usize, kind: Kind) -> Result<()> {
        self.alive()?;
        let site = CrashSite { point, step, kind };
        if let Some(hook) = &self.inner.options.crash_hook
            && hook(&site)
        {
            tracing::debug!(?site, "crash injected");
            self.inner.crashed.store(true, Ordering::SeqCst);
            self.inner.died.send_replace(true);
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Sends the command pending in `state`, which is committed. A send that fails for a
    /// passing reason is logged, not returned: the transition stands and the sweeper
    /// re-sends the command after the step timeout. Any other failure (a command the
    /// transport refuses) is returned, as no re-send would succeed.
    async fn send_pending(&self, state: &SagaState) -> Result<()> {
        let inner = &self.inner;
        let Some((queue, command)) = state.pending_command(
            &inner.definition,
            &inner.options.reply_queue,
            inner.options.dedup_ids,
        ) else {
            return Ok(());
        };
        self.checkpoint(Point::Persisted, command.step_index, command.kind)?;
        if let Err(e) = self.send(&queue, &command).await {
            if !e.is_transient() {
                return Err(e);
            }
            tracing::warn!(saga = %state.id, step = %command.step, kind = command.kind.as_str(), error = %e,
                "sending a saga command failed; it is sent again after the step timeout");
            return Ok(());
        }
        self.checkpoint(Point::Sent, command.step_index, command.kind)
    }

    async fn send(&self, queue: &str, command: &Command) -> Result<()> {
        let message = command.to_message()?;
        self.inner
            .ferry
            .publisher(Destination::queue(queue))
            .send(message)
            .await?;
        Ok(())
    }

    /// Applies `event` to the saga `id`: decide, commit, then send. A write refused because
    /// another writer moved the saga first is decided again on the fresh state.
    async fn apply(&self, id: &str, event: &Event) -> Result<Applied> {
        let inner = &self.inner;
        loop {
            let Some(state) = inner.store.load(id).await? else {
                return Ok(Applied::Unknown);
            };
            let next = match decide(
                &inner.definition,
                &state,
                event,
                inner.options.clock.now_ms(),
            ) {
                Decision::Ignore(why) => return Ok(Applied::Ignored(why)),
                Decision::Retry(why) => return Ok(Applied::Retry(why)),
                Decision::Move(next) => next,
            };
            if !inner.store.save(&next).await? {
                continue;
            }
            self.count_transition(&state, &next, event);
            if next.status.is_terminal() {
                self.checkpoint(
                    Point::Finished,
                    state.current_step,
                    pending_kind(state.status),
                )?;
            } else {
                self.send_pending(&next).await?;
            }
            return Ok(Applied::Moved);
        }
    }

    fn count_transition(&self, before: &SagaState, after: &SagaState, event: &Event) {
        let saga = self.inner.definition.name.clone();
        if *event == Event::Deadline {
            metrics::counter!("ferry_saga_timeouts_total", "saga" => saga.clone(), "kind" => "deadline")
                .increment(1);
        }
        if before.status != after.status {
            tracing::debug!(saga = %after.id, from = before.status.as_str(), to = after.status.as_str(),
                step = after.current_step, "saga moved");
        }
        match after.status {
            Status::Completed => {
                metrics::counter!("ferry_saga_completed_total", "saga" => saga).increment(1)
            }
            Status::Failed => {
                metrics::counter!("ferry_saga_failed_total", "saga" => saga).increment(1)
            }
            _ => {}
        }
    }

    /// Handles the sagas that are due: a passed deadline compensates; a command unanswered
    /// for the step timeout — or every pending command, when `recovering` — is sent again.
    async fn sweep(&self, recovering: bool) -> Result<()> {
        let inner = &self.inner;
        let now = inner.options.clock.now_ms();
        let resend_before = if recovering {
            i64::MAX
        } else {
            now.saturating_sub(super::clock::millis(inner.options.step_timeout))
        };
        for state in inner
            .store
            .due(&inner.definition.name, now, resend_before)
            .await?
        {
            self.alive()?;
            let id = state.id.clone();
            let forward = matches!(state.status, Status::Started | Status::InProgress);
            let handled = if forward && state.timeout_at_ms <= now {
                self.apply(&id, &Event::Deadline).await.map(|_| ())
            } else if state.sent_at_ms <= resend_before {
                self.resend(state, now, recovering).await
            } else {
                Ok(())
            };
            // One saga whose command cannot be sent must not hold up the others.
            match handled {
                Err(Error::Closed) if self.is_crashed() => return Err(Error::Closed),
                Err(e) => {
                    tracing::warn!(saga = %id, error = %e, "sweeping a saga failed; trying again on the next sweep")
                }
                Ok(()) => {}
            }
        }
        Ok(())
    }

    /// Sends the pending command of `state` again, with the same command id, after
    /// stamping the send (so another sweep does not repeat it at once).
    async fn resend(&self, mut state: SagaState, now: i64, recovering: bool) -> Result<()> {
        if !recovering {
            metrics::counter!("ferry_saga_timeouts_total", "saga" => self.inner.definition.name.clone(), "kind" => "step")
                .increment(1);
        }
        tracing::debug!(saga = %state.id, step = state.current_step, status = state.status.as_str(), recovering,
            "re-sending the pending saga command");
        state.sent_at_ms = now;
        state.updated_at_ms = now;
        if !self.inner.store.save(&state).await? {
            return Ok(()); // moved meanwhile: its new command was sent by whoever moved it
        }
        self.send_pending(&state).await
    }

    async fn sweep_loop(self, mut stopping: watch::Receiver<bool>) {
        let mut died = self.inner.died.subscribe();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.inner.options.sweep_interval) => {}
                _ = stopping.changed() => return,
                _ = died.changed() => return,
            }
            match self.sweep(false).await {
                Ok(()) => {}
                Err(Error::Closed) if self.is_crashed() => return,
                Err(e) => {
                    tracing::warn!(saga = %self.inner.definition.name, error = %e, "saga sweep failed; trying again")
                }
            }
        }
    }

    async fn consume(self, mut consumer: Consumer, stopping: watch::Receiver<bool>) {
        let poll = self.inner.options.consumer.poll;
        loop {
            if *stopping.borrow() {
                if let Err(e) = consumer.close().await {
                    tracing::warn!(error = %e, "closing the saga reply consumer failed");
                }
                return;
            }
            if self.is_crashed() {
                return; // dropped unsettled: what it held comes back when its lease ends
            }
            let delivery = match consumer.next_within(poll).await {
                Ok(Some(delivery)) => delivery,
                Ok(None) => continue,
                Err(Error::Closed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "reading saga replies failed; trying again");
                    tokio::time::sleep(poll).await;
                    continue;
                }
            };
            if let Err(e) = self.handle(delivery).await {
                if self.is_crashed() {
                    return;
                }
                tracing::warn!(error = %e, "settling a saga reply failed");
            }
        }
    }

    /// Handles one reply: malformed or misrouted ones are dead-lettered; the others move
    /// their saga (acked once committed) or change nothing (acked, logged at debug).
    async fn handle(&self, delivery: Delivery) -> Result<()> {
        let reply = match Reply::from_received(delivery.message()) {
            Ok(reply) => reply,
            Err(e) => return delivery.reject(&format!("not a saga reply: {e}")).await,
        };
        if reply.saga_type != self.inner.definition.name {
            let why = format!(
                "a reply for a `{}` saga on the reply queue of `{}` sagas",
                reply.saga_type, self.inner.definition.name
            );
            return delivery.reject(&why).await;
        }
        self.checkpoint(Point::Received, reply.step_index, reply.kind)?;
        let saga = reply.saga_id.clone();
        match self.apply(&saga, &Event::Reply(reply.into())).await {
            Ok(Applied::Moved) => delivery.ack().await,
            Ok(Applied::Ignored(why)) => {
                tracing::debug!(%saga, why, "saga reply ignored");
                delivery.ack().await
            }
            Ok(Applied::Unknown) => {
                tracing::debug!(%saga, "reply for an unknown saga ignored");
                delivery.ack().await
            }
            Ok(Applied::Retry(why)) => {
                tracing::warn!(%saga, why, "compensation declined; it is sent again after the step timeout");
                delivery.ack().await
            }
            Err(e) if self.is_crashed() => Err(e),
            Err(e) => {
                tracing::warn!(%saga, error = %e, "handling a saga reply failed; it comes back");
                delivery
                    .nack_with_error(Some(Duration::from_secs(1)), &e.to_string())
                    .await
            }
        }
    }
}

fn pending_kind(status: Status) -> Kind {
    if status == Status::Compensating {
        Kind::Compensation
    } else {
        Kind::Action
    }
}

/// Saga ids become part of command ids and message ids on every transport: 1–128 of
/// `[A-Za-z0-9._-]`, not starting with `.` or `-`.
fn validate_saga_id(id: &str) -> Result<()> {
    if id.len() > 128 {
        return Err(Error::invalid(
            format!("saga id `{id}`"),
            "longer than 128 bytes",
        ));
    }
    validate_name(id).map_err(|_| {
        Error::invalid(
            format!("saga id `{id}`"),
            "must be letters, digits, `.`, `_` and `-`, not starting with `.` or `-`",
        )
    })
}

/// The orchestrator's background tasks (reply consumer and sweeper).
pub struct Running {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops consuming and sweeping; replies not yet handled stay on the queue. A task
    /// that panicked (a `SagaStore` or crash hook of the application's) panics here.
    pub async fn stop(mut self) {
        self.stop.send_replace(true);
        self.join().await;
    }

    /// Waits until the tasks end by themselves (after an injected crash); re-raises a
    /// task's panic like [`stop`](Self::stop).
    pub async fn stopped(mut self) {
        self.join().await;
    }

    async fn join(&mut self) {
        for task in self.tasks.drain(..) {
            // A panic swallowed here would leave no trace of why replies stopped being
            // handled while the sweeper went on.
            if let Err(e) = task.await
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
