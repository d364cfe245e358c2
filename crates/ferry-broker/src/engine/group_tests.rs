//! Consumer groups over topics: members sharing partitions, crash without commit and
//! redelivery to the next owner, static rejoin, durable offsets, admin resets, lag in
//! records and time, and bad input.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::groups::{GroupJoin, StartAt};
use super::tests::T0;
use super::topic_tests::{msg, open, spec};
use super::*;
use crate::topic::{Position, TopicRecord};

const SESSION: Duration = Duration::from_secs(10);

fn join() -> GroupJoin {
    GroupJoin {
        session_timeout: SESSION,
        ..GroupJoin::default()
    }
}

async fn publish(broker: &Broker, n: usize, prefix: &str) {
    let batch: Vec<OutgoingMessage> = (0..n)
        .map(|i| msg(&format!("{prefix}{i}")).with_key(format!("k{i}")))
        .collect();
    broker.publish_to_topic("t", batch).await.unwrap();
}

fn payloads(records: &[TopicRecord]) -> BTreeSet<String> {
    records
        .iter()
        .map(|r| String::from_utf8(r.message.payload.to_vec()).unwrap())
        .collect()
}

/// Commits, per partition, one past the last record read.
fn commit_all(broker: &Broker, member: &str, records: &[TopicRecord]) {
    let mut last = std::collections::BTreeMap::new();
    for r in records {
        last.insert(r.partition, r.offset + 1);
    }
    for (p, next) in last {
        broker.commit_offset("t", "g", member, p, next).unwrap();
    }
}

#[tokio::test]
async fn members_share_the_partitions_and_read_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(4)).await.unwrap();
    publish(&broker, 40, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let b = broker.join_group("t", "g", join()).await.unwrap();
    let a_now = broker.heartbeat("t", "g", &a.member_id).unwrap();
    assert_eq!((a_now.partitions.len(), b.partitions.len()), (2, 2));
    assert!(a_now.partitions.is_disjoint(&b.partitions));
    let from_a = broker.poll_group("t", "g", &a.member_id, 100).unwrap();
    let from_b = broker.poll_group("t", "g", &b.member_id, 100).unwrap();
    assert!(
        from_a
            .iter()
            .all(|r| a_now.partitions.contains(&r.partition))
    );
    assert!(from_b.iter().all(|r| b.partitions.contains(&r.partition)));
    let all: BTreeSet<String> = payloads(&from_a)
        .union(&payloads(&from_b))
        .cloned()
        .collect();
    assert_eq!((from_a.len() + from_b.len(), all.len()), (40, 40));
    assert!(
        broker
            .poll_group("t", "g", &a.member_id, 100)
            .unwrap()
            .is_empty()
    );
    commit_all(&broker, &a.member_id, &from_a);
    commit_all(&broker, &b.member_id, &from_b);
    let info = broker.describe_group("t", "g").unwrap();
    assert!(
        info.partitions
            .iter()
            .all(|p| p.lag_records == 0 && p.lag_ms == 0)
    );
    assert_eq!(info.members.len(), 2);
}

#[tokio::test]
async fn a_crashed_members_uncommitted_records_go_to_the_next_owner() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, 10, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let first = broker.poll_group("t", "g", &a.member_id, 4).unwrap();
    commit_all(&broker, &a.member_id, &first);
    let second = broker.poll_group("t", "g", &a.member_id, 3).unwrap();
    assert_eq!(second[0].offset, 4);
    // a crashes: no commit of 4..7, no heartbeat. b joins and a's session runs out.
    let b = broker.join_group("t", "g", join()).await.unwrap();
    assert!(b.partitions.is_empty(), "a still holds the only partition");
    clock.advance(5_000);
    broker.heartbeat("t", "g", &b.member_id).unwrap();
    clock.advance(5_000);
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let b_now = broker.heartbeat("t", "g", &b.member_id).unwrap();
    assert_eq!(b_now.partitions, BTreeSet::from([0]));
    let again = broker.poll_group("t", "g", &b.member_id, 100).unwrap();
    assert_eq!(
        again.first().map(|r| r.offset),
        Some(4),
        "from the committed offset"
    );
    assert_eq!(again.len(), 6);
    assert!(matches!(
        broker.commit_offset("t", "g", &a.member_id, 0, 7),
        Err(BrokerError::UnknownMember { .. })
    ));
}

