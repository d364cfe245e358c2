//! `ferry.v1.Consumer`: unary receive and settle calls, and the credit-based consume
//! stream.
//!
//! **The stream.** After `open`, two tasks serve it: the *reader* takes the client's
//! messages — credit grants go to a semaphore, settles go to the broker and are answered
//! on the stream — and the *deliverer* waits for credit, receives up to the credit it holds
//! (a long poll it never abandons midway, so nothing is leased and then dropped), hands
//! back what it did not use, and sends the deliveries. When the client goes away the
//! reader closes the semaphore and the stream is marked ended; the deliverer's poll stops
//! waiting then (`Broker::receive_unless`), so it leases nothing for a client that is
//! gone. Every delivery still unsettled is given back, ready again at once for other
//! consumers: one tonic took to send fails its attempt ("consumer disconnected" — the
//! consumer may have crashed on it), one it never took is returned unsent with its
//! attempt not spent (`sent.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{Acked, Broker, Nacked};
use ferry_proto::v1::{self, consumer_server::Consumer};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::sent::{Held, Outgoing, Unsettled};
use super::{allow_read, caller};
use crate::auth::Gate;
use crate::convert::{self, opt_ms};
use crate::metrics::Meters;
use crate::settle::Deliveries;
use crate::status::{from_broker, from_convert, from_refusal};
use crate::temporary;

/// How long one receive of the deliverer waits for messages before it starts another (the
/// stream's end stops the wait sooner).
const POLL: Duration = Duration::from_millis(500);
/// Most deliveries one receive asks for, however much credit is granted.
const MAX_RECEIVE: usize = 256;
/// Most acks one broker call settles.
const MAX_ACK_BATCH: usize = 512;
/// The error a released delivery's attempt records.
const DISCONNECTED: &str = "consumer disconnected";

pub struct ConsumerService {
    pub broker: Broker,
    pub gate: Arc<Gate>,
    /// Turns `true` when the server begins to stop: consume streams end (giving their
    /// unsettled deliveries back) so that the server's wait for open calls ends.
    pub stopping: watch::Receiver<bool>,
    pub meters: Arc<Meters>,
}

type Reply<T> = Result<Response<T>, Status>;

impl ConsumerService {
    fn deliveries<'a>(&'a self, queue: &'a str) -> Deliveries<'a> {
        Deliveries::of(&self.broker, &self.meters, queue)
    }
}

fn nacked(n: Nacked) -> v1::NackResponse {
    v1::NackResponse {
        outcome: Some(match n {
            Nacked::RetryAt(at) => v1::nack_response::Outcome::RetryAtMs(at),
            Nacked::DeadLettered(reason) => {
                v1::nack_response::Outcome::DeadLettered(reason.as_str().to_owned())
            }
        }),
    }
}

