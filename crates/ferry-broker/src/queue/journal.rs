//! The state journal of one queue: what happened to its messages after publish, one small
//! storage record per event, so a restart can rebuild the delivery state.
//!
//! A record's value is a version byte (1), a tag byte and little-endian fixed-width fields:
//!
//! | tag | event          | fields after the tag                                        |
//! |-----|----------------|-------------------------------------------------------------|
//! | 1   | `Acked`        | seq u64                                                     |
//! | 2   | `Failed`       | seq u64, deliveries u32, retry_at i64, error (rest, UTF-8)  |
//! | 3   | `Leased`       | seq u64, deliveries u32, until i64, consumer (rest, UTF-8)  |
//! | 4   | `DeadLettered` | seq u64, reason u8 (1 max deliveries, 2 rejected, 3 expired, |
//! |     |                | 4 overflow)                                                 |
//! | 5   | `Cancelled`    | seq u64                                                     |
//! | 6   | `Parked`       | key (rest)                                                  |
//! | 7   | `Unparked`     | key (rest)                                                  |
//! | 8   | `Dropped`      | seq u64 (overflow policy `DropHead`)                        |
//! | 9   | `Extended`     | seq u64, until i64 (a lease's new deadline)                 |
//! | 10  | `CheckpointBegin` | low u64, end u64, then eight u64 counters: acked, nacked, |
//! |     |                | dead-lettered, dropped, cancelled, redriven, skipped,       |
//! |     |                | purged (a checkpoint written before `skipped` existed has   |
//! |     |                | six, before `purged` seven)                                  |
//! | 11  | `CheckpointLive` | runs of (from u64, to u64): unsettled, never delivered     |
//! | 12  | `CheckpointDelivered` | (seq u64, deliveries u32, not before i64 or i64::MIN)…|
//! | 13  | `CheckpointParked` | key (rest)                                              |
//! | 14  | `CheckpointEnd` | —                                                          |
//! | 15  | `Redriven`     | seq u64 (moved out of a dead-letter queue)                  |
//! | 16  | `CheckpointFailures` | seq u64, first failure i64, last failure i64 (i64::MIN |
//! |     |                | for none), error (u16 length, u16::MAX for none, then the   |
//! |     |                | bytes), last consumer (rest; a leading 0 for none, 1 before |
//! |     |                | the name)                                                   |
//! | 17  | `Skipped`      | seq u64 (a subscription's reference whose topic record the |
//! |     |                | topic's retention deleted before it was settled)           |
//! | 18  | `ReturnedUnsent` | seq u64, deliveries u32 (the count it is back to), last   |
//! |     |                | consumer (rest; a leading 0 for none, 1 before the name)    |
//! | 19  | `Purged`       | seq u64 (deleted by a purge of the queue)                   |
//! | 20  | `Leased` runs  | several leases in one record: see [`super::journal_runs`]   |
//! | 21  | `Acked` runs   | several acks in one record: see [`super::journal_runs`]     |
//!
//! A failed attempt's time is its record's timestamp.
//!
//! **Checkpoints** let the journal forget its past: `CheckpointBegin` … `CheckpointEnd`,
//! written in one append under the queue's lock, state everything the events before them
//! said. Seqs below `low` are settled; a seq in `[low, end)` is unsettled exactly when a
//! `CheckpointLive` run covers it; `CheckpointDelivered` and `CheckpointFailures` give the
//! deliveries, not-before times and failure records of those delivered before; seqs from
//! `end` on are described by the events that follow, as without a checkpoint. Replay starts over at each
//! complete checkpoint (an unfinished one, cut by a crash, is ignored), so the segments
//! wholly before the last one can be deleted.
//!
//! Binary rather than text (unlike message headers): the journal is written on every
//! receive and ack, and nobody reads it by hand. Decoding is strict: an unknown version or
//! tag is an error, never skipped — it would mean a newer writer whose events matter. (So a
//! journal with packed records, tags 20 and 21, does not open with a build older than them.)

use bytes::{BufMut, Bytes, BytesMut};
use ferry_storage::NewRecord;

use crate::queue::state::{DeadLetterReason, FailureRecord, RestorePoint, Seq};

pub(super) const VERSION: u8 = 1;

