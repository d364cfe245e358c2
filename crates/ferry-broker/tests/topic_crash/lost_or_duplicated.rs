//! After each verified round: no acknowledged message lost or moved, none written twice
//! (idempotent retries and resends included), keys in their partition and in publish
//! order, idempotent sequences without a gap, and partition ends that stay put.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ferry_broker::{Broker, BrokerConfig, Position};
use ferry_storage::ManualClock;
use ferry_testkit::killed_child::now_ms;

use crate::said::{DirState, Located};
use crate::scenario::{Id, Publisher, TOPICS, config, identify, spec};

pub async fn open_at(dir: &Path, at_ms: i64, label: &str) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(ManualClock::new(at_ms)),
        background_timers: false,
        ..config(1)
    };
    Broker::open(dir, config)
        .await
        .unwrap_or_else(|e| panic!("{label}: reopen after SIGKILL failed: {e}"))
}

/// The partitions' end offsets, per topic present.
pub fn ends(broker: &Broker, label: &str) -> Vec<(String, Vec<u64>)> {
    broker
        .list_topics()
        .iter()
        .map(|name| {
            let info = broker
                .describe_topic(name.as_str())
                .unwrap_or_else(|e| panic!("{label}: describe {name}: {e}"));
            let ends = info.partitions.iter().map(|p| p.end_offset).collect();
            (name.to_string(), ends)
        })
        .collect()
}

