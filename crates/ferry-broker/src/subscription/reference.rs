//! The reference record: what a subscription (or an attached queue) stores per message
//! instead of the message — enough to schedule and account for it without reading the
//! topic, and where in the topic the rest is.
//!
//! **Binary form (written now).** The record's timestamp is the message's `published_at`
//! and its key the message's key (storage models both already); its only header is
//! [`REF`] with an empty value, which marks the form explicitly (a producer cannot write a
//! `ferry-` header), and its value is:
//!
//! | bytes     | field                                                              |
//! |-----------|--------------------------------------------------------------------|
//! | 1         | form version, [`VERSION`]                                          |
//! | 1         | flags: which optional fields follow, and whether the id was chosen |
//! | 16        | the message id (ULID, big-endian)                                  |
//! | varint ×4 | partition, offset, size, link                                      |
//! | 1         | priority, when > 0                                                 |
//! | varint    | deliver-at (ms, zig-zag), when delayed                             |
//! | varint    | expires-at (ms, zig-zag), when it has a TTL                        |
//! | varint, n | dedup id length and bytes, when set                                |
//!
//! About 60 bytes plus the key, against about 130 for the text form, which repeated the
//! message's header layout with decimal and ULID text. Dead-letter fields have no place in
//! it: topic records never carry them.
//!
//! **Text form (read only).** Written before the binary form: the message's record (see
//! `record.rs`) without payload or user headers, plus a [`TOPIC_REF`] header
//! `<partition>:<offset>:<size>[:<link>]`. Data dirs written then still hold them.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ferry_storage::{NewRecord, Record};

use crate::error::{BrokerError, Result};
use crate::message::Message;
use crate::message_id::MessageId;

/// The header marking a reference in the binary form.
pub const REF: &str = "ferry-ref";
/// The header of a reference in the text form, naming the topic record it stands for.
pub const TOPIC_REF: &str = "ferry-topic-ref";
/// The binary form's version byte.
pub const VERSION: u8 = 1;

const HAS_PRIORITY: u8 = 1;
const HAS_DELIVER_AT: u8 = 1 << 1;
const HAS_EXPIRES_AT: u8 = 1 << 2;
const HAS_DEDUP_ID: u8 = 1 << 3;
const ID_CHOSEN: u8 = 1 << 4;
const KNOWN_FLAGS: u8 = HAS_PRIORITY | HAS_DELIVER_AT | HAS_EXPIRES_AT | HAS_DEDUP_ID | ID_CHOSEN;

/// Where a referenced message is in its topic, and its size (payload, key and headers) for
/// the subscription's stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopicRef {
    /// The link the reference came through, per queue: 0 for a subscription's own.
    pub link: u32,
    pub partition: u32,
    pub offset: u64,
    pub size: u32,
}

/// The reference record of `message` (read from the topic at `at`), in the binary form.
pub fn ref_record(message: &Message, at: TopicRef) -> NewRecord {
    let mut flags = 0;
    let mut value = BytesMut::with_capacity(
        2 + 16 + 4 * 10 + 1 + 2 * 10 + message.dedup_id.as_ref().map_or(0, |d| 10 + d.len()),
    );
    value.put_u8(VERSION);
    value.put_u8(0); // flags, set below
    value.put_u128(message.id.as_ulid().0);
    for field in [
        u64::from(at.partition),
        at.offset,
        u64::from(at.size),
        u64::from(at.link),
    ] {
        put_varint(&mut value, field);
    }
    if message.priority > 0 {
        flags |= HAS_PRIORITY;
        value.put_u8(message.priority);
    }
    if let Some(at) = message.deliver_at {
        flags |= HAS_DELIVER_AT;
        put_varint(&mut value, zigzag(at));
    }
    if let Some(at) = message.expires_at {
        flags |= HAS_EXPIRES_AT;
        put_varint(&mut value, zigzag(at));
    }
    if let Some(dedup_id) = &message.dedup_id {
        flags |= HAS_DEDUP_ID;
        put_varint(&mut value, dedup_id.len() as u64);
        value.put_slice(dedup_id.as_bytes());
    }
    if message.id_chosen {
        flags |= ID_CHOSEN;
    }
    value[1] = flags;
    NewRecord {
        timestamp: Some(message.published_at),
        key: message.key.clone(),
        headers: vec![(Bytes::from_static(REF.as_bytes()), Bytes::new())],
        value: value.freeze(),
    }
}

/// The message a queue's record stands for and, when it is a reference (in either form),
/// where in the topic it is; a reference's message has no payload or user headers.
pub fn decode_record(mut record: Record) -> Result<(Message, Option<TopicRef>)> {
    if record
        .headers
        .first()
        .is_some_and(|(name, _)| name == REF.as_bytes())
    {
        let (message, at) = decode_binary(record)?;
        return Ok((message, Some(at)));
    }
    let at = split_ref(&mut record)?;
    Ok((Message::from_record(record)?, at))
}

