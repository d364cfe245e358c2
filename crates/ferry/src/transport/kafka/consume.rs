//! Consuming one queue, subscription or dead-letter queue: one Kafka consumer in the
//! source's consumer group, polled by its own thread.
//!
//! The thread reads records into the consumer's ledger, which [`KafkaConsumer::fetch`]
//! hands out from; while it is full the thread pauses its partitions. A retry not yet due
//! pauses its retry partition until it is.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;

use super::capabilities::NAME;
use super::codec::Record;
use super::engine::{Shared, kafka_error};
use super::ledger::{Client, Context, Inner, READ_AHEAD, Source, Tp};
use super::names;
use super::settings::Entry;
use crate::error::{Error, Result};
use crate::transport::{ConsumerBackend, ConsumerOptions, Incoming};

/// The [`ConsumerBackend`] over one consumer thread.
pub(super) struct KafkaConsumer {
    inner: Arc<Inner>,
}

impl KafkaConsumer {
    pub async fn open(
        shared: &Arc<Shared>,
        source: &crate::spec::Source,
        options: &ConsumerOptions,
    ) -> Result<KafkaConsumer> {
        use crate::spec::Source as S;
        let (name, policy, topics, group) = match source {
            S::Queue(name) => {
                let Entry::Queue { policy } = shared.entry(name, "queue").await? else {
                    unreachable!("entry answers only its kind");
                };
                let mut topics = vec![name.clone()];
                topics.extend((0..policy.rungs()).map(|r| names::retry_topic(name, r)));
                (name.clone(), Some(policy), topics, names::group(name))
            }
            S::Subscription { topic, name } => {
                let entry = shared.entry(name, "subscription").await?;
                let Entry::Subscription {
                    topic: existing,
                    policy,
                } = entry
                else {
                    unreachable!("entry answers only its kind");
                };
                if existing != *topic {
                    return Err(Error::NotFound {
                        kind: "subscription",
                        name: format!("{topic}/{name}"),
                    });
                }
                let mut topics = vec![topic.clone()];
                topics.extend((0..policy.rungs()).map(|r| names::retry_topic(name, r)));
                (name.clone(), Some(policy), topics, names::group(name))
            }
            S::DeadLetters(origin) => {
                let name = origin.name().to_owned();
                let topic = names::dead_letter_topic(&name);
                if shared.partitions(&topic).await?.is_none() {
                    return Err(Error::NotFound {
                        kind: "queue",
                        name: topic,
                    });
                }
                let group = names::dead_letter_group(&name);
                (name, None, vec![topic], group)
            }
        };
        let patience = policy.as_ref().map_or(Duration::from_secs(30), |p| {
            Duration::from_millis(p.lease_ms)
        });
        let inner = Inner::new(
            Source {
                name,
                policy,
                consumer: options.name.clone(),
                patience,
            },
            shared.producer.clone(),
        );
        let client: Client = shared
            .config()
            .set("group.id", &group)
            .set("client.id", &options.name)
            // Commits are this transport's own: after each ack, on revoke and on close.
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "1000")
            .set("fetch.wait.max.ms", "100")
            .create_with_context(Context {
                inner: inner.clone(),
            })
            .map_err(kafka_error)?;
        let client = Arc::new(client);
        let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        client.subscribe(&topic_refs).map_err(kafka_error)?;
        inner.set_client(&client);
        shared.register(&inner);
        let thread_inner = inner.clone();
        std::thread::Builder::new()
            .name("ferry-kafka-consumer".into())
            .spawn(move || run(client, thread_inner))
            .map_err(|e| Error::transport(NAME, e))?;
        Ok(KafkaConsumer { inner })
    }
}

/// The consumer thread: polls, pauses and resumes, until stopped and settled.
fn run(client: Arc<Client>, inner: Arc<Inner>) {
    // Partitions this thread paused. Only those are resumed: librdkafka may fetch a resumed
    // partition again from an earlier position (records read twice are dropped by offset).
    let mut paused: HashSet<Tp> = HashSet::new();
    let mut full = false;
    let mut stopping_since: Option<Instant> = None;
    loop {
        if inner.stop.load(Ordering::Acquire) {
            let since = *stopping_since.get_or_insert_with(Instant::now);
            let out = inner.lock().handed_out(|_| true);
            if out == 0 || since.elapsed() >= inner.source.patience {
                break;
            }
        }
        let (reassigned, delayed) = {
            let mut state = inner.lock();
            (std::mem::take(&mut state.reassigned), state.delayed.clone())
        };
        if reassigned {
            // Start the new assignment unpaused. librdkafka lifts only its own pauses when
            // it assigns partitions (`rd_kafka_assignment_add` resets the toppar's
            // LIB_PAUSE flag, not APP_PAUSE), so a partition paused here, revoked and given
            // back to this consumer would stay paused, and with it forgotten here, never
            // be fetched again: resume what this thread paused before forgetting it.
            if !paused.is_empty() {
                let was: Vec<Tp> = paused.drain().collect();
                let _ = client.resume(&list(&was));
            }
            full = false;
        }
        let mut resume: Vec<Tp> = inner
            .due()
            .into_iter()
            .filter(|tp| !full && paused.contains(tp))
            .collect();
        let queued = inner.lock().queued.len();
        if full && queued < READ_AHEAD / 2 {
            full = false;
            resume.extend(paused.iter().filter(|tp| !delayed.contains(*tp)).cloned());
        }
        if !resume.is_empty() {
            for tp in &resume {
                paused.remove(tp);
            }
            let _ = client.resume(&list(&resume));
        }
        if !full && queued >= READ_AHEAD {
            full = true;
            if let Ok(assigned) = client.assignment() {
                let pause: Vec<Tp> = assigned
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .filter(|tp| !paused.contains(tp))
                    .collect();
                let _ = client.pause(&list(&pause));
                paused.extend(pause);
            }
        }
        match client.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                if let Some(at) = inner.read(Record::of(&message))
                    && paused.insert(at.clone())
                {
                    let _ = client.pause(&list(&[at]));
                }
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, consumer = %inner.source.consumer, "kafka: poll");
            }
            None => {}
        }
    }
    if let Err(e) = inner.commit_sync(|_| true, None) {
        tracing::warn!(error = %e, consumer = %inner.source.consumer, "kafka: final commit");
    }
    // Leaving the group revokes the partitions, which commits again what was settled since.
    client.unsubscribe();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let _ = client.poll(Duration::from_millis(50));
        if client.assignment().map_or(true, |a| a.count() == 0) {
            break;
        }
    }
    inner.lock().partitions.clear();
    drop(client);
}

fn list(tps: &[Tp]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (topic, partition) in tps {
        tpl.add_partition(topic, *partition);
    }
    tpl
}

impl Drop for KafkaConsumer {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

#[async_trait]
impl ConsumerBackend for KafkaConsumer {
    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.inner.stop.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let taken = self.inner.take(max.max(1));
            if !taken.is_empty() {
                return Ok(taken);
            }
            if tokio::time::timeout_at(deadline, self.inner.arrived.notified())
                .await
                .is_err()
            {
                return Ok(Vec::new());
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.stop();
        Ok(())
    }

    fn max_deliveries(&self) -> Option<u32> {
        self.inner.source.policy.as_ref().map(|p| p.max_deliveries)
    }
}
