//! Deliveries and their settlement: the lease each delivery is held under (a client-side
//! timer, since RabbitMQ has none), and nack, reject and dead-lettering done by republishing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lapin::acker::Acker;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use lapin::types::AMQPValue;
use lapin::{BasicProperties, Channel};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::acks::{Ack, AckBatches, Outstanding};
use super::consume::Current;
use super::engine::Inner;
use super::topology::{self, ATTEMPTS, Settings, dlq};
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, now_ms, reason, truncate_error};
use crate::transport::group_commit::GroupCommit;
use crate::transport::{Incoming, Settler};

/// Where one subscription session's deliveries come from and how they are settled (see
/// `super::consume`).
pub(super) struct Origin {
    pub inner: Arc<Inner>,
    /// The session's channel; its deliveries are settled on it, so it stays open until
    /// the session ended and every delivery it received is settled.
    pub channel: Arc<Channel>,
    /// The queue read.
    pub queue: String,
    /// The queue or subscription it belongs to (the origin, for dead letters).
    pub origin: String,
    pub settings: Arc<Settings>,
    /// Reading dead letters.
    pub dead: bool,
    pub consumer: String,
    /// The channel's delivery tags not yet settled, which bound a `multiple` ack, and
    /// whether the session ended.
    pub outstanding: Outstanding,
    pub acks: Arc<GroupCommit<AckBatches>>,
    /// The consumer's open session, ended first when a lease runs out while no fetch waits.
    pub current: Arc<Current>,
}

impl Origin {
    /// The settlement of these tags was sent; the channel closes if it was the last one of
    /// a session that ended.
    pub fn settled(&self, tags: impl IntoIterator<Item = u64>) {
        if self.outstanding.settled(tags) {
            self.close_channel();
        }
    }

    /// The session ended: nothing more is received on the channel, which closes once every
    /// delivery it received is settled (after [`CLOSE_GRACE`]). Closing also returns to the
    /// queue anything RabbitMQ delivered after the cancel, which the client never saw.
    pub fn end(&self) {
        if self.outstanding.end() {
            self.close_channel();
        }
    }

    fn close_channel(&self) {
        let channel = Channel::clone(&self.channel);
        tokio::spawn(async move {
            tokio::time::sleep(CLOSE_GRACE).await;
            let _ = channel.close(200, "session over").await;
        });
    }
}

/// How long a session's channel stays open after its last settlement. A quorum queue
/// applies acks asynchronously, and a channel that closes returns to the queue what it
/// has not applied yet (an ack just sent, or one RabbitMQ held back while many were in
/// flight) as if it had never been acked: the message would come back, counted.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// A delivery handed out, under a lease that started when it was.
pub(super) struct Handout {
    pub message: crate::message::Received,
    pub settler: Arc<RabbitSettler>,
}

impl Handout {
    pub fn into_incoming(self) -> Incoming {
        Incoming {
            message: self.message,
            settler: self.settler,
        }
    }
}

/// A delivery (its tag already counted as outstanding) as the SDK gets it, under a lease
/// that starts now; `None` when it had used up its deliveries already (returned by
/// consumers that died) or outlived its queue's default TTL, and went to the dead-letter
/// queue instead.
pub(super) async fn incoming(origin: &Arc<Origin>, delivery: Delivery) -> Result<Option<Handout>> {
    let tag = delivery.delivery_tag;
    let attempt = topology::attempt(&delivery.properties);
    if !origin.dead && attempt > origin.settings.max_deliveries {
        let died = Death {
            reason: reason::MAX_DELIVERIES,
            deliveries: attempt - 1,
            error: None,
        };
        dead_letter_on_receipt(origin, &delivery, died).await?;
        return Ok(None);
    }
    if !origin.dead
        && topology::past_default_ttl(
            &delivery.properties,
            origin.settings.default_ttl_ms,
            now_ms(),
        )
    {
        let died = Death {
            reason: reason::EXPIRED,
            deliveries: attempt - 1,
            error: None,
        };
        dead_letter_on_receipt(origin, &delivery, died).await?;
        return Ok(None);
    }
    let message = topology::received(&delivery.properties, &delivery.data, attempt, origin.dead);
    let lease = Arc::new(Lease {
        state: Mutex::new(State::Held(Instant::now() + origin.settings.lease())),
        wake: Notify::new(),
    });
    tokio::spawn(expire(
        lease.clone(),
        origin.clone(),
        delivery.acker.clone(),
        tag,
    ));
    Ok(Some(Handout {
        message,
        settler: Arc::new(RabbitSettler {
            origin: origin.clone(),
            lease,
            acker: delivery.acker,
            tag,
            properties: delivery.properties,
            data: delivery.data,
            attempt,
        }),
    }))
}

