//! The child: a broker publishing to both topics from plain and idempotent producers, saying
//! each acknowledged publish on stdout and checking the positions it was given.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use ferry_broker::{Broker, KeylessPlacement, OutgoingMessage, TopicPosition, partition_for_key};
use ferry_testkit::killed_child::{fail, say, splitmix};

use crate::idempotent::{produce_idempotent, read_idempotent_states};
use crate::scenario::{Id, TOPICS, config, derive, spec};
use crate::{
    CHILD_DIR_ENV, CHILD_IDEMPOTENT_FILE_ENV, CHILD_MAX_RUN, CHILD_PRODUCERS_ENV, CHILD_ROUND_ENV,
    CHILD_SEED_ENV,
};

pub fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

pub fn say_published(topic: usize, ids: &[Id], positions: &[TopicPosition]) {
    for (id, at) in ids.iter().zip(positions) {
        say(&format!(
            "PUB {} {} {} {id}\n",
            TOPICS[topic].0, at.partition, at.offset
        ));
    }
}

/// Checks the positions one publish call returned: one per message; a keyed message in its
/// key's partition; a partition's messages of the call at consecutive offsets, in call
/// order (one append per partition); a sticky topic's keyless messages of a call in one
/// partition.
pub fn check_positions(topic: usize, ids: &[Id], sent: &[OutgoingMessage], got: &[TopicPosition]) {
    let what = || format!("publish of {ids:?} to {}", TOPICS[topic].0);
    if got.len() != ids.len() {
        fail(&format!(
            "{} returned {} positions: {got:?}",
            what(),
            got.len()
        ));
    }
    let (_, partitions, keyless) = TOPICS[topic];
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut keyless_partitions: Vec<u32> = Vec::new();
    for (m, at) in sent.iter().zip(got) {
        match &m.key {
            Some(key) if partition_for_key(key, partitions) != at.partition => {
                fail(&format!("{} put key {key:?} in {at:?}: {got:?}", what()))
            }
            Some(_) => {}
            None => keyless_partitions.push(at.partition),
        }
        if let Some(prev) = last.insert(at.partition, at.offset)
            && at.offset != prev + 1
        {
            fail(&format!(
                "{} returned non-consecutive offsets in one partition: {got:?}",
                what()
            ));
        }
    }
    keyless_partitions.dedup();
    if keyless == KeylessPlacement::StickyBatch && keyless_partitions.len() > 1 {
        fail(&format!(
            "{} spread keyless messages of one call over partitions: {got:?}",
            what()
        ));
    }
}

pub async fn produce(broker: Broker, round: u32, producer: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let topic = Id::Plain {
        round,
        producer,
        n: 0,
    }
    .topic();
    let (name, partitions, _) = TOPICS[topic];
    let mut n = 0u64;
    loop {
        if rng.u8(..5) == 0 {
            n = produce_pipelined(&broker, round, producer, n, &mut rng).await;
            tokio::time::sleep(Duration::from_millis(rng.u64(..3))).await;
            continue;
        }
        let count = 1 + rng.u64(..4);
        let ids: Vec<Id> = (n..n + count)
            .map(|n| Id::Plain { round, producer, n })
            .collect();
        let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
        let result = if messages.iter().all(|m| m.key.is_none()) && rng.u8(..4) == 0 {
            let partition = rng.u32(..partitions);
            broker
                .publish_to_partition(name, partition, messages.clone())
                .await
                .inspect(|got| {
                    if got.iter().any(|at| at.partition != partition) {
                        fail(&format!(
                            "publish of {ids:?} to partition {partition} of {name} returned \
                             {got:?}"
                        ));
                    }
                })
        } else {
            broker.publish_to_topic(name, messages.clone()).await
        };
        match result {
            Ok(got) => {
                check_positions(topic, &ids, &messages, &got);
                say_published(topic, &ids, &got);
            }
            Err(e) => fail(&format!("publish of {ids:?} to {name}: {e}")),
        }
        n += count;
        // Spreads the producers' calls over time rather than in lockstep behind the fsyncs.
        tokio::time::sleep(Duration::from_millis(rng.u64(..3))).await;
    }
}

