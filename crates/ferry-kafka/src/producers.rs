//! Idempotent Kafka producers: the ids InitProducerId hands out and the epochs Produce
//! checks.
//!
//! **Ids** come from blocks the broker reserves durably ([`Broker::reserve_producer_ids`]:
//! the block's end is committed to the metadata store before any id of it is handed out),
//! so an id is never handed out twice, across restarts and crashes too; ids of a block
//! not used up when the process stops are skipped. Epochs start at 0.
//!
//! **Epochs** (KIP-360). A producer moves to a higher epoch, whose sequences start again
//! at 0 — the Java client bumps its epoch itself, librdkafka and InitProducerId v3+ with
//! the current id and epoch ask for it. Per (producer id, partition) the latest epoch is
//! remembered, as Kafka does: a batch of an older epoch is INVALID_PRODUCER_EPOCH (a
//! zombie, or a batch overtaken by the bump), a batch of a newer epoch on a partition that
//! knows the producer must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
//! Sequences themselves are the broker's (`kafka-<id>-<epoch>` as its producer id), whose
//! state is rebuilt from the records after a restart.
//!
//! **Restarts.** The epochs written are durable with the records: the broker's producer id
//! carries the epoch, and before the first idempotent batch to a partition after a start
//! the latest epoch of every producer it remembers (within the topic's
//! `producer_state_window`) is learnt from the broker ([`Producers::seed`]). What
//! InitProducerId granted without a batch written since is in memory only: after a restart
//! an epoch bumped through it but not yet written is not fenced until it is.
//!
//! [`Broker::reserve_producer_ids`]: ferry_broker::Broker::reserve_producer_ids

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use ferry_broker::{Broker, BrokerError};

/// Ids reserved from the broker at once: one metadata commit per block.
const BLOCK: u64 = 1000;

/// Entries of the per-partition epoch table beyond which the least recently used go.
const MAX_PARTITION_EPOCHS: usize = 100_000;

/// Why a batch's epoch is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochProblem {
    /// The batch's epoch is older than the producer's latest.
    Fenced { latest: i16 },
    /// A newer epoch on a partition that knows the producer, not starting at sequence 0.
    NewEpochNotAtZero { base_sequence: i32 },
}

/// What InitProducerId hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    Granted {
        producer_id: i64,
        epoch: i16,
    },
    /// The presented epoch is older than the producer's latest.
    Fenced,
}

#[derive(Default)]
struct State {
    /// The current block: `next..end` not handed out yet.
    next: u64,
    end: u64,
    /// The latest epoch InitProducerId granted per producer id.
    granted: HashMap<i64, i16>,
    /// The latest epoch written per producer id and partition, with a use counter for
    /// pruning.
    partitions: HashMap<(i64, String, u32), (i16, u64)>,
    uses: u64,
    /// Partitions whose epochs were learnt from the broker since this process started.
    seeded: HashSet<(String, u32)>,
}

pub struct Producers {
    broker: Broker,
    state: Mutex<State>,
}

