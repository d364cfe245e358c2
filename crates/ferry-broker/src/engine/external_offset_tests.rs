//! Offsets of groups coordinated outside the broker (Kafka's consumer groups): durable,
//! with their metadata, seen by the broker's lag and listing, refused while broker-side
//! members hold the same group, and checked partition by partition.

use ferry_storage::ManualClock;

use super::groups::{GroupJoin, OffsetCommit};
use super::tests::T0;
use super::topic_tests::{msg, open, spec};
use super::*;
use crate::ErrorKind;

fn commit(partition: u32, offset: u64, metadata: &str) -> OffsetCommit {
    OffsetCommit {
        partition,
        offset,
        metadata: metadata.into(),
    }
}

async fn with_records(broker: &Broker, partition: u32, n: usize) {
    let batch = (0..n).map(|i| msg(&format!("m{i}"))).collect();
    broker
        .publish_to_partition("t", partition, batch)
        .await
        .unwrap();
}

#[tokio::test]
async fn external_commits_are_the_groups_offsets_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    {
        let broker = open(dir.path(), &clock).await;
        broker.create_topic("t", spec(2)).await.unwrap();
        with_records(&broker, 0, 5).await;
        with_records(&broker, 1, 3).await;
        clock.advance(7_000);
        let results = broker
            .commit_group_offsets("t", "kg", &[commit(0, 2, "from kafka"), commit(1, 3, "")])
            .unwrap();
        assert!(results.iter().all(Result::is_ok));
        let lag = broker.group_lag("t", "kg").unwrap();
        assert_eq!(
            lag.iter()
                .map(|l| (l.committed, l.lag_records))
                .collect::<Vec<_>>(),
            vec![(Some(2), 3), (Some(3), 0)]
        );
        assert_eq!(lag[0].lag_ms, 7_000);
    }
    let broker = open(dir.path(), &clock).await;
    let offsets = broker.group_offsets("t", "kg").unwrap();
    assert_eq!(offsets[&0].offset, 2);
    assert_eq!(offsets[&0].metadata, "from kafka");
    assert_eq!(offsets[&1].offset, 3);
    assert!(
        broker
            .list_groups()
            .iter()
            .any(|(t, g)| t.as_str() == "t" && g.as_str() == "kg")
    );
    // The broker's own consumers of that group start where the external commits left it.
    let member = broker
        .join_group("t", "kg", GroupJoin::default())
        .await
        .unwrap();
    let read = broker.poll_group("t", "kg", &member.member_id, 10).unwrap();
    assert_eq!(read.len(), 3);
    assert!(read.iter().all(|r| r.partition == 0 && r.offset >= 2));
}

#[tokio::test]
async fn an_external_commit_is_refused_while_broker_members_hold_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    with_records(&broker, 0, 4).await;
    let member = broker
        .join_group("t", "g", GroupJoin::default())
        .await
        .unwrap();
    broker
        .commit_offset("t", "g", &member.member_id, 0, 1)
        .unwrap();
    let refused = broker
        .commit_group_offsets("t", "g", &[commit(0, 3, "")])
        .unwrap_err();
    assert!(matches!(
        refused,
        BrokerError::GroupCoordinatedByBroker { members: 1, .. }
    ));
    assert_eq!(refused.kind(), ErrorKind::Conflict);
    assert!(matches!(
        broker.delete_group_offsets("t", "g", &[0]).unwrap_err(),
        BrokerError::GroupCoordinatedByBroker { .. }
    ));
    // Reading is allowed, and the refused commit changed nothing.
    assert_eq!(broker.group_offsets("t", "g").unwrap()[&0].offset, 1);
    broker.leave_group("t", "g", &member.member_id).unwrap();
    broker
        .commit_group_offsets("t", "g", &[commit(0, 3, "")])
        .unwrap();
    assert_eq!(broker.group_lag("t", "g").unwrap()[0].committed, Some(3));
    assert_eq!(
        broker.describe_group("t", "g").unwrap().partitions[0].committed,
        Some(3)
    );
}

#[tokio::test]
async fn each_partition_of_an_external_commit_is_checked_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    with_records(&broker, 0, 2).await;
    let long = "x".repeat(MAX_OFFSET_METADATA + 1);
    let results = broker
        .commit_group_offsets(
            "t",
            "kg",
            &[
                commit(0, 2, "ok"),
                commit(1, 5, ""),
                commit(7, 0, ""),
                commit(0, 1, &long),
            ],
        )
        .unwrap();
    assert!(results[0].is_ok());
    assert!(
        results[1].is_ok(),
        "past the end is kept, as Kafka keeps it"
    );
    assert!(matches!(
        results[2],
        Err(BrokerError::PartitionNotFound { .. })
    ));
    assert!(matches!(
        results[3],
        Err(BrokerError::OffsetMetadataTooLarge { .. })
    ));
    let offsets = broker.group_offsets("t", "kg").unwrap();
    assert_eq!(offsets.len(), 2);
    assert_eq!(
        (offsets[&0].offset, offsets[&0].metadata.as_str()),
        (2, "ok")
    );
    assert_eq!(offsets[&1].offset, 5);
    let lag = broker.group_lag("t", "kg").unwrap();
    assert_eq!(
        (lag[1].lag_records, lag[1].lag_ms),
        (0, 0),
        "nothing to read below a commit past the end"
    );
    assert!(matches!(
        broker.commit_group_offsets("nope", "kg", &[]).unwrap_err(),
        BrokerError::TopicNotFound { .. }
    ));
    assert!(broker.commit_group_offsets("t", "bad/name", &[]).is_err());
}

#[tokio::test]
async fn deleting_external_offsets_removes_only_those_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    with_records(&broker, 0, 2).await;
    with_records(&broker, 1, 2).await;
    broker
        .commit_group_offsets("t", "kg", &[commit(0, 1, ""), commit(1, 2, "")])
        .unwrap();
    broker.delete_group_offsets("t", "kg", &[0]).unwrap();
    let offsets = broker.group_offsets("t", "kg").unwrap();
    assert_eq!(offsets.keys().copied().collect::<Vec<_>>(), vec![1]);
    assert!(matches!(
        broker.delete_group_offsets("t", "kg", &[9]).unwrap_err(),
        BrokerError::PartitionNotFound { .. }
    ));
    broker.delete_group_offsets("t", "kg", &[1]).unwrap();
    assert!(broker.group_lag("t", "kg").is_err());
}
