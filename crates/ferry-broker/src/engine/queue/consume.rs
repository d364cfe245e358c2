//! Receiving under a lease and the outcomes of a delivery: ack, nack, reject, extend; parked
//! keys and per-consumer prefetch.

use std::time::Duration;

use bytes::Bytes;

use super::durable;
use crate::engine::Broker;
use crate::error::{BrokerError, Result};
use crate::message::{Headers, millis};
use crate::message_id::MessageId;
use crate::queue::journal::JournalEvent;
use crate::queue::key_order::PerKey;
use crate::queue::state::{Acked, LeaseToken, Nacked, Seq};
use crate::record::DeadLetterInfo;
use crate::spec::{OrderingMode, QueueSpec};

/// What a receive asks for: up to `max` messages, leased for `lease` (the queue's lease if
/// `None`), waiting up to `wait` (real time) for one to become ready when none is, and how
/// many of one key it may take ([`PerKey`]; one unless asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiveOptions {
    pub max: usize,
    pub lease: Option<Duration>,
    pub wait: Option<Duration>,
    pub per_key: PerKey,
}

/// A message handed to a consumer under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub id: MessageId,
    pub seq: Seq,
    /// Carry it to ack, nack, reject or extend.
    pub token: LeaseToken,
    /// 1 for the first delivery.
    pub delivery: u32,
    pub lease_until_ms: i64,
    pub payload: Bytes,
    pub key: Option<Bytes>,
    pub headers: Headers,
    pub priority: u8,
    pub published_at: i64,
    /// Set when this queue is a dead-letter queue: why and from where the message came.
    pub dead_letter: Option<DeadLetterInfo>,
}

impl Broker {
    /// Caps how many messages `consumer` may hold in flight on `queue` at once; `None` lifts
    /// the cap. A consumer at its cap receives nothing; lowering a cap recalls nothing.
    ///
    /// Until the broker is reopened: the cap lives in memory only, is not journaled, and is gone after the
    /// broker reopens (consumers set it again when they reconnect).
    pub fn set_prefetch(&self, queue: &str, consumer: &str, prefetch: Option<usize>) -> Result<()> {
        check_consumer(consumer)?;
        let queue = self.queue(queue)?;
        queue.check_consumer(consumer)?;
        queue.lock().state.set_prefetch(consumer, prefetch);
        // A raised cap may let a long-polling receive take messages now.
        queue.ready.notify_waiters();
        Ok(())
    }