#[tonic::async_trait]
impl Consumer for ConsumerService {
    async fn receive(&self, r: Request<v1::ReceiveRequest>) -> Reply<v1::ReceiveResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        // proto3 cannot tell an unset `max` from 0: both take the default.
        let max = convert::receive_max((r.max != 0).then_some(r.max)).map_err(from_convert)?;
        let got = self
            .broker
            .receive(
                &r.queue,
                &r.consumer,
                max,
                opt_ms(r.lease_ms),
                convert::receive_wait(r.wait_ms),
            )
            .await
            .map_err(from_broker)?;
        self.meters.delivered(&r.queue, &got);
        Ok(Response::new(v1::ReceiveResponse {
            deliveries: got.into_iter().map(convert::delivery).collect(),
        }))
    }

    async fn ack(&self, r: Request<v1::AckRequest>) -> Reply<v1::AckResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        let acked = self
            .deliveries(&r.queue)
            .ack(r.seq, r.token)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::AckResponse {
            already_settled: acked == Acked::AlreadySettled,
        }))
    }

    async fn nack(&self, r: Request<v1::NackRequest>) -> Reply<v1::NackResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        let outcome = self
            .deliveries(&r.queue)
            .nack(r.seq, r.token, r.delay_ms, r.error.as_deref())
            .await
            .map_err(from_broker)?;
        Ok(Response::new(nacked(outcome)))
    }

    async fn reject(&self, r: Request<v1::RejectRequest>) -> Reply<v1::RejectResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        self.deliveries(&r.queue)
            .reject(r.seq, r.token, &r.reason)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::RejectResponse {}))
    }

    async fn extend(&self, r: Request<v1::ExtendRequest>) -> Reply<v1::ExtendResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        let until = self
            .deliveries(&r.queue)
            .extend(r.seq, r.token, r.by_ms)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::ExtendResponse {
            lease_until_ms: until,
        }))
    }

    type ConsumeStream = Outgoing;

    async fn consume(
        &self,
        r: Request<Streaming<v1::ConsumeRequest>>,
    ) -> Reply<Self::ConsumeStream> {
        let who = caller(&self.gate, &r)?;
        let mut inbound = r.into_inner();
        let open = match inbound.next().await {
            Some(Ok(v1::ConsumeRequest {
                kind: Some(v1::consume_request::Kind::Open(open)),
            })) => open,
            Some(Err(status)) => return Err(status),
            _ => {
                return Err(Status::invalid_argument(
                    "a consume stream starts with `open` (queue and consumer)",
                ));
            }
        };
        self.gate
            .allow_read(who, &open.queue, |q| self.broker.is_dead_letter_queue(q))
            .map_err(from_refusal)?;
        // Unknown queues and bad consumer names fail the call itself, before any stream.
        self.broker
            .describe_queue(&open.queue)
            .map_err(from_broker)?;
        if open.consumer.is_empty() {
            return Err(Status::invalid_argument("open.consumer: name the consumer"));
        }
        let (tx, rx) = mpsc::channel(64);
        let unsettled = Unsettled::default();
        let outgoing = Outgoing::new(rx, unsettled.clone(), Arc::clone(&self.meters), &open.queue);
        let stream = Arc::new(Stream {
            broker: self.broker.clone(),
            meters: Arc::clone(&self.meters),
            queue: open.queue,
            consumer: open.consumer,
            lease: opt_ms(open.lease_ms),
            credit: Semaphore::new(0),
            unsettled: unsettled.clone(),
            ended: watch::Sender::new(false),
            tx,
        });
        let deliverer = tokio::spawn(Arc::clone(&stream).deliver());
        let mut stopping = self.stopping.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stream.read(inbound) => {}
                _ = stopping.wait_for(|&stop| stop) => {}
            }
            stream.credit.close();
            stream.ended.send_replace(true);
            let _ = deliverer.await;
            stream.release().await;
            // The owner's stream on its temporary queue is its connection (see
            // `temporary.rs`): with it gone, so are the owner's temporary queues.
            temporary::stream_ended(&stream.broker, &stream.queue, &stream.consumer).await;
        });
        Ok(Response::new(outgoing))
    }
}

/// The stream's next item if it has already arrived, without waiting: `None` when nothing
/// has. Written by hand because the obvious `timeout(Duration::ZERO, …)` does wait: a zero
/// deadline still goes through the timer, which fires on its next millisecond tick, and
/// that added up to a millisecond to every ack that arrived alone.
fn arrived<S: tokio_stream::Stream + Unpin>(stream: &mut S) -> Option<Option<S::Item>> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(stream).poll_next(&mut cx) {
        std::task::Poll::Ready(item) => Some(item),
        std::task::Poll::Pending => None,
    }
}

fn is_ack(settle: &v1::Settle) -> bool {
    matches!(settle.outcome, Some(v1::settle::Outcome::Ack(_)))
}

/// One consume stream.
struct Stream {
    broker: Broker,
    meters: Arc<Meters>,
    queue: String,
    consumer: String,
    lease: Option<Duration>,
    credit: Semaphore,
    /// Deliveries leased for this stream and not settled, and whether each was sent.
    unsettled: Unsettled,
    /// Turns `true` when the stream ends (the client went away, or the server stops).
    ended: watch::Sender<bool>,
    tx: mpsc::Sender<Result<v1::ConsumeResponse, Status>>,
}

impl Stream {
    fn unsettled(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.unsettled.lock()
    }

    /// Done once nobody is left to send to: the stream ended, or tonic let go of its
    /// responses (the client's connection went).
    async fn gone(&self) {
        let mut ended = self.ended.subscribe();
        tokio::select! {
            () = self.tx.closed() => {}
            _ = ended.wait_for(|&ended| ended) => {}
        }
    }

