//! The `kafka://` transport: the [`Transport`] over one producer, one admin client and the
//! catalog reader, shared by everything a connection does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureProducer;
use rdkafka::types::RDKafkaErrorCode;

use super::capabilities::{NAME, capabilities};
use super::catalog::Catalog;
use super::consume::KafkaConsumer;
use super::ledger;
use super::names::CATALOG;
use super::settings::Entry;
use super::url::{self, Endpoint};
use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

/// How long one call to the engine may take.
pub(super) const TIMEOUT: Duration = Duration::from_secs(15);

/// A connection to one Kafka cluster.
pub struct Kafka {
    pub(super) shared: Arc<Shared>,
    capabilities: Capabilities,
}

pub(super) struct Shared {
    pub endpoint: Endpoint,
    pub producer: FutureProducer,
    pub admin: AdminClient<DefaultClientContext>,
    pub catalog: Catalog,
    closed: AtomicBool,
    /// This connection's consumers, stopped when it closes.
    consumers: Mutex<Vec<Weak<ledger::Inner>>>,
}

impl Shared {
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The client settings every client of this connection starts from.
    pub fn config(&self) -> ClientConfig {
        base_config(&self.endpoint)
    }

    /// Creates `topics` (name, partitions); those that exist already are fine.
    pub async fn create_topics(&self, topics: &[(String, i32)], compact: bool) -> Result<()> {
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|(name, partitions)| {
                let topic = NewTopic::new(name, *partitions, TopicReplication::Fixed(1));
                if compact {
                    topic.set("cleanup.policy", "compact")
                } else {
                    topic
                }
            })
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let results = self
            .admin
            .create_topics(new.iter(), &options)
            .await
            .map_err(kafka_error)?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(Error::Transport {
                        transport: NAME,
                        message: format!("creating topic `{topic}`: {code}"),
                        source: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// Deletes `topics`; answers which did not exist.
    pub async fn delete_topics(&self, topics: &[String]) -> Result<Vec<String>> {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let results = self
            .admin
            .delete_topics(&names, &options)
            .await
            .map_err(kafka_error)?;
        let mut missing = Vec::new();
        for result in results {
            match result {
                Ok(_) => {}
                Err((topic, RDKafkaErrorCode::UnknownTopicOrPartition)) => missing.push(topic),
                Err((topic, code)) => {
                    return Err(Error::Transport {
                        transport: NAME,
                        message: format!("deleting topic `{topic}`: {code}"),
                        source: None,
                    });
                }
            }
        }
        Ok(missing)
    }

    /// Deletes a consumer group and its committed offsets; one that never existed is fine.
    /// A consumer just closed may still be leaving the group, so a group with members is
    /// asked again for a few seconds.
    pub async fn delete_group(&self, group: &str) -> Result<()> {
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let results = loop {
            let results = self
                .admin
                .delete_groups(&[group], &options)
                .await
                .map_err(kafka_error)?;
            let busy = results
                .iter()
                .any(|r| matches!(r, Err((_, RDKafkaErrorCode::NonEmptyGroup))));
            if !busy || tokio::time::Instant::now() >= deadline {
                break results;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for result in results {
            match result {
                Ok(_)
                | Err((_, RDKafkaErrorCode::GroupIdNotFound))
                | Err((_, RDKafkaErrorCode::NotCoordinator)) => {}
                // Consumers still attached keep the group; its offsets name topics that are
                // gone, and a topic declared again under the name starts from its beginning.
                Err((group, RDKafkaErrorCode::NonEmptyGroup)) => {
                    tracing::warn!(
                        group = %group,
                        "kafka: the consumer group of a deleted source still has consumers; \
                         it is left to them"
                    );
                }
                Err((group, code)) => {
                    return Err(Error::Transport {
                        transport: NAME,
                        message: format!("deleting consumer group `{group}`: {code}"),
                        source: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// Partitions of `topic`, or `None` when it does not exist.
    pub async fn partitions(self: &Arc<Self>, topic: &str) -> Result<Option<i32>> {
        let shared = self.clone();
        let topic = topic.to_owned();
        tokio::task::spawn_blocking(move || {
            let metadata = shared
                .admin
                .inner()
                .fetch_metadata(Some(&topic), TIMEOUT)
                .map_err(kafka_error)?;
            let found = metadata.topics().iter().find(|t| t.name() == topic);
            Ok(match found {
                Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                    Some(t.partitions().len() as i32)
                }
                _ => None,
            })
        })
        .await
        .map_err(|e| Error::transport(NAME, e))?
    }

    /// The declaration of `name`, `NotFound` as `kind` unless it is one.
    pub async fn entry(&self, name: &str, kind: &'static str) -> Result<Entry> {
        self.check_open()?;
        match self.catalog.get(name).await? {
            Some(entry) if entry.kind() == kind => Ok(entry),
            _ => Err(Error::NotFound {
                kind,
                name: name.to_owned(),
            }),
        }
    }

    pub fn register(&self, consumer: &Arc<ledger::Inner>) {
        let mut consumers = self.consumers.lock().unwrap();
        consumers.retain(|c| c.strong_count() > 0);
        consumers.push(Arc::downgrade(consumer));
    }
}

fn base_config(endpoint: &Endpoint) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &endpoint.bootstrap)
        // librdkafka logs through its own logger otherwise; errors come back as results.
        .set("log_level", "3");
    config
}

/// A Kafka failure as the SDK's error: what retrying cannot fix gets its own variant.
pub(super) fn kafka_error(e: KafkaError) -> Error {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code() {
        Some(C::MessageSizeTooLarge | C::MessageBatchTooLarge | C::InvalidRecord) => {
            Error::invalid("message", format!("the engine refused it: {e}"))
        }
        Some(
            C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed,
        ) => Error::forbidden(e.to_string()),
        Some(C::SaslAuthenticationFailed | C::Authentication) => Error::unauthorized(e.to_string()),
        _ => Error::transport(NAME, e),
    }
}

impl Kafka {
    /// Connects to the cluster `url` names: makes sure the catalog topic exists, which
    /// also checks that the cluster answers.
    pub async fn connect(url: &str) -> Result<Kafka> {
        let endpoint = url::parse(url)?;
        let base = base_config(&endpoint);
        let producer: FutureProducer = base
            .clone()
            .set("acks", "all")
            .set("linger.ms", "2")
            .set("message.timeout.ms", "30000")
            .create()
            .map_err(kafka_error)?;
        let admin: AdminClient<DefaultClientContext> =
            base.clone().create().map_err(kafka_error)?;
        // librdkafka needs a group id even to assign partitions; assigning joins no group.
        let reader: BaseConsumer = base
            .clone()
            .set("group.id", "ferry-catalog-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .create()
            .map_err(kafka_error)?;
        let shared = Arc::new(Shared {
            endpoint,
            producer,
            admin,
            catalog: Catalog::new(reader),
            closed: AtomicBool::new(false),
            consumers: Mutex::new(Vec::new()),
        });
        shared
            .create_topics(&[(CATALOG.to_owned(), 1)], true)
            .await?;
        Ok(Kafka {
            shared,
            capabilities: capabilities(),
        })
    }
}

#[async_trait]
impl Transport for Kafka {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        super::topology::declare_queue(&self.shared, decl).await
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        super::topology::declare_topic(&self.shared, decl).await
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        super::topology::declare_subscription(&self.shared, decl).await
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        super::topology::delete(&self.shared, source).await
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        super::topology::delete_topic(&self.shared, name).await
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        self.shared.entry(queue, "queue").await?;
        Ok(None)
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        super::publish::publish(&self.shared, destination, batch).await
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        self.shared.check_open()?;
        let consumer = KafkaConsumer::open(&self.shared, source, options).await?;
        Ok(Box::new(consumer))
    }

    async fn close(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let consumers = std::mem::take(&mut *self.shared.consumers.lock().unwrap());
        for consumer in consumers.iter().filter_map(Weak::upgrade) {
            consumer.stop();
        }
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            use rdkafka::producer::Producer as _;
            shared.producer.flush(TIMEOUT)
        })
        .await
        .map_err(|e| Error::transport(NAME, e))?
        .map_err(kafka_error)
    }
}
