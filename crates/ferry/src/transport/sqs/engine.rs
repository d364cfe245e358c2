//! The `sqs://` transport: the [`Transport`] over one SQS and one SNS client, and the
//! look-ups everything else shares (a source's queue URL, FIFO-ness and stored settings; a
//! topic's ARN), cached per connection.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::acks::Acks;
use super::aws::{self, NO_QUEUE};
use super::capabilities::{NAME, capabilities};
use super::consume::SqsConsumer;
use super::names::{self, QueueNames};
use super::settings::Settings;
use super::url;
use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

/// A connection to one SQS/SNS endpoint.
pub struct Sqs {
    pub(super) shared: Arc<Shared>,
    capabilities: Capabilities,
}

/// One SQS queue as found: its URL and whether it is FIFO.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Found {
    pub url: String,
    pub fifo: bool,
}

pub(super) struct Shared {
    pub sqs: aws_sdk_sqs::Client,
    pub sns: aws_sdk_sns::Client,
    closed: AtomicBool,
    /// SQS name (with `.fifo`) → URL. Entries go when this connection deletes the queue.
    urls: Mutex<HashMap<String, String>>,
    /// SNS name → ARN.
    topics: Mutex<HashMap<String, String>>,
    /// Queue URL → the acks on their way to it, shared by this connection's consumers of
    /// the queue so that their acks go together.
    acks: Mutex<HashMap<String, Acks>>,
}

impl Shared {
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The URL of the SQS queue named `sqs_name`, if it exists.
    pub async fn queue_url(&self, sqs_name: &str) -> Result<Option<String>> {
        self.check_open()?;
        if let Some(url) = self.urls.lock().unwrap().get(sqs_name) {
            return Ok(Some(url.clone()));
        }
        match self.sqs.get_queue_url().queue_name(sqs_name).send().await {
            Ok(out) => {
                let url = out.queue_url().unwrap_or_default().to_owned();
                self.urls
                    .lock()
                    .unwrap()
                    .insert(sqs_name.to_owned(), url.clone());
                Ok(Some(url))
            }
            Err(e) => {
                let f = aws::failure(e);
                if f.is(NO_QUEUE) {
                    Ok(None)
                } else {
                    Err(f.into_error())
                }
            }
        }
    }

    /// The ack batcher of the queue at `url`.
    pub fn acks(&self, url: &str) -> Acks {
        self.acks
            .lock()
            .unwrap()
            .entry(url.to_owned())
            .or_insert_with(|| super::acks::acks(self.sqs.clone(), url.to_owned()))
            .clone()
    }

    pub fn remember(&self, sqs_name: &str, url: &str) {
        self.urls
            .lock()
            .unwrap()
            .insert(sqs_name.to_owned(), url.to_owned());
    }

    pub fn forget(&self, url: &str) {
        self.urls.lock().unwrap().retain(|_, u| u != url);
        self.acks.lock().unwrap().remove(url);
    }

    /// The live queue of `names`, standard or FIFO.
    pub async fn live(&self, names: &QueueNames) -> Result<Option<Found>> {
        for fifo in [false, true] {
            if let Some(url) = self.queue_url(&names.live(fifo)).await? {
                return Ok(Some(Found { url, fifo }));
            }
        }
        Ok(None)
    }

    /// The dead-letter queue of `names`, of the FIFO-ness of its live queue.
    pub async fn dead_letters(&self, names: &QueueNames, fifo: bool) -> Result<Option<String>> {
        self.queue_url(&names.dead_letters(fifo)).await
    }

    /// The Ferry declaration kept with the queue at `url`.
    pub async fn settings(&self, url: &str, kind: &'static str, name: &str) -> Result<Settings> {
        self.check_open()?;
        let out = self
            .sqs
            .list_queue_tags()
            .queue_url(url)
            .send()
            .await
            .map_err(|e| not_found_or(aws::failure(e), kind, name))?;
        let tags = out.tags().cloned().unwrap_or_default();
        Settings::from_tags(&tags).ok_or_else(|| {
            Error::invalid(
                format!("{kind} `{name}`"),
                "its SQS queue exists but was not declared through Ferry (it has no `ferry.*` \
                 tags); declare it with Ferry under another name, or tag it",
            )
        })
    }

