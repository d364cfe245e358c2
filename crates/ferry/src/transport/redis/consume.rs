//! Consuming a Redis source: each fetch runs the fetch script (moving due delayed entries,
//! claiming expired leases, reading new entries), and when that finds nothing, waits in a
//! blocking XREADGROUP on the consumer's own connection until a new entry arrives, the
//! fetch's time is up, or a delayed entry or a lease comes due (which the script reports).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::Value;
use ::redis::aio::MultiplexedConnection;
use async_trait::async_trait;
use bytes::Bytes;

use super::engine::{ADMIT, FETCH, MAINTAIN, Plan, Shared, map_error, ms, text, unexpected};
use super::settle::{Held, RedisSettler, SettleBatches};
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Received};
use crate::transport::group_commit::GroupCommit;
use crate::transport::{ConsumerBackend, Incoming};

/// How much longer than its BLOCK a blocking read may take to answer before the consumer
/// gives up on the connection: the server answers at the BLOCK's end, so only a broken
/// connection or a stalled server gets this far.
const BLOCK_GRACE: Duration = Duration::from_secs(5);
/// How often a consumer does housekeeping: trimming what every subscription has acked from
/// a topic's stream, forgetting idle group consumers that hold nothing.
const MAINTAIN_EVERY: Duration = Duration::from_secs(5);
/// How long a group consumer holding nothing stays listed after its last read.
const FORGET_IDLE_CONSUMERS: Duration = Duration::from_secs(300);

pub(super) struct RedisConsumer {
    shared: Arc<Shared>,
    plan: Arc<Plan>,
    name: String,
    last_maintained: Instant,
    closed: bool,
    settles: Arc<GroupCommit<SettleBatches>>,
    /// The connection this consumer's blocking reads wait on, opened at the first: a
    /// blocking XREADGROUP holds its connection until it returns, so it cannot be the
    /// shared one. Dropped on any error and opened again by the next wait.
    blocking: Option<MultiplexedConnection>,
}

impl RedisConsumer {
    pub(super) fn new(shared: Arc<Shared>, plan: Plan, name: &str) -> RedisConsumer {
        let plan = Arc::new(plan);
        RedisConsumer {
            settles: GroupCommit::new(SettleBatches {
                shared: shared.clone(),
                plan: plan.clone(),
            }),
            shared,
            plan,
            name: name.to_owned(),
            last_maintained: Instant::now(),
            closed: false,
            blocking: None,
        }
    }

    async fn maintain(&self, closing: &str) -> Result<()> {
        let mut con = self.shared.connection()?;
        MAINTAIN
            .key(&self.plan.topic_stream)
            .key(&self.plan.home)
            .arg(&self.plan.group)
            .arg(ms(FORGET_IDLE_CONSUMERS))
            .arg(closing)
            .invoke_async::<Value>(&mut con)
            .await
            .map(drop)
            .map_err(map_error)
    }

    /// One run of the fetch script: up to `max` deliveries, or none and how long until a
    /// delayed entry is due or a lease ends (`None` when nothing waits on a timer).
    async fn fetch_once(&mut self, max: usize) -> Result<(Vec<Incoming>, Option<Duration>)> {
        let mut con = self.shared.connection()?;
        if self.last_maintained.elapsed() >= MAINTAIN_EVERY {
            self.last_maintained = Instant::now();
            self.maintain("").await?;
        }
        let plan = &self.plan;
        let reply: Value = FETCH
            .key(&plan.home)
            .key(&plan.delayed)
            .key(&plan.ext)
            .key(&plan.fails)
            .key(&plan.dlq)
            .key(&plan.topic_delayed)
            .key(&plan.topic_stream)
            .arg(&plan.group)
            .arg(&self.name)
            .arg(max)
            .arg(plan.settings.lease_ms)
            .arg(plan.max_deliveries())
            .arg(plan.settings.default_ttl_ms)
            .arg(&plan.origin)
            .invoke_async(&mut con)
            .await
            .map_err(map_error)?;
        let (entries, wake) = match &reply {
            Value::Array(parts) => match parts.as_slice() {
                [Value::Array(entries), Value::Int(wake)] => (entries, *wake),
                _ => return Err(unexpected("fetch", &reply)),
            },
            _ => return Err(unexpected("fetch", &reply)),
        };
        let got = entries
            .iter()
            .map(|entry| self.incoming(entry))
            .collect::<Result<Vec<_>>>()?;
        let wake = u64::try_from(wake).ok().map(Duration::from_millis);
        Ok((got, wake))
    }