impl Producers {
    pub fn new(broker: Broker) -> Producers {
        Producers {
            broker,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new producer id at epoch 0.
    pub fn new_id(&self) -> Result<Init, BrokerError> {
        let mut state = self.state();
        let id = self.take_id(&mut state)?;
        state.granted.insert(id, 0);
        Ok(Init::Granted {
            producer_id: id,
            epoch: 0,
        })
    }

    fn take_id(&self, state: &mut State) -> Result<i64, BrokerError> {
        if state.next == state.end {
            // Durable before any id of it is handed out (see the module docs).
            let block = self.broker.reserve_producer_ids(BLOCK)?;
            state.next = block.start;
            state.end = block.end;
        }
        let id = state.next;
        state.next += 1;
        Ok(id as i64)
    }

    /// InitProducerId v3+ with the producer's current id and epoch: the same id at the next
    /// epoch, as KIP-360 describes. An id this broker never handed out (or whose epoch is
    /// exhausted) gets a new id at epoch 0, as Kafka answers a producer without a
    /// transactional id; an epoch older than the latest granted or written is fenced.
    pub fn bump(&self, producer_id: i64, epoch: i16) -> Result<Init, BrokerError> {
        let mut state = self.state();
        if state.end == 0 {
            // The first call of this process: learn the durable mark (ids below it may
            // have been handed out before a restart).
            let id = self.take_id(&mut state)?;
            state.next = id as u64;
        }
        let handed_out = u64::try_from(producer_id).is_ok_and(|id| id < state.next);
        if !handed_out || epoch >= i16::MAX - 1 {
            drop(state);
            return self.new_id();
        }
        let latest_written = state
            .partitions
            .iter()
            .filter(|((id, _, _), _)| *id == producer_id)
            .map(|(_, (e, _))| *e)
            .max();
        let latest = state
            .granted
            .get(&producer_id)
            .copied()
            .into_iter()
            .chain(latest_written)
            .max();
        if latest.is_some_and(|latest| epoch < latest) {
            return Ok(Init::Fenced);
        }
        let next = epoch + 1;
        state.granted.insert(producer_id, next);
        Ok(Init::Granted {
            producer_id,
            epoch: next,
        })
    }

    /// Learns, once per partition and process, the latest epoch of every producer the
    /// partition remembers from its records (`kafka-<id>-<epoch>`), so that a restart does
    /// not forget which epochs are fenced.
    pub async fn seed(&self, topic: &str, partition: u32) -> Result<(), BrokerError> {
        let key = (topic.to_owned(), partition);
        if self.state().seeded.contains(&key) {
            return Ok(());
        }
        let remembered = self.broker.idempotent_producers(topic, partition).await?;
        let mut state = self.state();
        if !state.seeded.insert(key) {
            return Ok(());
        }
        for (id, epoch) in remembered.iter().filter_map(|p| parse_broker_id(p)) {
            let entry = state
                .partitions
                .entry((id, topic.to_owned(), partition))
                .or_insert((epoch, 0));
            entry.0 = entry.0.max(epoch);
        }
        Ok(())
    }

    /// Checks a batch's epoch against what the partition (and InitProducerId) knows.
    pub fn check_epoch(
        &self,
        producer_id: i64,
        topic: &str,
        partition: u32,
        epoch: i16,
        base_sequence: i32,
    ) -> Result<(), EpochProblem> {
        let state = self.state();
        let on_partition = state
            .partitions
            .get(&(producer_id, topic.to_owned(), partition))
            .map(|(e, _)| *e);
        decide(
            on_partition,
            state.granted.get(&producer_id).copied(),
            epoch,
            base_sequence,
        )
    }

    /// Records that a batch of `epoch` was written (or answered as a retry).
    pub fn written(&self, producer_id: i64, topic: &str, partition: u32, epoch: i16) {
        let mut state = self.state();
        state.uses += 1;
        let uses = state.uses;
        let entry = state
            .partitions
            .entry((producer_id, topic.to_owned(), partition))
            .or_insert((epoch, uses));
        *entry = (entry.0.max(epoch), uses);
        if state.partitions.len() > MAX_PARTITION_EPOCHS {
            // Forget the least recently used half: those producers are most likely gone,
            // and forgetting one only loosens fencing (see "What a restart forgets").
            let mut ages: Vec<u64> = state.partitions.values().map(|(_, u)| *u).collect();
            let cut = ages.len() / 2;
            let (_, &mut median, _) = ages.select_nth_unstable(cut);
            state.partitions.retain(|_, (_, u)| *u >= median);
        }
    }
}

/// The broker's producer id of a Kafka producer at an epoch (what Produce publishes as).
pub fn broker_id(producer_id: i64, epoch: i16) -> String {
    format!("kafka-{producer_id}-{epoch}")
}

/// `(producer id, epoch)` of a [`broker_id`]; `None` for other producers' ids.
fn parse_broker_id(id: &str) -> Option<(i64, i16)> {
    let (producer, epoch) = id.strip_prefix("kafka-")?.rsplit_once('-')?;
    Some((producer.parse().ok()?, epoch.parse().ok()?))
}

/// The epoch rule (see the module docs): `on_partition` is the latest epoch the partition
/// wrote for the producer, `granted` the latest InitProducerId granted.
fn decide(
    on_partition: Option<i16>,
    granted: Option<i16>,
    epoch: i16,
    base_sequence: i32,
) -> Result<(), EpochProblem> {
    let latest = on_partition.into_iter().chain(granted).max();
    if let Some(latest) = latest
        && epoch < latest
    {
        return Err(EpochProblem::Fenced { latest });
    }
    if on_partition.is_some_and(|known| epoch > known) && base_sequence != 0 {
        return Err(EpochProblem::NewEpochNotAtZero { base_sequence });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_ids_carry_the_epoch() {
        assert_eq!(parse_broker_id(&broker_id(42, 3)), Some((42, 3)));
        assert_eq!(parse_broker_id("orders-service-1"), None);
        assert_eq!(parse_broker_id("kafka-x-1"), None);
    }

    #[test]
    fn an_older_epoch_is_fenced_and_a_newer_one_starts_at_zero() {
        assert_eq!(decide(None, None, 0, 17), Ok(()));
        assert_eq!(decide(Some(0), None, 0, 17), Ok(()));
        assert_eq!(
            decide(Some(1), None, 0, 0),
            Err(EpochProblem::Fenced { latest: 1 })
        );
        assert_eq!(
            decide(None, Some(2), 1, 0),
            Err(EpochProblem::Fenced { latest: 2 })
        );
        assert_eq!(
            decide(Some(0), None, 1, 5),
            Err(EpochProblem::NewEpochNotAtZero { base_sequence: 5 })
        );
        assert_eq!(decide(Some(0), None, 1, 0), Ok(()));
        // A partition that never saw the producer takes a new epoch at any sequence, as
        // Kafka takes a producer it has no state for.
        assert_eq!(decide(None, Some(1), 1, 9), Ok(()));
    }

    #[tokio::test]
    async fn ids_are_never_reused_across_reopens_and_bumps_keep_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let open = || ferry_broker::Broker::open(dir.path(), Default::default());
        let broker = open().await.unwrap();
        let producers = Producers::new(broker.clone());
        let Init::Granted {
            producer_id: a,
            epoch: 0,
        } = producers.new_id().unwrap()
        else {
            panic!("an id at epoch 0")
        };
        let Init::Granted { producer_id: b, .. } = producers.new_id().unwrap() else {
            panic!()
        };
        assert_ne!(a, b);
        assert_eq!(
            producers.bump(a, 0).unwrap(),
            Init::Granted {
                producer_id: a,
                epoch: 1
            }
        );
        // The old epoch is fenced, at InitProducerId and at Produce alike.
        assert_eq!(producers.bump(a, 0).unwrap(), Init::Fenced);
        assert_eq!(
            producers.check_epoch(a, "t", 0, 0, 3),
            Err(EpochProblem::Fenced { latest: 1 })
        );
        // An id never handed out gets a new one.
        let Init::Granted {
            producer_id: c,
            epoch: 0,
        } = producers.bump(1 << 40, 3).unwrap()
        else {
            panic!()
        };
        assert!(c > b);
        drop(producers);
        drop(broker);
        let broker = open().await.unwrap();
        let producers = Producers::new(broker);
        let Init::Granted { producer_id: d, .. } = producers.new_id().unwrap() else {
            panic!()
        };
        assert!(d > c, "{d} after a reopen, {c} before");
        // An id of before the reopen is still one this broker handed out.
        assert_eq!(
            producers.bump(a, 1).unwrap(),
            Init::Granted {
                producer_id: a,
                epoch: 2
            }
        );
    }
}
