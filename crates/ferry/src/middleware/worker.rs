//! [`Worker`]: pulls deliveries from a consumer, runs the handler stack on each, and
//! settles each delivery exactly once from the stack's answer.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::{Service, ServiceExt};

use crate::consumer::{Consumer, Delivery};
use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError};

/// Runs a handler stack over a consumer until told to stop, or until the source is
/// drained (see [`stop_when_idle`](Self::stop_when_idle)).
pub struct Worker<S> {
    consumer: Consumer,
    service: S,
    concurrency: usize,
    poll: Duration,
    idle: Option<Duration>,
}

/// Runs `service` over `consumer` with the default settings until `shutdown` completes;
/// see [`Worker`].
pub async fn run<S>(
    consumer: Consumer,
    service: S,
    shutdown: impl Future<Output = ()>,
) -> Result<()>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError> + Clone + Send + 'static,
    S::Future: Send,
{
    Worker::new(consumer, service).run(shutdown).await
}

impl<S> Worker<S>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError> + Clone + Send + 'static,
    S::Future: Send,
{
    /// Eight deliveries handled at once; the stop signal is checked at least every 500 ms.
    pub fn new(consumer: Consumer, service: S) -> Worker<S> {
        Worker {
            consumer,
            service,
            concurrency: 8,
            poll: Duration::from_millis(500),
            idle: None,
        }
    }

    /// Most deliveries handled at once. The consumer also holds up to its `prefetch`
    /// deliveries fetched ahead, whose leases run while they wait: keep the prefetch near
    /// this number when handlers are slow. To bound the calls to one downstream across
    /// stacks, use a [concurrency limit](super::concurrency) layer.
    pub fn concurrency(mut self, deliveries: usize) -> Self {
        self.concurrency = deliveries;
        self
    }

    /// How long one fetch waits for messages: the longest a stop signal waits for the fetch
    /// under way.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Also stops, as [`run`](Self::run) does on its signal, once the source is drained:
    /// no handler in flight, and no delivery for `idle` since the last one arrived or the
    /// last handler finished, whichever was later. Counting from the last handler's end
    /// lets a message it nacked come back (its backoff shorter than `idle`) and be handled
    /// before the worker stops. For batch jobs, tests and one-shot drains of a dead-letter
    /// queue. A message not due within `idle` (a delay, a backoff longer than `idle`) is
    /// left in the queue; zero is [`Error::Invalid`] when the worker runs.
    pub fn stop_when_idle(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// Handles deliveries until the source is drained (see
    /// [`stop_when_idle`](Self::stop_when_idle)), then returns as [`run`](Self::run) does:
    /// every handler finished and its delivery settled, the consumer closed.
    pub async fn run_until_idle(self, idle: Duration) -> Result<()> {
        self.stop_when_idle(idle).run(std::future::pending()).await
    }

    /// Handles deliveries until `shutdown` completes, then stops fetching, lets the
    /// handlers in flight finish and settle, and closes the consumer (deliveries fetched
    /// ahead go back at once). An error of the consumer that retrying will not cure ends
    /// the run the same way and is returned.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        if self.concurrency == 0 {
            return Err(Error::invalid("worker concurrency", "must be at least 1"));
        }
        if self.poll.is_zero() {
            return Err(Error::invalid("worker poll", "must be longer than zero"));
        }
        if self.idle.is_some_and(|idle| idle.is_zero()) {
            return Err(Error::invalid("worker idle", "must be longer than zero"));
        }
        let Worker {
            mut consumer,
            service,
            concurrency,
            poll,
            idle,
        } = self;
        // A fetch waits no longer than the idle time, so a drained source is noticed
        // within about `idle`, not `poll`.
        let fetch_wait = idle.map_or(poll, |idle| idle.min(poll));
        let source = consumer.source().clone();
        let max_deliveries = consumer.max_deliveries();
        let slots = Arc::new(Semaphore::new(concurrency));
        let mut in_flight = JoinSet::new();
        let mut failure = None;
        // The last delivery fetched or handler finished: the idle time counts from there.
        let mut last_activity = Instant::now();
        tokio::pin!(shutdown);
        loop {
            while let Some(done) = in_flight.try_join_next() {
                report_task_end(done);
                last_activity = Instant::now();
            }
            if let Some(idle) = idle
                && in_flight.is_empty()
                && last_activity.elapsed() >= idle
            {
                break;
            }
            // A slot first, then a delivery: a delivery fetched with no slot free would sit
            // under lease, unhandled.
            let slot = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            };
            // The fetch itself is never cancelled: deliveries it took would be dropped
            // unsettled and wait out their lease. The stop signal is looked at between
            // fetches, so it waits at most `poll`.
            let stop = tokio::select! {
                biased;
                _ = &mut shutdown => true,
                _ = std::future::ready(()) => false,
            };
            if stop {
                break;
            }
            let delivery = match consumer.next_within(fetch_wait).await {
                Ok(Some(delivery)) => {
                    last_activity = Instant::now();
                    delivery
                }
                Ok(None) => continue,
                Err(Error::Closed) => break,
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, %source, "fetching failed; trying again");
                    tokio::select! {
                        biased;
                        _ = &mut shutdown => break,
                        _ = tokio::time::sleep(poll) => continue,
                    }
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            let mut ctx = HandlerContext::new(delivery.message().clone(), &source);
            if let Some(max) = max_deliveries {
                ctx = ctx.with_max_deliveries(max);
            }
            let service = service.clone();
            in_flight.spawn(async move {
                let result = handle(service, ctx).await;
                settle(delivery, result).await;
                drop(slot);
            });
        }
        while let Some(done) = in_flight.join_next().await {
            report_task_end(done);
        }
        let closed = consumer.close().await;
        match failure {
            Some(e) => Err(e),
            None => closed,
        }
    }
}

async fn handle<S>(service: S, ctx: HandlerContext) -> Result<(), HandlerError>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError>,
{
    service.oneshot(ctx).await
}

/// The one settlement of a delivery. A settlement that fails (the lease ran out, the
/// connection dropped) is logged: the message comes back when its lease ends, which is
/// what the transport promises for an unsettled delivery.
async fn settle(delivery: Delivery, result: Result<(), HandlerError>) {
    let id = delivery.id.clone();
    let settled = match &result {
        Ok(()) => delivery.ack().await,
        Err(HandlerError::Transient { error, delay }) => {
            delivery.nack_with_error(*delay, error).await
        }
        Err(HandlerError::Permanent { reason }) => delivery.reject(reason).await,
        Err(HandlerError::Deferred { why, delay }) => {
            delivery.nack_with_error(Some(*delay), why).await
        }
    };
    if let Err(e) = settled {
        tracing::warn!(message.id = %id, error = %e, "settling a delivery failed; it comes back when its lease ends");
    }
}

/// A handler task that panicked dropped its delivery unsettled: it comes back when its
/// lease ends. The [panic layer](super::panic) turns a panic into a nack at once instead.
fn report_task_end(done: std::result::Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "a handler task panicked; its delivery comes back when its lease ends");
    }
}
