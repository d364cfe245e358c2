//! The SDK's consumer on a Ferry server: deliveries are fetched with the unary `Receive`
//! (a long poll, only while the SDK asks for more), and settled on the consumer's
//! [`SettleStream`] (ferry-client's consumer session opened without credit), where acks in
//! flight together share one journal write.
//!
//! The settle stream lives while anything can still settle on it — the consumer or a
//! delivery not yet settled — so a delivery handed out before the consumer closed stays
//! settleable after. A settle the stream cannot answer — it is down, it broke before the
//! answer, or the server refused the settle (its answer on the stream carries text, not a
//! status code) — is asked again with the unary call, whose status code the SDK maps onto
//! its typed errors. Asking again is safe: a refused settle changed nothing, and a settle
//! repeated after a lost answer is either found done (an ack) or refused as no longer held.
//!
//! Deliveries are not streamed by credit: credit outlives the fetch that granted it, so a
//! consumer whose handler is busy (or stuck) would go on leasing messages it does not hand
//! out — each lease that runs out there costs the message an attempt, and the SDK promises
//! that a delivery whose lease ended goes to another consumer. Fetching on demand keeps
//! `prefetch` meaning what it means on every transport: the most fetched ahead of the
//! handler, and only while it asks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry_client::SettleStream;
use ferry_client::proto::{self as v1, settle::Outcome};

use super::engine::{Shared, map_error, ms, received};
use crate::error::{Error, Result};
use crate::transport::{ConsumerBackend, Incoming, Settler};

pub(super) struct RemoteConsumer {
    shared: Arc<Shared>,
    queue: Arc<str>,
    name: String,
    /// The settle stream; `None` once closed (it ends when no delivery needs it).
    settles: Option<SettleStream>,
    max_deliveries: Option<u32>,
}

impl RemoteConsumer {
    /// Opening the settle stream fails at once when the queue does not exist.
    pub(super) async fn open(
        shared: Arc<Shared>,
        queue: String,
        name: &str,
    ) -> Result<RemoteConsumer> {
        let client = shared.client()?.clone();
        let settles = client
            .settle_stream(&queue, name)
            .await
            .map_err(map_error)?;
        Ok(RemoteConsumer {
            shared,
            queue: Arc::from(queue),
            name: name.to_owned(),
            settles: Some(settles),
            max_deliveries: None,
        })
    }

    /// The source's limit on deliveries, as the server keeps its declaration.
    pub(super) fn limited_to(mut self, max_deliveries: Option<u32>) -> RemoteConsumer {
        self.max_deliveries = max_deliveries;
        self
    }
}

#[async_trait]
impl ConsumerBackend for RemoteConsumer {
    fn max_deliveries(&self) -> Option<u32> {
        self.max_deliveries
    }

    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let client = self.shared.client()?;
        let settles = self.settles.as_ref().ok_or(Error::Closed)?;
        // A prefetch larger than one receive may return is filled over several fetches.
        let max = max.min(ferry_client::MAX_RECEIVE as usize) as u32;
        let deliveries = client
            .receive(&self.queue, &self.name, max, Some(wait))
            .await
            .map_err(map_error)?;
        Ok(deliveries
            .into_iter()
            .map(|d| Incoming {
                settler: Arc::new(RemoteSettler {
                    shared: self.shared.clone(),
                    queue: self.queue.clone(),
                    settles: settles.clone(),
                    seq: d.seq,
                    token: d.token,
                }),
                message: received(d),
            })
            .collect())
    }

    async fn close(&mut self) -> Result<()> {
        self.settles = None;
        Ok(())
    }
}

/// Settles one delivery on the settle stream, or with the unary call when the stream
/// cannot answer (see the module docs).
struct RemoteSettler {
    shared: Arc<Shared>,
    queue: Arc<str>,
    settles: SettleStream,
    seq: u64,
    token: u64,
}

impl RemoteSettler {
    /// Whether the stream settled it; if not, ask directly.
    async fn on_stream(&self, outcome: Outcome) -> bool {
        self.settles
            .settle(self.seq, self.token, outcome)
            .await
            .is_ok()
    }
}

#[async_trait]
impl Settler for RemoteSettler {
    async fn ack(&self) -> Result<()> {
        let client = self.shared.client()?;
        if self.on_stream(Outcome::Ack(true)).await {
            return Ok(());
        }
        client
            .ack(&self.queue, self.seq, self.token)
            .await
            .map_err(map_error)
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let client = self.shared.client()?;
        let nack = v1::settle::Nack {
            delay_ms: delay.map(ms),
            error: error.map(str::to_owned),
        };
        if self.on_stream(Outcome::Nack(nack)).await {
            return Ok(());
        }
        client
            .nack(&self.queue, self.seq, self.token, delay, error)
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn reject(&self, reason: &str) -> Result<()> {
        let client = self.shared.client()?;
        if self.on_stream(Outcome::Reject(reason.to_owned())).await {
            return Ok(());
        }
        client
            .reject(&self.queue, self.seq, self.token, reason)
            .await
            .map_err(map_error)
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        let client = self.shared.client()?;
        if self.on_stream(Outcome::ExtendMs(ms(by))).await {
            return Ok(());
        }
        client
            .extend(&self.queue, self.seq, self.token, by)
            .await
            .map(drop)
            .map_err(map_error)
    }
}
