//! ReceiveRequestAttemptId on FIFO queues: a ReceiveMessage retried with the attempt id of
//! an earlier one, within 5 minutes, answers that receive's messages again, with the same
//! receipt handles — so a client whose answer was lost (a network error) gets the messages
//! it leased instead of waiting out their visibility timeout while their group is held.
//!
//! As SQS documents, the retry is answered from the earlier receive only while none of its
//! messages was deleted or had its visibility changed and their visibility timeout has not
//! run out; it then resets their visibility timeout. Otherwise it is a new receive, which
//! the attempt id then stands for. (`receive.rs` checks the leases through the broker; this
//! module only remembers.)
//!
//! **Bounded, in memory.** Per queue at most [`MAX_ATTEMPTS`] attempts and [`MAX_BYTES`] of
//! message bodies; the oldest go first, and so does every attempt older than 5 minutes.
//! A receive that leased nothing is not remembered: a retry of it is a new receive, and
//! nothing can be lost by that. A restart forgets every attempt — the leases they name
//! end with the restart anyway (a receipt handle from before a restart is stale).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use ferry_broker::ReceivedMessage;

use crate::errors::SqsError;

/// How long an attempt id can be retried, as in SQS.
pub const RETRY_WINDOW_MS: i64 = 5 * 60 * 1000;
/// Attempts remembered per queue.
pub const MAX_ATTEMPTS: usize = 1000;
/// Message bodies remembered per queue, in bytes: ten messages of the largest size SQS
/// takes (256 KiB), times 25.
pub const MAX_BYTES: usize = 25 * 10 * 256 * 1024;
/// The longest attempt id SQS takes.
const MAX_ID_LEN: usize = 128;

/// An attempt id SQS takes: 1 to 128 characters, letters, digits and ASCII punctuation.
pub fn check_id(id: &str) -> Result<(), SqsError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c.is_ascii_punctuation();
    if id.is_empty() || id.len() > MAX_ID_LEN || !id.chars().all(allowed) {
        return Err(SqsError::invalid(format!(
            "Value {id} for parameter ReceiveRequestAttemptId is invalid. Reason: it must be \
             1 to {MAX_ID_LEN} characters of letters, digits and punctuation \
             (!\"#$%&'()*+,-./:;<=>?@[\\]^_`{{|}}~)."
        )));
    }
    Ok(())
}

/// What a receive with an attempt id leased: its messages as the broker gave them (lease
/// tokens and deadlines included).
#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: String,
    pub at_ms: i64,
    pub messages: Vec<ReceivedMessage>,
}

impl Attempt {
    fn bytes(&self) -> usize {
        self.messages.iter().map(|m| m.payload.len()).sum()
    }
}

/// The attempts of every queue; see the module docs.
#[derive(Debug, Default)]
pub struct ReceiveAttempts {
    queues: Mutex<HashMap<String, Attempts>>,
}

#[derive(Debug, Default)]
struct Attempts {
    /// Oldest first.
    attempts: VecDeque<Attempt>,
    bytes: usize,
}

impl Attempts {
    fn pop_oldest(&mut self) {
        if let Some(old) = self.attempts.pop_front() {
            self.bytes -= old.bytes();
        }
    }

    fn remove(&mut self, id: &str) {
        if let Some(at) = self.attempts.iter().position(|a| a.id == id) {
            let old = self.attempts.remove(at).expect("found above");
            self.bytes -= old.bytes();
        }
    }

    fn forget_expired(&mut self, now_ms: i64) {
        while self
            .attempts
            .front()
            .is_some_and(|a| now_ms - a.at_ms >= RETRY_WINDOW_MS)
        {
            self.pop_oldest();
        }
    }
}

impl ReceiveAttempts {
    /// The receive `id` stands for on `queue`, if it was made in the last 5 minutes.
    pub fn recall(&self, queue: &str, id: &str, now_ms: i64) -> Option<Attempt> {
        let mut queues = self.queues.lock().expect("attempts lock");
        let attempts = queues.get_mut(queue)?;
        attempts.forget_expired(now_ms);
        attempts.attempts.iter().find(|a| a.id == id).cloned()
    }

