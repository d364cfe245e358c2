//! [`Worker`]: pulls deliveries from a consumer, runs the handler stack on each, and
//! settles each delivery exactly once from the stack's answer.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tower::{Service, ServiceExt};

use crate::consumer::{Consumer, Delivery};
use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError};

/// Runs a handler stack over a consumer until told to stop.
pub struct Worker<S> {
    consumer: Consumer,
    service: S,
    concurrency: usize,
    poll: Duration,
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
        let Worker {
            mut consumer,
            service,
            concurrency,
            poll,
        } = self;
        let source = consumer.source().clone();
        let slots = Arc::new(Semaphore::new(concurrency));
        let mut in_flight = JoinSet::new();
        let mut failure = None;
        tokio::pin!(shutdown);
        loop {
            while let Some(done) = in_flight.try_join_next() {
                report_task_end(done);
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
            let delivery = match consumer.next_within(poll).await {
                Ok(Some(delivery)) => delivery,
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
            let ctx = HandlerContext::new(delivery.message().clone(), &source);
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
