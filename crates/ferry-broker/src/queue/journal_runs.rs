//! Leases and acks of one journal append packed into runs, one record each.
//!
//! A receive leases up to hundreds of messages, mostly neighbours, with one deadline and one
//! consumer, and an `ack_batch` settles as many. Written one record per message, every
//! record repeated the consumer and the deadline and paid a record's framing: most of a
//! subscription's journal bytes, and a good part of its work per delivery. Packed, a
//! receive of consecutive fresh messages is one record of a few dozen bytes.
//!
//! Only neighbouring events of the same kind are packed (leases also need the same
//! deadline and consumer), so a record reads back as the very events that were journaled,
//! in the same order: replay cannot tell a packed journal from an unpacked one. A single
//! event keeps its own record.
//!
//! | tag | record        | fields after the tag                                             |
//! |-----|---------------|------------------------------------------------------------------|
//! | 20  | `Leased` runs | until i64, consumer length u16, consumer (UTF-8), then runs of   |
//! |     |               | (first seq u64, count u32, deliveries u32)                       |
//! | 21  | `Acked` runs  | runs of (from seq u64, to seq u64), half-open                    |

use bytes::{BufMut, Bytes, BytesMut};
use ferry_storage::NewRecord;

use super::journal::{JournalEvent, Reader, VERSION, tag, utf8};
use crate::queue::state::Seq;

/// Events one packed record may stand for. The bound keeps a record well under the
/// storage's record limit and lets a reader refuse a record that claims more, rather
/// than expand it.
pub const MAX_EVENTS_PER_RECORD: usize = 1 << 16;

const LEASE_RUN_BYTES: usize = 16;
const ACK_RUN_BYTES: usize = 16;

/// The records of `events`, in order: neighbouring leases and acks packed, every other
/// event in its own record.
pub fn encode(events: &[JournalEvent], now_ms: i64) -> Vec<NewRecord> {
    let mut records = Vec::new();
    let mut rest = events;
    while let Some(first) = rest.first() {
        let (record, taken) = match first {
            JournalEvent::Leased {
                until_ms, consumer, ..
            } => pack_leases(rest, *until_ms, consumer),
            JournalEvent::Acked { .. } => pack_acks(rest),
            _ => (None, 1),
        };
        records.push(match record {
            Some(value) => NewRecord::new(value).with_timestamp(now_ms),
            None => first.to_record(now_ms),
        });
        rest = &rest[taken..];
    }
    records
}

/// Packs the leases at the head of `events` with this deadline and consumer; returns the
/// record (`None` when only one lease was there) and how many events it took.
fn pack_leases(events: &[JournalEvent], until: i64, consumer: &str) -> (Option<Bytes>, usize) {
    // (first seq, count, deliveries)
    let mut runs: Vec<(Seq, u32, u32)> = Vec::new();
    let mut taken = 0;
    for event in events.iter().take(MAX_EVENTS_PER_RECORD) {
        let JournalEvent::Leased {
            seq,
            deliveries,
            until_ms,
            consumer: other,
        } = event
        else {
            break;
        };
        if *until_ms != until || other != consumer {
            break;
        }
        match runs.last_mut() {
            Some((first, count, d))
                if *d == *deliveries && first.checked_add(u64::from(*count)) == Some(*seq) =>
            {
                *count += 1;
            }
            _ => runs.push((*seq, 1, *deliveries)),
        }
        taken += 1;
    }
    if taken < 2 {
        return (None, 1);
    }
    // Consumer names are at most 256 bytes (`MAX_CONSUMER_NAME_BYTES`).
    let name_len = u16::try_from(consumer.len()).expect("consumer names are short");
    let mut out = BytesMut::with_capacity(14 + consumer.len() + runs.len() * LEASE_RUN_BYTES);
    out.put_u8(VERSION);
    out.put_u8(tag::LEASED_RUNS);
    out.put_i64_le(until);
    out.put_u16_le(name_len);
    out.put_slice(consumer.as_bytes());
    for (first, count, deliveries) in runs {
        out.put_u64_le(first);
        out.put_u32_le(count);
        out.put_u32_le(deliveries);
    }
    (Some(out.freeze()), taken)
}