/// The byte after the version that says which event a record holds. Stored on disk: a
/// value never changes meaning, and a new event takes a new one.
pub(super) mod tag {
    pub const ACKED: u8 = 1;
    pub const FAILED: u8 = 2;
    pub const LEASED: u8 = 3;
    pub const DEAD_LETTERED: u8 = 4;
    pub const CANCELLED: u8 = 5;
    pub const PARKED: u8 = 6;
    pub const UNPARKED: u8 = 7;
    pub const DROPPED: u8 = 8;
    pub const EXTENDED: u8 = 9;
    pub const CHECKPOINT_BEGIN: u8 = 10;
    pub const CHECKPOINT_LIVE: u8 = 11;
    pub const CHECKPOINT_DELIVERED: u8 = 12;
    pub const CHECKPOINT_PARKED: u8 = 13;
    pub const CHECKPOINT_END: u8 = 14;
    pub const REDRIVEN: u8 = 15;
    pub const CHECKPOINT_FAILURES: u8 = 16;
    pub const SKIPPED: u8 = 17;
    pub const RETURNED_UNSENT: u8 = 18;
    pub const PURGED: u8 = 19;
    pub const LEASED_RUNS: u8 = 20;
    pub const ACKED_RUNS: u8 = 21;
}

/// A `DeadLettered` event's reason byte; stored on disk like the tags.
mod reason {
    pub const MAX_DELIVERIES: u8 = 1;
    pub const REJECTED: u8 = 2;
    pub const EXPIRED: u8 = 3;
    pub const OVERFLOW: u8 = 4;
}

/// In a `CheckpointFailures` event, the byte before the last consumer: whether one follows.
const NO_CONSUMER: u8 = 0;
const CONSUMER_FOLLOWS: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalEvent {
    Acked {
        seq: Seq,
    },
    Failed {
        seq: Seq,
        deliveries: u32,
        retry_at_ms: i64,
        error: Option<String>,
    },
    Leased {
        seq: Seq,
        deliveries: u32,
        until_ms: i64,
        consumer: String,
    },
    DeadLettered {
        seq: Seq,
        reason: DeadLetterReason,
    },
    Cancelled {
        seq: Seq,
    },
    Parked {
        key: Bytes,
    },
    Unparked {
        key: Bytes,
    },
    /// Discarded to make room under the overflow policy `DropHead`.
    Dropped {
        seq: Seq,
    },
    /// A running lease's deadline moved ([`crate::Broker::extend`]).
    Extended {
        seq: Seq,
        until_ms: i64,
    },
    /// Opens a checkpoint; see the module docs.
    CheckpointBegin {
        low: Seq,
        end: Seq,
        counts: Counts,
    },
    /// Unsettled, never-delivered seqs of the checkpoint, as half-open runs.
    CheckpointLive {
        runs: Vec<(Seq, Seq)>,
    },
    /// Unsettled seqs of the checkpoint that were delivered before.
    CheckpointDelivered {
        points: Vec<RestorePoint>,
    },
    CheckpointParked {
        key: Bytes,
    },
    CheckpointEnd,
    /// Moved out of this dead-letter queue by a redrive.
    Redriven {
        seq: Seq,
    },
    /// What a checkpoint's delivered seq has for its dead letter.
    CheckpointFailures {
        seq: Seq,
        record: FailureRecord,
    },
    /// A subscription's reference taken out because its topic's retention, set to override
    /// subscriptions, deletes the record it stands for.
    Skipped {
        seq: Seq,
    },
    /// A lease undone because its delivery never left the broker's side
    /// ([`crate::Broker::return_unsent`]): ready again with `deliveries`, and the consumer
    /// its dead letter would name back to `last_consumer`.
    ReturnedUnsent {
        seq: Seq,
        deliveries: u32,
        last_consumer: Option<String>,
    },
    /// Deleted by a purge of the queue ([`crate::Broker::purge_queue`]), whatever state it
    /// was in.
    Purged {
        seq: Seq,
    },
}

/// A queue's event counters since it was created, carried by checkpoints so they survive
/// the events they count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub acked: u64,
    /// Failed attempts (nacks and lease expiries) followed by a retry.
    pub nacked: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    pub cancelled: u64,
    pub redriven: u64,
    pub skipped: u64,
    pub purged: u64,
}

