//! Publish streams kept open between publishes, per queue.
//!
//! Why: a unary publish call costs an HTTP/2 stream of its own, with headers and trailers
//! both ways and a task, routing and a token check on the server; on an open
//! [`PublishStream`] a batch is one message each way, which at small messages is most of
//! the difference (`docs/benchmarks.md`, "Publish streams"). A stream carries one batch
//! at a time, and publishes to the same queue may run at once, so each publish takes an
//! idle stream of its queue (or opens one) and gives it back when answered.

use std::collections::HashMap;
use std::sync::Mutex;

use ferry_client::{Client, PublishStream};

/// Idle streams kept per queue; a stream given back beyond them is closed. As many as
/// publishes that commonly run at once to one queue, so they rarely open one.
const IDLE_PER_QUEUE: usize = 16;
/// Queues with idle streams kept; a stream to another queue given back beyond them is
/// closed, so that publishing to many short-lived queues does not grow the map.
const QUEUES: usize = 1024;

#[derive(Default)]
pub(super) struct PublishStreams {
    idle: Mutex<HashMap<String, Vec<PublishStream>>>,
}

impl PublishStreams {
    /// An idle stream to `queue`, or a new one (opened with its first batch).
    pub(super) fn take(&self, client: &Client, queue: &str) -> PublishStream {
        let mut idle = self.lock();
        let stream = idle.get_mut(queue).and_then(Vec::pop);
        if idle.get(queue).is_some_and(Vec::is_empty) {
            idle.remove(queue);
        }
        drop(idle);
        stream.unwrap_or_else(|| client.publish_stream(queue))
    }

    /// Gives back a stream after its batch was answered, for the next publish to its queue.
    pub(super) fn give_back(&self, stream: PublishStream) {
        let mut idle = self.lock();
        if idle.len() >= QUEUES && !idle.contains_key(stream.queue()) {
            return;
        }
        let streams = idle.entry(stream.queue().to_owned()).or_default();
        if streams.len() < IDLE_PER_QUEUE {
            streams.push(stream);
        }
    }

    /// Closes the idle streams to `queue` (it was deleted).
    pub(super) fn forget(&self, queue: &str) {
        self.lock().remove(queue);
    }

    /// Closes every idle stream (the transport is closing).
    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<PublishStream>>> {
        // A panic while holding the lock leaves at worst a stream too few or too many.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