    async fn read(&self, mut inbound: Streaming<v1::ConsumeRequest>) {
        use v1::consume_request::Kind;
        let mut next_up: Option<v1::ConsumeRequest> = None;
        loop {
            let request = match next_up.take() {
                Some(request) => request,
                None => match inbound.next().await {
                    Some(Ok(request)) => request,
                    _ => return,
                },
            };
            match request.kind {
                Some(Kind::Credit(n)) => self.grant(n),
                Some(Kind::Settle(settle)) if is_ack(&settle) => {
                    // Acks that have already arrived go to the broker together: one
                    // journal append (and fsync) for all of them rather than one each.
                    let mut acks = vec![settle];
                    let mut ended = false;
                    while acks.len() < MAX_ACK_BATCH {
                        match arrived(&mut inbound) {
                            Some(Some(Ok(v1::ConsumeRequest {
                                kind: Some(Kind::Credit(n)),
                            }))) => self.grant(n),
                            Some(Some(Ok(v1::ConsumeRequest {
                                kind: Some(Kind::Settle(s)),
                            }))) if is_ack(&s) => acks.push(s),
                            Some(Some(Ok(other))) => {
                                next_up = Some(other);
                                break;
                            }
                            Some(Some(Err(_)) | None) => {
                                ended = true;
                                break;
                            }
                            None => break, // nothing more has arrived
                        }
                    }
                    for result in self.ack_many(&acks).await {
                        let reply = v1::ConsumeResponse {
                            kind: Some(v1::consume_response::Kind::Settled(result)),
                        };
                        if self.tx.send(Ok(reply)).await.is_err() {
                            return;
                        }
                    }
                    if ended {
                        return;
                    }
                }
                Some(Kind::Settle(settle)) => {
                    let result = self.settle(settle).await;
                    let reply = v1::ConsumeResponse {
                        kind: Some(v1::consume_response::Kind::Settled(result)),
                    };
                    if self.tx.send(Ok(reply)).await.is_err() {
                        return;
                    }
                }
                Some(Kind::Open(_)) | None => {
                    let _ = self
                        .tx
                        .send(Err(Status::invalid_argument(
                            "a consume stream is opened once; send credit or settle",
                        )))
                        .await;
                    return;
                }
            }
        }
    }

    fn grant(&self, n: u32) {
        let room = Semaphore::MAX_PERMITS - self.credit.available_permits();
        self.credit.add_permits((n as usize).min(room));
    }

