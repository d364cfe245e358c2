//! Fetching from a shared pull consumer, and settling what was fetched: acks, naks with a
//! delay, dead-lettering by republish-then-ack, and lease extension by in-progress acks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::PullConsumer};
use async_trait::async_trait;
use futures_util::StreamExt;

use super::codec::{self, DELAY_MS, PUBLISHED_AT};
use super::engine::{INTERNAL_LEASE, Shared, map_publish, transport_error};
use super::names::StreamName;
use super::settings::Settings;
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received, now_ms, reason};
use crate::transport::{ConsumerBackend, Incoming, Settler};

/// The shortest expiry a pull is given: the engine reads an `expires` of zero as "never",
/// so a fetch asked not to wait at all may still wait this long when nothing is there.
const SHORTEST_WAIT: Duration = Duration::from_millis(10);
/// The longest one fetch waits while delayed messages may fall due, so the mover runs at
/// least this often.
const MOVER_PERIOD: Duration = Duration::from_millis(500);
/// How long the mover waits for the engine's next answer to its pull before it gives up on
/// that pull.
const MOVER_STALL: Duration = Duration::from_secs(1);
/// Most delayed messages looked at per fetch.
const MOVER_BATCH: usize = 256;
/// When a due message cannot enter its full queue, when to try again.
const FULL_RETRY: Duration = Duration::from_secs(1);
/// When a dead letter could not be written, when its delivery comes back to try again.
const DEAD_LETTER_RETRY: Duration = Duration::from_secs(1);

/// What settling deliveries from a queue or a subscription needs to know.
pub struct Live {
    /// The queue or subscription, as dead letters name their origin.
    origin: String,
    settings: Settings,
    dead_letters: Option<StreamName>,
    consumer: String,
}

impl Live {
    pub fn new(
        origin: &str,
        settings: Settings,
        dead_letters: Option<StreamName>,
        consumer: &str,
    ) -> Live {
        Live {
            origin: origin.to_owned(),
            settings,
            dead_letters,
            consumer: consumer.to_owned(),
        }
    }
}

/// Moves a queue's delayed messages from its holding stream into the queue once due.
pub struct Mover {
    holding: PullConsumer,
    target_subject: String,
    queue: String,
}

impl Mover {
    pub fn new(holding: PullConsumer, target_subject: String, queue: &str) -> Mover {
        Mover {
            holding,
            target_subject,
            queue: queue.to_owned(),
        }
    }

