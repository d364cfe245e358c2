//! Messages, deliveries, records, positions, filters and descriptions.

use ferry_broker::{
    DeadLetterInfo, DeadLetterReason, GroupInfo, Membership, MessageId, OutgoingMessage,
    PartitionInfo, PeekedMessage, Position, QueueInfo, ReceivedMessage, RedriveFilter,
    SkippedRange, SubscriptionInfo, TopicInfo, TopicRecord,
};
use ferry_proto::v1;

use super::{
    ConvertError, ms, queue_spec_to_proto, subscription_spec_to_proto, topic_spec_to_proto,
};

pub fn outgoing(m: v1::OutgoingMessage) -> Result<OutgoingMessage, ConvertError> {
    let mut out = OutgoingMessage::new(m.payload);
    out.key = m.key;
    out.headers = m.headers;
    out.priority = u8::try_from(m.priority).map_err(|_| ConvertError::OutOfRange {
        field: "priority",
        value: m.priority.to_string(),
    })?;
    match m.delivery {
        None => {}
        Some(v1::outgoing_message::Delivery::DeliverAfterMs(after)) => {
            out = out.with_delay(ms(after));
        }
        Some(v1::outgoing_message::Delivery::DeliverAtMs(at)) => out = out.with_deliver_at(at),
    }
    out.ttl = m.ttl_ms.map(ms);
    out.dedup_id = m.dedup_id;
    if let Some(id) = m.id {
        out.id = Some(MessageId::parse(&id)?);
    }
    Ok(out)
}

fn dead_letter(d: DeadLetterInfo) -> v1::DeadLetterInfo {
    v1::DeadLetterInfo {
        reason: d.reason,
        deliveries: d.deliveries,
        origin_queue: d.origin_queue,
        origin_seq: d.origin_seq,
        origin_published_at_ms: d.origin_published_at,
        last_error: d.last_error,
        first_failure_at_ms: d.first_failure_ms,
        last_failure_at_ms: d.last_failure_ms,
        consumer: d.consumer,
    }
}

pub fn delivery(m: ReceivedMessage) -> v1::Delivery {
    v1::Delivery {
        id: m.id.to_string(),
        seq: m.seq,
        token: m.token.0,
        delivery: m.delivery,
        lease_until_ms: m.lease_until_ms,
        payload: m.payload,
        key: m.key,
        headers: m.headers.into_iter().collect(),
        priority: u32::from(m.priority),
        published_at_ms: m.published_at,
        dead_letter: m.dead_letter.map(dead_letter),
    }
}

/// A peeked message as a delivery without a lease: token 0, delivery 0.
pub fn peeked(p: PeekedMessage) -> v1::Delivery {
    let m = p.message;
    v1::Delivery {
        id: m.id.to_string(),
        seq: p.seq,
        token: 0,
        delivery: 0,
        lease_until_ms: 0,
        payload: m.payload,
        key: m.key,
        headers: m.headers.into_iter().collect(),
        priority: u32::from(m.priority),
        published_at_ms: m.published_at,
        dead_letter: m.dead_letter.map(dead_letter),
    }
}

pub fn record(r: TopicRecord) -> v1::TopicRecord {
    v1::TopicRecord {
        partition: r.partition,
        offset: r.offset,
        id: r.message.id.to_string(),
        key: r.message.key,
        headers: r.message.headers.into_iter().collect(),
        payload: r.message.payload,
        published_at_ms: r.message.published_at,
    }
}

pub fn position(p: Option<v1::Position>) -> Result<Position, ConvertError> {
    use v1::position::At;
    match p.and_then(|p| p.at) {
        None => Err(ConvertError::Missing {
            field: "position",
            why: "say earliest, latest, an offset or a timestamp",
        }),
        Some(At::Earliest(_)) => Ok(Position::Earliest),
        Some(At::Latest(_)) => Ok(Position::Latest),
        Some(At::Offset(o)) => Ok(Position::Offset(o)),
        Some(At::TimestampMs(t)) => Ok(Position::Timestamp(t)),
    }
}

pub fn dead_letter_filter(f: Option<v1::DeadLetterFilter>) -> Result<RedriveFilter, ConvertError> {
    let Some(f) = f else {
        return Ok(RedriveFilter::default());
    };
    let reason = f
        .reason
        .map(|r| {
            DeadLetterReason::parse(&r).ok_or(ConvertError::OutOfRange {
                field: "filter.reason",
                value: format!("{r:?} (max_deliveries, rejected, expired or overflow)"),
            })
        })
        .transpose()?;
    let header = match (f.header_name, f.header_value) {
        (Some(n), Some(v)) => Some((n, v)),
        (None, None) => None,
        _ => {
            return Err(ConvertError::Missing {
                field: "filter.header_name / filter.header_value",
                why: "a header filter needs both",
            });
        }
    };
    Ok(RedriveFilter {
        reason,
        header,
        older_than: f.older_than_ms.map(ms),
        newer_than: f.newer_than_ms.map(ms),
        ..RedriveFilter::default()
    })
}

