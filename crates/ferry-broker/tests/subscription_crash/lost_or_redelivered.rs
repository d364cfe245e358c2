//! After each verified round: no acknowledged publish lost, moved or doubled; no acked
//! message delivered again; no group offset gone backwards; acks per key of `keyed` and
//! per partition of `solo` in publish order.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::{Broker, BrokerConfig, GroupJoin, OrderingMode, Position};
use ferry_storage::ManualClock;
use ferry_testkit::killed_child::now_ms;

use crate::said::DirState;
use crate::scenario::{
    GROUP, GROUP_INSTANCE, Id, PARTITIONS, SUBS, TOPIC, config, identify_record, shape,
};

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

/// Every record of the topic, per partition in offset order, checked against what the
/// children said; `None` if the child never created the topic.
pub fn read_topic(broker: &Broker, state: &mut DirState, label: &str) -> Option<Vec<Vec<Id>>> {
    if !broker.list_topics().iter().any(|n| n.as_str() == TOPIC) {
        assert!(
            state.published.is_empty(),
            "{label}: BROKER BUG: {TOPIC} is missing, with {} acknowledged publishes",
            state.published.len()
        );
        return None;
    }
    let mut found: HashMap<Id, (u32, u64)> = HashMap::new();
    let mut partitions = Vec::new();
    for p in 0..PARTITIONS {
        let records = broker
            .read_topic(TOPIC, p, Position::Earliest, usize::MAX)
            .unwrap_or_else(|e| panic!("{label}: read {TOPIC}/{p}: {e}"));
        let mut ids = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            assert_eq!(
                record.offset, i as u64,
                "{label}: BROKER BUG: {TOPIC}/{p} has a hole"
            );
            let id = identify_record(record).unwrap_or_else(|problem| {
                panic!(
                    "{label}: BROKER BUG: bad record at {TOPIC}/{p}/{}: {problem}",
                    record.offset
                )
            });
            assert!(
                state.rounds.contains(&id.round),
                "{label}: {TOPIC}/{p} holds {id}, from a round not run on this directory"
            );
            if let Some(first) = found.insert(id, (p, record.offset)) {
                panic!(
                    "{label}: BROKER BUG: {id} written twice: at {first:?} and {:?}",
                    (p, record.offset)
                );
            }
            ids.push(id);
        }
        if let Some(before) = state.logs.get(&p) {
            assert!(
                before.len() <= ids.len() && ids[..before.len()] == before[..],
                "{label}: BROKER BUG: {TOPIC}/{p} changed below its old end"
            );
        }
        state.logs.insert(p, ids.clone());
        partitions.push(ids);
    }
    let mut missing: Vec<_> = state
        .published
        .iter()
        .filter(|&(id, at)| found.get(id) != Some(at))
        .map(|(id, at)| (*id, *at, found.get(id).copied()))
        .collect();
    missing.sort_unstable();
    assert!(
        missing.is_empty(),
        "{label}: BROKER BUG: {} acknowledged publishes are not where they were acknowledged \
         (id, acknowledged at, found at), e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    Some(partitions)
}

/// Per subscription, the topic records it has not yet considered (taken in or passed over).
pub fn not_yet_considered(broker: &Broker) -> Vec<u64> {
    SUBS.iter()
        .filter_map(|s| broker.describe_subscription(s.name).ok())
        .map(|info| info.not_yet_considered)
        .collect()
}

/// The group's committed offsets as a reopened broker has them.
pub async fn committed_offsets(broker: &Broker, label: &str) -> BTreeMap<u32, u64> {
    // Groups live in memory: joining loads the committed offsets.
    let join = GroupJoin {
        instance_id: Some(GROUP_INSTANCE.to_owned()),
        session_timeout: Duration::from_secs(30),
        ..GroupJoin::default()
    };
    broker
        .join_group(TOPIC, GROUP, join)
        .await
        .unwrap_or_else(|e| panic!("{label}: join {GROUP}: {e}"));
    let info = broker
        .describe_group(TOPIC, GROUP)
        .unwrap_or_else(|e| panic!("{label}: describe {GROUP}: {e}"));
    info.partitions
        .iter()
        .map(|p| (p.partition, p.committed.unwrap_or(0)))
        .collect()
}