impl Counts {
    /// Counts one event (checkpoint parts count nothing).
    pub fn count(&mut self, event: &JournalEvent) {
        match event {
            JournalEvent::Acked { .. } => self.acked += 1,
            JournalEvent::Failed { .. } => self.nacked += 1,
            JournalEvent::DeadLettered { .. } => self.dead_lettered += 1,
            JournalEvent::Dropped { .. } => self.dropped += 1,
            JournalEvent::Cancelled { .. } => self.cancelled += 1,
            JournalEvent::Redriven { .. } => self.redriven += 1,
            JournalEvent::Skipped { .. } => self.skipped += 1,
            JournalEvent::Purged { .. } => self.purged += 1,
            _ => {}
        }
    }
}

impl JournalEvent {
    /// The seq this event settles — takes out of the queue for good — if any.
    pub fn settles(&self) -> Option<Seq> {
        match self {
            JournalEvent::Acked { seq }
            | JournalEvent::DeadLettered { seq, .. }
            | JournalEvent::Cancelled { seq }
            | JournalEvent::Dropped { seq }
            | JournalEvent::Redriven { seq }
            | JournalEvent::Skipped { seq }
            | JournalEvent::Purged { seq } => Some(*seq),
            _ => None,
        }
    }

    pub fn to_record(&self, now_ms: i64) -> NewRecord {
        let mut out = BytesMut::with_capacity(32);
        out.put_u8(VERSION);
        match self {
            JournalEvent::Acked { seq } => {
                out.put_u8(tag::ACKED);
                out.put_u64_le(*seq);
            }
            JournalEvent::Failed {
                seq,
                deliveries,
                retry_at_ms,
                error,
            } => {
                out.put_u8(tag::FAILED);
                out.put_u64_le(*seq);
                out.put_u32_le(*deliveries);
                out.put_i64_le(*retry_at_ms);
                if let Some(error) = error {
                    out.put_slice(error.as_bytes());
                }
            }
            JournalEvent::Leased {
                seq,
                deliveries,
                until_ms,
                consumer,
            } => {
                out.put_u8(tag::LEASED);
                out.put_u64_le(*seq);
                out.put_u32_le(*deliveries);
                out.put_i64_le(*until_ms);
                out.put_slice(consumer.as_bytes());
            }
            JournalEvent::DeadLettered { seq, reason } => {
                out.put_u8(tag::DEAD_LETTERED);
                out.put_u64_le(*seq);
                out.put_u8(match reason {
                    DeadLetterReason::MaxDeliveries => reason::MAX_DELIVERIES,
                    DeadLetterReason::Rejected => reason::REJECTED,
                    DeadLetterReason::Expired => reason::EXPIRED,
                    DeadLetterReason::Overflow => reason::OVERFLOW,
                });
            }
            JournalEvent::Cancelled { seq } => {
                out.put_u8(tag::CANCELLED);
                out.put_u64_le(*seq);
            }
            JournalEvent::Parked { key } => {
                out.put_u8(tag::PARKED);
                out.put_slice(key);
            }
            JournalEvent::Unparked { key } => {
                out.put_u8(tag::UNPARKED);
                out.put_slice(key);
            }
            JournalEvent::Dropped { seq } => {
                out.put_u8(tag::DROPPED);
                out.put_u64_le(*seq);
            }
            JournalEvent::Extended { seq, until_ms } => {
                out.put_u8(tag::EXTENDED);
                out.put_u64_le(*seq);
                out.put_i64_le(*until_ms);
            }
            JournalEvent::CheckpointBegin { low, end, counts } => {
                out.put_u8(tag::CHECKPOINT_BEGIN);
                out.put_u64_le(*low);
                out.put_u64_le(*end);
                for count in [
                    counts.acked,
                    counts.nacked,
                    counts.dead_lettered,
                    counts.dropped,
                    counts.cancelled,
                    counts.redriven,
                    counts.skipped,
                    counts.purged,
                ] {
                    out.put_u64_le(count);
                }
            }
            JournalEvent::CheckpointLive { runs } => {
                out.put_u8(tag::CHECKPOINT_LIVE);
                for (from, to) in runs {
                    out.put_u64_le(*from);
                    out.put_u64_le(*to);
                }
            }
            JournalEvent::CheckpointDelivered { points } => {
                out.put_u8(tag::CHECKPOINT_DELIVERED);
                for point in points {
                    out.put_u64_le(point.seq);
                    out.put_u32_le(point.deliveries);
                    out.put_i64_le(point.not_before_ms.unwrap_or(i64::MIN));
                }
            }
            JournalEvent::CheckpointParked { key } => {
                out.put_u8(tag::CHECKPOINT_PARKED);
                out.put_slice(key);
            }
            JournalEvent::CheckpointEnd => out.put_u8(tag::CHECKPOINT_END),
            JournalEvent::Skipped { seq } => {
                out.put_u8(tag::SKIPPED);
                out.put_u64_le(*seq);
            }
            JournalEvent::Redriven { seq } => {
                out.put_u8(tag::REDRIVEN);
                out.put_u64_le(*seq);
            }
            JournalEvent::Purged { seq } => {
                out.put_u8(tag::PURGED);
                out.put_u64_le(*seq);
            }
            JournalEvent::ReturnedUnsent {
                seq,
                deliveries,
                last_consumer,
            } => {
                out.put_u8(tag::RETURNED_UNSENT);
                out.put_u64_le(*seq);
                out.put_u32_le(*deliveries);
                put_consumer(&mut out, last_consumer.as_deref());
            }
            JournalEvent::CheckpointFailures { seq, record } => {
                out.put_u8(tag::CHECKPOINT_FAILURES);
                out.put_u64_le(*seq);
                out.put_i64_le(record.first_failure_ms.unwrap_or(i64::MIN));
                out.put_i64_le(record.last_failure_ms.unwrap_or(i64::MIN));
                match &record.last_error {
                    Some(error) => {
                        // Errors are cut to MAX_ERROR_LEN (1 KiB) when recorded.
                        let len = error.len().min(usize::from(u16::MAX - 1));
                        out.put_u16_le(len as u16);
                        out.put_slice(&error.as_bytes()[..len]);
                    }
                    None => out.put_u16_le(u16::MAX),
                }
                put_consumer(&mut out, record.last_consumer.as_deref());
            }
        }
        NewRecord::new(out.freeze()).with_timestamp(now_ms)
    }

