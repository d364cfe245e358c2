//! A consumer's acks, one `DELETE` per batch: acks that arrive while one is being written go
//! together in the next (see [`crate::transport::group_commit`]). Each row is deleted only
//! if it still carries the lease token its delivery was taken with, so a stale ack in a
//! batch is refused on its own (`NotHeld`) and the rest of the batch is unaffected.

use std::collections::HashSet;
use std::sync::Arc;

use super::engine::{Shared, map_error};
use crate::error::{Error, Result};
use crate::transport::group_commit::{SubmitBatch, all_failed};

/// One ack: the row, the lease token it must still carry, and the message id for errors.
pub(super) struct Ack {
    pub seq: i64,
    pub token: i64,
    pub id: String,
}

pub(super) fn not_held(id: &str) -> Error {
    Error::NotHeld {
        id: id.to_owned(),
        why: "it was settled, or its lease ended and another consumer took it".into(),
    }
}

pub(super) struct AckRows {
    pub shared: Arc<Shared>,
}

impl SubmitBatch for AckRows {
    type Item = Ack;
    const TRANSPORT: &'static str = super::engine::NAME;
    /// Two arrays of this many int8s are a few kilobytes: one round trip, one short
    /// statement.
    const MAX_BATCH: usize = 1024;

    async fn submit(&self, batch: Vec<Ack>) -> Vec<Result<()>> {
        let seqs: Vec<i64> = batch.iter().map(|a| a.seq).collect();
        let tokens: Vec<i64> = batch.iter().map(|a| a.token).collect();
        // Keyed by row and token: a stale and a current delivery of one row may share a batch.
        let deleted: std::result::Result<Vec<(i64, i64)>, _> = sqlx::query_as(
            "DELETE FROM ferry.messages m \
             USING unnest($1::int8[], $2::int8[]) AS a(seq, token) \
             WHERE m.seq = a.seq AND m.lease_token = a.token \
             RETURNING m.seq, a.token",
        )
        .bind(&seqs)
        .bind(&tokens)
        .fetch_all(&self.shared.pool)
        .await;
        match deleted {
            Ok(deleted) => {
                let deleted: HashSet<(i64, i64)> = deleted.into_iter().collect();
                batch
                    .iter()
                    .map(|a| {
                        if deleted.contains(&(a.seq, a.token)) {
                            Ok(())
                        } else {
                            Err(not_held(&a.id))
                        }
                    })
                    .collect()
            }
            Err(e) => all_failed(batch.len(), map_error(e)),
        }
    }
}