    /// Waits up to `block` in XREADGROUP … BLOCK for new entries of the source's streams,
    /// and takes up to `max` of them; empty when none came.
    ///
    /// A fetch dropped while it waits (its caller stopped waiting) may leave entries the
    /// server delivered to this consumer unseen: they are pending for it like any delivery
    /// never settled, and come back when the lease ends.
    async fn block_read(&mut self, max: usize, block: Duration) -> Result<Vec<Incoming>> {
        let plan = self.plan.clone();
        let mut streams: Vec<&str> = Vec::with_capacity(2);
        if !plan.topic_stream.is_empty() {
            streams.push(&plan.topic_stream);
        }
        streams.push(&plan.home);
        let mut read = ::redis::cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(&plan.group)
            .arg(&self.name)
            .arg("COUNT")
            .arg(max)
            .arg("BLOCK")
            .arg(ms(block).max(1))
            .arg("STREAMS")
            .arg(&streams)
            .arg(vec![">"; streams.len()]);
        let mut con = match self.blocking.take() {
            Some(con) => con,
            None => self.shared.blocking_connection().await?,
        };
        let reply = tokio::time::timeout(block + BLOCK_GRACE, read.query_async::<Value>(&mut con))
            .await
            .map_err(|_| Error::Timeout(block + BLOCK_GRACE))?
            .map_err(map_error)?;
        // Kept only after an answer: a connection that failed or timed out is dropped.
        self.blocking = Some(con);
        let read = read_entries(&reply).ok_or_else(|| unexpected("blocking read", &reply))?;
        if read.is_empty() {
            return Ok(Vec::new());
        }
        // The scripts' stream index: a subscription reads its topic's stream (1) and its
        // own (2); a queue its own alone (1).
        let index = |stream: &str| {
            if plan.topic_stream.is_empty() || stream == plan.topic_stream {
                1
            } else {
                2
            }
        };
        // What may have expired goes past the same TTL check as the fetch script's reads,
        // in a script of its own (server time, dead-lettering atomically); the rest is
        // delivered as read.
        let may_expire = plan.settings.default_ttl_ms > 0
            || read.iter().any(|(_, _, fields)| has_expiry(fields));
        if !may_expire {
            return read
                .iter()
                .map(|(stream, id, fields)| {
                    let entry = Value::Array(vec![
                        Value::Int(index(stream)),
                        Value::BulkString(id.as_bytes().to_vec()),
                        Value::Int(1),
                        (*fields).clone(),
                    ]);
                    self.incoming(&entry)
                })
                .collect();
        }
        let mut con = self.shared.connection()?;
        let mut admit = ADMIT.prepare_invoke();
        admit
            .key(&plan.home)
            .key(&plan.delayed)
            .key(&plan.ext)
            .key(&plan.fails)
            .key(&plan.dlq)
            .key(&plan.topic_delayed)
            .key(&plan.topic_stream)
            .arg(&plan.group)
            .arg(&self.name)
            .arg(plan.settings.default_ttl_ms)
            .arg(&plan.origin);
        for (stream, id, _) in &read {
            admit.arg(index(stream)).arg(id);
        }
        let reply: Value = admit.invoke_async(&mut con).await.map_err(map_error)?;
        let Value::Array(entries) = &reply else {
            return Err(unexpected("admit", &reply));
        };
        entries.iter().map(|entry| self.incoming(entry)).collect()
    }

