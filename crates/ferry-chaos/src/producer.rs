//! A producer worker: publishes batches to both queues until SIGTERM, and records each
//! message once its publish has returned OK (an acknowledged publish).
//!
//! Each batch is retried with the same message ids until it is stored, before the next
//! one is sent: so a key's messages are stored in the order of their `kseq`, and a retry
//! of a batch that did arrive is answered from the dedup window, not stored again. After
//! a publish had to be retried (the server was killed, paused or cut off), a few earlier
//! messages that carry a dedup id are published again under new message ids: the broker
//! must answer with the first message's id and store nothing.

use std::collections::VecDeque;
use std::time::Duration;

use ferry_client::{Client, ClientError, Message, RetryPolicy};

use crate::error::Result;
use crate::history::{Event, Fate, HistoryWriter, monotonic_ns};
use crate::scenario::{FATE_HEADER, KSEQ_HEADER, ORDERS_QUEUE, WORK_QUEUE};
use crate::worker::{Stop, connect};

/// Keys per producer on the ordered queue.
const KEYS: u64 = 8;
/// Messages per batch, per queue.
const BATCH: usize = 5;
/// Dedup-carrying messages remembered for re-publishing.
const RECENT_DEDUP: usize = 32;

#[derive(Debug, Clone)]
pub struct ProducerPlan {
    pub index: u32,
    pub seed: u64,
    /// This producer's messages per second (both queues together).
    pub rate: u32,
    /// Stop after this many acknowledged publishes.
    pub max_messages: Option<u64>,
}

struct Recent {
    dedup: String,
}

pub async fn run(url: &str, plan: ProducerPlan, history: &mut HistoryWriter) -> Result<()> {
    let mut stop = Stop::on_sigterm()?;
    let mut rng = fastrand::Rng::with_seed(plan.seed ^ (u64::from(plan.index) << 32));
    let Some(client) = connect(url, &mut stop).await? else {
        return Ok(());
    };
    // One try per call: this loop does the retrying, forever, with the same ids.
    let client = client.with_retry(RetryPolicy {
        attempts: 1,
        ..RetryPolicy::default()
    });
    let mut next_kseq = vec![0u64; KEYS as usize];
    let mut recent: VecDeque<Recent> = VecDeque::new();
    let mut published = 0u64;
    let mut dedup_counter = 0u64;
    // Two batches of BATCH per round.
    let round = Duration::from_secs_f64((2 * BATCH) as f64 / f64::from(plan.rate.max(1)));
    let mut ticker = tokio::time::interval(round);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.signalled() => return Ok(()),
        }
        if plan.max_messages.is_some_and(|max| published >= max) {
            stop.signalled().await;
            return Ok(());
        }

        // The ordered queue: each message the next of a random key.
        let mut orders = Vec::with_capacity(BATCH);
        for _ in 0..BATCH {
            let k = rng.u64(..KEYS);
            let kseq = next_kseq[k as usize];
            next_kseq[k as usize] += 1;
            // A few are nacked once: the key's head is then delivered again before the next.
            let fate = if rng.u32(..20) == 0 {
                Fate::NackOnce
            } else {
                Fate::Ack
            };
            orders.push(Outgoing {
                id: new_id(&mut rng),
                key: Some(format!("p{}-k{k}", plan.index)),
                kseq: Some(kseq),
                fate,
                dedup: None,
            });
        }
        let retried_orders = publish(&client, ORDERS_QUEUE, &orders, history, &mut stop).await?;

        // The work queue: fates drawn by weight; a fifth carry a dedup id.
        let mut work = Vec::with_capacity(BATCH);
        for _ in 0..BATCH {
            let fate = match rng.u32(..100) {
                0..5 => Fate::Reject,
                5..9 => Fate::Poison,
                9..19 => Fate::NackOnce,
                _ => Fate::Ack,
            };
            let dedup = (rng.u32(..5) == 0).then(|| {
                dedup_counter += 1;
                format!("p{}-d{dedup_counter}", plan.index)
            });
            work.push(Outgoing {
                id: new_id(&mut rng),
                key: None,
                kseq: None,
                fate,
                dedup,
            });
        }
        let retried_work = publish(&client, WORK_QUEUE, &work, history, &mut stop).await?;
        let (Some(retried_orders), Some(retried_work)) = (retried_orders, retried_work) else {
            return Ok(()); // stopped while the server was unreachable
        };
        published += (orders.len() + work.len()) as u64;
        for m in &work {
            if let Some(dedup) = &m.dedup {
                recent.push_back(Recent {
                    dedup: dedup.clone(),
                });
                if recent.len() > RECENT_DEDUP {
                    recent.pop_front();
                }
            }
        }

        // After a disturbance, and now and then anyway: the same dedup ids again.
        let again = if retried_orders || retried_work {
            3
        } else if rng.u32(..25) == 0 {
            1
        } else {
            0
        };
        for _ in 0..again.min(recent.len()) {
            let pick = &recent[rng.usize(..recent.len())];
            if republish(&client, &pick.dedup, &mut rng, history, &mut stop)
                .await?
                .is_none()
            {
                return Ok(());
            }
        }
    }
}