/// Reopens the directory after a kill and checks the topic and the group's offsets.
pub fn verify(dir: &Path, state: &mut DirState, label: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, now_ms(), label).await;
        let behind = not_yet_considered(&broker);
        // What a receive finds at once on a subscription still behind, and again once it
        // caught up (the clock stands still, so only the catch-up can make more ready). The
        // probe's leases end a second later, as a killed child's would.
        let mut probed: Vec<(usize, usize, usize)> = Vec::new();
        for (sub, s) in SUBS.iter().enumerate() {
            if behind.get(sub).is_some_and(|&n| n > 0) {
                let got = broker
                    .receive(s.name, "probe", 10_000, None, None)
                    .await
                    .unwrap_or_else(|e| panic!("{label}: probe {}: {e}", s.name));
                state.note_probe(sub, &got);
                probed.push((sub, got.len(), 0));
            }
        }
        // Whether the subscriptions catch up by themselves after the reopen returned (the
        // broker runs no timers here): observed, not required.
        let opened = Instant::now();
        let mut caught_up = None;
        while behind.iter().any(|&n| n > 0) && opened.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if not_yet_considered(&broker).iter().all(|&n| n == 0) {
                caught_up = Some(opened.elapsed());
                break;
            }
        }
        for (sub, _, later) in &mut probed {
            let got = broker
                .receive(SUBS[*sub].name, "probe", 10_000, None, None)
                .await
                .unwrap_or_else(|e| panic!("{label}: probe {}: {e}", SUBS[*sub].name));
            state.note_probe(*sub, &got);
            *later = got.len();
        }
        let probes: Vec<String> = probed
            .iter()
            .map(|(sub, at_once, later)| {
                format!(
                    "{} received {at_once} at once, {later} more after",
                    SUBS[*sub].name
                )
            })
            .collect();
        let catch_up = match (behind.iter().any(|&n| n > 0), caught_up) {
            (false, _) => String::new(),
            (true, Some(after)) => format!(" (caught up {after:?} later; {})", probes.join(", ")),
            (true, None) => format!(
                " (still {:?} after 1 s; {})",
                not_yet_considered(&broker),
                probes.join(", ")
            ),
        };
        let Some(partitions) = read_topic(&broker, state, label) else {
            return "no topic yet".to_owned();
        };
        for (p, offset) in committed_offsets(&broker, label).await {
            state.resolve_commit(p, offset, label);
        }
        let counts: Vec<String> = partitions.iter().map(|p| p.len().to_string()).collect();
        format!(
            "topic [{}], group committed {:?}, subscriptions not yet considered at the reopen \
             {behind:?}{catch_up}",
            counts.join(" "),
            state.committed
        )
    })
}

/// Per key on `keyed`, per partition on `solo` (among messages published without a delay):
/// the offsets of `order` must increase.
pub fn check_order(
    sub: usize,
    order: &[Id],
    at: &HashMap<Id, (u32, u64)>,
    history: &HashMap<Id, Vec<(u32, usize, &'static str)>>,
    label: &str,
) {
    let s = &SUBS[sub];
    let mut last: HashMap<Vec<u8>, (Id, u64)> = HashMap::new();
    for &id in order {
        let (partition, offset) = at[&id];
        let group = match s.ordering {
            OrderingMode::Shared => continue,
            OrderingMode::KeyShared => match shape(id).key {
                Some(key) => key.into_bytes(),
                None => continue,
            },
            // A delayed message joins an exclusive line when its delay ends, so what was
            // published after it may go first: publish order holds among the others.
            OrderingMode::Exclusive if shape(id).delay.is_some() => continue,
            OrderingMode::Exclusive => partition.to_le_bytes().to_vec(),
        };
        if let Some((before, before_offset)) = last.insert(group.clone(), (id, offset)) {
            assert!(
                before_offset < offset,
                "{label}: BROKER BUG: {} settled {id} (offset {offset} of partition \
                 {partition}) after {before} (offset {before_offset}): out of publish order \
                 for {}; (round, line, event) of {before}: {:?}, of {id}: {:?}",
                s.name,
                match s.ordering {
                    OrderingMode::KeyShared => format!("key {}", String::from_utf8_lossy(&group)),
                    _ => format!("partition {partition}"),
                },
                history.get(&before),
                history.get(&id)
            );
        }
    }
}
