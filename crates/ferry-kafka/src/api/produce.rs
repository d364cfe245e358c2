//! Produce: each partition's record batches become one publish to that Ferry partition,
//! answered once durable (acks 1 and all alike: one node holds every copy). With acks 0
//! Kafka sends no answer; the records are still stored before the next request is read.
//! A batch written by an idempotent producer has its epoch checked (`producers.rs`) and
//! goes through the broker's idempotent publish, so a retried batch is stored once. A
//! partition's records are taken all or none. v0–2, which the codec no longer knows, are
//! decoded and answered at the bottom of this module.
//!
//! A request is decoded and checked whole first ([`Produce::decode`]); its plain partitions'
//! appends are then placed at once ([`Produce::begin`]) and awaited together, so that a
//! request's partitions share group commits, and so that the connection can begin the next
//! request while this one waits (see `connection.rs`).
//!
//! `timeout_ms` is not used: Kafka bounds with it only the wait for other replicas, and
//! this node's answer waits for its own durable append, which Kafka does not bound either
//! (see `docs/compat/kafka.md`).

use bytes::{BufMut, Bytes, BytesMut};
use ferry_broker::{BrokerError, OutgoingMessage, PendingPublish, TopicPosition};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};

use super::text;
use crate::authz::Access;
use crate::connection::{ConnectionError, Request, decode_body, encode_response};
use crate::producers::{EpochProblem, broker_id};
use crate::records::{ProducedBatch, RecordsRefused, decode_produced};
use crate::{Shared, errors};

/// A Produce request decoded and checked, split per partition; nothing is stored yet.
/// [`Produce::begin`] starts its plain partitions' appends; the connection begins one
/// while the answers before it wait for their fsync (see `connection.rs`).
pub struct Produce {
    acks: i16,
    version: i16,
    topics: Vec<(TopicName, Vec<(i32, Step)>)>,
    /// Topics the user may not publish to, answered as refused.
    denied: Vec<TopicProduceResponse>,
}

/// What one partition's data asks for.
enum Step {
    Refused(RecordsRefused),
    /// Records of no idempotent producer: one publish.
    Plain {
        partition: u32,
        messages: Vec<OutgoingMessage>,
    },
    /// One idempotent producer's batch: checked and published under the partition's
    /// producer state, after every append begun before it.
    Idempotent {
        partition: u32,
        batch: ProducedBatch,
    },
}

/// A [`Produce`] whose plain appends are placed.
pub struct Begun {
    acks: i16,
    version: i16,
    topics: Vec<(TopicName, Vec<(i32, Started)>)>,
    denied: Vec<TopicProduceResponse>,
}

enum Started {
    Refused(RecordsRefused),
    Placed(PendingPublish),
    Idempotent {
        partition: u32,
        batch: ProducedBatch,
    },
}

impl Produce {
    /// Decodes the request (v0–2 as below), takes out the topics `access` may not publish
    /// to, and decodes every partition's records.
    pub fn decode(
        shared: &Shared,
        access: &Access,
        request: &mut Request,
    ) -> Result<Produce, ConnectionError> {
        let version = request.header.request_api_version;
        let mut body: ProduceRequest = if version < 3 {
            decode_before_v3(request)?
        } else {
            decode_body(request)?
        };
        let denied = access.produce(&mut body);
        let refusal = if !matches!(body.acks, -1..=1) {
            Some(RecordsRefused {
                code: ResponseError::InvalidRequiredAcks,
                message: format!("acks {} is not one of 0, 1 and -1", body.acks),
            })
        } else if body.transactional_id.is_some() {
            Some(RecordsRefused {
                code: ResponseError::InvalidRequest,
                message: "transactions are not supported yet".into(),
            })
        } else {
            None
        };
        let topics = body
            .topic_data
            .into_iter()
            .map(|topic| {
                let steps = topic
                    .partition_data
                    .into_iter()
                    .map(|data| {
                        let index = data.index;
                        let step = match &refusal {
                            Some(refused) => Step::Refused(refused.clone()),
                            None => Step::of(shared, data, version),
                        };
                        (index, step)
                    })
                    .collect();
                (topic.name, steps)
            })
            .collect();
        Ok(Produce {
            acks: body.acks,
            version,
            topics,
            denied,
        })
    }

