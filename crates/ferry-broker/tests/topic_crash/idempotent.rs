//! The idempotent producers: the state the parent hands each child in a file (producer
//! id, epoch, next sequence per partition, the batch under way at the last kill), and the
//! child's producers that resend it and carry on, saying what was written and what was a
//! duplicate.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::Duration;

use ferry_broker::{Broker, OutgoingMessage, TopicPosition};
use ferry_testkit::killed_child::{fail, say};

use crate::child::{check_positions, say_published};
use crate::scenario::{IDEMPOTENT_PRODUCERS, Id, TOPICS, derive, producer_id};

/// One idempotent producer, as the parent knows it.
#[derive(Debug, Clone, Default)]
pub struct IdempotentState {
    /// Per partition, the sequence after the last batch acknowledged in full.
    pub next: BTreeMap<u32, u64>,
    /// The batch under way at a kill, not acknowledged in full: (partition, first, count).
    pub pending: Option<(u32, u64, u64)>,
}

pub fn write_idempotent_states(states: &[IdempotentState], path: &Path) {
    let mut text = String::new();
    for (slot, state) in states.iter().enumerate() {
        for (partition, next) in &state.next {
            text.push_str(&format!("NEXT {slot} {partition} {next}\n"));
        }
        if let Some((partition, first, count)) = state.pending {
            text.push_str(&format!("PENDING {slot} {partition} {first} {count}\n"));
        }
    }
    std::fs::write(path, text).unwrap();
}

pub fn read_idempotent_states(path: &Path) -> Vec<IdempotentState> {
    let mut states = vec![IdempotentState::default(); IDEMPOTENT_PRODUCERS as usize];
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("garbled idempotent state line {line:?}"))
        };
        let state = &mut states[n(1) as usize];
        match words[0] {
            "NEXT" => {
                state.next.insert(n(2) as u32, n(3));
            }
            "PENDING" => state.pending = Some((n(2) as u32, n(3), n(4))),
            _ => panic!("garbled idempotent state line {line:?}"),
        }
    }
    states
}
/// An idempotent producer's batch and where it was written.
#[derive(Debug, Clone)]
pub struct Written {
    pub first: u64,
    pub positions: Vec<TopicPosition>,
}

pub async fn publish_idempotent(
    broker: &Broker,
    slot: u32,
    partition: u32,
    first: u64,
    count: u64,
) -> (Vec<Id>, Vec<OutgoingMessage>, Vec<TopicPosition>) {
    let topic = slot as usize % TOPICS.len();
    let name = TOPICS[topic].0;
    let ids: Vec<Id> = (first..first + count)
        .map(|seq| Id::Idempotent {
            slot,
            partition,
            seq,
        })
        .collect();
    let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
    let producer = producer_id(slot);
    match broker
        .publish_idempotent(name, partition, &producer, first, messages.clone())
        .await
    {
        Ok(got) => (ids, messages, got),
        Err(e) => fail(&format!(
            "idempotent publish of {producer} sequences {first}..{} to {name}/{partition}: {e}",
            first + count
        )),
    }
}

pub async fn produce_idempotent(broker: Broker, slot: u32, state: IdempotentState, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let topic = slot as usize % TOPICS.len();
    let (name, partitions, _) = TOPICS[topic];
    let producer = producer_id(slot);
    let mut next = state.next;
    // The latest batches per partition (the broker remembers at least five).
    let mut recent: HashMap<u32, VecDeque<Written>> = HashMap::new();
    let mut pending = state.pending;
    loop {
        // The batch the previous process was killed in the middle of goes first: it may or
        // may not have been written, and must be written once either way.
        let (partition, first, count) = pending.take().unwrap_or_else(|| {
            let partition = rng.u32(..partitions);
            let first = next.get(&partition).copied().unwrap_or(0);
            (partition, first, 1 + rng.u64(..4))
        });
        if first != next.get(&partition).copied().unwrap_or(0) {
            fail(&format!(
                "{producer}: the parent's state resends {first} in partition {partition}, \
                 but the next sequence there is {:?}",
                next.get(&partition)
            ));
        }
        say(&format!("TRY {slot} {partition} {first} {count}\n"));
        let (ids, messages, got) = if rng.u8(..6) == 0 {
            // Two copies race: one writes, the other must be answered as its retry.
            let (one, two) = tokio::join!(
                publish_idempotent(&broker, slot, partition, first, count),
                publish_idempotent(&broker, slot, partition, first, count),
            );
            if one.2 != two.2 {
                fail(&format!(
                    "{producer}: two racing copies of sequences {first}..{} in {name}/{partition} \
                     got different positions: {:?} and {:?}",
                    first + count,
                    one.2,
                    two.2
                ));
            }
            one
        } else {
            publish_idempotent(&broker, slot, partition, first, count).await
        };
        check_positions(topic, &ids, &messages, &got);
        if got.iter().any(|at| at.partition != partition) {
            fail(&format!(
                "{producer}: batch to partition {partition} of {name} returned {got:?}"
            ));
        }
        say_published(topic, &ids, &got);
        next.insert(partition, first + count);
        let batches = recent.entry(partition).or_default();
        batches.push_back(Written {
            first,
            positions: got,
        });
        if batches.len() > 5 {
            batches.pop_front();
        }
        if rng.u8(..3) == 0 {
            // Retry on purpose one of the latest batches, or a part of it, as a producer
            // that lost the answer would: same positions, nothing written.
            let batch = &batches[rng.usize(..batches.len())];
            let len = batch.positions.len();
            let from = rng.usize(..len);
            let to = from + 1 + rng.usize(..len - from);
            let retry_first = batch.first + from as u64;
            let (_, _, again) =
                publish_idempotent(&broker, slot, partition, retry_first, (to - from) as u64).await;
            if again[..] != batch.positions[from..to] {
                fail(&format!(
                    "{producer}: retry of sequences {retry_first}..{} in {name}/{partition} \
                     answered {again:?}, first answered {:?}",
                    retry_first + (to - from) as u64,
                    &batch.positions[from..to]
                ));
            }
            say(&format!(
                "DUP {slot} {partition} {retry_first} {}\n",
                to - from
            ));
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(..3))).await;
    }
}