pub fn queue_info(q: QueueInfo) -> v1::QueueInfo {
    let s = q.stats;
    v1::QueueInfo {
        name: q.name.to_string(),
        spec: Some(queue_spec_to_proto(&q.spec)),
        stats: Some(v1::QueueStats {
            ready: s.state.ready as u64,
            in_flight: s.state.in_flight as u64,
            delayed: s.state.delayed as u64,
            parked: s.state.parked_messages as u64,
            bytes: s.state.bytes,
            oldest_ready_age_ms: s.state.oldest_ready_age_ms.map(|a| a.max(0) as u64),
            published: s.next_seq,
            acked: s.acked,
            nacked: s.nacked,
            dead_lettered: s.dead_lettered,
            dropped: s.dropped,
            cancelled: s.cancelled,
            redriven: s.redriven,
            skipped: s.skipped,
        }),
    }
}

fn partition_info(p: PartitionInfo) -> v1::PartitionInfo {
    v1::PartitionInfo {
        partition: p.partition,
        start_offset: p.start_offset,
        end_offset: p.end_offset,
        bytes: p.bytes,
        oldest_published_at_ms: p.oldest_timestamp_ms,
    }
}

pub fn topic_info(t: TopicInfo) -> v1::TopicInfo {
    v1::TopicInfo {
        name: t.name.to_string(),
        spec: Some(topic_spec_to_proto(&t.spec)),
        partitions: t.partitions.into_iter().map(partition_info).collect(),
    }
}

fn skipped_range(r: SkippedRange) -> v1::SkippedRange {
    v1::SkippedRange {
        partition: r.partition,
        from_offset: r.from,
        to_offset: r.to,
        dropped: r.dropped,
        unread: r.unread,
    }
}

pub fn subscription_info(s: SubscriptionInfo) -> v1::SubscriptionInfo {
    v1::SubscriptionInfo {
        spec: Some(subscription_spec_to_proto(&s.spec)),
        queue: Some(queue_info(s.queue)),
        not_yet_considered: s.not_yet_considered,
        skipped: s.skipped.into_iter().map(skipped_range).collect(),
    }
}

pub fn group_info(g: GroupInfo) -> v1::GroupInfo {
    v1::GroupInfo {
        topic: g.topic.to_string(),
        group: g.group.to_string(),
        generation: g.generation,
        members: g
            .members
            .into_iter()
            .map(|(member_id, partitions)| v1::GroupMember {
                member_id,
                partitions,
            })
            .collect(),
        partitions: g
            .partitions
            .into_iter()
            .map(|p| v1::GroupPartition {
                partition: p.partition,
                owner: p.owner,
                committed: p.committed,
                end_offset: p.end_offset,
                lag_records: p.lag_records,
                lag_ms: p.lag_ms,
                skipped: p.skipped,
            })
            .collect(),
    }
}

pub fn membership(m: Membership) -> v1::Membership {
    v1::Membership {
        member_id: m.member_id,
        generation: m.generation,
        partitions: m.partitions.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outgoing_message_keeps_every_field() {
        let m = outgoing(v1::OutgoingMessage {
            payload: "p".into(),
            key: Some("k".into()),
            headers: [("subject".to_owned(), "a.b".to_owned())].into(),
            priority: 2,
            delivery: Some(v1::outgoing_message::Delivery::DeliverAfterMs(1500)),
            ttl_ms: Some(60_000),
            dedup_id: Some("d".into()),
            id: Some("01ARZ3NDEKTSV4RRFFQ69G5FAV".into()),
        })
        .unwrap();
        let expected = OutgoingMessage::new("p")
            .with_key("k")
            .with_header("subject", "a.b")
            .with_priority(2)
            .with_delay(std::time::Duration::from_millis(1500))
            .with_ttl(std::time::Duration::from_secs(60))
            .with_dedup_id("d")
            .with_id(MessageId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap());
        assert_eq!(m, expected);
    }

    #[test]
    fn bad_messages_and_filters_are_refused() {
        let too_high = v1::OutgoingMessage {
            priority: 256,
            ..Default::default()
        };
        assert!(matches!(
            outgoing(too_high),
            Err(ConvertError::OutOfRange { .. })
        ));
        let bad_id = v1::OutgoingMessage {
            id: Some("not-a-ulid".into()),
            ..Default::default()
        };
        assert!(matches!(outgoing(bad_id), Err(ConvertError::Broker(_))));
        let half_header = v1::DeadLetterFilter {
            header_name: Some("n".into()),
            ..Default::default()
        };
        assert!(dead_letter_filter(Some(half_header)).is_err());
        let bad_reason = v1::DeadLetterFilter {
            reason: Some("bored".into()),
            ..Default::default()
        };
        assert!(dead_letter_filter(Some(bad_reason)).is_err());
        assert!(position(None).is_err());
    }
}
