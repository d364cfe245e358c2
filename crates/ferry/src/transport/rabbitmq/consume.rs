//! A consumer reads in subscription sessions: a channel of its own with `basic.qos` (the
//! consumer's prefetch) and `basic.consume`, opened by a fetch and kept while the
//! application keeps fetching.
//!
//! RabbitMQ pushes deliveries into a subscription whether or not anyone asks, so a session
//! lasts only while its consumer is at work. With no fetch waiting it ends: once nothing
//! handed out from it is held and nothing was fetched or settled for [`IDLE`]; when a lease
//! of this consumer runs out (before that delivery is requeued, which would otherwise be
//! pushed straight back into this consumer); once what was pushed into it waited a whole
//! lease; and when the consumer closes. A consumer working through what it fetched keeps
//! its session, so that what RabbitMQ pushes meanwhile (within the prefetch) is handed out
//! at its next fetch rather than sent back — each send-back counts as a delivery, and a
//! message sent back by one busy consumer after another would reach its delivery limit
//! unseen. Ending cancels the subscription, sends back to the queue whatever arrived and was
//! not handed out (a nack with requeue), and closes the channel once every delivery handed
//! out from it is settled — acked, nacked, rejected, dead-lettered or requeued by its lease
//! timer — and a second more has passed (`settle::CLOSE_GRACE`: a quorum queue applies acks
//! asynchronously and returns on a channel's close what it has not applied yet). A quorum
//! queue can still deliver to a subscription after its `cancel-ok`; the client drops such a
//! delivery, and it goes back to the queue (counted once more) when the channel closes. The
//! next fetch opens a new session.
//!
//! Deliveries are settled on the channel they came from, so the acks of each session are
//! batched (`super::acks`) on their own.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::acks::{AckBatches, Outstanding};
use super::engine::Inner;
use super::settle::{self, Origin};
use super::topology::Settings;
use crate::error::{Error, Result};
use crate::transport::group_commit::GroupCommit;
use crate::transport::{ConsumerBackend, Incoming};

/// How long a session outlives its consumer's last fetch or settlement once it holds
/// nothing handed out. A consumer fetching in a loop is back within that time, so the
/// session (and what it has prefetched) carries over; a consumer that stopped lets go of
/// what RabbitMQ pushed into it within a tenth of a second, well inside any lease. The
/// consumer's poll period (1 s by default) would leave such messages out of other
/// consumers' reach ten times as long.
const IDLE: Duration = Duration::from_millis(100);
/// How long the end of a session waits for `cancel-ok`; the channel's close settles what
/// a cancel that did not answer leaves.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// How long a fetch that opened a session waits at least, for what RabbitMQ pushes as the
/// subscription starts: on a queue with messages ready that is a round trip.
const FIRST_PUSH: Duration = Duration::from_millis(20);
/// The wait before a fetch opens another session when the last one ended under it at
/// once (the server cancelled the subscription).
const REOPEN: Duration = Duration::from_millis(20);

/// What a session is told besides fetches.
pub(super) enum Control {
    /// One of the consumer's leases ran out: end unless a fetch waits; answers once ended.
    LeaseRanOut(oneshot::Sender<()>),
    /// The consumer closes: end now; answers once ended.
    Close(oneshot::Sender<()>),
}

/// The consumer's open session, if any.
#[derive(Default)]
pub(super) struct Current(Mutex<Option<mpsc::UnboundedSender<Control>>>);

impl Current {
    fn set(&self, control: mpsc::UnboundedSender<Control>) {
        *self.lock() = Some(control);
    }

