//! Building a message to publish.

use std::time::Duration;

use bytes::Bytes;
use ferry_proto::v1;

/// A message to publish; build with [`Message::new`] and the `with_` methods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message(pub(crate) v1::OutgoingMessage);

impl Message {
    pub fn new(payload: impl Into<Bytes>) -> Message {
        Message(v1::OutgoingMessage {
            payload: payload.into(),
            ..Default::default()
        })
    }
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.0.key = Some(key.into());
        self
    }
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.0.headers.insert(name.into(), value.into());
        self
    }
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.0.priority = u32::from(priority);
        self
    }
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.0.delivery = Some(v1::outgoing_message::Delivery::DeliverAfterMs(
            delay.as_millis() as u64,
        ));
        self
    }
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.0.ttl_ms = Some(ttl.as_millis() as u64);
        self
    }
    pub fn with_dedup_id(mut self, id: impl Into<String>) -> Self {
        self.0.dedup_id = Some(id.into());
        self
    }
    /// The message's id (a ULID); the producer sets one when none is given, so that a
    /// retried publish is recognised as the same message.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.0.id = Some(id.into());
        self
    }
    pub fn id(&self) -> Option<&str> {
        self.0.id.as_deref()
    }
    pub fn into_proto(self) -> v1::OutgoingMessage {
        self.0
    }
}

/// Mints ULIDs — a publish call's batch id — from one reading of the wall clock, each with
/// its own random part. Ids minted in the same millisecond carry no order among themselves
/// (publish order is the queue's), so one reading per batch loses nothing.
pub(crate) struct IdMinter {
    ms: u64,
}

impl IdMinter {
    pub(crate) fn now() -> IdMinter {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        IdMinter { ms }
    }

    /// A new id: this minter's time and 80 random bits.
    pub(crate) fn mint(&mut self) -> String {
        let random = (u128::from(fastrand::u64(..)) << 64 | u128::from(fastrand::u64(..))) >> 48;
        ulid::Ulid::from_parts(self.ms, random).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_are_distinct_ulids_of_the_clock_time() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let mut minter = IdMinter::now();
        let ids: std::collections::BTreeSet<String> = (0..1000).map(|_| minter.mint()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            let ulid = ulid::Ulid::from_string(id).unwrap();
            assert!(ulid.timestamp_ms() >= before && ulid.timestamp_ms() <= before + 60_000);
            assert!(!ulid.is_nil());
        }
    }
}
