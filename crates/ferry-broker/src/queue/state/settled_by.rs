//! Who settled the messages that left the queue after more than one lease: the memory that
//! lets a late ack from an earlier delivery fail instead of answering "already settled".
//!
//! Without it, an ack of a message no longer tracked can only be answered as idempotent
//! (`AlreadySettled`), and that is wrong when the message was delivered again after the
//! first lease ended and the later delivery acked it (or it was dead-lettered): two
//! consumers would each be told their ack took. Only messages that had a second delivery,
//! or that left without an ack after being delivered, can meet such a late ack, so only
//! those are remembered — the common path (one delivery, one ack) records nothing.
//!
//! Bounded: the oldest records are forgotten first once [`CAPACITY`] are held. A late ack
//! arrives within a lease or two of its message's settlement, long before thousands of other
//! redelivered messages of the same queue have settled after it.

use std::collections::{HashMap, VecDeque};

use super::{LeaseToken, Seq};

/// How many settlements a queue remembers, about 40 bytes each.
pub const CAPACITY: usize = 16_384;

/// How a remembered message left the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settler {
    /// Acked with this lease's token.
    Ack(LeaseToken),
    /// Dead-lettered, dropped or moved away while no lease was running or after one ended:
    /// no delivery's ack took.
    NoAck,
}

/// What a queue remembers of recent settlements; see the [module docs](self).
#[derive(Debug, Default)]
pub struct SettledBy {
    by_seq: HashMap<Seq, Settler>,
    order: VecDeque<Seq>,
}

impl SettledBy {
    pub fn record(&mut self, seq: Seq, settler: Settler) {
        if self.by_seq.insert(seq, settler).is_none() {
            self.order.push_back(seq);
        }
        while self.order.len() > CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.by_seq.remove(&oldest);
            }
        }
    }

    /// Whether an ack with `token` of a message no longer tracked repeats the ack that
    /// settled it (or, for a message not remembered, may do so).
    pub fn is_repeat(&self, seq: Seq, token: LeaseToken) -> bool {
        match self.by_seq.get(&seq) {
            None => true,
            Some(Settler::Ack(by)) => *by == token,
            Some(Settler::NoAck) => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_seq.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_the_settling_token_or_an_unknown_message() {
        let mut settled = SettledBy::default();
        settled.record(1, Settler::Ack(LeaseToken(7)));
        settled.record(2, Settler::NoAck);
        assert!(settled.is_repeat(1, LeaseToken(7)));
        assert!(
            !settled.is_repeat(1, LeaseToken(6)),
            "an earlier delivery's token"
        );
        assert!(
            !settled.is_repeat(2, LeaseToken(5)),
            "dead-lettered: no ack took"
        );
        assert!(settled.is_repeat(3, LeaseToken(1)), "not remembered");
    }

    #[test]
    fn the_oldest_records_go_first_past_the_capacity() {
        let mut settled = SettledBy::default();
        for seq in 0..(CAPACITY as u64 + 10) {
            settled.record(seq, Settler::NoAck);
        }
        assert_eq!(settled.len(), CAPACITY);
        assert!(settled.is_repeat(9, LeaseToken(1)), "forgotten");
        assert!(!settled.is_repeat(10, LeaseToken(1)), "still held");
        assert!(!settled.is_repeat(CAPACITY as u64 + 9, LeaseToken(1)));
    }
}