    /// The records of `events`, in order, neighbouring leases and acks packed together
    /// ([`super::journal_runs`]).
    pub fn encode_all(events: &[JournalEvent], now_ms: i64) -> Vec<NewRecord> {
        super::journal_runs::encode(events, now_ms)
    }

    /// The events in a record value: one, or several for a packed record. The error is a
    /// description of the problem.
    pub fn decode_all(value: &Bytes) -> Result<Vec<JournalEvent>, String> {
        match value.get(..2) {
            Some(&[VERSION, tag @ (tag::LEASED_RUNS | tag::ACKED_RUNS)]) => {
                let mut r = Reader(value.slice(2..));
                super::journal_runs::decode(tag, &mut r)
            }
            _ => Ok(vec![JournalEvent::decode(value)?]),
        }
    }

    /// The event in a record value holding one; the error is a description of the problem.
    pub fn decode(value: &Bytes) -> Result<JournalEvent, String> {
        let mut r = Reader(value.clone());
        let version = r.u8()?;
        if version != VERSION {
            return Err(format!("unknown journal version {version}"));
        }
        let tag = r.u8()?;
        let event = match tag {
            tag::ACKED => JournalEvent::Acked { seq: r.u64()? },
            tag::FAILED => {
                let seq = r.u64()?;
                let deliveries = r.u32()?;
                let retry_at_ms = r.u64()? as i64;
                let rest = r.rest();
                let error = if rest.is_empty() {
                    None
                } else {
                    Some(
                        String::from_utf8(rest.to_vec())
                            .map_err(|_| "the error text is not UTF-8".to_owned())?,
                    )
                };
                JournalEvent::Failed {
                    seq,
                    deliveries,
                    retry_at_ms,
                    error,
                }
            }
            tag::LEASED => JournalEvent::Leased {
                seq: r.u64()?,
                deliveries: r.u32()?,
                until_ms: r.u64()? as i64,
                consumer: utf8(r.rest(), "the consumer")?,
            },
            tag::DEAD_LETTERED => {
                let seq = r.u64()?;
                let reason = match r.u8()? {
                    reason::MAX_DELIVERIES => DeadLetterReason::MaxDeliveries,
                    reason::REJECTED => DeadLetterReason::Rejected,
                    reason::EXPIRED => DeadLetterReason::Expired,
                    reason::OVERFLOW => DeadLetterReason::Overflow,
                    other => return Err(format!("unknown dead-letter reason {other}")),
                };
                JournalEvent::DeadLettered { seq, reason }
            }
            tag::CANCELLED => JournalEvent::Cancelled { seq: r.u64()? },
            tag::PARKED => JournalEvent::Parked { key: r.rest() },
            tag::UNPARKED => JournalEvent::Unparked { key: r.rest() },
            tag::DROPPED => JournalEvent::Dropped { seq: r.u64()? },
            tag::EXTENDED => JournalEvent::Extended {
                seq: r.u64()?,
                until_ms: r.u64()? as i64,
            },
            tag::CHECKPOINT_BEGIN => JournalEvent::CheckpointBegin {
                low: r.u64()?,
                end: r.u64()?,
                counts: Counts {
                    acked: r.u64()?,
                    nacked: r.u64()?,
                    dead_lettered: r.u64()?,
                    dropped: r.u64()?,
                    cancelled: r.u64()?,
                    redriven: r.u64()?,
                    skipped: if r.0.is_empty() { 0 } else { r.u64()? },
                    purged: if r.0.is_empty() { 0 } else { r.u64()? },
                },
            },
            tag::CHECKPOINT_LIVE => {
                let mut runs = Vec::with_capacity(r.0.len() / 16);
                while !r.0.is_empty() {
                    let (from, to) = (r.u64()?, r.u64()?);
                    if from >= to {
                        return Err(format!("an empty live run {from}..{to}"));
                    }
                    runs.push((from, to));
                }
                JournalEvent::CheckpointLive { runs }
            }
            tag::CHECKPOINT_DELIVERED => {
                let mut points = Vec::with_capacity(r.0.len() / 20);
                while !r.0.is_empty() {
                    let seq = r.u64()?;
                    let deliveries = r.u32()?;
                    let not_before = r.u64()? as i64;
                    points.push(RestorePoint {
                        seq,
                        deliveries,
                        not_before_ms: (not_before != i64::MIN).then_some(not_before),
                    });
                }
                JournalEvent::CheckpointDelivered { points }
            }
            tag::CHECKPOINT_PARKED => JournalEvent::CheckpointParked { key: r.rest() },
            tag::CHECKPOINT_END => JournalEvent::CheckpointEnd,
            tag::REDRIVEN => JournalEvent::Redriven { seq: r.u64()? },
            tag::PURGED => JournalEvent::Purged { seq: r.u64()? },
            tag::CHECKPOINT_FAILURES => {
                let seq = r.u64()?;
                let time = |t: u64| (t as i64 != i64::MIN).then_some(t as i64);
                let first_failure_ms = time(r.u64()?);
                let last_failure_ms = time(r.u64()?);
                let last_error = match u16::from_le_bytes(r.take()?) {
                    u16::MAX => None,
                    len => Some(utf8(r.bytes(usize::from(len))?, "the error text")?),
                };
                let last_consumer = consumer(&mut r)?;
                JournalEvent::CheckpointFailures {
                    seq,
                    record: FailureRecord {
                        first_failure_ms,
                        last_failure_ms,
                        last_error,
                        last_consumer,
                    },
                }
            }
            tag::SKIPPED => JournalEvent::Skipped { seq: r.u64()? },
            tag::RETURNED_UNSENT => JournalEvent::ReturnedUnsent {
                seq: r.u64()?,
                deliveries: r.u32()?,
                last_consumer: consumer(&mut r)?,
            },
            tag::LEASED_RUNS | tag::ACKED_RUNS => {
                return Err(format!(
                    "tag {tag} holds several events (`decode_all` reads it)"
                ));
            }
            other => return Err(format!("unknown event tag {other}")),
        };
        if !r.0.is_empty() {
            return Err(format!("{} trailing bytes", r.0.len()));
        }
        Ok(event)
    }
}