    /// Whether the request may be begun while earlier answers of the connection are
    /// pending: it is answered (acks 1 or -1) and no idempotent producer's batch is in it,
    /// whose sequence check needs the batches before it stored.
    pub fn pipelines(&self) -> bool {
        self.acks != 0
            && self
                .topics
                .iter()
                .flat_map(|(_, steps)| steps)
                .all(|(_, step)| !matches!(step, Step::Idempotent { .. }))
    }

    /// Places every plain partition's append, in request order, before returning.
    pub fn begin(self, shared: &Shared) -> Begun {
        let topics = self
            .topics
            .into_iter()
            .map(|(name, steps)| {
                let started = steps
                    .into_iter()
                    .map(|(index, step)| {
                        let started = match step {
                            Step::Refused(refused) => Started::Refused(refused),
                            Step::Plain {
                                partition,
                                messages,
                            } => match shared.broker.begin_publish_to_partition(
                                name.0.as_str(),
                                partition,
                                messages,
                            ) {
                                Ok(pending) => Started::Placed(pending),
                                Err(e) => Started::Refused(from_broker(e)),
                            },
                            Step::Idempotent { partition, batch } => {
                                Started::Idempotent { partition, batch }
                            }
                        };
                        (index, started)
                    })
                    .collect();
                (name, started)
            })
            .collect();
        Begun {
            acks: self.acks,
            version: self.version,
            topics,
            denied: self.denied,
        }
    }
}

impl Step {
    /// Decodes one partition's records.
    fn of(shared: &Shared, data: PartitionProduceData, version: i16) -> Step {
        let partition = match u32::try_from(data.index) {
            Ok(partition) => partition,
            Err(_) => {
                return Step::Refused(RecordsRefused {
                    code: ResponseError::UnknownTopicOrPartition,
                    message: format!("partition {} does not exist", data.index),
                });
            }
        };
        let Some(records) = data.records else {
            return Step::Refused(RecordsRefused {
                code: ResponseError::CorruptMessage,
                message: "the partition's records are null".into(),
            });
        };
        let batches = match decode_produced(&records, shared.config.max_frame_bytes, version) {
            Ok(batches) => batches,
            Err(refused) => return Step::Refused(refused),
        };
        if batches.iter().all(|b| b.producer.is_none()) {
            // One publish: a partition's batches are stored together or not at all.
            let messages = batches.into_iter().flat_map(|b| b.messages).collect();
            return Step::Plain {
                partition,
                messages,
            };
        }
        match <[ProducedBatch; 1]>::try_from(batches) {
            Ok([batch]) => Step::Idempotent { partition, batch },
            Err(_) => Step::Refused(RecordsRefused {
                code: ResponseError::InvalidRecord,
                message: "an idempotent producer sends one batch per partition and request".into(),
            }),
        }
    }
}

impl Begun {
    /// The answer once every partition's records are durable (or refused), `None` with
    /// acks 0, which Kafka does not answer.
    pub async fn answer(self, shared: &Shared) -> Option<ProduceResponse> {
        let version = self.version;
        let mut responses = Vec::with_capacity(self.topics.len() + self.denied.len());
        for (name, started) in self.topics {
            let mut partitions = Vec::with_capacity(started.len());
            for (index, started) in started {
                let outcome = match started {
                    Started::Refused(refused) => Err(refused),
                    Started::Placed(pending) => pending
                        .durable()
                        .await
                        .map_err(from_broker)
                        .map(|positions| written(shared, &positions)),
                    Started::Idempotent { partition, batch } => {
                        produce_idempotent(shared, name.0.as_str(), partition, batch)
                            .await
                            .map(|positions| written(shared, &positions))
                    }
                };
                let response = PartitionProduceResponse::default().with_index(index);
                partitions.push(match outcome {
                    Ok(base_offset) => response.with_base_offset(base_offset),
                    Err(refused) => {
                        let response = response
                            .with_error_code(refused.code.code())
                            .with_base_offset(-1);
                        if version >= 8 {
                            response.with_error_message(text(refused.message))
                        } else {
                            response
                        }
                    }
                });
            }
            responses.push(
                TopicProduceResponse::default()
                    .with_name(name)
                    .with_partition_responses(partitions),
            );
        }
        responses.extend(self.denied);
        (self.acks != 0).then(|| ProduceResponse::default().with_responses(responses))
    }
}

/// The encoded answer to Produce at `version` (v0–2 as below).
pub fn encode(
    request: &Request,
    version: i16,
    response: &ProduceResponse,
) -> Result<Bytes, ConnectionError> {
    if version < 3 {
        Ok(encode_before_v3(request, version, response))
    } else {
        encode_response(request, version, response)
    }
}