/// Packs the acks at the head of `events`; returns the record (`None` when only one ack
/// was there) and how many events it took.
fn pack_acks(events: &[JournalEvent]) -> (Option<Bytes>, usize) {
    let mut runs: Vec<(Seq, Seq)> = Vec::new();
    let mut taken = 0;
    for event in events.iter().take(MAX_EVENTS_PER_RECORD) {
        let JournalEvent::Acked { seq } = event else {
            break;
        };
        match runs.last_mut() {
            Some((_, to)) if *to == *seq && *seq < Seq::MAX => *to += 1,
            _ => match seq.checked_add(1) {
                Some(to) => runs.push((*seq, to)),
                // The one seq a half-open run cannot hold ends the packing.
                None => break,
            },
        }
        taken += 1;
    }
    if taken < 2 {
        return (None, 1);
    }
    let mut out = BytesMut::with_capacity(2 + runs.len() * ACK_RUN_BYTES);
    out.put_u8(VERSION);
    out.put_u8(tag::ACKED_RUNS);
    for (from, to) in runs {
        out.put_u64_le(from);
        out.put_u64_le(to);
    }
    (Some(out.freeze()), taken)
}

/// The events of a packed record whose version and tag `r` has already read.
pub fn decode(tag: u8, r: &mut Reader) -> Result<Vec<JournalEvent>, String> {
    let mut events = Vec::new();
    let mut expand = |from: Seq, count: u64, each: &mut dyn FnMut(Seq) -> JournalEvent| {
        if count == 0 {
            return Err(format!("an empty run at seq {from}"));
        }
        if events.len() as u64 + count > MAX_EVENTS_PER_RECORD as u64 {
            return Err(format!(
                "a packed record of more than {MAX_EVENTS_PER_RECORD} events"
            ));
        }
        let last = from
            .checked_add(count - 1)
            .ok_or_else(|| format!("a run past the last seq at {from}"))?;
        events.extend((from..=last).map(&mut *each));
        Ok(())
    };
    match tag {
        tag::LEASED_RUNS => {
            let until_ms = r.u64()? as i64;
            let name_len = u16::from_le_bytes(r.take()?);
            let consumer = utf8(r.bytes(usize::from(name_len))?, "the consumer")?;
            while !r.is_empty() {
                let (first, count, deliveries) = (r.u64()?, r.u32()?, r.u32()?);
                expand(first, u64::from(count), &mut |seq| JournalEvent::Leased {
                    seq,
                    deliveries,
                    until_ms,
                    consumer: consumer.clone(),
                })?;
            }
        }
        tag::ACKED_RUNS => {
            while !r.is_empty() {
                let (from, to) = (r.u64()?, r.u64()?);
                expand(from, to.saturating_sub(from), &mut |seq| {
                    JournalEvent::Acked { seq }
                })?;
            }
        }
        other => return Err(format!("tag {other} is not a packed record")),
    }
    if events.len() < 2 {
        return Err("a packed record of fewer than two events".to_owned());
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leased(seq: Seq, deliveries: u32, until_ms: i64, consumer: &str) -> JournalEvent {
        JournalEvent::Leased {
            seq,
            deliveries,
            until_ms,
            consumer: consumer.to_owned(),
        }
    }

    fn read_back(records: &[NewRecord]) -> Vec<JournalEvent> {
        records
            .iter()
            .flat_map(|r| JournalEvent::decode_all(&r.value).unwrap())
            .collect()
    }

    #[test]
    fn a_receive_of_neighbours_is_one_small_record() {
        let events: Vec<_> = (100..356)
            .map(|s| leased(s, 1, 5_000, "worker-1"))
            .collect();
        let records = encode(&events, 7);
        assert_eq!(records.len(), 1);
        // version, tag, until, name length, name, one run
        assert_eq!(records[0].value.len(), 2 + 8 + 2 + 8 + LEASE_RUN_BYTES);
        assert_eq!(records[0].timestamp, Some(7));
        assert_eq!(read_back(&records), events);
    }

    #[test]
    fn an_ack_batch_is_one_record_of_its_runs() {
        let seqs = [4, 5, 6, 9, 10, 3, 2];
        let events: Vec<_> = seqs
            .iter()
            .map(|&seq| JournalEvent::Acked { seq })
            .collect();
        let records = encode(&events, 0);
        assert_eq!(records.len(), 1);
        // runs 4..7, 9..11, 3..4, 2..3: order kept, not sorted
        assert_eq!(records[0].value.len(), 2 + 4 * ACK_RUN_BYTES);
        assert_eq!(read_back(&records), events);
    }

    #[test]
    fn mixed_events_read_back_in_the_order_they_were_journaled() {
        let events = vec![
            JournalEvent::Acked { seq: 1 },
            leased(2, 1, 10, "a"),
            leased(3, 1, 10, "a"),
            leased(4, 2, 10, "a"),
            leased(5, 2, 11, "a"),
            leased(6, 2, 11, "b"),
            leased(7, 2, 11, "b"),
            JournalEvent::ReturnedUnsent {
                seq: 7,
                deliveries: 1,
                last_consumer: None,
            },
            JournalEvent::Acked { seq: 2 },
            JournalEvent::Acked { seq: 3 },
            leased(u64::MAX - 1, 1, 10, "a"),
            leased(u64::MAX, 1, 10, "a"),
            JournalEvent::Acked { seq: u64::MAX - 1 },
            JournalEvent::Acked { seq: u64::MAX },
        ];
        let records = encode(&events, 0);
        // ack 1 alone; leases 2-4 (until 10, a); lease 5 alone; leases 6-7 (b);
        // returned; acks 2-3; leases at the top; ack MAX-1 alone (MAX cannot end a run);
        // ack MAX alone
        assert_eq!(records.len(), 9);
        assert_eq!(read_back(&records), events);
    }

    #[test]
    fn a_huge_batch_is_cut_into_records_of_the_bound() {
        let events: Vec<_> = (0..MAX_EVENTS_PER_RECORD as u64 + 3)
            .map(|seq| JournalEvent::Acked { seq: seq * 2 })
            .collect();
        let records = encode(&events, 0);
        assert_eq!(records.len(), 2);
        assert_eq!(read_back(&records), events);
    }

    #[test]
    fn malformed_packed_records_are_errors() {
        let record = |tag: u8, body: &[u8]| {
            let mut value = vec![VERSION, tag];
            value.extend_from_slice(body);
            JournalEvent::decode_all(&Bytes::from(value))
        };
        let run = |from: u64, to: u64| [from.to_le_bytes(), to.to_le_bytes()].concat();
        assert!(record(tag::ACKED_RUNS, &run(5, 5)).is_err(), "an empty run");
        assert!(record(tag::ACKED_RUNS, &run(5, 6)).is_err(), "one event");
        assert!(
            record(tag::ACKED_RUNS, &run(0, u64::MAX)).is_err(),
            "more events than the bound"
        );
        let two_runs = [run(5, 7), run(9, 11)].concat();
        assert!(
            record(tag::ACKED_RUNS, &two_runs[..20]).is_err(),
            "cut short"
        );
        assert_eq!(record(tag::ACKED_RUNS, &two_runs).unwrap().len(), 4);
        assert_eq!(record(tag::ACKED_RUNS, &run(5, 7)).unwrap().len(), 2);
        let mut lease = 0i64.to_le_bytes().to_vec();
        lease.extend_from_slice(&3u16.to_le_bytes());
        lease.extend_from_slice(b"ab");
        assert!(
            record(tag::LEASED_RUNS, &lease).is_err(),
            "the name cut short"
        );
        let mut lease = 0i64.to_le_bytes().to_vec();
        lease.extend_from_slice(&1u16.to_le_bytes());
        lease.push(b'a');
        lease.extend_from_slice(&u64::MAX.to_le_bytes());
        lease.extend_from_slice(&2u32.to_le_bytes());
        lease.extend_from_slice(&1u32.to_le_bytes());
        assert!(
            record(tag::LEASED_RUNS, &lease).is_err(),
            "past the last seq"
        );
        // A packed tag read as a single event is refused, not misread.
        assert!(JournalEvent::decode(&Bytes::from(vec![VERSION, tag::ACKED_RUNS])).is_err());
    }
}