/// An optional consumer name as the rest of a record: a leading byte says whether one
/// follows.
fn put_consumer(out: &mut BytesMut, consumer: Option<&str>) {
    match consumer {
        Some(consumer) => {
            out.put_u8(CONSUMER_FOLLOWS);
            out.put_slice(consumer.as_bytes());
        }
        None => out.put_u8(NO_CONSUMER),
    }
}

fn consumer(r: &mut Reader) -> Result<Option<String>, String> {
    match r.u8()? {
        NO_CONSUMER if r.0.is_empty() => Ok(None),
        CONSUMER_FOLLOWS => Ok(Some(utf8(r.rest(), "the consumer")?)),
        _ => Err("a malformed consumer".to_owned()),
    }
}

pub(super) fn utf8(bytes: Bytes, what: &str) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
}

pub(super) struct Reader(Bytes);

impl Reader {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(super) fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        if self.0.len() < N {
            return Err("the record is truncated".to_owned());
        }
        let bytes = self.0.split_to(N);
        Ok(bytes[..].try_into().expect("split N bytes"))
    }
    pub(super) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take::<1>()?[0])
    }
    pub(super) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub(super) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    pub(super) fn rest(&mut self) -> Bytes {
        std::mem::take(&mut self.0)
    }
    pub(super) fn bytes(&mut self, n: usize) -> Result<Bytes, String> {
        if self.0.len() < n {
            return Err("the record is truncated".to_owned());
        }
        Ok(self.0.split_to(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_tags_keep_the_bytes_written_before_they_had_names() {
        let bytes = |event: JournalEvent| event.to_record(0).value.to_vec();
        assert_eq!(bytes(JournalEvent::Acked { seq: 1 })[..2], [VERSION, 1]);
        assert_eq!(
            bytes(JournalEvent::DeadLettered {
                seq: 1,
                reason: DeadLetterReason::Overflow,
            })[..2],
            [VERSION, 4]
        );
        assert_eq!(
            bytes(JournalEvent::DeadLettered {
                seq: 1,
                reason: DeadLetterReason::Overflow,
            })[10],
            4
        );
        assert_eq!(bytes(JournalEvent::CheckpointEnd), [VERSION, 14]);
        assert_eq!(bytes(JournalEvent::Redriven { seq: 1 })[1], 15);
        assert_eq!(bytes(JournalEvent::Skipped { seq: 1 })[1], 17);
        assert_eq!(bytes(JournalEvent::Purged { seq: 1 })[1], 19);
        let returned = bytes(JournalEvent::ReturnedUnsent {
            seq: 1,
            deliveries: 2,
            last_consumer: None,
        });
        assert_eq!(returned[1], 18);
        assert_eq!(returned[10..], [2, 0, 0, 0, 0]);
        let failures = JournalEvent::CheckpointFailures {
            seq: 1,
            record: FailureRecord {
                last_consumer: Some("c".to_owned()),
                ..FailureRecord::default()
            },
        };
        let value = bytes(failures);
        assert_eq!(value[1], 16);
        assert_eq!(value[value.len() - 2..], [1, b'c']);
    }

    #[test]
    fn every_event_round_trips() {
        let events = [
            JournalEvent::Acked { seq: 7 },
            JournalEvent::Failed {
                seq: u64::MAX,
                deliveries: 3,
                retry_at_ms: -5,
                error: Some("boom é".into()),
            },
            JournalEvent::Failed {
                seq: 1,
                deliveries: 1,
                retry_at_ms: 10,
                error: None,
            },
            JournalEvent::Leased {
                seq: 2,
                deliveries: 9,
                until_ms: 1_700_000_000_000,
                consumer: "worker-é".into(),
            },
            JournalEvent::Leased {
                seq: 2,
                deliveries: 1,
                until_ms: 1,
                consumer: String::new(),
            },
            JournalEvent::DeadLettered {
                seq: 3,
                reason: DeadLetterReason::Expired,
            },
            JournalEvent::Cancelled { seq: 4 },
            JournalEvent::DeadLettered {
                seq: 5,
                reason: DeadLetterReason::Overflow,
            },
            JournalEvent::Dropped { seq: 6 },
            JournalEvent::Extended {
                seq: 7,
                until_ms: 1_700_000_000_001,
            },
            JournalEvent::Parked {
                key: Bytes::from_static(b"k"),
            },
            JournalEvent::Unparked { key: Bytes::new() },
            JournalEvent::CheckpointBegin {
                low: 3,
                end: 9,
                counts: Counts {
                    acked: 1,
                    nacked: 2,
                    dead_lettered: 3,
                    dropped: 4,
                    cancelled: 5,
                    redriven: 6,
                    skipped: 7,
                    purged: 8,
                },
            },
            JournalEvent::Skipped { seq: 8 },
            JournalEvent::Purged { seq: 9 },
            JournalEvent::CheckpointLive {
                runs: vec![(3, 4), (6, 9)],
            },
            JournalEvent::CheckpointLive { runs: vec![] },
            JournalEvent::CheckpointDelivered {
                points: vec![
                    RestorePoint {
                        seq: 4,
                        deliveries: 2,
                        not_before_ms: Some(-1),
                    },
                    RestorePoint {
                        seq: 5,
                        deliveries: 1,
                        not_before_ms: None,
                    },
                ],
            },
            JournalEvent::CheckpointParked {
                key: Bytes::from_static(b"p"),
            },
            JournalEvent::CheckpointEnd,
            JournalEvent::Redriven { seq: 8 },
            JournalEvent::CheckpointFailures {
                seq: 9,
                record: FailureRecord {
                    first_failure_ms: Some(1),
                    last_failure_ms: Some(2),
                    last_error: Some("boom".into()),
                    last_consumer: Some("c".into()),
                },
            },
            JournalEvent::CheckpointFailures {
                seq: 9,
                record: FailureRecord {
                    last_consumer: Some(String::new()),
                    ..FailureRecord::default()
                },
            },
            JournalEvent::CheckpointFailures {
                seq: 9,
                record: FailureRecord::default(),
            },
            JournalEvent::ReturnedUnsent {
                seq: 10,
                deliveries: 0,
                last_consumer: None,
            },
            JournalEvent::ReturnedUnsent {
                seq: 11,
                deliveries: 2,
                last_consumer: Some("worker-é".into()),
            },
        ];
        for event in events {
            let record = event.to_record(1);
            assert_eq!(JournalEvent::decode(&record.value).unwrap(), event);
        }
    }

    #[test]
    fn unknown_versions_tags_and_truncation_are_errors() {
        for bad in [
            &[2u8, 1][..],
            &[1, 99],
            &[1, 1, 0, 0],
            &[1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            // A live run whose end is not after its start.
            &[1, 11, 5, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0],
            // A delivered entry cut short.
            &[1, 12, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
            &[1, 14, 0],
            // A returned lease without its consumer byte, and with bytes after "none".
            &[1, 18, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
            &[1, 18, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'x'],
            // Failures whose error runs past the record.
            &[
                1, 16, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0, 128,
                5, 0, b'x', 0,
            ],
        ] {
            assert!(
                JournalEvent::decode(&Bytes::copy_from_slice(bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_checkpoint_begin_with_six_counters_reads_as_none_skipped() {
        let mut value = vec![1u8, 10];
        for field in [3u64, 9, 1, 2, 3, 4, 5, 6] {
            value.extend_from_slice(&field.to_le_bytes());
        }
        let event = JournalEvent::decode(&Bytes::from(value.clone())).unwrap();
        let JournalEvent::CheckpointBegin { counts, .. } = event else {
            panic!("{event:?}");
        };
        assert_eq!((counts.redriven, counts.skipped), (6, 0));
        // Neither a partial seventh counter nor a ninth.
        value.push(0);
        assert!(JournalEvent::decode(&Bytes::from(value.clone())).is_err());
        value.extend_from_slice(&[0; 23]);
        assert!(JournalEvent::decode(&Bytes::from(value)).is_err());
    }

    #[test]
    fn a_checkpoint_begin_with_seven_counters_reads_as_none_purged() {
        let mut value = vec![1u8, 10];
        for field in [3u64, 9, 1, 2, 3, 4, 5, 6, 7] {
            value.extend_from_slice(&field.to_le_bytes());
        }
        let event = JournalEvent::decode(&Bytes::from(value)).unwrap();
        let JournalEvent::CheckpointBegin { counts, .. } = event else {
            panic!("{event:?}");
        };
        assert_eq!((counts.skipped, counts.purged), (7, 0));
    }
}
