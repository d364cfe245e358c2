//! Consuming: a fetch leases rows with `FOR UPDATE SKIP LOCKED`, and each delivery is
//! settled by its row's sequence number and lease token (acks in batches, `super::acks`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::acks::{Ack, AckRows, not_held};
use super::engine::{CHANNEL, Shared, dlq_of, map_error, micros};
use super::settings::Settings;
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Received, now_ms, reason};
use crate::transport::group_commit::GroupCommit;
use crate::transport::{ConsumerBackend, Incoming, Settler};

/// How often a waiting fetch looks again without a notification: what a missed NOTIFY, an
/// ended lease or a delay coming due waits at most.
const POLL: Duration = Duration::from_millis(250);
/// Expired messages dead-lettered per fetch, so one fetch stays short.
const EXPIRE_BATCH: i64 = 100;

/// What a consumer reads and how its messages are settled.
pub(super) struct SourceInfo {
    /// The `queue` column of its rows.
    pub queue: String,
    /// The queue or subscription named in dead-letter metadata.
    pub origin: String,
    pub settings: Settings,
    /// Reading a dead-letter queue: deliveries carry their dead-letter metadata.
    pub dead_letters: bool,
}

pub(super) struct PgConsumer {
    shared: Arc<Shared>,
    source: Arc<SourceInfo>,
    name: Arc<str>,
    pick: String,
    acks: Arc<GroupCommit<AckRows>>,
}

/// The columns a delivery is made from.
const DELIVERY: &str = "m.seq, m.id, m.key, m.headers::text AS headers, m.payload, m.priority, \
     (extract(epoch FROM m.published_at) * 1000)::int8 AS published_ms, m.read_count, \
     m.lease_token";

impl PgConsumer {
    pub fn new(shared: Arc<Shared>, source: SourceInfo, name: &str) -> PgConsumer {
        // With per-key ordering only the oldest row of a key may be taken: while it is
        // leased (or waiting out a nack's delay) the key's later rows wait behind it. A
        // concurrent fetch either sees the head leased, or finds it locked and skips it.
        let head_of_key = if source.settings.ordered {
            "AND (c.key IS NULL OR c.seq = (SELECT min(h.seq) FROM ferry.messages h \
                                            WHERE h.queue = c.queue AND h.key = c.key))"
        } else {
            ""
        };
        // The picked rows are updated by primary key from an array, not joined back: the
        // statement is prepared, and a generic plan guesses `LIMIT $2` as a tenth of the
        // table, for which a join reads the whole table into a hash (every row, dead ones
        // included) on each fetch. `= ANY` of an array is looked up in the primary key
        // whatever the guess.
        let pick = format!(
            "UPDATE ferry.messages m \
             SET visible_at = now() + $3 * interval '1 microsecond', \
                 lease_token = nextval('ferry.lease_tokens'), \
                 read_count = m.read_count + 1, consumer = $4 \
             WHERE m.seq = ANY (ARRAY( \
               SELECT c.seq FROM ferry.messages c \
               WHERE c.queue = $1 AND c.visible_at <= now() \
                 AND (c.expires_at IS NULL OR c.expires_at > now()) {head_of_key} \
               ORDER BY c.priority DESC, c.seq \
               LIMIT $2 \
               FOR UPDATE SKIP LOCKED)) \
             RETURNING {DELIVERY}"
        );
        PgConsumer {
            acks: GroupCommit::new(AckRows {
                shared: shared.clone(),
            }),
            shared,
            source: Arc::new(source),
            name: Arc::from(name),
            pick,
        }
    }

    /// Leases up to `max` deliveries now, after dead-lettering what expired.
    async fn take(&self, max: usize) -> Result<Vec<Incoming>> {
        let mut tx = self.shared.pool.begin().await.map_err(map_error)?;
        if !self.source.dead_letters {
            expire(&mut tx, &self.source).await?;
        }
        // The pick must walk `messages_next` in its order and stop at the limit. The
        // planner prefers a bitmap scan of the whole queue and a sort when it guesses that
        // the queue holds few rows, and it guesses so whenever the table's statistics are
        // missing or stale (no ANALYZE since the backlog was published, or autovacuum off):
        // then every fetch reads and sorts the entire backlog to lease a few hundred rows.
        // For this transaction only, a bitmap scan is not an option.
        sqlx::query("SET LOCAL enable_bitmapscan = off")
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        let mut rows = sqlx::query(&self.pick)
            .bind(&self.source.queue)
            .bind(max as i64)
            .bind(micros(self.source.settings.lease()))
            .bind(&*self.name)
            .fetch_all(&mut *tx)
            .await
            .map_err(map_error)?;
        tx.commit().await.map_err(map_error)?;
        // RETURNING keeps no order; hand them out in the order they were picked.
        rows.sort_by_key(|row| {
            (
                std::cmp::Reverse(row.get::<i16, _>("priority")),
                row.get::<i64, _>("seq"),
            )
        });
        rows.iter()
            .map(|row| self.incoming(row))
            .collect::<Result<Vec<_>>>()
    }