fn from_broker(e: BrokerError) -> RecordsRefused {
    RecordsRefused {
        code: errors::from_broker(&e),
        message: e.to_string(),
    }
}

/// Wakes the fetches waiting for records; the base offset of the first record written.
fn written(shared: &Shared, positions: &[TopicPosition]) -> i64 {
    shared.appends.appended();
    positions
        .first()
        .map(|TopicPosition { offset, .. }| *offset as i64)
        .unwrap_or(-1)
}

/// Stores an idempotent producer's batch once, checking its epoch first.
async fn produce_idempotent(
    shared: &Shared,
    topic: &str,
    partition: u32,
    batch: ProducedBatch,
) -> Result<Vec<TopicPosition>, RecordsRefused> {
    let producer = batch.producer.expect("an idempotent step has a producer");
    shared
        .producers
        .seed(topic, partition)
        .await
        .map_err(from_broker)?;
    shared
        .producers
        .check_epoch(
            producer.producer_id,
            topic,
            partition,
            producer.epoch,
            producer.base_sequence,
        )
        .map_err(|problem| match problem {
            EpochProblem::Fenced { latest } => RecordsRefused {
                code: ResponseError::InvalidProducerEpoch,
                message: format!(
                    "producer {} is at epoch {latest}; epoch {} is fenced",
                    producer.producer_id, producer.epoch
                ),
            },
            EpochProblem::NewEpochNotAtZero { base_sequence } => RecordsRefused {
                code: ResponseError::OutOfOrderSequenceNumber,
                message: format!(
                    "epoch {} of producer {} starts at sequence {base_sequence}, not 0",
                    producer.epoch, producer.producer_id
                ),
            },
        })?;
    let first_sequence = u64::try_from(producer.base_sequence).map_err(|_| RecordsRefused {
        code: ResponseError::InvalidRecord,
        message: format!("base sequence {} is negative", producer.base_sequence),
    })?;
    // The epoch is part of the producer's identity: a new epoch starts its sequences
    // again at 0, as a new producer would.
    let producer_id = broker_id(producer.producer_id, producer.epoch);
    let positions = shared
        .broker
        .publish_idempotent(
            topic,
            partition,
            &producer_id,
            first_sequence,
            batch.messages,
        )
        .await
        .map_err(from_broker)?;
    shared
        .producers
        .written(producer.producer_id, topic, partition, producer.epoch);
    Ok(positions)
}

/// Produce v0–2, which the codec (generated from Kafka 4's specs, where they were removed)
/// no longer knows: a v0–2 body is a v3 body without its leading `transactional_id`, so
/// it is decoded as v3 with a null one put in front (the guard's checks included).
pub fn decode_before_v3(request: &Request) -> Result<ProduceRequest, ConnectionError> {
    let mut body = BytesMut::with_capacity(request.body.len() + 2);
    body.put_i16(-1); // a null transactional_id
    body.put_slice(&request.body);
    let mut as_v3 = Request {
        api: request.api,
        header: request.header.clone().with_request_api_version(3),
        body: body.freeze(),
    };
    decode_body(&mut as_v3).map_err(|e| match e {
        // Said of the version the client sent.
        ConnectionError::Malformed { api, problem, .. } => ConnectionError::Malformed {
            api,
            version: request.header.request_api_version,
            problem,
        },
        other => other,
    })
}

/// The answer to Produce v0–2, header (v0) included: per partition its index, error code
/// and base offset, `log_append_time_ms` from v2 on, then `throttle_time_ms` from v1 on —
/// Kafka's layouts, written here since the codec no longer encodes these versions.
fn encode_before_v3(request: &Request, version: i16, response: &ProduceResponse) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(request.header.correlation_id);
    buf.put_i32(response.responses.len() as i32);
    for topic in &response.responses {
        let name = topic.name.0.as_bytes();
        buf.put_i16(name.len() as i16);
        buf.put_slice(name);
        buf.put_i32(topic.partition_responses.len() as i32);
        for partition in &topic.partition_responses {
            buf.put_i32(partition.index);
            buf.put_i16(partition.error_code);
            buf.put_i64(partition.base_offset);
            if version >= 2 {
                buf.put_i64(partition.log_append_time_ms);
            }
        }
    }
    if version >= 1 {
        buf.put_i32(response.throttle_time_ms);
    }
    buf.freeze()
}