fn decode_binary(record: Record) -> Result<(Message, TopicRef)> {
    let offset = record.offset;
    let bad = |problem: &str| BrokerError::MalformedRecord {
        offset,
        problem: format!("reference record: {problem}"),
    };
    if record.headers.len() != 1 || !record.headers[0].1.is_empty() {
        return Err(bad("a binary reference has one header, empty"));
    }
    let mut value = record.value;
    if value.remaining() < 2 + 16 {
        return Err(bad("too short"));
    }
    let version = value.get_u8();
    if version != VERSION {
        return Err(bad(&format!("unknown version {version}")));
    }
    let flags = value.get_u8();
    if flags & !KNOWN_FLAGS != 0 {
        return Err(bad(&format!("unknown flags {flags:#04x}")));
    }
    let id = MessageId::from_ulid(ulid::Ulid(value.get_u128()));
    let mut varint = |what: &str| get_varint(&mut value).ok_or_else(|| bad(what));
    let partition = u32::try_from(varint("partition")?).map_err(|_| bad("partition"))?;
    let topic_offset = varint("offset")?;
    let size = u32::try_from(varint("size")?).map_err(|_| bad("size"))?;
    let link = u32::try_from(varint("link")?).map_err(|_| bad("link"))?;
    let priority = if flags & HAS_PRIORITY != 0 {
        if !value.has_remaining() {
            return Err(bad("priority"));
        }
        match value.get_u8() {
            0 => return Err(bad("priority 0 is written as absent")),
            p => p,
        }
    } else {
        0
    };
    let mut time = |flag: u8, what: &str| -> Result<Option<i64>> {
        if flags & flag == 0 {
            return Ok(None);
        }
        get_varint(&mut value)
            .map(|v| Some(unzigzag(v)))
            .ok_or_else(|| bad(what))
    };
    let deliver_at = time(HAS_DELIVER_AT, "deliver-at")?;
    let expires_at = time(HAS_EXPIRES_AT, "expires-at")?;
    let dedup_id = if flags & HAS_DEDUP_ID != 0 {
        let len = get_varint(&mut value).ok_or_else(|| bad("dedup id length"))?;
        let len = usize::try_from(len).map_err(|_| bad("dedup id length"))?;
        if value.remaining() < len {
            return Err(bad("dedup id"));
        }
        let bytes = value.split_to(len);
        Some(String::from_utf8(bytes.to_vec()).map_err(|_| bad("dedup id is not UTF-8"))?)
    } else {
        None
    };
    if value.has_remaining() {
        return Err(bad("trailing bytes"));
    }
    let message = Message {
        id,
        key: record.key,
        headers: Default::default(),
        payload: Bytes::new(),
        published_at: record.timestamp,
        priority,
        deliver_at,
        expires_at,
        dedup_id,
        id_chosen: flags & ID_CHOSEN != 0,
        dead_letter: None,
    };
    let at = TopicRef {
        link,
        partition,
        offset: topic_offset,
        size,
    };
    Ok((message, at))
}

/// The reference record of `message` in the text form, as written before the binary form
/// existed: for tests that open data dirs holding them.
#[cfg(test)]
pub fn text_ref_record(message: &Message, at: TopicRef) -> NewRecord {
    let slim = Message {
        headers: Default::default(),
        payload: Bytes::new(),
        ..message.clone()
    };
    let mut record = slim.to_record();
    let value = match at.link {
        0 => format!("{}:{}:{}", at.partition, at.offset, at.size),
        link => format!("{}:{}:{}:{link}", at.partition, at.offset, at.size),
    };
    record.headers.insert(
        0,
        (Bytes::from_static(TOPIC_REF.as_bytes()), Bytes::from(value)),
    );
    record
}

/// Takes the text form's [`TOPIC_REF`] header out of `record`, if it has one.
fn split_ref(record: &mut Record) -> Result<Option<TopicRef>> {
    let Some(i) = record
        .headers
        .iter()
        .position(|(name, _)| name == TOPIC_REF.as_bytes())
    else {
        return Ok(None);
    };
    let (_, value) = record.headers.remove(i);
    let bad = || BrokerError::MalformedRecord {
        offset: record.offset,
        problem: format!("header {TOPIC_REF:?} is not <partition>:<offset>:<size>[:<link>]"),
    };
    let text = std::str::from_utf8(&value).map_err(|_| bad())?;
    let mut parts = text.split(':');
    let mut next = || parts.next().ok_or_else(bad);
    let partition = next()?.parse().map_err(|_| bad())?;
    let offset = next()?.parse().map_err(|_| bad())?;
    let size = next()?.parse().map_err(|_| bad())?;
    let link = match parts.next() {
        Some(id) => id.parse().ok().filter(|id| *id > 0).ok_or_else(bad)?,
        None => 0,
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(Some(TopicRef {
        link,
        partition,
        offset,
        size,
    }))
}

fn put_varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// A LEB128 `u64`; `None` when cut short or longer than a `u64`.
fn get_varint(buf: &mut Bytes) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        if !buf.has_remaining() {
            return None;
        }
        let byte = buf.get_u8();
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;