    /// Remembers what the receive `attempt.id` leased on `queue`, in place of what it stood
    /// for before. An attempt that leased nothing is forgotten instead.
    pub fn remember(&self, queue: &str, attempt: Attempt) {
        let mut queues = self.queues.lock().expect("attempts lock");
        let now_ms = attempt.at_ms;
        // Expired attempts of every queue go, so that queues no longer received from do
        // not keep theirs.
        queues.retain(|_, attempts| {
            attempts.forget_expired(now_ms);
            !attempts.attempts.is_empty()
        });
        let attempts = queues.entry(queue.to_owned()).or_default();
        attempts.remove(&attempt.id);
        if attempt.messages.is_empty() || attempt.bytes() > MAX_BYTES {
            return;
        }
        attempts.bytes += attempt.bytes();
        attempts.attempts.push_back(attempt);
        while attempts.attempts.len() > MAX_ATTEMPTS || attempts.bytes > MAX_BYTES {
            attempts.pop_oldest();
        }
    }

    /// Forgets the receive `id` stood for on `queue`.
    pub fn forget(&self, queue: &str, id: &str) {
        let mut queues = self.queues.lock().expect("attempts lock");
        if let Some(attempts) = queues.get_mut(queue) {
            attempts.remove(id);
        }
    }

    /// Forgets every attempt (the test-only reset).
    pub fn clear(&self) {
        self.queues.lock().expect("attempts lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u64, bytes: usize) -> ReceivedMessage {
        ReceivedMessage {
            id: ferry_broker::MessageId::NIL,
            seq,
            token: ferry_broker::LeaseToken(seq),
            delivery: 1,
            lease_until_ms: 0,
            payload: vec![b'x'; bytes].into(),
            key: None,
            headers: Default::default(),
            priority: 0,
            published_at: 0,
            dead_letter: None,
        }
    }

    fn attempt(id: &str, at_ms: i64, messages: Vec<ReceivedMessage>) -> Attempt {
        Attempt {
            id: id.to_owned(),
            at_ms,
            messages,
        }
    }

    #[test]
    fn attempt_ids_take_letters_digits_and_punctuation_up_to_128() {
        assert!(check_id("a-Z_0.9!~{}").is_ok());
        assert!(check_id(&"x".repeat(128)).is_ok());
        assert!(check_id("").is_err());
        assert!(check_id(&"x".repeat(129)).is_err());
        assert!(check_id("has space").is_err());
        assert!(check_id("é").is_err());
    }

    #[test]
    fn an_attempt_is_recalled_for_five_minutes_on_its_queue_only() {
        let attempts = ReceiveAttempts::default();
        attempts.remember("q", attempt("a", 0, vec![message(1, 3)]));
        assert_eq!(attempts.recall("q", "a", 1).unwrap().messages[0].seq, 1);
        assert!(attempts.recall("other", "a", 1).is_none());
        assert!(attempts.recall("q", "b", 1).is_none());
        assert!(attempts.recall("q", "a", RETRY_WINDOW_MS).is_none());
    }

    #[test]
    fn an_empty_receive_is_not_remembered_and_replaces_the_earlier_one() {
        let attempts = ReceiveAttempts::default();
        attempts.remember("q", attempt("a", 0, vec![message(1, 3)]));
        attempts.remember("q", attempt("a", 1, vec![]));
        assert!(attempts.recall("q", "a", 2).is_none());
    }

    #[test]
    fn the_oldest_attempts_go_past_the_bounds() {
        let attempts = ReceiveAttempts::default();
        for i in 0..=MAX_ATTEMPTS {
            attempts.remember("q", attempt(&i.to_string(), 0, vec![message(1, 1)]));
        }
        assert!(attempts.recall("q", "0", 0).is_none());
        assert!(attempts.recall("q", "1", 0).is_some());
        let big = MAX_BYTES / 2 + 1;
        attempts.remember("q", attempt("big1", 0, vec![message(1, big)]));
        attempts.remember("q", attempt("big2", 0, vec![message(2, big)]));
        assert!(attempts.recall("q", "big1", 0).is_none());
        assert!(attempts.recall("q", "big2", 0).is_some());
    }
}