    fn incoming(&self, row: &PgRow) -> Result<Incoming> {
        let headers: BTreeMap<String, String> = serde_json::from_str(row.get("headers"))?;
        let dead_letter = if self.source.dead_letters {
            DeadLetterInfo::from_headers(&headers)
        } else {
            None
        };
        let id: String = row.get("id");
        let read_count: i32 = row.get("read_count");
        let message = Received {
            id: id.clone(),
            key: row.get::<Option<Vec<u8>>, _>("key").map(Bytes::from),
            headers,
            payload: Bytes::from(row.get::<Vec<u8>, _>("payload")),
            priority: row.get::<i16, _>("priority").clamp(0, 255) as u8,
            published_at_ms: row.get("published_ms"),
            attempt: read_count.max(1) as u32,
            dead_letter,
        };
        Ok(Incoming {
            message,
            settler: Arc::new(PgSettler {
                shared: self.shared.clone(),
                acks: self.acks.clone(),
                source: self.source.clone(),
                seq: row.get("seq"),
                token: row.get("lease_token"),
                id,
            }),
        })
    }
}

#[async_trait]
impl ConsumerBackend for PgConsumer {
    fn max_deliveries(&self) -> Option<u32> {
        (!self.source.dead_letters).then_some(self.source.settings.max_deliveries)
    }

    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let deadline = tokio::time::Instant::now() + wait;
        let waker = self.shared.waker(&self.source.queue);
        loop {
            // Armed before looking, so a publish committed while we look still wakes us.
            let notified = waker.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let taken = self.take(max).await?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !taken.is_empty() || left.is_zero() {
                return Ok(taken);
            }
            let _ = tokio::time::timeout(left.min(POLL), notified).await;
        }
    }

    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A row as dead-lettering needs it.
struct Failing {
    seq: i64,
    headers: String,
    read_count: i32,
    consumer: Option<String>,
    last_error: Option<String>,
    first_failure_ms: Option<i64>,
}

const FAILING: &str = "seq, headers::text AS headers, read_count, consumer, last_error, \
     (extract(epoch FROM first_failure_at) * 1000)::int8 AS first_failure_ms";

impl Failing {
    fn from_row(row: &PgRow) -> Failing {
        Failing {
            seq: row.get("seq"),
            headers: row.get("headers"),
            read_count: row.get("read_count"),
            consumer: row.get("consumer"),
            last_error: row.get("last_error"),
            first_failure_ms: row.get("first_failure_ms"),
        }
    }

    fn dead_letter_info(
        &self,
        source: &SourceInfo,
        reason: &str,
        error: Option<&str>,
    ) -> DeadLetterInfo {
        let now = now_ms();
        DeadLetterInfo {
            reason: reason.to_owned(),
            deliveries: self.read_count.max(0) as u32,
            origin: source.origin.clone(),
            last_error: error.map(str::to_owned).or_else(|| self.last_error.clone()),
            first_failure_ms: Some(self.first_failure_ms.unwrap_or(now)),
            last_failure_ms: Some(now),
            consumer: self.consumer.clone(),
        }
    }
}

/// Moves expired rows that no consumer holds to the dead-letter queue (reason `expired`),
/// or drops them when the source keeps no dead letters.
async fn expire(tx: &mut PgConnection, source: &SourceInfo) -> Result<()> {
    let rows = sqlx::query(&format!(
        "SELECT {FAILING} FROM ferry.messages \
         WHERE queue = $1 AND expires_at <= now() AND visible_at <= now() \
         ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED"
    ))
    .bind(&source.queue)
    .bind(EXPIRE_BATCH)
    .fetch_all(&mut *tx)
    .await
    .map_err(map_error)?;
    for row in rows {
        let failing = Failing::from_row(&row);
        let info = failing.dead_letter_info(source, reason::EXPIRED, None);
        dead_letter(tx, source, &failing, &info).await?;
    }
    Ok(())
}

