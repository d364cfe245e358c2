//! Receiving and settling: ReceiveMessage (long polls of whole seconds), DeleteMessage for
//! an ack, ChangeMessageVisibility for a nack or an extension, and dead-lettering done by
//! the SDK so that the dead letter carries why.
//!
//! Dead-lettering is SendMessage to the dead-letter queue, then DeleteMessage of the
//! original. A crash between the two leaves the message in both: its lease runs out, it
//! comes back with a receive count past `max_deliveries`, and the next receive dead-letters
//! it again — a duplicate dead letter (with the same id; a FIFO dead-letter queue drops it
//! as a duplicate within 5 minutes), never a lost one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::MessageSystemAttributeName as Sys;

use super::acks::Ack;
use super::aws::{self, NOT_HELD};
use super::capabilities::NAME;
use super::codec::{self, Attr, Raw};
use super::engine::{Found, Shared, seconds_up};
use super::publish::{group_of, sqs_attribute};
use super::settings::Settings;
use super::topology::MAX_VISIBILITY;
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Received, now_ms, reason};
use crate::transport::{ConsumerBackend, ConsumerOptions, Incoming, Settler};

/// SQS's longest long poll.
const MAX_WAIT_SECS: u64 = 20;
/// SQS's most messages per receive.
const MAX_PER_RECEIVE: usize = 10;

pub(super) struct SqsConsumer {
    shared: Arc<Shared>,
    url: String,
    fifo: bool,
    dead_letter_url: Option<String>,
    settings: Arc<Settings>,
    /// Reading a source's dead letters.
    dead_letters: bool,
    name: String,
    closed: bool,
}

impl SqsConsumer {
    pub fn live(
        shared: Arc<Shared>,
        found: Found,
        dead_letter_url: Option<String>,
        settings: Settings,
        options: &ConsumerOptions,
    ) -> SqsConsumer {
        SqsConsumer {
            shared,
            url: found.url,
            fifo: found.fifo,
            dead_letter_url,
            settings: Arc::new(settings),
            dead_letters: false,
            name: options.name.clone(),
            closed: false,
        }
    }

    pub fn dead_letters(
        shared: Arc<Shared>,
        url: String,
        fifo: bool,
        settings: Settings,
        options: &ConsumerOptions,
    ) -> SqsConsumer {
        SqsConsumer {
            shared,
            url,
            fifo,
            dead_letter_url: None,
            settings: Arc::new(settings),
            dead_letters: true,
            name: options.name.clone(),
            closed: false,
        }
    }

    fn settler(&self, receipt: String, message: Received) -> SqsSettler {
        SqsSettler {
            shared: self.shared.clone(),
            url: self.url.clone(),
            fifo: self.fifo,
            dead_letter_url: self.dead_letter_url.clone(),
            settings: self.settings.clone(),
            dead_letters: self.dead_letters,
            consumer: self.name.clone(),
            receipt,
            message,
        }
    }
}