#[tokio::test]
async fn a_static_member_rejoins_without_a_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(4)).await.unwrap();
    let static_join = || GroupJoin {
        instance_id: Some("host-1".into()),
        ..join()
    };
    let s = broker.join_group("t", "g", static_join()).await.unwrap();
    broker.join_group("t", "g", join()).await.unwrap();
    let held = broker.heartbeat("t", "g", &s.member_id).unwrap();
    clock.advance(3_000);
    let back = broker.join_group("t", "g", static_join()).await.unwrap();
    assert_eq!(back, held, "same member, partitions and generation");
}

#[tokio::test]
async fn committed_offsets_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    publish(&broker, 20, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let read = broker.poll_group("t", "g", &a.member_id, 8).unwrap();
    commit_all(&broker, &a.member_id, &read);
    let committed = broker.describe_group("t", "g").unwrap().partitions;
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let rest = broker.poll_group("t", "g", &a.member_id, 100).unwrap();
    assert_eq!(rest.len(), 12);
    assert!(payloads(&read).is_disjoint(&payloads(&rest)));
    let after = broker.describe_group("t", "g").unwrap().partitions;
    let offsets =
        |ps: &[super::groups::GroupPartition]| ps.iter().map(|p| p.committed).collect::<Vec<_>>();
    assert_eq!(offsets(&after), offsets(&committed));
}

#[tokio::test]
async fn commits_only_move_forward_from_the_owner_and_within_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    publish(&broker, 10, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let b = broker.join_group("t", "g", join()).await.unwrap();
    let a_held = broker.heartbeat("t", "g", &a.member_id).unwrap().partitions;
    let (pa, pb) = (*a_held.first().unwrap(), *b.partitions.first().unwrap());
    let end = broker.describe_topic("t").unwrap().partitions[pa as usize].end_offset;
    broker.commit_offset("t", "g", &a.member_id, pa, 2).unwrap();
    let before = broker.describe_group("t", "g").unwrap();
    assert!(matches!(
        broker.commit_offset("t", "g", &a.member_id, pa, 1),
        Err(BrokerError::OffsetRegression { .. })
    ));
    assert!(matches!(
        broker.commit_offset("t", "g", &a.member_id, pb, 1),
        Err(BrokerError::NotPartitionOwner { .. })
    ));
    assert!(matches!(
        broker.commit_offset("t", "g", &a.member_id, pa, end + 1),
        Err(BrokerError::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        broker.commit_offset("t", "g", "m-nobody", pa, 3),
        Err(BrokerError::UnknownMember { .. })
    ));
    assert!(matches!(
        broker.commit_offset("t", "nope", &a.member_id, pa, 3),
        Err(BrokerError::GroupNotFound { .. })
    ));
    assert!(matches!(
        broker.poll_group("nope", "g", &a.member_id, 1),
        Err(BrokerError::TopicNotFound { .. })
    ));
    assert!(matches!(
        broker.commit_offset("t", "g", &a.member_id, 9, 0),
        Err(BrokerError::PartitionNotFound { .. })
    ));
    assert_eq!(broker.describe_group("t", "g").unwrap(), before);
}

#[tokio::test]
async fn an_admin_reset_moves_offsets_and_the_owner_reads_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, 5, "old").await;
    clock.advance(1_000);
    publish(&broker, 5, "new").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let all = broker.poll_group("t", "g", &a.member_id, 100).unwrap();
    commit_all(&broker, &a.member_id, &all);
    broker
        .reset_group_offsets("t", "g", None, Position::Timestamp(T0 + 1_000))
        .unwrap();
    let again = broker.poll_group("t", "g", &a.member_id, 100).unwrap();
    assert_eq!(again.first().map(|r| r.offset), Some(5));
    broker
        .reset_group_offsets("t", "g", Some(0), Position::Earliest)
        .unwrap();
    assert_eq!(
        broker.describe_group("t", "g").unwrap().partitions[0].committed,
        Some(0)
    );
    assert!(matches!(
        broker.reset_group_offsets("t", "g", Some(0), Position::Offset(99)),
        Err(BrokerError::OffsetOutOfRange { .. })
    ));
    broker
        .reset_group_offsets("t", "g", Some(0), Position::Latest)
        .unwrap();
    assert!(
        broker
            .poll_group("t", "g", &a.member_id, 100)
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn lag_is_counted_in_records_and_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, 3, "a").await;
    clock.advance(2_000);
    publish(&broker, 2, "b").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    clock.advance(3_000);
    let p = &broker.describe_group("t", "g").unwrap().partitions[0];
    assert_eq!((p.lag_records, p.lag_ms, p.committed), (5, 5_000, None));
    broker.commit_offset("t", "g", &a.member_id, 0, 3).unwrap();
    let p = &broker.describe_group("t", "g").unwrap().partitions[0];
    assert_eq!((p.lag_records, p.lag_ms, p.committed), (2, 3_000, Some(3)));
}