    fn deliveries(&self) -> Deliveries<'_> {
        Deliveries::of(&self.broker, &self.meters, &self.queue)
    }

    /// Acks several deliveries with one broker call; results in their order.
    async fn ack_many(&self, acks: &[v1::Settle]) -> Vec<v1::SettleResult> {
        let pairs = acks.iter().map(|a| (a.seq, a.token));
        let outcomes = match self.deliveries().ack_batch(pairs).await {
            Ok(outcomes) => outcomes,
            Err(error) => {
                let text = error.to_string();
                return acks
                    .iter()
                    .map(|a| v1::SettleResult {
                        seq: a.seq,
                        ok: false,
                        error: text.clone(),
                        lease_until_ms: None,
                    })
                    .collect();
            }
        };
        acks.iter()
            .zip(outcomes)
            .map(|(a, outcome)| match outcome {
                Ok(Acked::AlreadySettled) => self.already_settled(a.seq, a.token),
                other => self.result(a.seq, a.token, other.map(|_| true), None),
            })
            .collect()
    }

    async fn settle(&self, settle: v1::Settle) -> v1::SettleResult {
        use v1::settle::Outcome;
        let (seq, token) = (settle.seq, settle.token);
        let deliveries = self.deliveries();
        let mut lease_until_ms = None;
        let outcome = match settle.outcome {
            Some(Outcome::Ack(_)) => match deliveries.ack(seq, token).await {
                Ok(Acked::AlreadySettled) => return self.already_settled(seq, token),
                other => other.map(|_| true),
            },
            Some(Outcome::Nack(n)) => deliveries
                .nack(seq, token, n.delay_ms, n.error.as_deref())
                .await
                .map(|_| true),
            Some(Outcome::Reject(reason)) => {
                deliveries.reject(seq, token, &reason).await.map(|()| true)
            }
            Some(Outcome::ExtendMs(by)) => deliveries.extend(seq, token, by).await.map(|until| {
                lease_until_ms = Some(until);
                false
            }),
            None => {
                return v1::SettleResult {
                    seq,
                    ok: false,
                    error: "settle without an outcome (ack, nack, reject or extend_ms)".into(),
                    lease_until_ms: None,
                };
            }
        };
        self.result(seq, token, outcome, lease_until_ms)
    }

    /// The answer to an ack of a message the broker no longer holds. The broker's ack is
    /// idempotent, and so is a repeated ack on this stream. But if the delivery acked is
    /// one this stream still holds unsettled, the message was settled through another
    /// delivery: this lease ended (it expired, say while the server was stopped), and the
    /// message was delivered again and acked, or dead-lettered. Answering OK would tell a
    /// second consumer its ack took, so that ack fails, as one with a stale lease does.
    fn already_settled(&self, seq: u64, token: u64) -> v1::SettleResult {
        let mut unsettled = self.unsettled();
        if unsettled.get(&seq).map(|h| h.token) != Some(token) {
            return v1::SettleResult {
                seq,
                ok: true,
                error: String::new(),
                lease_until_ms: None,
            };
        }
        unsettled.remove(&seq);
        v1::SettleResult {
            seq,
            ok: false,
            error: format!(
                "message {seq} is already settled: this delivery's lease ended and the message \
                 was acked through another delivery or dead-lettered"
            ),
            lease_until_ms: None,
        }
    }

    /// The answer to one settle, forgetting the delivery once it is settled or its lease
    /// is gone.
    fn result(
        &self,
        seq: u64,
        token: u64,
        outcome: Result<bool, ferry_broker::BrokerError>,
        lease_until_ms: Option<i64>,
    ) -> v1::SettleResult {
        match outcome {
            Ok(settled) => {
                if settled {
                    self.unsettled().remove(&seq);
                }
                v1::SettleResult {
                    seq,
                    ok: true,
                    error: String::new(),
                    lease_until_ms,
                }
            }
            Err(error) => {
                if matches!(error, ferry_broker::BrokerError::StaleLease { .. }) {
                    // With the token this stream was given, the lease is gone: nothing
                    // left to release. (A wrong token says nothing about the lease.)
                    let mut unsettled = self.unsettled();
                    if unsettled.get(&seq).map(|h| h.token) == Some(token) {
                        unsettled.remove(&seq);
                    }
                }
                v1::SettleResult {
                    seq,
                    ok: false,
                    error: error.to_string(),
                    lease_until_ms: None,
                }
            }
        }
    }

    async fn deliver(self: Arc<Self>) {
        loop {
            if self.tx.is_closed() || *self.ended.borrow() {
                return; // a stopped receive brought it here: nobody to send to
            }
            let Ok(first) = self.credit.acquire().await else {
                return; // closed: the client went away
            };
            first.forget();
            let mut held = 1;
            let extra = self.credit.available_permits().min(MAX_RECEIVE - held);
            if extra > 0
                && let Ok(more) = self.credit.try_acquire_many(extra as u32)
            {
                more.forget();
                held += extra;
            }
            let got = self
                .broker
                .receive_unless(
                    &self.queue,
                    &self.consumer,
                    held,
                    self.lease,
                    Some(POLL),
                    self.gone(),
                )
                .await;
            let got = match got {
                Ok(got) => got,
                Err(error) => {
                    let _ = self.tx.send(Err(from_broker(error))).await;
                    self.credit.close();
                    return;
                }
            };
            self.credit.add_permits(held - got.len());
            // Counted as delivered when `Outgoing` sends them.
            self.meters.leased(&self.queue, &got);
            {
                let mut unsettled = self.unsettled();
                for d in &got {
                    let held = Held {
                        token: d.token.0,
                        sent: false,
                    };
                    unsettled.insert(d.seq, held);
                }
            }
            for d in got {
                let reply = v1::ConsumeResponse {
                    kind: Some(v1::consume_response::Kind::Delivery(convert::delivery(d))),
                };
                if self.tx.send(Ok(reply)).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Gives the stream's unsettled deliveries back, ready at once: a failed attempt for
    /// each one sent, none spent for each one never sent. Taken under the lock
    /// [`Outgoing`] marks deliveries sent under, so none is sent after this.
    async fn release(&self) {
        let held: Vec<(u64, Held)> = self.unsettled().drain().collect();
        for (seq, Held { token, sent }) in held {
            if sent {
                self.deliveries().release(seq, token, DISCONNECTED).await;
            } else {
                self.deliveries().return_unsent(seq, token).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::arrived;

    #[test]
    fn arrived_takes_what_is_there_and_never_waits() {
        let mut ready = tokio_stream::iter([1, 2]);
        assert_eq!(arrived(&mut ready), Some(Some(1)));
        assert_eq!(arrived(&mut ready), Some(Some(2)));
        assert_eq!(arrived(&mut ready), Some(None), "ended");
        // No runtime and no timer here: a wait would need both.
        let mut nothing = tokio_stream::pending::<u32>();
        assert_eq!(arrived(&mut nothing), None);
    }
}