#[async_trait]
impl ConsumerBackend for SqsConsumer {
    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        if self.closed {
            return Err(Error::Closed);
        }
        self.shared.check_open()?;
        // Long polls are whole seconds: the whole seconds of `wait`, and a short poll
        // followed by the rest of the wait below one.
        let wait_secs = wait.as_secs().min(MAX_WAIT_SECS);
        let started = tokio::time::Instant::now();
        let out = self
            .shared
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, MAX_PER_RECEIVE) as i32)
            .wait_time_seconds(wait_secs as i32)
            .message_attribute_names("All")
            .message_system_attribute_names(Sys::ApproximateReceiveCount)
            .message_system_attribute_names(Sys::SentTimestamp)
            .send()
            .await
            .map_err(|e| aws::failure(e).into_error())?;
        let mut incoming = Vec::new();
        for m in out.messages() {
            let (Some(receipt), Some(id)) = (m.receipt_handle(), m.message_id()) else {
                continue;
            };
            let system = |name: Sys| m.attributes().and_then(|a| a.get(&name));
            let attributes: HashMap<&str, Attr> = m
                .message_attributes()
                .map(|all| {
                    all.iter()
                        .map(|(name, v)| {
                            let attr = match (v.data_type(), v.binary_value()) {
                                (t, Some(b)) if t.starts_with("Binary") => {
                                    Attr::Binary(b.as_ref().to_vec())
                                }
                                (t, _) if t.starts_with("Number") => {
                                    Attr::Number(v.string_value().unwrap_or_default().to_owned())
                                }
                                _ => Attr::String(v.string_value().unwrap_or_default().to_owned()),
                            };
                            (name.as_str(), attr)
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut received = codec::decode(
                Raw {
                    message_id: id,
                    body: m.body().unwrap_or_default(),
                    attributes,
                    receive_count: system(Sys::ApproximateReceiveCount)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1),
                    sent_ms: system(Sys::SentTimestamp)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                },
                self.dead_letters,
            )?;
            if self.dead_letters && received.dead_letter.is_none() {
                // Moved by SQS's RedrivePolicy after its leases ran out: SQS says no more.
                received.dead_letter = Some(DeadLetterInfo {
                    reason: reason::MAX_DELIVERIES.into(),
                    deliveries: self.settings.max_deliveries,
                    origin: self.settings.name.clone(),
                    last_error: None,
                    first_failure_ms: None,
                    last_failure_ms: None,
                    consumer: None,
                });
            }
            let settler = self.settler(receipt.to_owned(), received.clone());
            if !self.dead_letters && received.attempt > self.settings.max_deliveries {
                // Past its deliveries without being dead-lettered: a crash between the
                // dead letter's send and the original's delete, or a lease that ran out
                // where the engine does not redrive. Finish the job.
                settler
                    .dead_letter(reason::MAX_DELIVERIES, None, received.attempt - 1)
                    .await?;
                continue;
            }
            incoming.push(Incoming {
                message: received,
                settler: Arc::new(settler),
            });
        }
        if incoming.is_empty() {
            let left = wait.saturating_sub(started.elapsed());
            if !left.is_zero() && wait_secs == 0 {
                tokio::time::sleep(left).await;
            }
        }
        Ok(incoming)
    }

    async fn close(&mut self) -> Result<()> {
        self.closed = true;
        Ok(())
    }

    fn max_deliveries(&self) -> Option<u32> {
        (!self.dead_letters).then_some(self.settings.max_deliveries)
    }
}

struct SqsSettler {
    shared: Arc<Shared>,
    url: String,
    fifo: bool,
    dead_letter_url: Option<String>,
    settings: Arc<Settings>,
    dead_letters: bool,
    consumer: String,
    receipt: String,
    message: Received,
}

impl SqsSettler {
    fn not_held(&self, f: aws::Failure) -> Error {
        if f.is(NOT_HELD) {
            Error::NotHeld {
                id: self.message.id.clone(),
                why: f.error.to_string(),
            }
        } else {
            f.into_error()
        }
    }

    async fn delete(&self) -> Result<()> {
        self.shared
            .sqs
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(&self.receipt)
            .send()
            .await
            .map_err(|e| self.not_held(aws::failure(e)))?;
        Ok(())
    }

    async fn hide_for(&self, d: Duration) -> Result<()> {
        if d > MAX_VISIBILITY {
            // Clamping would bring the message back early.
            return Err(Error::unsupported(
                NAME,
                format!("hiding a delivery for {d:?}"),
                "SQS hides a message for at most 12 hours",
            ));
        }
        self.shared
            .sqs
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(&self.receipt)
            .visibility_timeout(seconds_up(d))
            .send()
            .await
            .map_err(|e| self.not_held(aws::failure(e)))?;
        Ok(())
    }

    /// Sends the message to the dead-letter queue with why, then deletes it here; drops
    /// it when the source keeps no dead letters.
    async fn dead_letter(&self, why: &str, error: Option<&str>, deliveries: u32) -> Result<()> {
        if !self.settings.dead_letter {
            return self.delete().await;
        }
        let url = self
            .dead_letter_url
            .as_deref()
            .ok_or_else(|| Error::NotFound {
                kind: "queue",
                name: format!("{}.dlq", self.settings.name),
            })?;
        let m = &self.message;
        let mut headers = m.headers.clone();
        let now = now_ms();
        DeadLetterInfo {
            reason: why.to_owned(),
            deliveries,
            origin: self.settings.name.clone(),
            last_error: error.map(str::to_owned),
            first_failure_ms: None,
            last_failure_ms: Some(now),
            consumer: Some(self.consumer.clone()),
        }
        .write_headers(&mut headers);
        let encoded = codec::encode_parts(
            &m.id,
            m.key.as_deref(),
            &headers,
            &m.payload,
            m.published_at_ms,
        );
        let mut send = self
            .shared
            .sqs
            .send_message()
            .queue_url(url)
            .message_body(&encoded.body);
        for (name, value) in &encoded.attributes {
            send = send.message_attributes(*name, sqs_attribute(value));
        }
        if self.fifo {
            send = send
                .message_group_id(group_of(m.key.as_deref(), &m.id))
                .message_deduplication_id(&m.id);
        }
        send.send()
            .await
            .map_err(|e| aws::failure(e).into_error())?;
        self.delete().await
    }
}

#[async_trait]
impl Settler for SqsSettler {
    async fn ack(&self) -> Result<()> {
        self.shared.check_open()?;
        self.shared
            .acks(&self.url)
            .settle(Ack {
                receipt: self.receipt.clone(),
                id: self.message.id.clone(),
            })
            .await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let attempt = self.message.attempt;
        if !self.dead_letters && attempt >= self.settings.max_deliveries {
            return self
                .dead_letter(reason::MAX_DELIVERIES, error, attempt)
                .await;
        }
        let delay = delay.unwrap_or_else(|| self.settings.backoff.delay(attempt, fastrand::f64()));
        self.hide_for(delay).await
    }

    async fn reject(&self, why: &str) -> Result<()> {
        if self.dead_letters {
            return Err(Error::unsupported(
                NAME,
                "rejecting a dead letter",
                "a dead letter has no further queue; ack it to remove it, or nack it to keep it",
            ));
        }
        self.dead_letter(reason::REJECTED, Some(why), self.message.attempt)
            .await
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        self.hide_for(by).await
    }
}