    /// Leases up to `max` messages to `consumer` for `lease` (the queue's by default),
    /// waiting up to `wait` (real time) for one to become ready when none is. An empty
    /// consumer name and a lease outside 1 ms to 12 hours are refused, leasing nothing.
    pub async fn receive(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Vec<ReceivedMessage>> {
        self.receive_unless(queue, consumer, max, lease, wait, std::future::pending())
            .await
    }

    /// [`receive`](Self::receive) that stops waiting, leasing nothing, once `stop` is
    /// done — checked before each attempt to lease and raced against the wait — so a
    /// caller whose consumer went away ends its long poll at once instead of leasing what
    /// becomes ready meanwhile. Only the wait is cut short: a lease once taken is always
    /// returned, so dropping nothing midway keeps it cancel-safe where dropping the
    /// future of [`receive`](Self::receive) would not be.
    pub async fn receive_unless(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        lease: Option<Duration>,
        wait: Option<Duration>,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Vec<ReceivedMessage>> {
        let options = ReceiveOptions {
            max,
            lease,
            wait,
            per_key: PerKey::One,
        };
        self.receive_with(queue, consumer, options, stop).await
    }

    /// [`receive_unless`](Self::receive_unless) with every option, among them how many
    /// messages of one key it may take: with [`PerKey::Consecutive`] a key-shared (or
    /// exclusive) queue hands out a key's next messages right behind its head in the same
    /// receive, in order, and holds the key until all of them are settled or have failed
    /// (see [`PerKey`]). On a shared queue keys do not order, and `per_key` changes nothing.
    pub async fn receive_with(
        &self,
        queue: &str,
        consumer: &str,
        options: ReceiveOptions,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Vec<ReceivedMessage>> {
        let ReceiveOptions {
            max,
            lease,
            wait,
            per_key,
        } = options;
        tokio::pin!(stop);
        check_consumer(consumer)?;
        check_receive_lease(lease)?;
        let queue = self.queue(queue)?;
        queue.check_consumer(consumer)?;
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        loop {
            let notified = queue.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if stopped(stop.as_mut()) {
                return Ok(Vec::new());
            }
            self.tick_queue(&queue).await?;
            let now_ms = self.now_ms();
            let (deliveries, rx, effects) = {
                let mut inner = queue.lock();
                let deliveries = inner
                    .state
                    .receive_per_key(consumer, max, per_key, lease, now_ms);
                let mut events = Vec::with_capacity(deliveries.len());
                for d in &deliveries {
                    inner.deliveries.insert(d.seq, d.delivery);
                    events.push(JournalEvent::Leased {
                        seq: d.seq,
                        deliveries: d.delivery,
                        until_ms: d.lease_until_ms,
                        consumer: consumer.to_owned(),
                    });
                }
                let rx = (!events.is_empty()).then(|| queue.journal(&mut inner, &events, now_ms));
                (deliveries, rx, queue.take_effects(&mut inner, now_ms))
            };
            self.apply_effects(&queue, effects).await?;
            if let Some(rx) = rx {
                durable(rx).await?;
                let earliest = deliveries.iter().map(|d| d.lease_until_ms).min();
                self.inner
                    .timers_changed
                    .timer_at(earliest.unwrap_or(i64::MAX));
                let seqs: Vec<Seq> = deliveries.iter().map(|d| d.seq).collect();
                let messages = queue.read_many(&seqs)?;
                let mut out = Vec::with_capacity(deliveries.len());
                for (d, message) in deliveries.into_iter().zip(messages) {
                    out.push(ReceivedMessage {
                        id: d.id,
                        seq: d.seq,
                        token: d.token,
                        delivery: d.delivery,
                        lease_until_ms: d.lease_until_ms,
                        payload: message.payload,
                        key: message.key,
                        headers: message.headers,
                        priority: message.priority,
                        published_at: message.published_at,
                        dead_letter: message.dead_letter,
                    });
                }
                return Ok(out);
            }
            let Some(deadline) = deadline else {
                return Ok(Vec::new());
            };
            tokio::select! {
                biased;
                () = stop.as_mut() => return Ok(Vec::new()),
                woken = tokio::time::timeout_at(deadline, notified) => {
                    if woken.is_err() {
                        return Ok(Vec::new());
                    }
                }
            }
        }
    }

    /// Settles a delivered message. Returns once the ack is durable: an acked message never
    /// comes back, even after a crash. A repeated ack is `Ok(AlreadySettled)`; a stale token
    /// is [`BrokerError::StaleLease`]; a seq the queue never assigned is
    /// [`BrokerError::MessageNotPublished`] (as for every settle), not "already settled".
    pub async fn ack(&self, queue: &str, seq: Seq, token: LeaseToken) -> Result<Acked> {
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (acked, rx, effects) = {
            let mut inner = queue.lock();
            let acked = inner.state.ack(seq, token, now_ms)?;
            let rx = (acked == Acked::Settled)
                .then(|| queue.journal(&mut inner, &[JournalEvent::Acked { seq }], now_ms));
            (acked, rx, queue.take_effects(&mut inner, now_ms))
        };
        if let Some(rx) = rx {
            durable(rx).await?;
        }
        self.apply_effects(&queue, effects).await?;
        Ok(acked)
    }

    /// Settles several delivered messages of one queue with one journal write; returns once
    /// every settlement is durable, with one outcome per message in order: as
    /// [`ack`](Self::ack) gives it (`Ok(Settled)`, `Ok(AlreadySettled)`, or a
    /// [`BrokerError::StaleLease`] that changed nothing). The outer error is for the queue
    /// (unknown, poisoned) or the write.
    pub async fn ack_batch(
        &self,
        queue: &str,
        acks: &[(Seq, LeaseToken)],
    ) -> Result<Vec<Result<Acked>>> {
        let queue = self.queue(queue)?;
        let now_ms = self.now_ms();
        let (outcomes, rx, effects) = {
            let mut inner = queue.lock();
            let mut events = Vec::with_capacity(acks.len());
            let outcomes: Vec<Result<Acked>> = acks
                .iter()
                .map(|&(seq, token)| {
                    queue.check_published(seq)?;
                    let acked = inner.state.ack(seq, token, now_ms)?;
                    if acked == Acked::Settled {
                        events.push(JournalEvent::Acked { seq });
                    }
                    Ok(acked)
                })
                .collect();
            let rx = (!events.is_empty()).then(|| queue.journal(&mut inner, &events, now_ms));
            (outcomes, rx, queue.take_effects(&mut inner, now_ms))
        };
        if let Some(rx) = rx {
            durable(rx).await?;
        }
        self.apply_effects(&queue, effects).await?;
        Ok(outcomes)
    }

    /// A failed attempt: redelivery after `delay` or the retry policy's backoff, or the
    /// dead-letter queue when deliveries are used up. Returns once that is durable. A
    /// `delay` over 90 days is [`BrokerError::DelayTooLong`], and the lease is kept.
    pub async fn nack(
        &self,
        queue: &str,
        seq: Seq,
        token: LeaseToken,
        delay: Option<Duration>,
        error: Option<&str>,
    ) -> Result<Nacked> {
        check_retry_delay(delay)?;
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (nacked, effects) = {
            let mut inner = queue.lock();
            let nacked = inner.state.nack(seq, token, delay, error, now_ms)?;
            // The `Failed` event of a retry is journaled with the effects.
            (nacked, queue.take_effects(&mut inner, now_ms))
        };
        self.apply_effects(&queue, effects).await?;
        if let Nacked::RetryAt(at_ms) = nacked {
            self.inner.timers_changed.timer_at(at_ms);
        }
        Ok(nacked)
    }

    /// A permanent failure: the message goes to the dead-letter queue now with `reason`.
    /// Returns once the dead letter is stored and the origin's journal says so.
    pub async fn reject(
        &self,
        queue: &str,
        seq: Seq,
        token: LeaseToken,
        reason: &str,
    ) -> Result<()> {
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let effects = {
            let mut inner = queue.lock();
            inner.state.reject(seq, token, reason, now_ms)?;
            queue.take_effects(&mut inner, now_ms)
        };
        self.apply_effects(&queue, effects).await
    }

    /// Moves the lease's deadline to `now + by`; returns the new deadline once it is
    /// durable (journaled as `Extended`), so after a restart the message stays out of
    /// delivery until the extended deadline. `by` over 12 hours is refused
    /// ([`BrokerError::InvalidSetting`]) and the lease is left as it was.
    pub async fn extend(
        &self,
        queue: &str,
        seq: Seq,
        token: LeaseToken,
        by: Duration,
    ) -> Result<i64> {
        check_extension(by)?;
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (until_ms, rx) = {
            let mut inner = queue.lock();
            let until_ms = inner.state.extend(seq, token, by, now_ms)?;
            let event = JournalEvent::Extended { seq, until_ms };
            let rx = queue.journal(&mut inner, &[event], now_ms);
            (until_ms, rx)
        };
        self.inner.timers_changed.timer_at(until_ms);
        durable(rx).await?;
        Ok(until_ms)
    }

    /// The deadline of the running lease `token` of `seq`, in ms since the epoch:
    /// [`BrokerError::StaleLease`] if that is not the message's current lease (settled,
    /// failed, returned or leased again since). A lease whose deadline has passed counts as
    /// running until the queue's next tick ends it; compare with the clock.
    pub fn lease_deadline(&self, queue: &str, seq: Seq, token: LeaseToken) -> Result<i64> {
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let inner = queue.lock();
        inner.state.lease_deadline(seq, token)
    }

    /// Holds `key`'s messages on a key-shared queue until [`unpark`](Self::unpark); durable.
    /// A delivery in flight is not recalled; parking a parked key changes nothing.
    /// [`BrokerError::NotKeyShared`] on a shared or exclusive queue, where keys do not order
    /// and there is nothing to hold a key's messages behind.
    pub async fn park(&self, queue: &str, key: &[u8]) -> Result<()> {
        let queue = self.queue(queue)?;
        // No message can carry a longer key; refusing it keeps a caller from making the
        // queue hold and journal a key of any size.
        let max = self.inner.config.limits.max_key_bytes;
        if key.len() > max {
            return Err(BrokerError::KeyTooLarge {
                size: key.len(),
                max,
            });
        }
        let now_ms = self.now_ms();
        let rx = {
            let mut inner = queue.lock();
            if !inner.state.park(key) {
                return Err(not_key_shared(&queue));
            }
            let key = Bytes::copy_from_slice(key);
            queue.journal(&mut inner, &[JournalEvent::Parked { key }], now_ms)
        };
        durable(rx).await
    }

    /// Releases a parked key: its messages flow again, in order. Unparking a key that is
    /// not parked changes nothing; [`BrokerError::NotKeyShared`] on a queue that cannot
    /// park keys, as [`park`](Self::park).
    pub async fn unpark(&self, queue: &str, key: &[u8]) -> Result<()> {
        let queue = self.queue(queue)?;
        if queue.spec().ordering != OrderingMode::KeyShared {
            return Err(not_key_shared(&queue));
        }
        let now_ms = self.now_ms();
        let (rx, effects) = {
            let mut inner = queue.lock();
            inner.state.unpark(key, now_ms);
            let key = Bytes::copy_from_slice(key);
            let rx = queue.journal(&mut inner, &[JournalEvent::Unparked { key }], now_ms);
            (rx, queue.take_effects(&mut inner, now_ms))
        };
        durable(rx).await?;
        self.apply_effects(&queue, effects).await
    }

    /// The keys parked on `queue`, in byte order, each with how many of its messages it
    /// holds back (those not in flight). Empty on a queue that is not key-shared.
    pub fn parked_keys(&self, queue: &str) -> Result<Vec<ParkedKey>> {
        let queue = self.queue(queue)?;
        let mut keys: Vec<ParkedKey> = queue
            .lock()
            .state
            .parked_keys()
            .map(|(key, held)| ParkedKey {
                key: Bytes::copy_from_slice(key),
                held,
            })
            .collect();
        keys.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(keys)
    }
}

/// A parked key of a key-shared queue ([`Broker::parked_keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedKey {
    pub key: Bytes,
    /// Its messages held back, not counting one in flight when the key was parked.
    pub held: usize,
}

fn not_key_shared(queue: &super::Queue) -> BrokerError {
    BrokerError::NotKeyShared {
        queue: queue.name.clone(),
        ordering: match queue.spec().ordering {
            OrderingMode::Shared => "shared",
            OrderingMode::KeyShared => "key-shared",
            OrderingMode::Exclusive => "exclusive",
        },
    }
}

/// Whether `stop` is done, polled once without waiting.
fn stopped(stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    stop.poll(&mut cx).is_ready()
}

/// The longest consumer name, in bytes: it is journaled with every lease.
pub const MAX_CONSUMER_NAME_BYTES: usize = 256;

pub(crate) fn check_consumer(consumer: &str) -> Result<()> {
    // Prefetch caps, exclusive turns, leases and dead letters are all told apart by the
    // consumer's name; an empty one is almost always an unset field.
    if consumer.is_empty() {
        return Err(BrokerError::EmptyConsumerName);
    }
    if consumer.len() > MAX_CONSUMER_NAME_BYTES {
        let mut end = 32;
        while !consumer.is_char_boundary(end) {
            end -= 1;
        }
        return Err(BrokerError::ConsumerNameTooLong {
            prefix: consumer[..end].to_owned(),
            len: consumer.len(),
            max: MAX_CONSUMER_NAME_BYTES,
        });
    }
    Ok(())
}

/// A lease asked for at receive: the same bounds as a queue's own lease (1 ms to
/// [`QueueSpec::MAX_LEASE`]), refused rather than clamped so a caller never works on a
/// message believing it holds a lease it does not.
fn check_receive_lease(lease: Option<Duration>) -> Result<()> {
    match lease {
        Some(lease) if millis(lease) < 1 || lease > QueueSpec::MAX_LEASE => {
            Err(BrokerError::InvalidSetting {
                setting: "lease",
                problem: format!(
                    "must be between 1 ms and 12 hours, got {}; a consumer that needs longer \
                     should extend its lease while it works",
                    crate::error::human(&lease)
                ),
            })
        }
        _ => Ok(()),
    }
}

/// A lease extension: the new deadline is `now + by`, so `by` is at most
/// [`QueueSpec::MAX_LEASE`]; zero ends the lease now (the attempt fails as if it expired).
fn check_extension(by: Duration) -> Result<()> {
    if by > QueueSpec::MAX_LEASE {
        return Err(BrokerError::InvalidSetting {
            setting: "lease extension",
            problem: format!(
                "must be between 0 ms and 12 hours, got {}; extend again later to hold the \
                 message longer",
                crate::error::human(&by)
            ),
        });
    }
    Ok(())
}

/// A nack's explicit delay: at most [`QueueSpec::MAX_DELAY`], as for a delayed publish.
fn check_retry_delay(delay: Option<Duration>) -> Result<()> {
    match delay {
        Some(delay) if delay > QueueSpec::MAX_DELAY => Err(BrokerError::DelayTooLong {
            delay,
            max: QueueSpec::MAX_DELAY,
        }),
        _ => Ok(()),
    }
}