    /// Forgets `control` if it is still the open session's.
    fn clear(&self, control: &mpsc::UnboundedSender<Control>) {
        let mut current = self.lock();
        if current.as_ref().is_some_and(|c| c.same_channel(control)) {
            *current = None;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<mpsc::UnboundedSender<Control>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the open session that a lease ran out, and waits until it ended if no fetch
    /// was waiting.
    pub async fn lease_ran_out(&self) {
        self.tell(Control::LeaseRanOut).await;
    }

    async fn tell(&self, control: impl FnOnce(oneshot::Sender<()>) -> Control) {
        let Some(session) = self.lock().clone() else {
            return;
        };
        let (done, ended) = oneshot::channel();
        if session.send(control(done)).is_ok() {
            let _ = tokio::time::timeout(CANCEL_WAIT * 2, ended).await;
        }
    }
}

/// What every session of one consumer reads.
pub(super) struct Reader {
    pub inner: Arc<Inner>,
    pub queue: String,
    pub origin: String,
    pub settings: Arc<Settings>,
    pub dead: bool,
    pub consumer: String,
    pub prefetch: usize,
}

pub(super) struct RabbitConsumer {
    reader: Reader,
    current: Arc<Current>,
    /// Where fetches go while a session is open.
    session: Option<mpsc::UnboundedSender<Request>>,
    closed: bool,
}

impl RabbitConsumer {
    pub fn new(reader: Reader) -> RabbitConsumer {
        RabbitConsumer {
            reader,
            current: Arc::default(),
            session: None,
            closed: false,
        }
    }

    /// Opens a session: its channel, `basic.qos` and `basic.consume`.
    async fn open(&mut self, max: usize) -> Result<mpsc::UnboundedSender<Request>> {
        let reader = &self.reader;
        let inner = &reader.inner;
        let channel = inner.channel().await?;
        // One fetch's worth ahead; a fetch asking for more than the consumer's prefetch
        // sets the session's.
        let prefetch = reader.prefetch.max(max).clamp(1, usize::from(u16::MAX));
        let subscribed = async {
            channel
                .basic_qos(prefetch as u16, BasicQosOptions { global: false })
                .await?;
            channel
                .basic_consume(
                    &reader.queue,
                    "",
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
        }
        .await;
        let deliveries = match subscribed {
            Ok(deliveries) => deliveries,
            Err(e) => {
                let _ = channel.close(200, "not subscribed").await;
                return Err(inner.error(e, "queue", &reader.queue));
            }
        };
        let (control, control_in) = mpsc::unbounded_channel();
        let (requests, requests_in) = mpsc::unbounded_channel();
        let origin = Arc::new(Origin {
            inner: inner.clone(),
            channel: Arc::new(channel),
            queue: reader.queue.clone(),
            origin: reader.origin.clone(),
            settings: reader.settings.clone(),
            dead: reader.dead,
            consumer: reader.consumer.clone(),
            outstanding: Outstanding::default(),
            acks: GroupCommit::new(AckBatches),
            current: self.current.clone(),
        });
        self.current.set(control.clone());
        let session = Session {
            tag: deliveries.tag(),
            origin,
            deliveries,
            stream_done: false,
            failed: None,
            buffer: VecDeque::new(),
            requests: requests_in,
            control: control_in,
            me: control,
        };
        tokio::spawn(session.run());
        Ok(requests)
    }
}

#[async_trait::async_trait]
impl ConsumerBackend for RabbitConsumer {
    fn max_deliveries(&self) -> Option<u32> {
        (!self.reader.dead).then_some(self.reader.settings.max_deliveries)
    }

    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        if self.closed || self.reader.inner.is_closed() {
            return Err(Error::Closed);
        }
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut deadline = Instant::now() + wait;
        let mut reopened = false;
        loop {
            let requests = match &self.session {
                Some(requests) if !requests.is_closed() => requests.clone(),
                _ => {
                    if reopened {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Ok(Vec::new());
                        }
                        tokio::time::sleep(left.min(REOPEN)).await;
                    }
                    reopened = true;
                    let requests = self.open(max).await?;
                    self.session = Some(requests.clone());
                    // What is ready arrives a moment after the subscription starts; a fetch
                    // that would not wait at all would find none of it, where a `basic.get`
                    // would have taken it.
                    deadline = deadline.max(Instant::now() + FIRST_PUSH);
                    requests
                }
            };
            let (reply, answer) = oneshot::channel();
            let request = Request {
                max,
                deadline,
                reply,
            };
            if requests.send(request).is_ok()
                && let Ok(answer) = answer.await
            {
                return answer;
            }
            // The session ended meanwhile (idle, or cancelled by the server): another one.
            self.session = None;
            if Instant::now() >= deadline && reopened {
                return Ok(Vec::new());
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        // Deliveries handed out stay settleable; each session's channel closes when the
        // last of them goes.
        self.closed = true;
        self.session = None;
        self.current.tell(Control::Close).await;
        Ok(())
    }
}

/// One fetch: up to `max` deliveries, waiting until `deadline` for the first.
struct Request {
    max: usize,
    deadline: Instant,
    reply: oneshot::Sender<Result<Vec<Incoming>>>,
}

/// A subscription session, run by a task of its own.
struct Session {
    origin: Arc<Origin>,
    deliveries: lapin::Consumer,
    tag: ShortString,
    /// The stream of deliveries ended (the subscription was cancelled, or the channel
    /// failed: `failed`).
    stream_done: bool,
    failed: Option<lapin::Error>,
    /// Received and not yet handed out, in tag order.
    buffer: VecDeque<Delivery>,
    requests: mpsc::UnboundedReceiver<Request>,
    control: mpsc::UnboundedReceiver<Control>,
    /// Its own control sender, to leave `Current` when it ends.
    me: mpsc::UnboundedSender<Control>,
}

impl Session {
    async fn run(mut self) {
        let mut pending: Option<Request> = None;
        let mut idle_since = Instant::now();
        let mut check_at = idle_since + IDLE;
        loop {
            if let Some(request) = pending.take() {
                self.pull_ready();
                if request.reply.is_closed() {
                    // The fetch gave up waiting.
                    idle_since = Instant::now();
                    check_at = idle_since + IDLE;
                } else if !self.buffer.is_empty() || Instant::now() >= request.deadline {
                    // Back when everything received went to the dead-letter queue instead
                    // and the fetch can wait on.
                    pending = self.answer(request).await;
                    idle_since = Instant::now();
                    check_at = idle_since + IDLE;
                } else if self.stream_done {
                    if let Some(e) = self.failed.take() {
                        let e = self.origin.inner.error(e, "queue", &self.origin.queue);
                        let _ = request.reply.send(Err(e));
                    }
                    // Otherwise the fetch sees the session gone and opens another.
                    break;
                } else {
                    pending = Some(request);
                }
            }
            if pending.is_none() && self.stream_done {
                // Cancelled by the server (the queue was deleted) or failed: the next
                // fetch opens another session, or learns why it cannot.
                break;
            }
            let deadline = pending.as_ref().map(|r| r.deadline);
            tokio::select! {
                biased;
                Some(control) = self.control.recv() => match control {
                    Control::Close(done) => {
                        self.end(pending.take()).await;
                        let _ = done.send(());
                        return;
                    }
                    Control::LeaseRanOut(done) => {
                        if pending.is_none() {
                            self.end(None).await;
                            let _ = done.send(());
                            return;
                        }
                        let _ = done.send(());
                    }
                },
                request = self.requests.recv(), if pending.is_none() => match request {
                    Some(request) => pending = Some(request),
                    // The consumer is gone.
                    None => break,
                },
                delivery = self.deliveries.next(), if !self.stream_done => {
                    self.received(delivery);
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or(idle_since)), if deadline.is_some() => {}
                _ = tokio::time::sleep_until(check_at), if pending.is_none() => {
                    match self.idle(idle_since) {
                        Some(next) => check_at = next,
                        None => break,
                    }
                }
            }
        }
        self.end(pending).await;
    }

    /// Whether the session, with no fetch waiting since `idle_since`, is over (`None`), or
    /// else when to ask again. It is over once nothing handed out from it is held and
    /// nothing was fetched or settled for [`IDLE`], or once what RabbitMQ pushed into it
    /// waited a whole lease without a fetch. A consumer still working through what it
    /// fetched keeps its session: it fetches again when done, and what came meanwhile
    /// (within its prefetch) is handed out then; ending the session would send that back
    /// to the queue, each time counted as a delivery.
    fn idle(&self, idle_since: Instant) -> Option<Instant> {
        let now = Instant::now();
        if !self.buffer.is_empty() && now >= idle_since + self.origin.settings.lease() {
            return None;
        }
        let (in_hand, last_settled) = {
            let tags = self.origin.outstanding.lock();
            (
                tags.held.len().saturating_sub(self.buffer.len()),
                tags.last_settled.map(Instant::from_std),
            )
        };
        let active = last_settled.map_or(idle_since, |at| at.max(idle_since));
        if in_hand > 0 {
            Some(now + IDLE)
        } else if now >= active + IDLE {
            None
        } else {
            Some(active + IDLE)
        }
    }

    /// Takes one item of the stream of deliveries.
    fn received(&mut self, item: Option<lapin::Result<Delivery>>) {
        match item {
            Some(Ok(delivery)) => {
                // Outstanding from now on: a `multiple` ack stops below it.
                self.origin.outstanding.received(delivery.delivery_tag);
                self.buffer.push_back(delivery);
            }
            Some(Err(e)) => {
                self.failed = Some(e);
                self.stream_done = true;
            }
            None => self.stream_done = true,
        }
    }

    /// Takes every delivery already received by the client.
    fn pull_ready(&mut self) {
        while !self.stream_done {
            match self.deliveries.next().now_or_never() {
                Some(item) => self.received(item),
                None => return,
            }
        }
    }

    /// Hands out up to `max` deliveries to the fetch, each under a lease from now; if the
    /// fetch is no longer there to take them, they go back to the queue. The request comes
    /// back unanswered when there was nothing to hand out and it can wait longer.
    async fn answer(&mut self, request: Request) -> Option<Request> {
        let mut out = Vec::new();
        let mut failed = None;
        while out.len() < request.max {
            let Some(delivery) = self.buffer.pop_front() else {
                break;
            };
            match settle::incoming(&self.origin, delivery).await {
                Ok(Some(handout)) => out.push(handout),
                Ok(None) => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if out.is_empty() && failed.is_none() && Instant::now() < request.deadline {
            return Some(request);
        }
        let settlers: Vec<_> = out.iter().map(|h| h.settler.clone()).collect();
        let answer = match failed {
            Some(e) if out.is_empty() => Err(e),
            _ => Ok(out.into_iter().map(|h| h.into_incoming()).collect()),
        };
        if request.reply.send(answer).is_err() {
            for settler in settlers {
                settler.withdraw().await;
            }
        }
        None
    }

    /// Cancels the subscription, sends back what was received and not handed out, and
    /// lets the channel close once the deliveries handed out are settled.
    async fn end(mut self, pending: Option<Request>) {
        self.requests.close();
        drop(pending);
        while self.requests.try_recv().is_ok() {}
        if !self.stream_done {
            let cancel = self
                .origin
                .channel
                .basic_cancel(self.tag.as_str(), BasicCancelOptions::default());
            if let Ok(Ok(())) = tokio::time::timeout(CANCEL_WAIT, cancel).await {
                // Everything delivered before `cancel-ok` is in the stream, ahead of its end.
                self.pull_ready();
            }
        }
        // A lease or a close that finds this session from now on does not wait for it;
        // those that came meanwhile are answered when it is dropped.
        self.origin.current.clear(&self.me);
        let origin = &self.origin;
        let back = self
            .buffer
            .drain(..)
            .map(|d| async move { settle::requeue(origin, &d.acker, d.delivery_tag).await });
        futures_util::future::join_all(back).await;
        origin.end();
    }
}