/// Dead-letters a delivery never handed out and acks it; if the republish fails, the
/// delivery goes back to the queue instead, so that it does not stay unsettled.
async fn dead_letter_on_receipt(
    origin: &Origin,
    delivery: &Delivery,
    death: Death<'_>,
) -> Result<()> {
    let tag = delivery.delivery_tag;
    if let Err(e) = dead_letter(origin, &delivery.properties, &delivery.data, death).await {
        let _ = requeue(origin, &delivery.acker, tag).await;
        return Err(e);
    }
    ack(origin, &delivery.acker, tag).await
}

/// Why a message goes to the dead-letter queue.
struct Death<'a> {
    reason: &'static str,
    deliveries: u32,
    error: Option<&'a str>,
}

/// Republishes the message to `<origin>.dlq` with its `ferry-dlq-*` metadata and waits for
/// the confirm; the caller acks the original only after, so a crash between the two leaves
/// a duplicate dead letter, never a lost one. With dead letters off, the message is
/// dropped (the caller's ack).
async fn dead_letter(
    origin: &Origin,
    properties: &BasicProperties,
    data: &[u8],
    death: Death<'_>,
) -> Result<()> {
    if !origin.settings.dead_letter {
        return Ok(());
    }
    let info = DeadLetterInfo {
        reason: death.reason.to_owned(),
        deliveries: death.deliveries,
        origin: origin.origin.clone(),
        last_error: death.error.map(truncate_error),
        first_failure_ms: None,
        last_failure_ms: Some(now_ms()),
        consumer: Some(origin.consumer.clone()),
    };
    let mut headers = BTreeMap::new();
    info.write_headers(&mut headers);
    let properties = topology::republished(properties, |table| {
        for (name, value) in &headers {
            table.insert(name.as_str().into(), topology::long(value));
        }
    });
    origin
        .inner
        .publish_confirmed(
            "",
            "dead-letter queue",
            true,
            vec![(dlq(&origin.queue), data.to_vec(), properties)],
        )
        .await
}

/// The longest a settlement waits on the connection.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `call` on the consumer's channel: an ack or nack on a channel that is gone would
/// wait for ever, and RabbitMQ requeued its deliveries when it went.
pub(super) async fn on_channel(
    origin: &Origin,
    call: impl Future<Output = lapin::Result<()>>,
) -> Result<()> {
    if origin.inner.is_closed() {
        return Err(Error::Closed);
    }
    if !origin.channel.status().connected() {
        return Err(Error::NotHeld {
            id: String::new(),
            why: "the consumer's channel closed and RabbitMQ requeued its deliveries".into(),
        });
    }
    match tokio::time::timeout(SETTLE_TIMEOUT, call).await {
        Ok(result) => result.map_err(|e| origin.inner.error(e, "queue", &origin.queue)),
        Err(_) => Err(Error::Timeout(SETTLE_TIMEOUT)),
    }
}

/// Acks one delivery now, on its own.
async fn ack(origin: &Origin, acker: &Acker, tag: u64) -> Result<()> {
    on_channel(origin, acker.ack(BasicAckOptions::default())).await?;
    origin.settled([tag]);
    Ok(())
}

/// Sends the delivery back to the queue (a nack with requeue; RabbitMQ counts it as a
/// delivery).
pub(super) async fn requeue(origin: &Origin, acker: &Acker, tag: u64) -> Result<()> {
    let options = BasicNackOptions {
        requeue: true,
        multiple: false,
    };
    on_channel(origin, acker.nack(options)).await?;
    origin.settled([tag]);
    Ok(())
}

/// Where a delivery is in its life.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Held by the application until the deadline.
    Held(Instant),
    /// A settlement is under way; back to `Held` if it fails.
    Busy,
    Settled,
    /// The lease ran out and the delivery went back to the queue.
    Expired,
}

struct Lease {
    state: Mutex<State>,
    /// Wakes the timer when the deadline moves or the delivery is settled.
    wake: Notify,
}

impl Lease {
    fn get(&self) -> State {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn set(&self, state: State) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
        self.wake.notify_one();
    }
}

/// Requeues the delivery when its lease ends unsettled — the SDK's stand-in for a
/// visibility timeout. RabbitMQ counts the return in x-delivery-count, so the next
/// delivery's attempt is one higher.
async fn expire(lease: Arc<Lease>, origin: Arc<Origin>, acker: Acker, tag: u64) {
    loop {
        match lease.get() {
            State::Held(deadline) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = lease.wake.notified() => continue,
                }
            }
            State::Busy => {
                lease.wake.notified().await;
                continue;
            }
            State::Settled | State::Expired => return,
        }
        let expired = {
            let mut state = lease.state.lock().unwrap_or_else(|e| e.into_inner());
            match *state {
                State::Held(deadline) if Instant::now() >= deadline => {
                    *state = State::Expired;
                    true
                }
                _ => false,
            }
        };
        if expired {
            // A consumer that is not fetching gives up its subscription first: RabbitMQ
            // would push the requeued delivery straight back into it, out of other
            // consumers' reach.
            origin.current.lease_ran_out().await;
            // If this fails the channel is gone, and RabbitMQ requeued the delivery itself.
            let _ = requeue(&origin, &acker, tag).await;
            return;
        }
    }
}