/// Replaces the row with a copy in the dead-letter queue carrying `info` in its headers, in
/// the caller's transaction, so the message is in exactly one of the two; without a
/// dead-letter queue it is dropped.
async fn dead_letter(
    tx: &mut PgConnection,
    source: &SourceInfo,
    failing: &Failing,
    info: &DeadLetterInfo,
) -> Result<()> {
    if source.settings.dead_letter {
        let mut headers: BTreeMap<String, String> = serde_json::from_str(&failing.headers)?;
        info.write_headers(&mut headers);
        let dlq = dlq_of(&source.origin);
        sqlx::query(
            "INSERT INTO ferry.messages \
               (queue, id, key, headers, payload, priority, published_at, visible_at) \
             SELECT $2, id, key, $3::jsonb, payload, priority, published_at, now() \
             FROM ferry.messages WHERE seq = $1",
        )
        .bind(failing.seq)
        .bind(&dlq)
        .bind(serde_json::to_string(&headers)?)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
        notify(tx, &dlq).await?;
    }
    sqlx::query("DELETE FROM ferry.messages WHERE seq = $1")
        .bind(failing.seq)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
    Ok(())
}

/// Wakes consumers of `queue` once the transaction commits.
async fn notify(tx: &mut PgConnection, queue: &str) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(queue)
        .execute(tx)
        .await
        .map_err(map_error)?;
    Ok(())
}

struct PgSettler {
    shared: Arc<Shared>,
    acks: Arc<GroupCommit<AckRows>>,
    source: Arc<SourceInfo>,
    seq: i64,
    token: i64,
    id: String,
}

impl PgSettler {
    fn not_held(&self) -> Error {
        not_held(&self.id)
    }

    /// The row, locked, if this delivery still holds it.
    async fn held(&self, tx: &mut PgConnection) -> Result<Failing> {
        let row = sqlx::query(&format!(
            "SELECT {FAILING} FROM ferry.messages WHERE seq = $1 AND lease_token = $2 FOR UPDATE"
        ))
        .bind(self.seq)
        .bind(self.token)
        .fetch_optional(tx)
        .await
        .map_err(map_error)?;
        row.as_ref()
            .map(Failing::from_row)
            .ok_or_else(|| self.not_held())
    }

    async fn give_up(&self, reason: &str, error: Option<&str>) -> Result<()> {
        let mut tx = self.shared.pool.begin().await.map_err(map_error)?;
        let failing = self.held(&mut tx).await?;
        let info = failing.dead_letter_info(&self.source, reason, error);
        dead_letter(&mut tx, &self.source, &failing, &info).await?;
        tx.commit().await.map_err(map_error)
    }
}

#[async_trait]
impl Settler for PgSettler {
    async fn ack(&self) -> Result<()> {
        let ack = Ack {
            seq: self.seq,
            token: self.token,
            id: self.id.clone(),
        };
        self.acks.settle(ack).await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let mut tx = self.shared.pool.begin().await.map_err(map_error)?;
        let failing = self.held(&mut tx).await?;
        let attempts = failing.read_count.max(0) as u32;
        if attempts >= self.source.settings.max_deliveries {
            let info = failing.dead_letter_info(&self.source, reason::MAX_DELIVERIES, error);
            dead_letter(&mut tx, &self.source, &failing, &info).await?;
        } else {
            let delay = delay.unwrap_or_else(|| self.source.settings.backoff(attempts));
            sqlx::query(
                "UPDATE ferry.messages \
                 SET visible_at = now() + $2 * interval '1 microsecond', lease_token = NULL, \
                     last_error = coalesce($3, last_error), \
                     first_failure_at = coalesce(first_failure_at, now()), \
                     last_failure_at = now() \
                 WHERE seq = $1",
            )
            .bind(self.seq)
            .bind(micros(delay))
            .bind(error)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
            if delay.is_zero() {
                notify(&mut tx, &self.source.queue).await?;
            }
        }
        tx.commit().await.map_err(map_error)
    }

    async fn reject(&self, reason: &str) -> Result<()> {
        self.give_up(reason::REJECTED, Some(reason)).await
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        let moved = sqlx::query(
            "UPDATE ferry.messages SET visible_at = now() + $3 * interval '1 microsecond' \
             WHERE seq = $1 AND lease_token = $2",
        )
        .bind(self.seq)
        .bind(self.token)
        .bind(micros(by))
        .execute(&self.shared.pool)
        .await
        .map_err(map_error)?
        .rows_affected();
        if moved == 0 {
            return Err(self.not_held());
        }
        Ok(())
    }
}
