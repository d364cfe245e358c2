//! [`Requester`]: requests over a private reply queue (a temporary queue where the
//! transport has them), replies routed by correlation id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::{BLOCKING_LIMIT, header};
use crate::capability::Feature;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::ferry::Ferry;
use crate::message::{Message, Received, header::CORRELATION_ID, new_id, now_ms};
use crate::spec::{DeliveryPolicy, Destination, QueueDecl, Source};
use crate::temporary::TemporaryQueueDecl;
use crate::transport::ConsumerOptions;

/// How often the reply listener looks for a stop while no reply comes.
const LISTEN_POLL: Duration = Duration::from_millis(100);

/// Sends requests and waits for their replies. Every request of one requester shares its
/// reply queue (declared by [`open`](Self::open), deleted by [`close`](Self::close)); one
/// listener task routes each reply to the request with its correlation id. A reply that
/// comes after its request gave up is acked and dropped — counted in
/// [`late_replies`](Self::late_replies), never handed to another request.
///
/// Where the transport has temporary queues ([`Feature::TemporaryQueues`]: the embedded
/// broker, a Ferry server, RabbitMQ) the reply queue is one, so a requester that ends
/// without `close` (a crash) leaves nothing behind: the transport deletes the queue with
/// the process's connection, or after its idle timeout. Elsewhere it is a queue named
/// after the prefix given to `open`, which a crash leaves behind to be swept by that name.
pub struct Requester {
    ferry: Ferry,
    reply_queue: String,
    /// Whether the reply queue is a temporary queue (the transport may delete it first).
    temporary: bool,
    shared: Arc<Shared>,
    stop: Arc<Notify>,
    listener: Mutex<Option<JoinHandle<()>>>,
    /// Whether requests get a TTL (the transport has message TTLs).
    ttl: bool,
    warned: AtomicBool,
    closed: AtomicBool,
}

#[derive(Default)]
struct Shared {
    /// Requests waiting, by correlation id.
    pending: Mutex<HashMap<String, oneshot::Sender<Received>>>,
    late: AtomicU64,
    /// The listener has ended (stopped, or its consumer closed): no reply will be routed.
    /// Set and read under the `pending` lock.
    deaf: AtomicBool,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Received>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `reply` to its request, or counts it as late.
    fn route(&self, reply: Received) {
        let waiting = reply
            .header(CORRELATION_ID)
            .and_then(|id| self.pending().remove(id));
        let delivered = match waiting {
            Some(request) => request.send(reply).map_err(|reply| reply.id),
            None => Err(reply.id),
        };
        if let Err(id) = delivered {
            self.late.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("ferry_request_reply_late_replies_total").increment(1);
            tracing::debug!(%id, "request/reply: a reply with no request waiting was dropped");
        }
    }
}

/// Removes a request from the pending map however `request` ends (timeout, error, or the
/// caller dropping the future), so a late reply finds nothing to go to.
struct PendingGuard<'a> {
    shared: &'a Shared,
    correlation: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.pending().remove(&self.correlation);
    }
}

impl Requester {
    /// Declares the reply queue and starts listening on it: a temporary queue where the
    /// transport has them (named by the transport; `prefix` names nothing then, as there
    /// is nothing to sweep), else `<prefix>-<ulid>` with one delivery and no dead letters
    /// (a reply nobody takes is worthless).
    pub async fn open(ferry: &Ferry, prefix: &str) -> Result<Requester> {
        let temporary = ferry.capabilities().supports(Feature::TemporaryQueues);
        let (reply_queue, listener_name) = if temporary {
            let queue = ferry
                .declare_temporary_queue(&TemporaryQueueDecl::default())
                .await?;
            // Only the owner may consume a temporary queue.
            (queue.name, queue.owner)
        } else {
            let reply_queue = format!("{prefix}-{}", new_id().to_ascii_lowercase());
            let decl = QueueDecl::new(&reply_queue).delivery(DeliveryPolicy {
                max_deliveries: 1,
                dead_letter: false,
                ..DeliveryPolicy::default()
            });
            ferry.declare_queue(&decl).await?;
            let listener_name = format!("{reply_queue}-listener");
            (reply_queue, listener_name)
        };
        let options = ConsumerOptions {
            name: listener_name,
            poll: LISTEN_POLL,
            ..ConsumerOptions::default()
        };
        let consumer = match ferry.consumer(Source::queue(&reply_queue), options).await {
            Ok(consumer) => consumer,
            Err(e) => {
                let _ = ferry.delete(&Source::queue(&reply_queue)).await;
                return Err(e);
            }
        };
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(Notify::new());
        let listener = tokio::spawn(listen(consumer, shared.clone(), stop.clone()));
        Ok(Requester {
            ttl: ferry.capabilities().supports(Feature::Ttl),
            ferry: ferry.clone(),
            reply_queue,
            temporary,
            shared,
            stop,
            listener: Mutex::new(Some(listener)),
            warned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        })
    }

