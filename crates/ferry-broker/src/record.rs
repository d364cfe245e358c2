//! How a [`Message`] is laid out in a storage record, and read back.
//!
//! The record's own fields carry what storage already models: the key, the payload (value)
//! and `published_at` (timestamp, so reads by time and retention by age work unchanged).
//! Everything else the broker needs goes into headers named `ferry-…`, a namespace user
//! headers may not enter, written before the user headers:
//!
//! | header             | value                           | written when     |
//! |--------------------|---------------------------------|------------------|
//! | `ferry-id`         | the ULID, 26 characters         | always           |
//! | `ferry-priority`   | decimal `u8`                    | priority > 0     |
//! | `ferry-deliver-at` | decimal ms since the Unix epoch | delayed          |
//! | `ferry-expires-at` | decimal ms since the Unix epoch | TTL set          |
//! | `ferry-dedup-id`   | the dedup id                    | dedup id set     |
//!
//! Text rather than binary values: a log can be inspected with any tool, and the bytes
//! saved (about ten per message) are small next to the header framing itself. Absent
//! optional fields cost nothing.
//!
//! Reading is strict: an unknown `ferry-` header, a repeated header, a missing id or a value
//! that does not parse is an error naming the record's offset, never silently dropped — an
//! unknown reserved header means a newer writer whose meaning this reader cannot honour.

use bytes::Bytes;
use ferry_storage::{NewRecord, Record};

use crate::error::{BrokerError, Result};
use crate::header;
use crate::message::{Headers, Message};
use crate::message_id::MessageId;

pub const ID: &str = "ferry-id";
pub const PRIORITY: &str = "ferry-priority";
pub const DELIVER_AT: &str = "ferry-deliver-at";
pub const EXPIRES_AT: &str = "ferry-expires-at";
pub const DEDUP_ID: &str = "ferry-dedup-id";

impl Message {
    /// The storage record for this message. Assumes a message that passed publish
    /// validation: a user header in the `ferry-` namespace would not read back.
    pub fn to_record(&self) -> NewRecord {
        let mut headers = Vec::with_capacity(self.headers.len() + 5);
        let mut put = |name: &'static str, value: String| {
            headers.push((Bytes::from_static(name.as_bytes()), Bytes::from(value)));
        };
        put(ID, self.id.to_string());
        if self.priority > 0 {
            put(PRIORITY, self.priority.to_string());
        }
        if let Some(at) = self.deliver_at {
            put(DELIVER_AT, at.to_string());
        }
        if let Some(at) = self.expires_at {
            put(EXPIRES_AT, at.to_string());
        }
        if let Some(dedup_id) = &self.dedup_id {
            put(DEDUP_ID, dedup_id.clone());
        }
        headers.extend(
            self.headers
                .iter()
                .map(|(n, v)| (Bytes::from(n.clone()), Bytes::from(v.clone()))),
        );
        NewRecord {
            timestamp: Some(self.published_at),
            key: self.key.clone(),
            headers,
            value: self.payload.clone(),
        }
    }

    /// The message stored in `record`. Key and payload share the record's buffers.
    pub fn from_record(record: Record) -> Result<Message> {
        let offset = record.offset;
        let bad = |problem: String| BrokerError::MalformedRecord { offset, problem };
        let mut id = None;
        let mut priority = None;
        let mut deliver_at = None;
        let mut expires_at = None;
        let mut dedup_id = None;
        let mut headers = Headers::new();
        for (name, value) in record.headers {
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| bad("a header name is not UTF-8".into()))?;
            let value = String::from_utf8(value.to_vec())
                .map_err(|_| bad(format!("the value of header {name:?} is not UTF-8")))?;
            let repeated = || bad(format!("header {name:?} appears more than once"));
            let unparsable = || {
                bad(format!(
                    "header {name:?} has the unreadable value {value:?}"
                ))
            };
            if !header::is_reserved(&name) {
                if headers.contains_key(&name) {
                    return Err(repeated());
                }
                headers.insert(name, value);
                continue;
            }
            let slot_was_empty = match name.as_str() {
                ID => id
                    .replace(MessageId::parse(&value).map_err(|_| unparsable())?)
                    .is_none(),
                PRIORITY => priority
                    .replace(value.parse::<u8>().map_err(|_| unparsable())?)
                    .is_none(),
                DELIVER_AT => deliver_at
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                EXPIRES_AT => expires_at
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                DEDUP_ID => dedup_id.replace(value.clone()).is_none(),
                _ => {
                    return Err(bad(format!(
                        "unknown broker header {name:?}; it was probably written by a newer \
                         Ferry — upgrade this one to read it"
                    )));
                }
            };
            if !slot_was_empty {
                return Err(repeated());
            }
        }
        Ok(Message {
            id: id.ok_or_else(|| bad(format!("the {ID} header is missing")))?,
            key: record.key,
            headers,
            payload: record.value,
            published_at: record.timestamp,
            priority: priority.unwrap_or(0),
            deliver_at,
            expires_at,
            dedup_id,
        })
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
