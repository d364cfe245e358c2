use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::*;

const SESSION: Duration = Duration::from_secs(10);

fn group(partitions: u32) -> GroupState {
    GroupState::new("g", partitions, SESSION, BTreeMap::new()).unwrap()
}

fn join(g: &mut GroupState, id: &str, now_ms: i64) -> Membership {
    g.join(Join::default(), || id.to_owned(), now_ms)
}

fn parts(m: &Membership) -> Vec<u32> {
    m.partitions.iter().copied().collect()
}

#[test]
fn members_share_partitions_and_a_join_moves_only_the_excess() {
    let mut g = group(4);
    let a = join(&mut g, "a", 0);
    assert_eq!((parts(&a), a.generation), (vec![0, 1, 2, 3], 1));
    let b = join(&mut g, "b", 0);
    assert_eq!((parts(&b), b.generation), (vec![2, 3], 2));
    assert_eq!(parts(&g.heartbeat("a", 1).unwrap()), [0, 1]);
}

#[test]
fn a_session_ends_without_heartbeats_and_its_partitions_move() {
    let mut g = group(2);
    join(&mut g, "a", 0);
    join(&mut g, "b", 0);
    g.heartbeat("a", 9_000).unwrap();
    assert_eq!(g.next_expiry(), Some(10_000));
    assert!(g.expire(9_999).is_empty());
    assert_eq!(g.expire(10_000), ["b"]);
    assert_eq!(parts(&g.heartbeat("a", 10_000).unwrap()), [0, 1]);
    assert!(matches!(
        g.heartbeat("b", 10_000),
        Err(BrokerError::UnknownMember { .. })
    ));
}

#[test]
fn a_static_member_rejoins_within_its_session_without_a_rebalance() {
    let mut g = group(4);
    let static_join = || Join {
        member_id: None,
        instance_id: Some("host-1".into()),
    };
    let first = g.join(static_join(), || "s1".into(), 0);
    join(&mut g, "b", 0);
    let held = g.heartbeat("s1", 1_000).unwrap();
    let generation = g.generation();
    // The process restarts and joins again with its instance id.
    let again = g.join(static_join(), || "s2".into(), 5_000);
    assert_eq!(again.member_id, first.member_id);
    assert_eq!(again.partitions, held.partitions);
    assert_eq!(g.generation(), generation, "no rebalance");
    // Once its session has ended it is a new member.
    g.heartbeat("b", 14_000).unwrap();
    assert_eq!(g.expire(15_000), ["s1"]);
    let later = g.join(static_join(), || "s3".into(), 15_000);
    assert_eq!(later.member_id, "s3");
}

#[test]
fn leaving_hands_partitions_over_at_once() {
    let mut g = group(3);
    join(&mut g, "a", 0);
    join(&mut g, "b", 0);
    g.leave("b").unwrap();
    assert_eq!(parts(&g.heartbeat("a", 0).unwrap()), [0, 1, 2]);
    assert!(matches!(
        g.leave("b"),
        Err(BrokerError::UnknownMember { .. })
    ));
}

#[test]
fn commits_come_from_the_owner_and_only_move_forward() {
    let mut g = group(2);
    join(&mut g, "a", 0);
    join(&mut g, "b", 0);
    g.commit("a", 0, 10).unwrap();
    g.commit("a", 0, 10).unwrap();
    assert!(matches!(
        g.commit("a", 0, 9),
        Err(BrokerError::OffsetRegression {
            committed: 10,
            offset: 9,
            ..
        })
    ));
    assert!(matches!(
        g.commit("a", 1, 5),
        Err(BrokerError::NotPartitionOwner { partition: 1, .. })
    ));
    assert!(matches!(
        g.commit("nobody", 0, 11),
        Err(BrokerError::UnknownMember { .. })
    ));
    assert_eq!(g.committed().get(&0), Some(&10));
    assert_eq!(g.committed().get(&1), None);
    g.reset(0, 3);
    assert_eq!(g.committed().get(&0), Some(&3));
}

#[test]
fn a_new_owner_reads_from_the_committed_offset_not_the_old_position() {
    let mut g = group(1);
    join(&mut g, "a", 0);
    assert_eq!(
        g.position("a", 0).unwrap(),
        None,
        "nothing committed: the start applies"
    );
    g.advance("a", 0, 50).unwrap();
    g.commit("a", 0, 20).unwrap();
    assert_eq!(g.position("a", 0).unwrap(), Some(50));
    // a crashes without committing past 20; b takes over from 20.
    join(&mut g, "b", 0);
    g.leave("a").unwrap();
    assert_eq!(g.position("b", 0).unwrap(), Some(20));
    assert!(matches!(
        g.advance("a", 0, 60),
        Err(BrokerError::UnknownMember { .. })
    ));
}

#[test]
fn more_partitions_rebalance_and_every_partition_is_held() {
    let mut g = group(2);
    join(&mut g, "a", 0);
    join(&mut g, "b", 0);
    g.set_partitions(5);
    let all: BTreeSet<u32> = g.assignment().values().flatten().copied().collect();
    assert_eq!(all, (0..5).collect());
}

#[test]
fn session_timeouts_out_of_range_are_refused() {
    for bad in [Duration::from_millis(99), Duration::from_secs(3601)] {
        assert!(matches!(
            GroupState::new("g", 1, bad, BTreeMap::new()),
            Err(BrokerError::InvalidSetting {
                setting: "session_timeout",
                ..
            })
        ));
    }
}