/// Begins two to five publishes before awaiting any, as a Kafka connection begins the
/// produce requests it has in flight, then says each once durable, in call order. Their
/// appends must land in call order: in each partition a later call's offsets are above an
/// earlier's (and the parent checks the stored order after the kill). Returns the next `n`.
async fn produce_pipelined(
    broker: &Broker,
    round: u32,
    producer: u32,
    mut n: u64,
    rng: &mut fastrand::Rng,
) -> u64 {
    let topic = Id::Plain {
        round,
        producer,
        n: 0,
    }
    .topic();
    let (name, partitions, _) = TOPICS[topic];
    let mut begun = Vec::new();
    for _ in 0..2 + rng.u32(..4) {
        let count = 1 + rng.u64(..4);
        let ids: Vec<Id> = (n..n + count)
            .map(|n| Id::Plain { round, producer, n })
            .collect();
        n += count;
        let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
        let placed = if messages.iter().all(|m| m.key.is_none()) && rng.bool() {
            broker.begin_publish_to_partition(name, rng.u32(..partitions), messages.clone())
        } else {
            broker.begin_publish_to_topic(name, messages.clone())
        };
        match placed {
            Ok(pending) => begun.push((ids, messages, pending)),
            Err(e) => fail(&format!("begin publish of {ids:?} to {name}: {e}")),
        }
    }
    let mut highest: HashMap<u32, u64> = HashMap::new();
    for (ids, messages, pending) in begun {
        match pending.durable().await {
            Ok(got) => {
                check_positions(topic, &ids, &messages, &got);
                for at in &got {
                    if highest.get(&at.partition).is_some_and(|&h| at.offset <= h) {
                        fail(&format!(
                            "publish of {ids:?} to {name}, begun after others, was stored \
                             before them: {got:?} (earlier up to {highest:?})"
                        ));
                    }
                }
                for at in &got {
                    let h = highest.entry(at.partition).or_insert(at.offset);
                    *h = (*h).max(at.offset);
                }
                say_published(topic, &ids, &got);
            }
            Err(e) => fail(&format!("publish of {ids:?} to {name}: {e}")),
        }
    }
    n
}

/// The child side: does nothing unless the parent started this binary to be crashed.
#[tokio::test]
async fn topic_crash_child_broker_under_load() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round = env_u64(CHILD_ROUND_ENV) as u32;
    let seed = env_u64(CHILD_SEED_ENV);
    let producers = env_u64(CHILD_PRODUCERS_ENV) as u32;
    let idempotent_file = std::env::var_os(CHILD_IDEMPOTENT_FILE_ENV).expect("state file set");
    let idempotent = read_idempotent_states(Path::new(&idempotent_file));
    let broker = match Broker::open(&dir, config(splitmix(seed))).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    let existing = broker.list_topics();
    for (name, partitions, keyless) in TOPICS {
        if !existing.iter().any(|n| n.as_str() == name)
            && let Err(e) = broker.create_topic(name, spec(partitions, keyless)).await
        {
            fail(&format!("create {name}: {e}"));
        }
    }
    // libtest has printed "test topic_crash_child_broker_under_load ... " without a newline.
    say("\nREADY\n");
    for producer in 0..producers {
        let seed = splitmix(seed ^ (1 << 32) ^ producer as u64);
        tokio::spawn(produce(broker.clone(), round, producer, seed));
    }
    for (slot, state) in idempotent.into_iter().enumerate() {
        let seed = splitmix(seed ^ (2 << 32) ^ slot as u64);
        tokio::spawn(produce_idempotent(broker.clone(), slot as u32, state, seed));
    }
    tokio::time::sleep(CHILD_MAX_RUN).await;
    // Only reached when the parent never killed us.
    std::process::exit(4);
}