    /// This requester's reply queue.
    pub fn reply_queue(&self) -> &str {
        &self.reply_queue
    }

    /// Replies dropped because no request was waiting for them (it had timed out).
    pub fn late_replies(&self) -> u64 {
        self.shared.late.load(Ordering::Relaxed)
    }

    /// Publishes `message` to `queue` as a request and waits up to `timeout` for its reply;
    /// [`Error::Timeout`] when none came in time. The requester sets the `correlation-id`
    /// header (a fresh id per request, replacing any value), [`header::REPLY_TO`] and
    /// [`header::DEADLINE`], and a TTL of at most `timeout` where the transport has TTLs.
    pub async fn request(
        &self,
        queue: &str,
        mut message: Message,
        timeout: Duration,
    ) -> Result<Received> {
        if timeout.is_zero() {
            return Err(Error::invalid(
                "request timeout",
                "must be longer than zero",
            ));
        }
        if timeout > BLOCKING_LIMIT && !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                ?timeout,
                limit = ?BLOCKING_LIMIT,
                reply_queue = %self.reply_queue,
                "request/reply: blocking on a queue for longer than the limit; a caller \
                 waiting this long is better served by a direct call"
            );
        }
        let started = tokio::time::Instant::now();
        let correlation = new_id();
        // Saturating: `as i64` would wrap a huge timeout to a deadline already past, and
        // every responder would skip the request as expired.
        let deadline_ms =
            now_ms().saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
        let headers = &mut message.headers;
        headers.insert(CORRELATION_ID.into(), correlation.clone());
        headers.insert(header::REPLY_TO.into(), self.reply_queue.clone());
        headers.insert(header::DEADLINE.into(), deadline_ms.to_string());
        if self.ttl {
            message.ttl = Some(message.ttl.map_or(timeout, |ttl| ttl.min(timeout)));
        }

        let (sender, reply) = oneshot::channel();
        {
            // Checked under the lock `close` clears the map with: a request registered
            // after that clearing would find no listener and wait out its whole timeout
            // instead of failing with `Closed`.
            let mut pending = self.shared.pending();
            if self.closed.load(Ordering::Acquire) || self.shared.deaf.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            pending.insert(correlation.clone(), sender);
        }
        let _guard = PendingGuard {
            shared: &self.shared,
            correlation,
        };
        self.ferry
            .publisher(Destination::queue(queue))
            .send(message)
            .await?;
        let give_up = started
            .checked_add(timeout)
            .unwrap_or(started + Duration::from_secs(86_400 * 365));
        match tokio::time::timeout_at(give_up, reply).await {
            Ok(Ok(reply)) => Ok(reply),
            // The listener ended: the requester was closed.
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout)),
        }
    }

    /// Stops listening and deletes the reply queue; requests still waiting fail with
    /// [`Error::Closed`]. Idempotent.
    pub async fn close(&self) -> Result<()> {
        {
            let _pending = self.shared.pending();
            if self.closed.swap(true, Ordering::AcqRel) {
                return Ok(());
            }
        }
        self.stop.notify_one();
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(listener) = listener {
            let _ = listener.await;
        }
        self.shared.pending().clear();
        match self.ferry.delete(&Source::queue(&self.reply_queue)).await {
            // A Ferry server deletes a temporary queue itself once the listener's stream
            // ends, which may be before this delete arrives.
            Err(Error::NotFound { .. }) if self.temporary => Ok(()),
            other => other,
        }
    }
}

impl Drop for Requester {
    fn drop(&mut self) {
        // Without `close` a named reply queue stays (a temporary one goes with the
        // listener's connection or its idle timeout); at least stop the listener.
        self.stop.notify_one();
    }
}

/// Routes replies until stopped. Fetch errors are logged and retried: the requests waiting
/// time out on their own if the engine stays away.
async fn listen(mut consumer: Consumer, shared: Arc<Shared>, stop: Arc<Notify>) {
    loop {
        let next = tokio::select! {
            biased;
            _ = stop.notified() => break,
            next = consumer.next_within(LISTEN_POLL) => next,
        };
        match next {
            Ok(Some(delivery)) => {
                let reply = delivery.message().clone();
                if let Err(e) = delivery.ack().await {
                    tracing::warn!(error = %e, "request/reply: acking a reply failed");
                }
                shared.route(reply);
            }
            Ok(None) => {}
            Err(Error::Closed) => break,
            Err(e) => {
                tracing::warn!(error = %e, "request/reply: fetching replies failed; retrying");
                tokio::time::sleep(LISTEN_POLL).await;
            }
        }
    }
    {
        // Requests waiting now (or sent later) would otherwise wait out their timeouts for
        // replies nobody routes; dropping their senders fails them with `Closed` at once.
        let mut pending = shared.pending();
        shared.deaf.store(true, Ordering::Release);
        pending.clear();
    }
    if let Err(e) = consumer.close().await {
        tracing::debug!(error = %e, "request/reply: closing the reply consumer failed");
    }
}
