//! How much one read that answers with whole messages — a peek, a topic read, a group
//! poll — may gather: a count and a number of bytes. A count alone does not bound an
//! answer: a thousand messages of 1 MiB are a gigabyte held in memory and then sent.

use crate::message::Message;

/// At most `messages` messages and about `bytes` bytes of them (payload, key and
/// headers, what [`message_bytes`] counts). The first message is always taken, whatever
/// its size, so that a reader paging on from the last one returned always progresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    pub messages: usize,
    pub bytes: usize,
}

impl ReadLimit {
    /// A limit in messages only.
    pub fn messages(messages: usize) -> ReadLimit {
        ReadLimit {
            messages,
            bytes: usize::MAX,
        }
    }
}

/// The bytes of `message` a limit counts: what its reader receives of it beyond a fixed
/// overhead (ids, times and counts are a few dozen bytes whatever the message).
pub fn message_bytes(message: &Message) -> usize {
    let headers: usize = message.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    message.payload.len() + message.key.as_ref().map_or(0, |k| k.len()) + headers
}

/// What a read has gathered so far against its limit.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: ReadLimit,
    messages: usize,
    bytes: usize,
}

impl Budget {
    pub(crate) fn new(limit: ReadLimit) -> Budget {
        Budget {
            limit,
            messages: 0,
            bytes: 0,
        }
    }

    /// Whether nothing more fits, whatever its size.
    pub(crate) fn is_spent(&self) -> bool {
        self.messages >= self.limit.messages || self.bytes >= self.limit.bytes
    }

    /// Whether `message` fits: within the count, and within the bytes unless it is the
    /// first.
    pub(crate) fn fits(&self, message: &Message) -> bool {
        self.messages < self.limit.messages
            && (self.messages == 0
                || self.bytes.saturating_add(message_bytes(message)) <= self.limit.bytes)
    }

    pub(crate) fn take(&mut self, message: &Message) {
        self.messages += 1;
        self.bytes = self.bytes.saturating_add(message_bytes(message));
    }

    /// The messages still allowed by count.
    pub(crate) fn messages_left(&self) -> usize {
        self.limit.messages.saturating_sub(self.messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OutgoingMessage;

    fn message(payload_bytes: usize) -> Message {
        OutgoingMessage::new(vec![0u8; payload_bytes])
            .with_header("k", "vv")
            .into_message(
                &crate::Limits::default(),
                0,
                &mut fastrand::Rng::with_seed(1),
            )
            .unwrap()
    }

    #[test]
    fn the_first_message_fits_whatever_its_size_and_the_rest_within_the_bytes() {
        let mut budget = Budget::new(ReadLimit {
            messages: 10,
            bytes: 100,
        });
        let big = message(500);
        assert_eq!(message_bytes(&big), 503);
        assert!(budget.fits(&big), "the first always fits");
        budget.take(&big);
        assert!(budget.is_spent());
        assert!(!budget.fits(&message(0)));

        let mut budget = Budget::new(ReadLimit {
            messages: 10,
            bytes: 100,
        });
        budget.take(&message(47)); // 50 bytes
        assert!(budget.fits(&message(47)), "exactly at the limit fits");
        assert!(!budget.fits(&message(48)));
    }

    #[test]
    fn the_count_bounds_even_empty_messages() {
        let mut budget = Budget::new(ReadLimit::messages(2));
        let empty = message(0);
        budget.take(&empty);
        assert_eq!(budget.messages_left(), 1);
        assert!(budget.fits(&empty));
        budget.take(&empty);
        assert!(budget.is_spent());
        assert!(!budget.fits(&empty));
    }
}