pub(super) struct RabbitSettler {
    origin: Arc<Origin>,
    lease: Arc<Lease>,
    acker: Acker,
    tag: u64,
    properties: BasicProperties,
    data: Vec<u8>,
    attempt: u32,
}

impl RabbitSettler {
    fn id(&self) -> String {
        self.properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default()
    }

    /// Sends a delivery handed out that never reached the application back to the queue.
    pub(super) async fn withdraw(&self) {
        let _ = self
            .settle(requeue(&self.origin, &self.acker, self.tag))
            .await;
    }

    /// Takes the delivery for a settlement, unless it was settled or its lease ended.
    fn claim(&self) -> Result<Instant> {
        let mut state = self.lease.state.lock().unwrap_or_else(|e| e.into_inner());
        match *state {
            State::Held(deadline) => {
                *state = State::Busy;
                Ok(deadline)
            }
            State::Expired | State::Busy | State::Settled => Err(self.not_held(*state)),
        }
    }

    /// Why a delivery in `state` (not `Held`) can no longer be settled or extended.
    fn not_held(&self, state: State) -> Error {
        let why = match state {
            State::Expired => "its lease ended and it went back to the queue",
            State::Held(_) | State::Busy | State::Settled => "it was settled already",
        };
        Error::NotHeld {
            id: self.id(),
            why: why.into(),
        }
    }

    /// Runs a settlement: settled if it worked, held again (under its lease) if not.
    async fn settle(&self, work: impl Future<Output = Result<()>>) -> Result<()> {
        let deadline = self.claim()?;
        let result = work.await;
        self.lease.set(match result {
            Ok(()) => State::Settled,
            Err(_) => State::Held(deadline),
        });
        result
    }

    async fn dead_letter_and_ack(&self, death: Death<'_>) -> Result<()> {
        dead_letter(&self.origin, &self.properties, &self.data, death).await?;
        ack(&self.origin, &self.acker, self.tag).await
    }

    /// Republishes to the retry queue for `delay`, which dead-letters it back after the
    /// wait, then acks the original. The republish resets RabbitMQ's delivery count, so
    /// the deliveries so far travel in `ferry-attempts`.
    async fn retry_after(&self, delay: Duration) -> Result<()> {
        let origin = &self.origin;
        let ms = topology::bucket_ms(delay)?;
        let queue = topology::retry_queue(&origin.queue, ms);
        origin.inner.timer_queue(&origin.queue, &queue, ms).await?;
        let attempts = i64::from(self.attempt);
        let properties = topology::republished(&self.properties, |table| {
            table.insert(ATTEMPTS.into(), AMQPValue::LongLongInt(attempts));
        });
        origin
            .inner
            .publish_to_timer(&queue, self.data.clone(), properties)
            .await?;
        ack(origin, &self.acker, self.tag).await
    }
}

#[async_trait]
impl Settler for RabbitSettler {
    async fn ack(&self) -> Result<()> {
        let ack = Ack {
            origin: self.origin.clone(),
            acker: self.acker.clone(),
            tag: self.tag,
        };
        self.settle(self.origin.acks.settle(ack)).await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let settings = &self.origin.settings;
        self.settle(async {
            if !self.origin.dead && self.attempt >= settings.max_deliveries {
                return self
                    .dead_letter_and_ack(Death {
                        reason: reason::MAX_DELIVERIES,
                        deliveries: self.attempt,
                        error,
                    })
                    .await;
            }
            let delay = delay.unwrap_or_else(|| {
                settings
                    .backoff
                    .to_backoff()
                    .delay(self.attempt, fastrand::f64())
            });
            if delay.is_zero() {
                requeue(&self.origin, &self.acker, self.tag).await
            } else {
                self.retry_after(delay).await
            }
        })
        .await
    }

    async fn reject(&self, why: &str) -> Result<()> {
        if self.origin.dead {
            return Err(Error::invalid(
                "reject",
                "a dead letter has no dead-letter queue of its own; ack it to drop it",
            ));
        }
        self.settle(self.dead_letter_and_ack(Death {
            reason: reason::REJECTED,
            deliveries: self.attempt,
            error: Some(why),
        }))
        .await
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        let mut state = self.lease.state.lock().unwrap_or_else(|e| e.into_inner());
        match *state {
            State::Held(_) => {
                *state = State::Held(Instant::now() + by);
                drop(state);
                self.lease.wake.notify_one();
                Ok(())
            }
            State::Expired | State::Busy | State::Settled => Err(self.not_held(*state)),
        }
    }
}
