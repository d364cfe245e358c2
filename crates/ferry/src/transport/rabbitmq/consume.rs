//! A consumer's fetch: a `basic.consume` that lives only while a fetch waits.
//!
//! RabbitMQ pushes to a subscribed consumer up to its prefetch (`basic.qos`) of unacked
//! messages, whether or not the application is asking for them. A subscription kept open
//! between fetches would hold messages where no other consumer can take them while the
//! handler is busy or stuck, and a delivery whose lease ran out would be pushed straight
//! back to the consumer that let it expire. So each fetch subscribes with a prefetch of
//! what it may return, takes the first delivery (waiting up to the fetch's wait), cancels,
//! and keeps what arrived before the cancel was confirmed — RabbitMQ sends nothing for a
//! consumer after its `cancel-ok`, and the prefetch bounds what can come before it. An
//! idle consumer so gets a new message as soon as it is published, with no poll interval,
//! and between fetches holds nothing it has not handed out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use lapin::options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;

use super::settle::{self, Origin};
use crate::error::Result;
use crate::transport::Incoming;

/// One consumer's subscriptions, one per fetch, on its channel.
pub(super) struct Subscriber {
    /// The prefetch last set on the channel; it applies to subscriptions made after.
    prefetch: Option<u16>,
    /// Numbers this consumer's subscriptions (consumer tags are unique per channel).
    fetches: AtomicU64,
}

impl Subscriber {
    pub fn new() -> Subscriber {
        Subscriber {
            prefetch: None,
            fetches: AtomicU64::new(0),
        }
    }

    /// Up to `max` deliveries: the first within `wait`, the rest those that come with it.
    pub async fn fetch(
        &mut self,
        origin: &Arc<Origin>,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Incoming>> {
        let error = |e| origin.inner.error(e, "queue", &origin.queue);
        let prefetch = u16::try_from(max.max(1)).unwrap_or(u16::MAX);
        if self.prefetch != Some(prefetch) {
            // Per consumer (not global): quorum queues support only that.
            origin
                .channel
                .basic_qos(prefetch, BasicQosOptions { global: false })
                .await
                .map_err(error)?;
            self.prefetch = Some(prefetch);
        }
        let tag = format!(
            "{}.{}",
            origin.consumer,
            self.fetches.fetch_add(1, Ordering::Relaxed)
        );
        let mut deliveries = origin
            .channel
            .basic_consume(
                &origin.queue,
                &tag,
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(error)?;

        let deadline = tokio::time::Instant::now() + wait;
        let mut out = Vec::new();
        let mut failed = None;
        let mut ended = false;
        // Wait for the first usable delivery; one that had used up its deliveries goes to
        // the dead-letter queue in `incoming` and the wait goes on.
        while out.is_empty() {
            match tokio::time::timeout_at(deadline, deliveries.next()).await {
                Err(_) => break,
                Ok(None) => {
                    // RabbitMQ cancelled the subscription (the queue was deleted).
                    ended = true;
                    break;
                }
                Ok(Some(Err(e))) => {
                    failed = Some(e);
                    break;
                }
                Ok(Some(Ok(delivery))) => {
                    if let Some(incoming) = settle::incoming(origin, delivery).await? {
                        out.push(incoming);
                    }
                }
            }
        }
        if !ended && failed.is_none() {
            // What came with the first is taken before the cancel, which then has less to
            // wait behind.
            while let Some(Some(Ok(delivery))) = deliveries.next().now_or_never() {
                if let Some(incoming) = settle::incoming(origin, delivery).await? {
                    out.push(incoming);
                }
            }
            if let Err(e) = origin
                .channel
                .basic_cancel(&tag, BasicCancelOptions::default())
                .await
            {
                failed = Some(e);
            }
        }
        // Deliveries sent before the cancel-ok: the stream ends after them.
        if failed.is_none() {
            while let Some(next) = deliveries.next().await {
                match next {
                    Ok(delivery) => {
                        if let Some(incoming) = settle::incoming(origin, delivery).await? {
                            out.push(incoming);
                        }
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        match failed {
            // What did arrive is settled by its lease timer or the channel's end.
            Some(e) => Err(error(e)),
            None => Ok(out),
        }
    }
}
