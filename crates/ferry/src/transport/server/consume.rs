//! The SDK's consumer on a Ferry server: deliveries come on the consumer's `Consume`
//! stream ([`super::stream`]), and each delivery is settled on that stream.
//!
//! **Prefetch is credit.** The stream opens with `prefetch` credit. The SDK fetches again
//! only once it has handed out everything fetched before, so at each fetch the credit the
//! previous fetch's deliveries took is granted back: at most `prefetch` deliveries are
//! ever fetched ahead of the handler, as on every transport, while a delivery held by the
//! handler — settled or not — does not hold back the next ones.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use ferry_client::ClientError;
use ferry_client::proto::{self as v1, settle::Outcome};
use tokio::sync::{mpsc, oneshot};

use super::engine::{Shared, map_error, received};
use super::stream::{self, Answer, Command, Event, Handle};
use crate::error::{Error, Result};
use crate::transport::{ConsumerBackend, Incoming, Settler};

pub(super) struct StreamConsumer {
    shared: Arc<Shared>,
    queue: Arc<str>,
    /// `None` once closed: the stream then ends as soon as no delivery needs it.
    commands: Option<mpsc::UnboundedSender<Command>>,
    events: mpsc::UnboundedReceiver<Event>,
    live: Arc<std::sync::atomic::AtomicU64>,
    /// Deliveries handed to the SDK by the last fetch, and the stream they came on.
    owed: (u64, u32),
    /// Why the stream ended for good, repeated to every later fetch.
    failed: Option<(tonic::Code, String)>,
}

impl StreamConsumer {
    pub(super) async fn open(
        shared: Arc<Shared>,
        queue: String,
        name: &str,
        prefetch: usize,
    ) -> Result<StreamConsumer> {
        let client = shared.client()?.clone();
        let prefetch = prefetch.clamp(1, u32::MAX as usize) as u32;
        let Handle {
            commands,
            events,
            live,
        } = stream::open(client, &queue, name, prefetch)
            .await
            .map_err(map_error)?;
        Ok(StreamConsumer {
            shared,
            queue: Arc::from(queue),
            commands: Some(commands),
            events,
            live,
            owed: (0, 0),
            failed: None,
        })
    }

    fn failure(&self) -> Option<Error> {
        self.failed.as_ref().map(|(code, message)| {
            map_error(ClientError::Server {
                code: *code,
                message: message.clone(),
            })
        })
    }

    /// The next event, waiting until `deadline` when `wait`, else only if one is there.
    async fn next_event(&mut self, wait: Option<tokio::time::Instant>) -> Option<Event> {
        match wait {
            Some(deadline) => tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .ok()
                .flatten(),
            None => self.events.try_recv().ok(),
        }
    }
}

#[async_trait]
impl ConsumerBackend for StreamConsumer {
    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        self.shared.client()?;
        let commands = self.commands.clone().ok_or(Error::Closed)?;
        if let Some(error) = self.failure() {
            return Err(error);
        }
        let (generation, n) = std::mem::take(&mut self.owed);
        if n > 0 {
            // The SDK has handed out every delivery of the last fetch.
            let _ = commands.send(Command::Credit { generation, n });
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut fetched = Vec::new();
        while fetched.len() < max {
            let wait = fetched.is_empty().then_some(deadline);
            let Some(event) = self.next_event(wait).await else {
                break;
            };
            let (generation, delivery) = match event {
                Event::Delivery {
                    generation,
                    delivery,
                } => (generation, delivery),
                Event::Failed(error) => {
                    let code = error.code().unwrap_or(tonic::Code::Unavailable);
                    let message = match &error {
                        ClientError::Server { message, .. } => message.clone(),
                        other => other.to_string(),
                    };
                    self.failed = Some((code, message));
                    if fetched.is_empty() {
                        return Err(map_error(error));
                    }
                    break;
                }
            };
            // The server gave back what an ended stream held; it may be with another
            // consumer already.
            if generation != self.live.load(Ordering::Acquire) {
                continue;
            }
            if self.owed.0 != generation {
                self.owed = (generation, 0);
            }
            self.owed.1 += 1;
            fetched.push(Incoming {
                settler: Arc::new(StreamSettler {
                    shared: self.shared.clone(),
                    queue: self.queue.clone(),
                    commands: commands.clone(),
                    generation,
                    seq: delivery.seq,
                    token: delivery.token,
                }),
                message: received(delivery),
            });
        }
        Ok(fetched)
    }

    async fn close(&mut self) -> Result<()> {
        // No more credit. Deliveries that still arrive stay with the stream, which gives
        // them back when the last delivery handed out is settled or dropped.
        self.commands = None;
        self.events.close();
        Ok(())
    }
}

/// Settles one delivery on the stream it came on, or with the unary call when that
/// stream cannot answer (see [`super::stream`]).
struct StreamSettler {
    shared: Arc<Shared>,
    queue: Arc<str>,
    commands: mpsc::UnboundedSender<Command>,
    generation: u64,
    seq: u64,
    token: u64,
}

impl StreamSettler {
    /// The stream's answer; `None` means ask directly.
    async fn on_stream(&self, outcome: Outcome) -> Option<Option<i64>> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Settle {
            generation: self.generation,
            settle: v1::Settle {
                seq: self.seq,
                token: self.token,
                outcome: Some(outcome),
            },
            reply,
        };
        self.commands.send(command).ok()?;
        match answer.await {
            Ok(Answer::Done { lease_until_ms }) => Some(lease_until_ms),
            Ok(Answer::AskDirectly) | Err(_) => None,
        }
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

#[async_trait]
impl Settler for StreamSettler {
    async fn ack(&self) -> Result<()> {
        let client = self.shared.client()?;
        if self.on_stream(Outcome::Ack(true)).await.is_some() {
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
        if self.on_stream(Outcome::Nack(nack)).await.is_some() {
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
        if self
            .on_stream(Outcome::Reject(reason.to_owned()))
            .await
            .is_some()
        {
            return Ok(());
        }
        client
            .reject(&self.queue, self.seq, self.token, reason)
            .await
            .map_err(map_error)
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        let client = self.shared.client()?;
        if self.on_stream(Outcome::ExtendMs(ms(by))).await.is_some() {
            return Ok(());
        }
        client
            .extend(&self.queue, self.seq, self.token, by)
            .await
            .map(drop)
            .map_err(map_error)
    }
}