#[tokio::test]
async fn a_group_starting_at_latest_reads_only_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, 3, "before").await;
    let latest = GroupJoin {
        start: StartAt::Latest,
        ..join()
    };
    let a = broker.join_group("t", "g", latest).await.unwrap();
    assert!(
        broker
            .poll_group("t", "g", &a.member_id, 10)
            .unwrap()
            .is_empty()
    );
    publish(&broker, 2, "after").await;
    let got = broker.poll_group("t", "g", &a.member_id, 10).unwrap();
    assert_eq!(
        payloads(&got),
        BTreeSet::from(["after0".into(), "after1".into()])
    );
}

#[tokio::test]
async fn deleting_the_topic_deletes_its_groups_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, 3, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    broker.commit_offset("t", "g", &a.member_id, 0, 2).unwrap();
    broker.delete_topic("t").await.unwrap();
    broker.create_topic("t", spec(1)).await.unwrap();
    assert!(matches!(
        broker.describe_group("t", "g"),
        Err(BrokerError::GroupNotFound { .. })
    ));
    broker.join_group("t", "g", join()).await.unwrap();
    assert_eq!(
        broker.describe_group("t", "g").unwrap().partitions[0].committed,
        None
    );
}

fn names(pairs: &[(&str, &str)]) -> Vec<(Name, Name)> {
    pairs
        .iter()
        .map(|(t, g)| (Name::new(*t).unwrap(), Name::new(*g).unwrap()))
        .collect()
}

#[tokio::test]
async fn a_group_that_has_not_rejoined_since_a_reopen_is_still_listed_with_its_lag() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    assert!(broker.list_groups().is_empty());
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, 5, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    broker.commit_offset("t", "g", &a.member_id, 0, 3).unwrap();
    // Joined, never committed: known while the broker runs, gone with it.
    broker.join_group("t", "h", join()).await.unwrap();
    assert_eq!(broker.list_groups(), names(&[("t", "g"), ("t", "h")]));
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.list_groups(), names(&[("t", "g")]));
    clock.advance(4_000);
    let lag = broker.group_lag("t", "g").unwrap();
    assert_eq!(lag.len(), 1);
    assert_eq!(
        (
            lag[0].committed,
            lag[0].end_offset,
            lag[0].lag_records,
            lag[0].lag_ms
        ),
        (Some(3), 5, 2, 4_000)
    );
    // Described by its commits, with no members, as Kafka describes an empty group;
    // neither describing nor lag starts a session.
    let info = broker.describe_group("t", "g").unwrap();
    assert_eq!((info.generation, info.members.len()), (0, 0));
    assert_eq!(
        (
            info.partitions[0].owner.as_deref(),
            info.partitions[0].committed,
            info.partitions[0].lag_records,
            info.partitions[0].lag_ms
        ),
        (None, Some(3), 2, 4_000)
    );
    assert_eq!(broker.list_groups(), names(&[("t", "g")]));
    // A group that neither has members nor committed anything is unknown.
    assert!(matches!(
        broker.describe_group("t", "h"),
        Err(BrokerError::GroupNotFound { .. })
    ));
    assert!(matches!(
        broker.group_lag("t", "h"),
        Err(BrokerError::GroupNotFound { .. })
    ));
}