    pub async fn queue_arn(&self, url: &str) -> Result<String> {
        self.check_open()?;
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| aws::failure(e).into_error())?;
        out.attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| Error::Transport {
                transport: NAME,
                message: format!("the queue at {url} answered no QueueArn"),
                source: None,
            })
    }

    /// The ARN of topic `name`, if it exists. SNS has no look-up by name, so the first miss
    /// lists the topics.
    pub async fn topic_arn(&self, name: &str) -> Result<Option<String>> {
        self.check_open()?;
        let sns_name = names::topic(name)?;
        if let Some(arn) = self.topics.lock().unwrap().get(&sns_name) {
            return Ok(Some(arn.clone()));
        }
        let suffix = format!(":{sns_name}");
        let mut token = None;
        loop {
            let out = self
                .sns
                .list_topics()
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| aws::failure(e).into_error())?;
            for topic in out.topics() {
                if let Some(arn) = topic.topic_arn().filter(|a| a.ends_with(&suffix)) {
                    self.topics
                        .lock()
                        .unwrap()
                        .insert(sns_name.clone(), arn.to_owned());
                    return Ok(Some(arn.to_owned()));
                }
            }
            match out.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => return Ok(None),
            }
        }
    }

    pub fn remember_topic(&self, name: &str, arn: &str) {
        if let Ok(sns_name) = names::topic(name) {
            self.topics.lock().unwrap().insert(sns_name, arn.to_owned());
        }
    }

    pub fn forget_topic(&self, arn: &str) {
        self.topics.lock().unwrap().retain(|_, a| a != arn);
    }
}

/// `NotFound` for a queue gone between two calls, else the failure as classified.
pub(super) fn not_found_or(f: aws::Failure, kind: &'static str, name: &str) -> Error {
    if f.is(NO_QUEUE) {
        Error::NotFound {
            kind,
            name: name.to_owned(),
        }
    } else {
        f.into_error()
    }
}

impl Sqs {
    /// Connects to the endpoint `url` names and checks that it answers with these keys.
    pub async fn connect(url: &str) -> Result<Sqs> {
        let endpoint = url::parse(url, |name| std::env::var(name).ok())?;
        let (sqs, sns) = aws::clients(&endpoint);
        // One cheap call, so a wrong endpoint or key fails here and not on first use.
        sqs.list_queues()
            .max_results(1)
            .send()
            .await
            .map_err(|e| aws::failure(e).into_error())?;
        Ok(Sqs {
            shared: Arc::new(Shared {
                sqs,
                sns,
                closed: AtomicBool::new(false),
                urls: Mutex::new(HashMap::new()),
                topics: Mutex::new(HashMap::new()),
                acks: Mutex::new(HashMap::new()),
            }),
            capabilities: capabilities(),
        })
    }

    /// A queue's or a subscription's queue and settings, `NotFound` if absent.
    pub(super) async fn source(&self, source: &Source) -> Result<(Found, Settings)> {
        let (names, kind, name) = match source {
            Source::Queue(name) => (QueueNames::of_queue(name), "queue", name),
            Source::Subscription { name, .. } => {
                (QueueNames::of_subscription(name), "subscription", name)
            }
            Source::DeadLetters(origin) => return Box::pin(self.source(origin)).await,
        };
        let found = self
            .shared
            .live(&names)
            .await?
            .ok_or_else(|| Error::NotFound {
                kind,
                name: name.clone(),
            })?;
        let settings = self.shared.settings(&found.url, kind, name).await?;
        if let Source::Subscription { topic, .. } = source
            && settings.topic.as_deref() != Some(topic.as_str())
        {
            return Err(Error::NotFound {
                kind: "subscription",
                name: format!("{topic}/{name}"),
            });
        }
        Ok((found, settings))
    }
}

/// Whole seconds, rounded up so that nothing comes back early.
pub(super) fn seconds_up(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.min(i32::MAX as u64) as i32
}

#[async_trait]
impl Transport for Sqs {
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
        super::topology::delete(self, source).await
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        super::topology::delete_topic(&self.shared, name).await
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        let (_, settings) = self.source(&Source::queue(queue)).await?;
        Ok(settings.dedup_window)
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        match destination {
            Destination::Queue(name) => {
                let (found, _) = self.source(&Source::queue(name)).await?;
                super::publish::to_queue(&self.shared, &found, batch).await
            }
            Destination::Topic(name) => {
                let arn = self
                    .shared
                    .topic_arn(name)
                    .await?
                    .ok_or_else(|| Error::NotFound {
                        kind: "topic",
                        name: name.clone(),
                    })?;
                super::publish::to_topic(&self.shared, name, &arn, batch).await
            }
        }
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let (found, settings) = self.source(source).await?;
        let names = match source.clone() {
            Source::DeadLetters(origin) => origin_names(&origin),
            other => origin_names(&other),
        };
        let dead_letter_url = self.shared.dead_letters(&names, found.fifo).await?;
        let consumer = match source {
            Source::DeadLetters(_) => {
                let url = dead_letter_url.ok_or_else(|| Error::NotFound {
                    kind: "queue",
                    name: format!("{}.dlq", source.name()),
                })?;
                SqsConsumer::dead_letters(self.shared.clone(), url, found.fifo, settings, options)
            }
            _ => SqsConsumer::live(
                self.shared.clone(),
                found,
                dead_letter_url,
                settings,
                options,
            ),
        };
        Ok(Box::new(consumer))
    }

    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, Ordering::Release);
        Ok(())
    }
}

pub(super) fn origin_names(source: &Source) -> QueueNames {
    match source {
        Source::Queue(name) => QueueNames::of_queue(name),
        Source::Subscription { name, .. } => QueueNames::of_subscription(name),
        Source::DeadLetters(origin) => origin_names(origin),
    }
}