    /// Moves what is due and sends the rest back until it is. A moved message is a new one
    /// in the queue (its attempts start at 1) with the id, headers, `Nats-Msg-Id` and
    /// original publish time it had; it is published before the holding copy is acked, so a
    /// crash between the two repeats the move, which the queue's duplicate window absorbs.
    async fn run(&self, js: &jetstream::Context) -> Result<()> {
        let mut batch = self
            .holding
            .fetch()
            .max_messages(MOVER_BATCH)
            .messages()
            .await
            .map_err(transport_error)?;
        // The engine answers this `no_wait` pull at once unless it parks it (see `pull`);
        // an expiry would make every fetch wait it out whenever nothing is held, so a stall
        // is cut short here instead. A message the engine then delivers into the abandoned
        // pull comes back to the mover when its holding lease ends: late, not lost.
        loop {
            let message = match tokio::time::timeout(MOVER_STALL, batch.next()).await {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(_) => {
                    tracing::debug!(queue = %self.queue, "the delayed-message pull stalled; moving on");
                    break;
                }
            };
            let message = message.map_err(transport_error)?;
            let info = message.info().map_err(transport_error)?;
            let stored_ms = (info.published.unix_timestamp_nanos() / 1_000_000) as i64;
            let delay_ms: i64 = message
                .headers
                .as_ref()
                .and_then(|h| h.get(DELAY_MS))
                .and_then(|v| v.as_str().parse().ok())
                .unwrap_or(0);
            let left = stored_ms + delay_ms - now_ms();
            if left > 0 {
                message
                    .ack_with(AckKind::Nak(Some(Duration::from_millis(left as u64))))
                    .await
                    .map_err(transport_error)?;
                continue;
            }
            let mut headers = message.headers.clone().unwrap_or_default();
            headers.insert(DELAY_MS, "0");
            if headers.get(PUBLISHED_AT).is_none() {
                headers.insert(PUBLISHED_AT, stored_ms.to_string());
            }
            let publish = jetstream::message::PublishMessage::build()
                .payload(message.payload.clone())
                .headers(headers);
            let stored = match js.send_publish(self.target_subject.clone(), publish).await {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match stored.map_err(|e| map_publish("queue", &self.queue, e)) {
                Ok(_) => message.double_ack().await.map_err(transport_error)?,
                Err(Error::Full { .. }) => message
                    .ack_with(AckKind::Nak(Some(FULL_RETRY)))
                    .await
                    .map_err(transport_error)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

pub struct NatsConsumer {
    shared: Arc<Shared>,
    consumer: PullConsumer,
    /// `None` when reading dead letters.
    live: Option<Arc<Live>>,
    mover: Option<Mover>,
}

impl NatsConsumer {
    pub fn new(
        shared: Arc<Shared>,
        consumer: PullConsumer,
        live: Option<Arc<Live>>,
        mover: Option<Mover>,
    ) -> NatsConsumer {
        NatsConsumer {
            shared,
            consumer,
            live,
            mover,
        }
    }

    /// Up to `max` messages, waiting up to `wait` for the first: one pull, `no_wait` with an
    /// expiry, which the engine answers as a one-shot — it hands over what is there at once
    /// (or the first to arrive within `wait`) and ends the pull with a status.
    ///
    /// Every pull carries an expiry. A `no_wait` pull without one can be parked by the
    /// engine (nats-server 2.9) when the messages it counted on go to a pull queued before
    /// it; it then waits for the next message published, however long that takes, and the
    /// fetch with it — seen as a request/reply request left unanswered while its responder
    /// sat in a fetch that never returned. With an expiry the engine ends it at `wait`.
    async fn pull(&self, max: usize, wait: Duration) -> Result<Vec<jetstream::Message>> {
        let mut got = Vec::new();
        let batch = self
            .consumer
            .fetch()
            .max_messages(max)
            .expires(wait.max(SHORTEST_WAIT))
            .messages()
            .await
            .map_err(|e| self.fetch_error(e))?;
        match self.drain_into(batch, &mut got).await {
            // Messages already taken are handed over even if the pull then fails: dropped,
            // they would come back only when their leases end, an attempt spent.
            Err(e) if !got.is_empty() => {
                tracing::debug!(error = %e, "a pull failed after taking messages; handing those over");
            }
            outcome => outcome?,
        }
        Ok(got)
    }

    /// Reads one pull's messages to its end. The engine ends a pull it cannot serve now
    /// with a status — at its MaxAckPending or MaxWaiting — which means "nothing now".
    async fn drain_into(
        &self,
        mut batch: jetstream::consumer::pull::Batch,
        got: &mut Vec<jetstream::Message>,
    ) -> Result<()> {
        while let Some(message) = batch.next().await {
            match message {
                Ok(message) => got.push(message),
                Err(e) if e.to_string().to_ascii_lowercase().contains("exceeded max") => break,
                Err(e) => return Err(self.fetch_error(e)),
            }
        }
        Ok(())
    }

    fn fetch_error(&self, e: impl std::fmt::Display) -> Error {
        let text = e.to_string();
        if text.to_ascii_lowercase().contains("consumer deleted") {
            Error::NotFound {
                kind: "queue or subscription",
                name: self.consumer.cached_info().stream_name.clone(),
            }
        } else {
            transport_error(text)
        }
    }
}

#[async_trait]
impl ConsumerBackend for NatsConsumer {
    fn max_deliveries(&self) -> Option<u32> {
        self.live.as_ref().map(|live| live.settings.max_deliveries)
    }

    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let js = self.shared.js()?;
        let mut wait = wait;
        if let Some(mover) = &self.mover {
            if let Err(e) = mover.run(&js).await {
                tracing::warn!(queue = %mover.queue, error = %e, "moving due delayed messages failed; trying again on the next fetch");
            }
            wait = wait.min(MOVER_PERIOD);
        }
        let mut incoming = Vec::new();
        for message in self.pull(max, wait).await? {
            let info = message.info().map_err(transport_error)?;
            let attempt = u32::try_from(info.delivered.max(1)).unwrap_or(u32::MAX);
            let stored_ms = (info.published.unix_timestamp_nanos() / 1_000_000) as i64;
            let fallback_id = format!("{}:{}", info.stream, info.stream_sequence);
            let seq_id = fallback_id.clone();
            let received = codec::received(
                message.headers.as_ref(),
                message.payload.clone(),
                fallback_id,
                stored_ms,
                attempt,
                self.live.is_none(),
            );
            let settler = NatsSettler {
                shared: self.shared.clone(),
                message: Arc::new(message),
                live: self.live.clone(),
                received,
                seq_id,
                extension: Mutex::new(None),
            };
            if let Some(live) = &self.live
                && attempt > live.settings.max_deliveries
            {
                // The deliveries are used up and the message is still here: the last
                // delivery's lease ran out, or dead-lettering it failed (on its nack, or on
                // an earlier fetch). MaxDeliver is unlimited, so the engine keeps handing it
                // back until a dead-lettering succeeds; it never goes to the application.
                let deliveries = live.settings.max_deliveries;
                let error = Some(
                    "the last delivery was not settled within its lease, or dead-lettering it failed"
                        .to_owned(),
                );
                if let Err(e) = settler
                    .dead_letter(reason::MAX_DELIVERIES, deliveries, error)
                    .await
                {
                    tracing::warn!(origin = %live.origin, error = %e, "dead-lettering a delivery past max_deliveries failed; it comes back to be tried again");
                }
                continue;
            }
            let message = settler.received.clone();
            incoming.push(Incoming {
                message,
                settler: Arc::new(settler),
            });
        }
        Ok(incoming)
    }

    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Settles one delivery.
struct NatsSettler {
    shared: Arc<Shared>,
    message: Arc<jetstream::Message>,
    live: Option<Arc<Live>>,
    received: Received,
    /// `<stream>:<sequence>`: the dead letter's `Nats-Msg-Id`, so a republish repeated after
    /// a crash is stored once.
    seq_id: String,
    /// Repeats in-progress acks for an extension longer than the lease.
    extension: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for NatsSettler {
    fn drop(&mut self) {
        self.stop_extending();
    }
}

impl NatsSettler {
    fn stop_extending(&self) {
        if let Some(task) = self
            .extension
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }

    /// Sends `kind` and waits for the engine to confirm it.
    async fn confirm(&self, kind: AckKind) -> Result<()> {
        self.shared.js()?;
        self.message
            .double_ack_with(kind)
            .await
            .map_err(|e| self.settle_error(e))
    }

    fn settle_error(&self, e: impl std::fmt::Display) -> Error {
        let text = e.to_string();
        if text.contains("timed out") {
            // The engine confirms only what it still holds as pending: no answer means the
            // delivery was settled already or its lease ran out and it went elsewhere.
            Error::NotHeld {
                id: self.received.id.clone(),
                why: "the engine did not confirm the settlement: the delivery was settled or its lease ran out".into(),
            }
        } else {
            transport_error(text)
        }
    }

    /// Republishes to the dead-letter stream with the metadata, then acks. Without a
    /// dead-letter queue the message is dropped (`Term`).
    ///
    /// Nothing is stranded, whatever stops this between its steps, because the consumer's
    /// MaxDeliver is unlimited (`engine.rs`): the delivery stays pending until the ack, and
    /// every later delivery of it is past `max_deliveries` and dead-lettered when fetched.
    /// - The republish fails (the dead-letter stream deleted, full or unreachable): the
    ///   delivery is handed back with a `Nak` to come again after [`DEAD_LETTER_RETRY`], and
    ///   the error returned; if the `Nak` is lost too, it comes back when its lease ends.
    /// - The process dies before the republish is stored: it comes back when its lease ends.
    /// - The republish is stored but the ack is lost (a crash, a dropped connection): it
    ///   comes back and is republished under the same `Nats-Msg-Id` (`<stream>:<sequence>`),
    ///   which the dead-letter stream's duplicate window (the engine's two minutes) absorbs.
    ///   A redelivery later than that window — a lease longer than two minutes — stores a
    ///   second copy: a duplicate dead letter, never a lost one.
    async fn dead_letter(&self, why: &str, deliveries: u32, error: Option<String>) -> Result<()> {
        let live = self.live.as_ref().expect("only live deliveries die");
        let Some(dead_letters) = &live.dead_letters else {
            return self.confirm(AckKind::Term).await;
        };
        let js = self.shared.js()?;
        let now = now_ms();
        let info = DeadLetterInfo {
            reason: why.to_owned(),
            deliveries,
            origin: live.origin.clone(),
            last_error: error,
            first_failure_ms: None,
            last_failure_ms: Some(now),
            consumer: Some(live.consumer.clone()),
        };
        let mut headers = self.received.headers.clone();
        info.write_headers(&mut headers);
        headers.insert(
            crate::message::header::DLQ_ORIGIN_PUBLISHED_AT.into(),
            self.received.published_at_ms.to_string(),
        );
        let message = Message {
            id: Some(self.received.id.clone()),
            key: self.received.key.clone(),
            headers,
            payload: self.received.payload.clone(),
            ..Message::default()
        };
        let extra = [(PUBLISHED_AT, self.received.published_at_ms.to_string())];
        let encoded = codec::encode(&message, &extra, Some(self.seq_id.clone()))?;
        let publish = jetstream::message::PublishMessage::build()
            .payload(encoded.payload)
            .headers(encoded.headers);
        let stored = match js.send_publish(dead_letters.subject.clone(), publish).await {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            let error = map_publish("dead-letter queue", &live.origin, e);
            if let Err(nak) = self
                .message
                .ack_with(AckKind::Nak(Some(DEAD_LETTER_RETRY)))
                .await
            {
                tracing::debug!(error = %nak, "handing back a delivery whose dead letter failed; its lease will");
            }
            return Err(error);
        }
        self.confirm(AckKind::Ack).await
    }
}

#[async_trait]
impl Settler for NatsSettler {
    async fn ack(&self) -> Result<()> {
        self.stop_extending();
        self.confirm(AckKind::Ack).await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        self.stop_extending();
        let attempt = self.received.attempt;
        let delay = match &self.live {
            Some(live) if attempt >= live.settings.max_deliveries => {
                return self
                    .dead_letter(reason::MAX_DELIVERIES, attempt, error.map(str::to_owned))
                    .await;
            }
            Some(live) => delay.unwrap_or_else(|| {
                live.settings
                    .backoff
                    .to_backoff()
                    .delay(attempt, fastrand::f64())
            }),
            None => delay.unwrap_or_default(),
        };
        let delay = (!delay.is_zero()).then_some(delay);
        self.confirm(AckKind::Nak(delay)).await
    }

    async fn reject(&self, reason: &str) -> Result<()> {
        self.stop_extending();
        if self.live.is_some() {
            self.dead_letter(
                reason::REJECTED,
                self.received.attempt,
                Some(reason.to_owned()),
            )
            .await
        } else {
            // A dead letter rejected has nowhere further to go.
            self.confirm(AckKind::Term).await
        }
    }

    /// An in-progress ack restarts the full AckWait (in 2.9 as later), so it hides the
    /// delivery for the lease from now — at least `by` when `by` fits in the lease. For a
    /// longer `by` it is repeated every half lease until `by` is covered.
    async fn extend(&self, by: Duration) -> Result<()> {
        self.stop_extending();
        self.confirm(AckKind::Progress).await?;
        let lease = self
            .live
            .as_ref()
            .map(|l| l.settings.lease())
            .unwrap_or(INTERNAL_LEASE);
        if by <= lease {
            return Ok(());
        }
        let message = self.message.clone();
        let until = tokio::time::Instant::now() + by;
        let every = (lease / 2).max(Duration::from_millis(50));
        let task = tokio::spawn(async move {
            loop {
                let next = tokio::time::Instant::now() + every;
                // Stop once the lease from the last progress already covers `until`.
                if next - every + lease >= until {
                    return;
                }
                tokio::time::sleep_until(next).await;
                if message.ack_with(AckKind::Progress).await.is_err() {
                    return;
                }
            }
        });
        *self.extension.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        Ok(())
    }
}
