//! What the SQL inboxes share: the outcome types, the table-name rule, and the
//! record-then-handle-then-commit-then-ack sequence.

use std::fmt::Display;
use std::future::Future;

use sqlx::{Database, Transaction};

use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::message::Received;

/// What inserting a key into the processed-messages table found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The key is new: do the effects in this transaction, then commit.
    First,
    /// A committed transaction recorded it already: skip the effects.
    Duplicate,
}

/// What `process` (of `PostgresInbox` or `SqliteInbox`) did with a delivery.
#[derive(Debug)]
pub enum Processed<T, E> {
    /// First time: the handler's effects and the record committed together; acked.
    Done(T),
    /// Processed before: nothing ran; acked.
    Duplicate,
    /// The handler failed: its transaction rolled back (no record), and the delivery was
    /// nacked with the error so a redelivery processes it.
    Failed(E),
}

impl<T, E> Processed<T, E> {
    pub fn is_done(&self) -> bool {
        matches!(self, Processed::Done(_))
    }
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Processed::Duplicate)
    }
}

/// The inbox table: see [`crate::sql_name`]; a `schema.` before it where `allow_schema`.
pub(super) fn validate_table(table: &str, allow_schema: bool) -> Result<()> {
    crate::sql_name::check_table(
        "inbox",
        table,
        allow_schema,
        crate::sql_name::MAX_IDENTIFIER,
    )
}

/// Runs `handler` with `tx` if `recorded` is [`Recorded::First`], then commits and acks;
/// a duplicate rolls back and acks; a failed handler rolls back and nacks.
///
/// Crash windows: a crash before the commit leaves neither record nor effects, and the
/// unsettled delivery comes back; a crash after the commit and before the ack brings the
/// message back as a duplicate, which is acked without running.
pub(super) async fn settle_once<DB, T, E, F, Fut>(
    transport: &'static str,
    tx: Transaction<'static, DB>,
    recorded: Recorded,
    delivery: Delivery,
    handler: F,
) -> Result<Processed<T, E>>
where
    DB: Database,
    E: Display,
    F: FnOnce(Transaction<'static, DB>, Received) -> Fut,
    Fut: Future<Output = Result<(Transaction<'static, DB>, T), E>>,
{
    let db = |e: sqlx::Error| Error::transport(transport, e);
    if recorded == Recorded::Duplicate {
        tx.rollback().await.map_err(db)?;
        tracing::debug!(id = %delivery.id, "inbox: duplicate skipped");
        metrics::counter!("ferry_inbox_duplicates_total").increment(1);
        delivery.ack().await?;
        return Ok(Processed::Duplicate);
    }
    match handler(tx, delivery.message().clone()).await {
        Ok((tx, value)) => {
            if let Err(e) = tx.commit().await {
                // Neither the record nor the effects are committed: a retry starts over.
                let e = db(e);
                nack_quietly(delivery, &e.to_string()).await;
                return Err(e);
            }
            metrics::counter!("ferry_inbox_processed_total").increment(1);
            delivery.ack().await?;
            Ok(Processed::Done(value))
        }
        Err(e) => {
            // The handler dropped the transaction: sqlx rolls it back before the connection
            // is used again, so neither the record nor any effect commits.
            metrics::counter!("ferry_inbox_failures_total").increment(1);
            delivery.nack_with_error(None, &e.to_string()).await?;
            Ok(Processed::Failed(e))
        }
    }
}

async fn nack_quietly(delivery: Delivery, error: &str) {
    let id = delivery.id.clone();
    if let Err(e) = delivery.nack_with_error(None, error).await {
        // The lease will end and bring it back anyway.
        tracing::warn!(%id, error = %e, "inbox: nack after a failed commit failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_table_names_may_carry_a_schema_only_where_allowed() {
        assert!(validate_table("processed_messages", false).is_ok());
        assert!(validate_table("billing.inbox_2", true).is_ok());
        assert!(validate_table("main.inbox", false).is_err());
    }
}