#[tokio::test]
async fn group_lag_follows_publishes_and_commits_and_is_zero_when_caught_up() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let a = broker.join_group("t", "g", join()).await.unwrap();
    let lag = broker.group_lag("t", "g").unwrap();
    assert!(lag.iter().all(|p| (p.lag_records, p.lag_ms) == (0, 0)));
    publish(&broker, 10, "m").await;
    clock.advance(1_500);
    let lag = broker.group_lag("t", "g").unwrap();
    assert_eq!(lag.iter().map(|p| p.lag_records).sum::<u64>(), 10);
    assert!(lag.iter().all(|p| p.lag_records == 0 || p.lag_ms == 1_500));
    let records = broker.poll_group("t", "g", &a.member_id, 100).unwrap();
    // Reading is not committing: the lag stays until the commit.
    assert_eq!(
        broker
            .group_lag("t", "g")
            .unwrap()
            .iter()
            .map(|p| p.lag_records)
            .sum::<u64>(),
        10
    );
    commit_all(&broker, &a.member_id, &records);
    let lag = broker.group_lag("t", "g").unwrap();
    assert!(lag.iter().all(|p| (p.lag_records, p.lag_ms) == (0, 0)));
    // It agrees with what describe_group reports.
    let described = broker.describe_group("t", "g").unwrap().partitions;
    for (l, d) in lag.iter().zip(&described) {
        assert_eq!(
            (l.partition, l.committed, l.lag_records, l.lag_ms),
            (d.partition, d.committed, d.lag_records, d.lag_ms)
        );
    }
}

#[tokio::test]
async fn a_group_is_deleted_only_without_members_and_stays_deleted_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    publish(&broker, 4, "m").await;
    let a = broker.join_group("t", "g", join()).await.unwrap();
    broker.commit_offset("t", "g", &a.member_id, 0, 1).unwrap();
    assert!(matches!(
        broker.delete_group("t", "g"),
        Err(BrokerError::GroupNotEmpty { members: 1, .. })
    ));
    assert_eq!(
        broker.list_groups(),
        names(&[("t", "g")]),
        "a refusal changes nothing"
    );
    broker.leave_group("t", "g", &a.member_id).unwrap();
    broker.delete_group("t", "g").unwrap();
    assert!(broker.list_groups().is_empty());
    assert!(matches!(
        broker.group_lag("t", "g"),
        Err(BrokerError::GroupNotFound { .. })
    ));
    assert!(matches!(
        broker.delete_group("t", "g"),
        Err(BrokerError::GroupNotFound { .. })
    ));
    drop(broker);

    // Its committed offsets are gone from disk: a new group of that name starts afresh.
    let broker = open(dir.path(), &clock).await;
    assert!(broker.list_groups().is_empty());
    let again = broker.join_group("t", "g", join()).await.unwrap();
    let records = broker.poll_group("t", "g", &again.member_id, 100).unwrap();
    assert_eq!(
        records.len(),
        4,
        "reads from the start, not from the deleted commit"
    );
}