/// Reopens the broker after the kill and checks it against everything the children said.
pub fn verify(dir: &Path, state: &mut DirState, label: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, now_ms(), label).await;
        let existing: Vec<String> = broker.list_topics().iter().map(|n| n.to_string()).collect();
        let mut found: HashMap<Id, Located> = HashMap::new();
        let mut per_topic = Vec::new();
        for (topic, &(name, partitions, keyless)) in TOPICS.iter().enumerate() {
            if !existing.iter().any(|n| n == name) {
                // The child was killed before it created the topic: it published nothing.
                let acked = state.acked.keys().filter(|id| id.topic() == topic).count();
                assert_eq!(
                    acked, 0,
                    "{label}: topic {name} is missing, with {acked} acknowledged messages"
                );
                per_topic.push(format!("{name} missing"));
                continue;
            }
            let info = broker
                .describe_topic(name)
                .unwrap_or_else(|e| panic!("{label}: describe {name}: {e}"));
            assert_eq!(info.spec, spec(partitions, keyless), "{label}: {name} spec");
            let mut counts = Vec::new();
            for p in &info.partitions {
                let partition = p.partition;
                let records = broker
                    .read_topic(name, partition, Position::Earliest, usize::MAX)
                    .unwrap_or_else(|e| panic!("{label}: read {name}/{partition}: {e}"));
                let offsets: Vec<u64> = records.iter().map(|r| r.offset).collect();
                assert!(
                    p.start_offset == 0
                        && offsets.iter().copied().eq(0..p.end_offset)
                        && offsets.len() as u64 == p.end_offset,
                    "{label}: BROKER BUG: {name}/{partition} ({}..{}) has a hole or does not \
                     start at 0; offsets read: {} from {:?} to {:?}",
                    p.start_offset,
                    p.end_offset,
                    offsets.len(),
                    offsets.first(),
                    offsets.last()
                );
                // Per publisher (a plain producer of one round, or an idempotent producer
                // in this partition), the last counter seen: publish order within the
                // partition, and so within each key (a key has one partition).
                let mut last: HashMap<Publisher, (u64, u64)> = HashMap::new();
                let mut ids = Vec::with_capacity(records.len());
                for record in &records {
                    let id = identify(record, topic).unwrap_or_else(|problem| {
                        panic!(
                            "{label}: BROKER BUG: bad record at {name}/{partition} offset {}: \
                             {problem}",
                            record.offset
                        )
                    });
                    if let Id::Plain { round, .. } = id {
                        assert!(
                            state.rounds.contains(&round),
                            "{label}: {name}/{partition} holds {id}, from a round not run on \
                             this directory"
                        );
                    }
                    let at = (topic, partition, record.offset);
                    if let Some(first) = found.insert(id, at) {
                        panic!("{label}: BROKER BUG: {id} written twice: at {first:?} and {at:?}");
                    }
                    let (publisher, counter) = id.publisher();
                    if let Some((before, before_offset)) =
                        last.insert(publisher, (counter, record.offset))
                        && before >= counter
                    {
                        panic!(
                            "{label}: BROKER BUG: out of publish order in {name}/{partition}: \
                             counter {before} at offset {before_offset}, then {id} at offset {}",
                            record.offset
                        );
                    }
                    ids.push(id);
                }
                if let Some(before) = state.logs.get(&(topic, partition)) {
                    let kept = before.len() <= ids.len() && ids[..before.len()] == before[..];
                    assert!(
                        kept,
                        "{label}: BROKER BUG: {name}/{partition} changed below its old end: \
                         {} records read at the last look, {} now; first difference at offset \
                         {:?}",
                        before.len(),
                        ids.len(),
                        before.iter().zip(&ids).position(|(a, b)| a != b)
                    );
                }
                counts.push(ids.len().to_string());
                state.logs.insert((topic, partition), ids);
            }
            per_topic.push(format!("{name} [{}]", counts.join(" ")));
        }
        let mut missing: Vec<(Id, Located, Option<Located>)> = state
            .acked
            .iter()
            .filter(|&(id, at)| found.get(id) != Some(at))
            .map(|(&id, &at)| (id, at, found.get(&id).copied()))
            .collect();
        missing.sort_unstable();
        assert!(
            missing.is_empty(),
            "{label}: BROKER BUG: {} acknowledged messages are not where they were \
             acknowledged (id, acknowledged at, found at), e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        // Each idempotent producer's sequences per partition: 0..n, n at a batch boundary.
        let mut sequences: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
        for id in found.keys() {
            if let Id::Idempotent {
                slot,
                partition,
                seq,
            } = *id
            {
                sequences.entry((slot, partition)).or_default().push(seq);
            }
        }
        let (mut pending_written, mut pending_absent) = (0, 0);
        for (slot, idempotent) in state.idempotent.iter().enumerate() {
            let slot = slot as u32;
            let (_, partitions, _) = TOPICS[slot as usize % TOPICS.len()];
            for partition in 0..partitions {
                let mut seqs = sequences.remove(&(slot, partition)).unwrap_or_default();
                seqs.sort_unstable();
                let n = seqs.len() as u64;
                assert!(
                    seqs.iter().copied().eq(0..n),
                    "{label}: BROKER BUG: idem-{slot} in partition {partition} has a gap: \
                     {seqs:?}"
                );
                let next = idempotent.next.get(&partition).copied().unwrap_or(0);
                let pending = idempotent
                    .pending
                    .filter(|&(p, _, _)| p == partition)
                    .map(|(_, first, count)| first + count);
                if n == next {
                    pending_absent += usize::from(pending.is_some());
                } else if Some(n) == pending {
                    pending_written += 1;
                } else {
                    panic!(
                        "{label}: BROKER BUG: idem-{slot} in partition {partition} has \
                         sequences 0..{n}; its last acknowledged batch ended at {next}, the \
                         batch under way at the kill would end at {pending:?}"
                    );
                }
            }
        }
        assert!(
            sequences.is_empty(),
            "{label}: idempotent messages of unknown producers or partitions: {:?}",
            sequences.keys().collect::<Vec<_>>()
        );
        let unacknowledged = found
            .keys()
            .filter(|id| !state.acked.contains_key(id))
            .count();
        // Recovery is done: a second reopen finds exactly the same ends.
        let first_ends = ends(&broker, label);
        drop(broker);
        let broker = open_at(dir, now_ms(), label).await;
        assert_eq!(
            ends(&broker, label),
            first_ends,
            "{label}: BROKER BUG: a second reopen moved the partitions' ends"
        );
        drop(broker);
        format!(
            "read {} ({}), {unacknowledged} present without a PUB line, idempotent batches \
             under way at a kill: {pending_written} written, {pending_absent} not",
            found.len(),
            per_topic.join(", ")
        )
    })
}
