//! At the end, an hour later (every lease expired, every retry due): each subscription
//! delivers every message its filter takes exactly once counting acks, and the group
//! reads each partition from its committed offset to its end.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use ferry_broker::Acked;
use ferry_testkit::killed_child::now_ms;

use crate::lost_or_redelivered::{
    check_order, committed_offsets, not_yet_considered, open_at, read_topic,
};
use crate::said::DirState;
use crate::scenario::{GROUP, Id, SUBS, TOPIC, identify_delivery, shape};

/// What the final drain of one directory found.
pub struct Drained {
    pub per_sub: Vec<(usize, usize, usize)>,
    pub empty_polls_before_first: Vec<usize>,
    /// Per subscription, the topic records it had not yet considered (taken in or passed
    /// over) when the reopen returned.
    pub behind_at_open: Vec<u64>,
    pub group_records: usize,
}

/// Reopens an hour later, drains every subscription and the group, and checks that nothing
/// was lost, nothing acked came back, and order held.
pub fn drain_and_check(dir: &Path, state: &mut DirState, label: &str) -> Drained {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, now_ms() + 3_600_000, label).await;
        let behind_at_open = not_yet_considered(&broker);
        let Some(partitions) = read_topic(&broker, state, label) else {
            return Drained {
                per_sub: Vec::new(),
                empty_polls_before_first: Vec::new(),
                behind_at_open: Vec::new(),
                group_records: 0,
            };
        };
        let at: HashMap<Id, (u32, u64)> = partitions
            .iter()
            .enumerate()
            .flat_map(|(p, ids)| {
                ids.iter()
                    .enumerate()
                    .map(move |(o, &id)| (id, (p as u32, o as u64)))
            })
            .collect();
        broker.tick_now().await.unwrap();
        let mut drained = Drained {
            per_sub: Vec::new(),
            empty_polls_before_first: Vec::new(),
            behind_at_open,
            group_records: 0,
        };
        for (sub, s) in SUBS.iter().enumerate() {
            let matching: HashSet<Id> = at
                .keys()
                .copied()
                .filter(|&id| s.takes(shape(id).subject))
                .collect();
            let st = &state.subs[sub];
            let mut got: Vec<Id> = Vec::new();
            let mut seen: HashSet<Id> = HashSet::new();
            let mut empty_before_first = 0;
            let accounted = |seen: &HashSet<Id>| {
                matching
                    .iter()
                    .all(|id| seen.contains(id) || st.acked.contains(id) || st.acking.contains(id))
            };
            // Receives may find nothing for a while after a reopen (catch-up is under way):
            // poll until everything is accounted for, or nothing comes for a few seconds.
            let mut quiet_since = Instant::now();
            let mut extra_look = true;
            loop {
                if accounted(&seen) {
                    if !extra_look {
                        break;
                    }
                    // One more look: anything delivered now is delivered twice.
                    extra_look = false;
                }
                if quiet_since.elapsed() > Duration::from_secs(5) {
                    break;
                }
                broker.tick_now().await.unwrap();
                // The first look does not wait: whether what the reopen found is ready at once.
                let wait = (!got.is_empty() || empty_before_first > 0)
                    .then_some(Duration::from_millis(100));
                let batch = broker
                    .receive(s.name, "drain", 64, None, wait)
                    .await
                    .unwrap_or_else(|e| panic!("{label}: drain {}: {e}", s.name));
                if batch.is_empty() {
                    if got.is_empty() {
                        empty_before_first += 1;
                    }
                    continue;
                }
                quiet_since = Instant::now();
                for m in &batch {
                    let id = identify_delivery(s, m).unwrap_or_else(|problem| {
                        panic!("{label}: BROKER BUG: {} delivered {problem}", s.name)
                    });
                    assert!(
                        !st.acked.contains(&id),
                        "{label}: BROKER BUG: {} delivered {id} again after its ack was \
                         acknowledged",
                        s.name
                    );
                    assert!(
                        seen.insert(id),
                        "{label}: BROKER BUG: {} delivered {id} again after it was acked in \
                         the drain",
                        s.name
                    );
                    got.push(id);
                    let acked = broker
                        .ack(s.name, m.seq, m.token)
                        .await
                        .unwrap_or_else(|e| panic!("{label}: drain ack {id}: {e}"));
                    assert_eq!(acked, Acked::Settled, "{label}: drain ack of {id}");
                }
            }
            let mut lost: Vec<Id> = matching
                .iter()
                .copied()
                .filter(|id| {
                    !seen.contains(id) && !st.acked.contains(id) && !st.acking.contains(id)
                })
                .collect();
            lost.sort_unstable();
            assert!(
                lost.is_empty(),
                "{label}: BROKER BUG: {} never delivered {} of the {} messages its filter \
                 takes (none acked, none delivered in a drain of {}), e.g. {:?}",
                s.name,
                lost.len(),
                matching.len(),
                got.len(),
                &lost[..lost.len().min(10)]
            );
            // Acks under way at a kill that were durable make up the difference.
            let acking_settled = st.acking.iter().filter(|id| !seen.contains(id)).count();
            assert_eq!(
                st.acked.len() + got.len() + acking_settled,
                matching.len(),
                "{label}: {} acked {} + drained {} + acks under way at a kill {} != {} \
                 matching records",
                s.name,
                st.acked.len(),
                got.len(),
                acking_settled,
                matching.len()
            );
            let mut order = st.ack_order.clone();
            order.extend(&got);
            check_order(
                sub,
                &order,
                &at,
                &st.history,
                &format!("{label}: {}", s.name),
            );
            drained
                .per_sub
                .push((st.acked.len(), got.len(), matching.len()));
            drained.empty_polls_before_first.push(empty_before_first);
        }
        // The group reads each partition from its committed offset to the end, once.
        let committed = committed_offsets(&broker, label).await;
        for (&p, &offset) in &committed {
            state.resolve_commit(p, offset, label);
        }
        let info = broker.describe_group(TOPIC, GROUP).unwrap();
        let member = info.members.keys().next().cloned().expect("one member");
        let mut next: BTreeMap<u32, u64> = committed.clone();
        loop {
            let records = broker
                .poll_group(TOPIC, GROUP, &member, 256)
                .unwrap_or_else(|e| panic!("{label}: poll {GROUP}: {e}"));
            if records.is_empty() {
                break;
            }
            for record in &records {
                let want = next.get(&record.partition).copied().unwrap_or(0);
                assert_eq!(
                    record.offset, want,
                    "{label}: BROKER BUG: {GROUP} polled {}/{} where {want} was next (committed \
                     {committed:?})",
                    record.partition, record.offset
                );
                next.insert(record.partition, want + 1);
                drained.group_records += 1;
            }
        }
        for (p, ids) in partitions.iter().enumerate() {
            assert_eq!(
                next.get(&(p as u32)).copied().unwrap_or(0),
                ids.len() as u64,
                "{label}: {GROUP} did not read partition {p} to its end"
            );
        }
        drained
    })
}
