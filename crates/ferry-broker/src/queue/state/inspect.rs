//! What the engine reads of a queue's state without changing it: tracked seqs, restore
//! points and failure records for checkpoints, parked keys, stats and leases.

use super::*;

impl QueueState {
    /// Every tracked seq, in publish order.
    pub fn seqs(&self) -> Vec<Seq> {
        self.entries.iter().map(|(seq, _)| seq).collect()
    }

    /// What a restart needs to know of a tracked message beyond the stored message itself:
    /// its deliveries so far and — for one delivered before — when it may go again (the end
    /// of its running lease or of its retry backoff). `None` for a seq not tracked.
    pub fn restore_point(&self, seq: Seq) -> Option<RestorePoint> {
        let entry = self.entries.get(seq)?;
        Some(RestorePoint {
            seq,
            deliveries: entry.deliveries,
            not_before_ms: match self.leases.get(&seq) {
                Some(lease) => Some(lease.until_ms),
                None if entry.scheduled && entry.deliveries > 0 => Some(entry.eligible_since_ms),
                None => None,
            },
        })
    }

    /// What a tracked message's deliveries left for its dead letter: its failed attempts and
    /// the consumer of its last delivery (the one running, if any); `None` for a message
    /// never delivered (or not tracked).
    pub fn failure_record(&self, seq: Seq) -> Option<FailureRecord> {
        let mut record = self.history.get(&seq).map(History::record);
        if let Some(lease) = self.leases.get(&seq) {
            record.get_or_insert_default().last_consumer = Some(lease.consumer.to_string());
        }
        record
    }

    /// The parked keys, each with how many of its messages it holds (those not in
    /// flight). In no particular order.
    pub fn parked_keys(&self) -> impl Iterator<Item = (&[u8], usize)> + '_ {
        self.keys.parked_keys()
    }

    #[cfg(test)]
    pub fn is_parked(&self, key: &[u8]) -> bool {
        self.keys.is_parked(key)
    }

    pub fn stats(&self, now_ms: i64) -> QueueStateStats {
        let oldest = self
            .ready
            .iter()
            .filter_map(|level| level.first())
            .map(|seq| {
                let entry = self.entries.get(seq).expect("ready seqs are tracked");
                now_ms.saturating_sub(entry.eligible_since_ms).max(0)
            })
            .max();
        QueueStateStats {
            tracked: self.entries.len(),
            ready: self.ready.iter().map(|r| r.len() as usize).sum(),
            in_flight: self.in_flight,
            delayed: self.scheduled,
            parked_messages: self.keys.parked_keys().map(|(_, held)| held).sum(),
            oldest_ready_age_ms: oldest,
            bytes: self.bytes,
        }
    }

    /// How many messages are tracked, and their bytes (payload, key and headers): what a
    /// length limit counts. Cheaper than [`stats`](Self::stats).
    pub fn size(&self) -> (usize, u64) {
        (self.entries.len(), self.bytes)
    }

    pub fn is_tracked(&self, seq: Seq) -> bool {
        self.entries.contains(seq)
    }

    /// The current lease of `seq`, if it is in flight: its token and deadline.
    pub fn lease(&self, seq: Seq) -> Option<(LeaseToken, i64)> {
        let lease = self.leases.get(&seq)?;
        Some((lease.token, lease.until_ms))
    }

    /// Messages `consumer` holds in flight.
    #[cfg(test)]
    pub fn in_flight_of(&self, consumer: &str) -> usize {
        self.consumers.get(consumer).map_or(0, |c| c.in_flight)
    }
}