struct Outgoing {
    id: String,
    key: Option<String>,
    kseq: Option<u64>,
    fate: Fate,
    dedup: Option<String>,
}

impl Outgoing {
    fn message(&self) -> Message {
        let mut m = Message::new(format!("chaos {}", self.id))
            .with_id(self.id.clone())
            .with_header(FATE_HEADER, self.fate.as_str());
        if let (Some(key), Some(kseq)) = (&self.key, self.kseq) {
            m = m
                .with_key(key.clone().into_bytes())
                .with_header(KSEQ_HEADER, kseq.to_string());
        }
        if let Some(dedup) = &self.dedup {
            m = m.with_dedup_id(dedup.clone());
        }
        m
    }
}

/// Publishes `batch` until it is stored and records it; `Some(retried)` says whether it
/// needed more than one try, `None` that a SIGTERM came first.
async fn publish(
    client: &Client,
    queue: &str,
    batch: &[Outgoing],
    history: &mut HistoryWriter,
    stop: &mut Stop,
) -> Result<Option<bool>> {
    let messages: Vec<Message> = batch.iter().map(Outgoing::message).collect();
    let Some((ids, retried)) =
        until_stored(stop, || client.publish(queue, messages.clone())).await?
    else {
        return Ok(None);
    };
    let t = monotonic_ns();
    for (m, id) in batch.iter().zip(ids) {
        history.append(&Event::Published {
            t,
            queue: queue.to_owned(),
            sent_id: m.id.clone(),
            id,
            key: m.key.clone(),
            kseq: m.kseq,
            fate: m.fate,
            dedup: m.dedup.clone(),
        })?;
    }
    Ok(Some(retried))
}

/// Publishes a message under an already used dedup id, with a new message id.
async fn republish(
    client: &Client,
    dedup: &str,
    rng: &mut fastrand::Rng,
    history: &mut HistoryWriter,
    stop: &mut Stop,
) -> Result<Option<()>> {
    let sent_id = new_id(rng);
    let message = Message::new(format!("chaos again {dedup}"))
        .with_id(sent_id.clone())
        .with_dedup_id(dedup)
        .with_header(FATE_HEADER, Fate::Ack.as_str());
    let Some((ids, _)) =
        until_stored(stop, || client.publish(WORK_QUEUE, vec![message.clone()])).await?
    else {
        return Ok(None);
    };
    history.append(&Event::Republished {
        t: monotonic_ns(),
        queue: WORK_QUEUE.to_owned(),
        sent_id,
        returned_id: ids.into_iter().next().unwrap_or_default(),
        dedup: dedup.to_owned(),
    })?;
    Ok(Some(()))
}

/// Runs `call` until it succeeds; a transient failure is retried after a backoff, any
/// other ends the worker. `None` if SIGTERM came while retrying.
async fn until_stored<T, F, Fut>(stop: &mut Stop, mut call: F) -> Result<Option<(T, bool)>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let backoff = RetryPolicy::default();
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(value) => return Ok(Some((value, attempt > 0))),
            Err(error) if error.is_transient() => {
                tokio::select! {
                    _ = tokio::time::sleep(backoff.delay(attempt.min(5))) => {}
                    _ = stop.signalled() => return Ok(None),
                }
                attempt += 1;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// A message id (a ULID) from the wall clock and the seeded generator.
fn new_id(rng: &mut fastrand::Rng) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let random = (u128::from(rng.u64(..)) << 64 | u128::from(rng.u64(..))) >> 48;
    ulid::Ulid::from_parts(ms, random).to_string()
}
