//! Producer ids handed out to idempotent producers that do not choose their own (the Kafka
//! front end's InitProducerId): numbers never handed out twice by this broker directory,
//! across restarts and crashes too.
//!
//! **Blocks.** The next free id is kept in the metadata store under [`NEXT_KEY`]. A caller
//! reserves a block of ids at once: the store's new high mark is committed (fdatasync'd)
//! *before* any id of the block is returned, so a crash after handing ids out finds the
//! mark past them, and a crash before the commit finds the old mark with nothing of the
//! block given out. Ids of a block the caller had not handed out when the process stopped
//! are skipped, never reused — Kafka's controller reserves producer id blocks the same way.
//! One commit per block keeps the fsync off the path of most allocations.

use std::ops::Range;

use super::Broker;
use crate::error::{BrokerError, Result};

/// The metadata key of the next producer id never reserved.
const NEXT_KEY: &str = "producer-ids/next";

/// The largest block a caller may reserve at once.
pub const MAX_PRODUCER_ID_BLOCK: u64 = 1 << 20;

impl Broker {
    /// Reserves `count` producer ids (1 to [`MAX_PRODUCER_ID_BLOCK`]) no earlier
    /// reservation of this broker directory returned; durable when it returns.
    pub fn reserve_producer_ids(&self, count: u64) -> Result<Range<u64>> {
        if !(1..=MAX_PRODUCER_ID_BLOCK).contains(&count) {
            return Err(BrokerError::InvalidSetting {
                setting: "count",
                problem: format!(
                    "{count} producer ids; reserve from 1 to {MAX_PRODUCER_ID_BLOCK} at once"
                ),
            });
        }
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let next = match meta.get(NEXT_KEY) {
            None => 0,
            Some(value) => <[u8; 8]>::try_from(&value[..])
                .map(u64::from_le_bytes)
                .map_err(|_| BrokerError::InvalidSetting {
                    setting: NEXT_KEY,
                    problem: format!(
                        "the stored mark is {} bytes, not 8; the metadata is damaged",
                        value.len()
                    ),
                })?,
        };
        // Kafka's producer ids are signed 64-bit: stay below i64::MAX.
        let end = next
            .checked_add(count)
            .filter(|&end| end <= i64::MAX as u64)
            .ok_or_else(|| BrokerError::InvalidSetting {
                setting: "count",
                problem: "every producer id has been handed out".into(),
            })?;
        meta.put(NEXT_KEY, end.to_le_bytes().to_vec())?;
        Ok(next..end)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Broker, BrokerConfig};

    #[tokio::test]
    async fn reserved_blocks_never_overlap_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .unwrap();
        let first = broker.reserve_producer_ids(10).unwrap();
        let second = broker.reserve_producer_ids(5).unwrap();
        assert_eq!(first, 0..10);
        assert_eq!(second, 10..15);
        drop(broker);
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .unwrap();
        assert_eq!(broker.reserve_producer_ids(3).unwrap(), 15..18);
        assert!(broker.reserve_producer_ids(0).is_err());
        assert!(
            broker
                .reserve_producer_ids(super::MAX_PRODUCER_ID_BLOCK + 1)
                .is_err()
        );
        assert_eq!(broker.reserve_producer_ids(1).unwrap(), 18..19);
    }
}