    fn incoming(&self, entry: &Value) -> Result<Incoming> {
        let bad = || unexpected("fetch", entry);
        let Value::Array(parts) = entry else {
            return Err(bad());
        };
        let [
            Value::Int(index),
            id,
            Value::Int(count),
            Value::Array(fields),
        ] = parts.as_slice()
        else {
            return Err(bad());
        };
        let entry_id = text(id).ok_or_else(bad)?;
        let mut map: BTreeMap<String, Bytes> = BTreeMap::new();
        for pair in fields.chunks(2) {
            if let [Value::BulkString(f), Value::BulkString(v)] = pair {
                map.insert(
                    String::from_utf8_lossy(f).into_owned(),
                    Bytes::copy_from_slice(v),
                );
            }
        }
        let string = |f: &str| map.get(f).map(|v| String::from_utf8_lossy(v).into_owned());
        let int = |f: &str| string(f).and_then(|v| v.parse::<i64>().ok());
        let mut headers: BTreeMap<String, String> = match map.get("h") {
            Some(h) => serde_json::from_slice(h)?,
            None => BTreeMap::new(),
        };
        let dead_letter = string("dr").map(|reason| DeadLetterInfo {
            reason,
            deliveries: int("dn").unwrap_or(0).max(0) as u32,
            origin: string("do").unwrap_or_default(),
            last_error: string("de"),
            first_failure_ms: int("df"),
            last_failure_ms: int("dl"),
            consumer: string("dc"),
        });
        if let Some(info) = &dead_letter {
            info.write_headers(&mut headers);
            if let Some(t) = string("t") {
                headers.insert(crate::message::header::DLQ_ORIGIN_PUBLISHED_AT.into(), t);
            }
        }
        let count = (*count).max(1) as u32;
        let carried = int("a").unwrap_or(0).max(0) as u32;
        let message = Received {
            id: string("id").unwrap_or_else(|| entry_id.clone()),
            key: map.get("k").cloned(),
            headers,
            payload: map.get("p").cloned().unwrap_or_default(),
            priority: 0,
            published_at_ms: int("t").unwrap_or(0),
            attempt: carried + count,
            dead_letter,
        };
        Ok(Incoming {
            message,
            settler: Arc::new(RedisSettler {
                settles: self.settles.clone(),
                plan: self.plan.clone(),
                delivery: Arc::new(Held {
                    from_topic: self.plan.is_topic_stream(*index),
                    entry_id,
                    consumer: self.name.clone(),
                    count,
                    carried,
                }),
            }),
        })
    }
}

/// The entries of an XREADGROUP reply as (stream, id, fields); empty when the BLOCK ended
/// with nothing, `None` when the reply has another shape.
fn read_entries(reply: &Value) -> Option<Vec<(String, String, &Value)>> {
    let streams: Vec<(&Value, &Value)> = match reply {
        Value::Nil => return Some(Vec::new()),
        Value::Array(streams) => streams
            .iter()
            .map(|s| match s {
                Value::Array(pair) if pair.len() == 2 => Some((&pair[0], &pair[1])),
                _ => None,
            })
            .collect::<Option<_>>()?,
        Value::Map(streams) => streams.iter().map(|(k, v)| (k, v)).collect(),
        _ => return None,
    };
    let mut out = Vec::new();
    for (stream, entries) in streams {
        let stream = text(stream)?;
        let Value::Array(entries) = entries else {
            return None;
        };
        for entry in entries {
            let Value::Array(parts) = entry else {
                return None;
            };
            let [id, fields @ Value::Array(_)] = parts.as_slice() else {
                return None;
            };
            out.push((stream.clone(), text(id)?, fields));
        }
    }
    Some(out)
}

/// Whether entry fields carry an expiry (`x`).
fn has_expiry(fields: &Value) -> bool {
    let Value::Array(fields) = fields else {
        return false;
    };
    fields
        .chunks(2)
        .any(|pair| matches!(pair.first(), Some(Value::BulkString(f)) if f.as_slice() == b"x"))
}

#[async_trait]
impl ConsumerBackend for RedisConsumer {
    fn max_deliveries(&self) -> Option<u32> {
        (!self.plan.is_dead_letters).then_some(self.plan.settings.max_deliveries)
    }

    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let max = max.max(1);
        let deadline = Instant::now() + wait;
        loop {
            let (got, wake) = self.fetch_once(max).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !got.is_empty() || left.is_zero() {
                return Ok(got);
            }
            // Wait for a new entry, but no longer than the fetch may, nor past the moment
            // a delayed entry comes due or a lease ends: those need the script again.
            let block = wake.map_or(left, |wake| wake.min(left));
            if block.is_zero() {
                continue;
            }
            let got = self.block_read(max, block).await?;
            if !got.is_empty() {
                return Ok(got);
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.blocking = None;
        // Forget this group consumer if it holds nothing; deliveries it handed out keep it.
        match self.maintain(&self.name).await {
            Err(Error::Closed) => Ok(()),
            other => other,
        }
    }
}
