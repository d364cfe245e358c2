//! Settling a delivery — ack, nack, reject, extend — one way for every front end: the gRPC
//! unary calls, the gRPC consume stream and HTTP each call [`Deliveries`], and differ only
//! in how they read the request and how they answer.
//!
//! What they share: the wire's numbers become the broker's types here (a token, delays in
//! milliseconds), the broker settles, and [`Meters`] hears how the delivery ended — so the
//! server's counts and latencies mean the same whichever way a consumer settles. A call the
//! broker refused changes no meter: the delivery is still held (or was never the caller's),
//! and its later settle or the end of its lease is what counts. An extend ends nothing and
//! is not metered.
//!
//! What stays with each front end, on purpose: the consume stream answers an ack of a
//! message already settled by what it knows of its own deliveries (see
//! `grpc::consumer`), and answers failures in the stream rather than failing the call;
//! the unary calls and HTTP turn a refusal into a status of their own protocol.

use std::time::Duration;

use ferry_broker::{Acked, Broker, BrokerError, LeaseToken, Nacked};

use crate::convert::opt_ms;
use crate::metrics::Meters;

/// The deliveries of one queue, settled through the broker and measured in the server's
/// meters.
#[derive(Clone, Copy)]
pub(crate) struct Deliveries<'a> {
    broker: &'a Broker,
    meters: &'a Meters,
    queue: &'a str,
}

impl<'a> Deliveries<'a> {
    pub(crate) fn of(broker: &'a Broker, meters: &'a Meters, queue: &'a str) -> Deliveries<'a> {
        Deliveries {
            broker,
            meters,
            queue,
        }
    }

    /// Acks delivery `seq`/`token`. Only an ack that settled the message is measured: an
    /// [`Acked::AlreadySettled`] one was measured when it settled, or never held.
    pub(crate) async fn ack(&self, seq: u64, token: u64) -> Result<Acked, BrokerError> {
        let acked = self.broker.ack(self.queue, seq, LeaseToken(token)).await?;
        if acked == Acked::Settled {
            self.meters.acked(self.queue, seq, token);
        }
        Ok(acked)
    }

    /// Acks several deliveries with one broker call (one journal append for all), each
    /// measured as [`Deliveries::ack`] would; outcomes in their order. The outer error is
    /// the call's as a whole, which settled none of them.
    pub(crate) async fn ack_batch(
        &self,
        acks: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<Vec<Result<Acked, BrokerError>>, BrokerError> {
        let pairs: Vec<(u64, LeaseToken)> = acks
            .into_iter()
            .map(|(seq, token)| (seq, LeaseToken(token)))
            .collect();
        let outcomes = self.broker.ack_batch(self.queue, &pairs).await?;
        for ((seq, token), outcome) in pairs.iter().zip(&outcomes) {
            if matches!(outcome, Ok(Acked::Settled)) {
                self.meters.acked(self.queue, *seq, token.0);
            }
        }
        Ok(outcomes)
    }

    /// Nacks delivery `seq`/`token`: redelivered after `delay_ms` (unset: the queue's
    /// backoff), or dead-lettered if that was its last delivery.
    pub(crate) async fn nack(
        &self,
        seq: u64,
        token: u64,
        delay_ms: Option<u64>,
        error: Option<&str>,
    ) -> Result<Nacked, BrokerError> {
        let nacked = self
            .broker
            .nack(self.queue, seq, LeaseToken(token), opt_ms(delay_ms), error)
            .await?;
        self.meters.settled_without_ack(self.queue, seq, token);
        Ok(nacked)
    }

    /// Rejects delivery `seq`/`token`: dead-lettered at once, with `reason`.
    pub(crate) async fn reject(
        &self,
        seq: u64,
        token: u64,
        reason: &str,
    ) -> Result<(), BrokerError> {
        self.broker
            .reject(self.queue, seq, LeaseToken(token), reason)
            .await?;
        self.meters.rejected(self.queue, seq, token);
        Ok(())
    }

    /// Extends the lease of delivery `seq`/`token` by `by_ms`; the lease's new end.
    pub(crate) async fn extend(
        &self,
        seq: u64,
        token: u64,
        by_ms: u64,
    ) -> Result<i64, BrokerError> {
        self.broker
            .extend(
                self.queue,
                seq,
                LeaseToken(token),
                Duration::from_millis(by_ms),
            )
            .await
    }

    /// Gives delivery `seq`/`token` back, ready at once, because its consumer went away
    /// (`why` is recorded as the attempt's error). It is forgotten by the meters whatever
    /// the broker answers: a lease that ended meanwhile, or a queue deleted since, has
    /// nothing to give back, and nobody is left to hear about it.
    pub(crate) async fn release(&self, seq: u64, token: u64, why: &str) {
        self.meters.settled_without_ack(self.queue, seq, token);
        let _ = self
            .broker
            .nack(
                self.queue,
                seq,
                LeaseToken(token),
                Some(Duration::ZERO),
                Some(why),
            )
            .await;
    }

    /// Gives delivery `seq`/`token` back without spending its attempt, because it never
    /// left the server (see `grpc::sent`): ready again at once with the delivery count it
    /// had before. Forgotten by the meters whatever the broker answers, as in
    /// [`release`](Self::release).
    pub(crate) async fn return_unsent(&self, seq: u64, token: u64) {
        self.meters.settled_without_ack(self.queue, seq, token);
        let _ = self
            .broker
            .return_unsent(self.queue, seq, LeaseToken(token))
            .await;
    }
}
