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

/// Idle streams kept, over all queues; a stream given back beyond them is closed. Each one
/// holds a task and stream state on the server, and counts against any limit of
/// concurrent streams per connection on the way (Ferry's server allows 1,024 by default,
/// a proxy may allow fewer: nginx's gRPC proxy takes 128), which calls and consume streams
/// share — a call over such a limit waits for a stream to end. So few are kept, whatever
/// the queues.
const IDLE: usize = 32;

#[derive(Default)]
pub(super) struct PublishStreams {
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    by_queue: HashMap<String, Vec<PublishStream>>,
    count: usize,
}

impl PublishStreams {
    /// An idle stream to `queue`, or a new one (opened with its first batch).
    pub(super) fn take(&self, client: &Client, queue: &str) -> PublishStream {
        let mut idle = self.lock();
        let stream = idle.by_queue.get_mut(queue).and_then(Vec::pop);
        if stream.is_some() {
            idle.count -= 1;
        }
        if idle.by_queue.get(queue).is_some_and(Vec::is_empty) {
            idle.by_queue.remove(queue);
        }
        drop(idle);
        stream.unwrap_or_else(|| client.publish_stream(queue))
    }

    /// Gives back a stream after its batch was answered, for the next publish to its queue.
    pub(super) fn give_back(&self, stream: PublishStream) {
        let mut idle = self.lock();
        if idle.count >= IDLE {
            return;
        }
        idle.count += 1;
        idle.by_queue
            .entry(stream.queue().to_owned())
            .or_default()
            .push(stream);
    }

    /// Closes the idle streams to `queue` (it was deleted).
    pub(super) fn forget(&self, queue: &str) {
        let mut idle = self.lock();
        if let Some(streams) = idle.by_queue.remove(queue) {
            idle.count -= streams.len();
        }
    }

    /// Closes every idle stream (the transport is closing).
    pub(super) fn clear(&self) {
        *self.lock() = Idle::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // A panic while holding the lock leaves at worst a stream too few or too many.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
