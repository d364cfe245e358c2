//! Ferry's side: the same records through Ferry's own gRPC API with `ferry-client` —
//! `PublishToTopic` to one partition a batch, and `ReadTopic` from each partition's start.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use bytes::Bytes;
use ferry_client::{Client, Message, proto};

/// What a produce or fetch on Ferry's side measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub messages: u64,
    /// Payload bytes.
    pub bytes: u64,
    pub seconds: f64,
}

impl Measured {
    pub fn msgs_per_sec(&self) -> f64 {
        self.messages as f64 / self.seconds
    }

    /// 10^6 payload bytes per second, as rdkafka_performance counts them.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e6
    }
}

/// `messages` of `size` bytes in batches of `batch`, batch i to partition i mod
/// `partitions`, by `in_flight` tasks each waiting for its batch's answer (durable: the
/// topic's durability is `Fsync`) before sending the next.
pub async fn produce(
    client: &Client,
    topic: &str,
    partitions: u32,
    messages: u64,
    size: usize,
    batch: usize,
    in_flight: usize,
) -> anyhow::Result<Measured> {
    // The payload rdkafka_performance sends: its default pattern repeated to the size.
    let pattern = b"librdkafka_performance testing!";
    let payload = Bytes::from(
        pattern
            .iter()
            .copied()
            .cycle()
            .take(size)
            .collect::<Vec<u8>>(),
    );
    let batches = messages.div_ceil(batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..in_flight {
        let (client, topic, payload, next) = (
            client.clone(),
            topic.to_owned(),
            payload.clone(),
            Arc::clone(&next),
        );
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= batches {
                    return anyhow::Ok(());
                }
                let count = (messages - i * batch as u64).min(batch as u64);
                let records = (0..count).map(|_| Message::new(payload.clone())).collect();
                let partition = (i % u64::from(partitions)) as u32;
                let stored = client
                    .publish_to_partition(&topic, partition, records)
                    .await
                    .with_context(|| format!("PublishToTopic {topic} [{partition}]"))?;
                if stored.len() as u64 != count {
                    bail!("PublishToTopic stored {} of {count}", stored.len());
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(Measured {
        messages,
        bytes: messages * size as u64,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Every record of `topic` from each partition's start, one reader per partition, each
/// `ReadTopic` asking for up to `max_records` (the server caps an answer's bytes too) and
/// the next from the last offset + 1, until `expected` records have come.
///
/// Timed as rdkafka_performance times its consumer: from the first record received to
/// the last, every record counted (so neither side pays its connection and first request
/// in the figure, and both are paid the first answer's records for free).
pub async fn fetch(
    client: &Client,
    topic: &str,
    partitions: u32,
    expected: u64,
    max_records: u32,
) -> anyhow::Result<Measured> {
    let info = client.describe_topic(topic).await?;
    let mut tasks = tokio::task::JoinSet::new();
    for p in info.partitions {
        let mut groups = client.groups();
        let topic = topic.to_owned();
        tasks.spawn(async move {
            let (mut messages, mut bytes) = (0u64, 0u64);
            let mut first: Option<Instant> = None;
            let mut offset = p.start_offset;
            while offset < p.end_offset {
                let records = groups
                    .read_topic(proto::ReadTopicRequest {
                        topic: topic.clone(),
                        partition: p.partition,
                        from: Some(proto::Position {
                            at: Some(proto::position::At::Offset(offset)),
                        }),
                        max_records,
                    })
                    .await
                    .with_context(|| format!("ReadTopic {topic} [{}]", p.partition))?
                    .into_inner()
                    .records;
                let Some(last) = records.last() else {
                    bail!(
                        "ReadTopic {topic} [{}] ended at {offset}, before {}",
                        p.partition,
                        p.end_offset
                    );
                };
                first.get_or_insert_with(Instant::now);
                offset = last.offset + 1;
                messages += records.len() as u64;
                bytes += records.iter().map(|r| r.payload.len() as u64).sum::<u64>();
            }
            anyhow::Ok((messages, bytes, first))
        });
    }
    let (mut messages, mut bytes, mut started) = (0, 0, None::<Instant>);
    while let Some(done) = tasks.join_next().await {
        let (m, b, first) = done??;
        messages += m;
        bytes += b;
        started = match (started, first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let seconds = started.map_or(0.0, |s| s.elapsed().as_secs_f64());
    if messages != expected {
        bail!(
            "ReadTopic of {topic} ({partitions} partitions) gave {messages} of {expected} records"
        );
    }
    Ok(Measured {
        messages,
        bytes,
        seconds,
    })
}
