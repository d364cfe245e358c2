//! The Rust client of a Ferry server (`ferry serve`), over gRPC (`ferry.v1`).
//!
//! - [`Client`]: connect, admin calls (parked keys too), publish, receive and settle one call at a time;
//! - [`PublishStream`]: batches to one queue over one long-lived stream, each a message
//!   each way rather than a call of its own; a batch whose answer was lost is sent again
//!   with its batch id;
//! - [`Producer`]: batches messages (linger, max batch) and retries a batch that may not
//!   have arrived — each publish call carries a client-chosen batch id, which the queue
//!   remembers within its dedup window, so a retry is stored once;
//! - [`Consumer`]: streams deliveries with a prefetch (credit), extends their leases while
//!   they are held, and settles them; it reconnects with backoff after a connection loss.
//!
//! The connection is one HTTP/2 channel, shared by everything made from a `Client`; it
//! reconnects by itself, and calls retried here back off exponentially with jitter.

mod connect;
mod consumer;
mod error;
mod message;
mod producer;
mod publish_call;
mod publish_stream;
mod retry;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferry_proto::v1::{
    self, admin_client::AdminClient, consumer_client::ConsumerClient,
    dead_letters_client::DeadLettersClient, groups_client::GroupsClient,
    publisher_client::PublisherClient,
};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;

pub use connect::{ConnectOptions, Credentials};
pub use consumer::{Consumer, ConsumerConfig, Delivery, DroppedDelivery, SettleStream};
pub use error::{ClientError, ERROR_KIND_METADATA, ErrorKind, Missing, Result, TlsFailure};
pub use ferry_proto::MAX_RECEIVE;
pub use ferry_proto::v1 as proto;
pub use message::Message;
pub use producer::{Producer, ProducerConfig};
pub use publish_stream::PublishStream;
pub use retry::RetryPolicy;

/// The largest message the client sends or takes, as the server's default.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// The channel every call goes through: one HTTP/2 connection, with the API token (if
/// any) added to each call's metadata.
pub type Transport = InterceptedService<tonic::transport::Channel, Credentials>;

/// A connection to a Ferry server; cheap to clone.
#[derive(Clone)]
pub struct Client {
    channel: Transport,
    retry: RetryPolicy,
}

impl Client {
    /// Connects to `url` (`ferry://host:port`) with no token and no TLS; fails if the
    /// server does not answer.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with(url, ConnectOptions::default()).await
    }

    /// Connects to `url` as `options` say: with an API token sent on every call, over TLS.
    pub async fn connect_with(url: &str, options: ConnectOptions) -> Result<Client> {
        let target = connect::Target::parse(url, &options)?;
        let credentials = options.credentials()?;
        let endpoint = Endpoint::from_shared(target.uri.clone())
            .map_err(|e| ClientError::BadUrl {
                url: url.to_owned(),
                problem: e.to_string(),
            })?
            .connect_timeout(Duration::from_secs(5))
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_while_idle(true);
        let endpoint = options.apply_tls(endpoint, &target)?;
        let channel = endpoint.connect().await.map_err(|source| {
            let host = options.tls_host(&target);
            // The URL the caller gave, not the `http(s)://` one the channel is made of.
            match error::tls_failure(&source, &host) {
                Some(failure) => ClientError::Tls {
                    url: url.to_owned(),
                    failure,
                    source,
                },
                None => ClientError::Connect {
                    url: url.to_owned(),
                    reason: error::causes(&source),
                    error: source,
                },
            }
        })?;
        Ok(Client {
            channel: InterceptedService::new(channel, credentials),
            retry: RetryPolicy::default(),
        })
    }

    /// How calls that may be retried safely are retried.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Client {
        self.retry = retry;
        self
    }

    pub(crate) fn admin_client(&self) -> AdminClient<Transport> {
        AdminClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }
    pub(crate) fn publisher(&self) -> PublisherClient<Transport> {
        PublisherClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }
    pub(crate) fn consumer_client(&self) -> ConsumerClient<Transport> {
        ConsumerClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    // ---- Admin ----

    pub async fn create_queue(&self, name: &str, spec: v1::QueueSpec) -> Result<()> {
        self.admin_client()
            .create_queue(v1::CreateQueueRequest {
                name: name.into(),
                spec: Some(spec),
            })
            .await?;
        Ok(())
    }
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        self.admin_client()
            .delete_queue(v1::DeleteQueueRequest { name: name.into() })
            .await?;
        Ok(())
    }
    pub async fn list_queues(&self) -> Result<Vec<String>> {
        Ok(self
            .admin_client()
            .list_queues(v1::ListQueuesRequest {})
            .await?
            .into_inner()
            .names)
    }
    pub async fn describe_queue(&self, name: &str) -> Result<v1::QueueInfo> {
        Ok(self
            .admin_client()
            .describe_queue(v1::DescribeQueueRequest { name: name.into() })
            .await?
            .into_inner())
    }
    /// Creates a temporary queue that only the consumer `owner` receives from; returns its
    /// name (chosen by the server) and the idle timeout in force (`None` takes the server's
    /// default). The server deletes it when a stream `owner` opened on it ends — hold one
    /// open ([`Client::settle_stream`] or [`Client::consumer`] with `owner` as the consumer
    /// name) while the queue is in use, so that it goes with this process — or after the
    /// idle timeout without any operation on it.
    pub async fn create_temporary_queue(
        &self,
        owner: &str,
        idle_timeout: Option<Duration>,
    ) -> Result<(String, Duration)> {
        let created = self
            .admin_client()
            .create_temporary_queue(v1::CreateTemporaryQueueRequest {
                owner: owner.into(),
                idle_timeout_ms: idle_timeout.map(|d| d.as_millis().try_into().unwrap_or(u64::MAX)),
            })
            .await?
            .into_inner();
        Ok((created.name, Duration::from_millis(created.idle_timeout_ms)))
    }
    pub async fn create_topic(&self, name: &str, spec: v1::TopicSpec) -> Result<()> {
        self.admin_client()
            .create_topic(v1::CreateTopicRequest {
                name: name.into(),
                spec: Some(spec),
            })
            .await?;
        Ok(())
    }
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        self.admin_client()
            .delete_topic(v1::DeleteTopicRequest { name: name.into() })
            .await?;
        Ok(())
    }
    pub async fn list_topics(&self) -> Result<Vec<String>> {
        Ok(self
            .admin_client()
            .list_topics(v1::ListTopicsRequest {})
            .await?
            .into_inner()
            .names)
    }
    pub async fn describe_topic(&self, name: &str) -> Result<v1::TopicInfo> {
        Ok(self
            .admin_client()
            .describe_topic(v1::DescribeTopicRequest { name: name.into() })
            .await?
            .into_inner())
    }
    /// Grows a topic to `partitions`; records stay where they are. Fewer is refused.
    pub async fn add_partitions(&self, name: &str, partitions: u32) -> Result<()> {
        self.admin_client()
            .add_partitions(v1::AddPartitionsRequest {
                name: name.into(),
                partitions,
            })
            .await?;
        Ok(())
    }
    /// Replaces queue `name`'s spec with `spec` in place (unset fields take the defaults,
    /// as at creation); settings fixed at creation must be unchanged. Returns the spec now
    /// in force.
    pub async fn update_queue(&self, name: &str, spec: v1::QueueSpec) -> Result<v1::QueueSpec> {
        let reply = self
            .admin_client()
            .update_queue(v1::UpdateQueueRequest {
                name: name.into(),
                spec: Some(spec),
            })
            .await?;
        Ok(reply.into_inner().spec.unwrap_or_default())
    }

    /// Replaces topic `name`'s spec with `spec` in place, as [`Client::update_queue`];
    /// `spec.partitions` 0 keeps the partition count.
    pub async fn update_topic(&self, name: &str, spec: v1::TopicSpec) -> Result<v1::TopicSpec> {
        let reply = self
            .admin_client()
            .update_topic(v1::UpdateTopicRequest {
                name: name.into(),
                spec: Some(spec),
            })
            .await?;
        Ok(reply.into_inner().spec.unwrap_or_default())
    }

    pub async fn create_subscription(&self, name: &str, spec: v1::SubscriptionSpec) -> Result<()> {
        self.admin_client()
            .create_subscription(v1::CreateSubscriptionRequest {
                name: name.into(),
                spec: Some(spec),
            })
            .await?;
        Ok(())
    }
    pub async fn delete_subscription(&self, name: &str) -> Result<()> {
        self.admin_client()
            .delete_subscription(v1::DeleteSubscriptionRequest { name: name.into() })
            .await?;
        Ok(())
    }
    pub async fn describe_subscription(&self, name: &str) -> Result<v1::SubscriptionInfo> {
        Ok(self
            .admin_client()
            .describe_subscription(v1::DescribeSubscriptionRequest { name: name.into() })
            .await?
            .into_inner())
    }
    pub async fn describe_group(&self, topic: &str, group: &str) -> Result<v1::GroupInfo> {
        Ok(self
            .admin_client()
            .describe_group(v1::DescribeGroupRequest {
                topic: topic.into(),
                group: group.into(),
            })
            .await?
            .into_inner())
    }

    /// The consumer groups the server knows, of `topic` or of every topic, as (topic, group).
    pub async fn list_groups(&self, topic: Option<&str>) -> Result<Vec<(String, String)>> {
        Ok(self
            .admin_client()
            .list_groups(v1::ListGroupsRequest {
                topic: topic.map(str::to_owned),
            })
            .await?
            .into_inner()
            .groups
            .into_iter()
            .map(|g| (g.topic, g.group))
            .collect())
    }

    /// Deletes a consumer group's committed offsets and state; refused while it has members.
    pub async fn delete_group(&self, topic: &str, group: &str) -> Result<()> {
        self.admin_client()
            .delete_group(v1::DeleteGroupRequest {
                topic: topic.into(),
                group: group.into(),
            })
            .await?;
        Ok(())
    }

    /// Consumer-group calls (join, heartbeat, poll, commit, read by position).
    pub fn groups(&self) -> GroupsClient<Transport> {
        GroupsClient::new(self.channel.clone()).max_decoding_message_size(MAX_MESSAGE)
    }

    // ---- Publish ----

    /// Publishes a batch to `queue` and returns the ids, in order. The call carries a
    /// client-chosen batch id, the same on every try, so a publish retried after a lost
    /// answer is stored once and answered with the original ids (within the queue's dedup
    /// window): one check per call on the server, not one per message. Messages without
    /// an id of their own get ids the server mints.
    pub async fn publish(&self, queue: &str, messages: Vec<Message>) -> Result<Vec<String>> {
        self.publish_with_batch_id(queue, &message::IdMinter::now().mint(), messages)
            .await
    }

    /// [`publish`](Self::publish) with the caller's batch id (a ULID): for a caller that
    /// keeps the id of a call across its own restarts and sends the call again with it.
    /// A call with the batch id of one the queue stored within its dedup window stores
    /// nothing and answers with the original ids.
    pub async fn publish_with_batch_id(
        &self,
        queue: &str,
        batch_id: &str,
        messages: Vec<Message>,
    ) -> Result<Vec<String>> {
        let messages: Vec<v1::OutgoingMessage> = messages.into_iter().map(|m| m.0).collect();
        // Shared by every try: a retry sends the same batch without copying it.
        let request = Arc::new(v1::PublishRequest {
            batch_id: Some(batch_id.to_owned()),
            queue: queue.into(),
            messages,
        });
        self.retry
            .run(|| {
                let (channel, request) = (self.channel.clone(), Arc::clone(&request));
                async move { Ok(publish_call::publish(channel, request).await?.ids) }
            })
            .await
    }

    /// A [`PublishStream`] to `queue`: batches one after another on one stream, for a
    /// producer that publishes steadily. Opens nothing yet: the stream starts with the
    /// first batch.
    pub fn publish_stream(&self, queue: &str) -> PublishStream {
        PublishStream::new(self.clone(), queue.to_owned())
    }

    /// Publishes a batch to `topic`, each message to its key's partition.
    pub async fn publish_to_topic(
        &self,
        topic: &str,
        messages: Vec<Message>,
    ) -> Result<Vec<v1::TopicPosition>> {
        Ok(self
            .publisher()
            .publish_to_topic(v1::PublishToTopicRequest {
                topic: topic.into(),
                messages: messages.into_iter().map(|m| m.0).collect(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .positions)
    }

    /// Publishes a batch to one partition of `topic`, whatever the messages' keys.
    pub async fn publish_to_partition(
        &self,
        topic: &str,
        partition: u32,
        messages: Vec<Message>,
    ) -> Result<Vec<v1::TopicPosition>> {
        Ok(self
            .publisher()
            .publish_to_topic(v1::PublishToTopicRequest {
                topic: topic.into(),
                messages: messages.into_iter().map(|m| m.0).collect(),
                partition: Some(partition),
                ..Default::default()
            })
            .await?
            .into_inner()
            .positions)
    }

    /// A batching producer for `queue`.
    pub fn producer(&self, queue: &str, config: ProducerConfig) -> Producer {
        Producer::start(self.clone(), queue.to_owned(), config)
    }

    // ---- Consume ----

    /// Up to `max` messages of `queue`, waiting up to `wait` (cut to 20 s by the server) for
    /// the first. `max` is 1 to [`MAX_RECEIVE`]; the server refuses more.
    pub async fn receive(
        &self,
        queue: &str,
        consumer: &str,
        max: u32,
        wait: Option<Duration>,
    ) -> Result<Vec<v1::Delivery>> {
        Ok(self
            .consumer_client()
            .receive(v1::ReceiveRequest {
                queue: queue.into(),
                consumer: consumer.into(),
                max,
                lease_ms: None,
                wait_ms: wait.map(|w| w.as_millis() as u64),
            })
            .await?
            .into_inner()
            .deliveries)
    }
    pub async fn ack(&self, queue: &str, seq: u64, token: u64) -> Result<()> {
        self.consumer_client()
            .ack(v1::AckRequest {
                queue: queue.into(),
                seq,
                token,
            })
            .await?;
        Ok(())
    }
    pub async fn nack(
        &self,
        queue: &str,
        seq: u64,
        token: u64,
        delay: Option<Duration>,
        error: Option<&str>,
    ) -> Result<v1::NackResponse> {
        Ok(self
            .consumer_client()
            .nack(v1::NackRequest {
                queue: queue.into(),
                seq,
                token,
                delay_ms: delay.map(|d| d.as_millis() as u64),
                error: error.map(str::to_owned),
            })
            .await?
            .into_inner())
    }
    pub async fn reject(&self, queue: &str, seq: u64, token: u64, reason: &str) -> Result<()> {
        self.consumer_client()
            .reject(v1::RejectRequest {
                queue: queue.into(),
                seq,
                token,
                reason: reason.into(),
            })
            .await?;
        Ok(())
    }

    /// Keeps a received message hidden for `by` from now; returns the new deadline (ms).
    pub async fn extend(&self, queue: &str, seq: u64, token: u64, by: Duration) -> Result<i64> {
        Ok(self
            .consumer_client()
            .extend(v1::ExtendRequest {
                queue: queue.into(),
                seq,
                token,
                by_ms: by.as_millis() as u64,
            })
            .await?
            .into_inner()
            .lease_until_ms)
    }

    /// A streaming consumer of `queue` named `consumer`.
    pub async fn consumer(
        &self,
        queue: &str,
        consumer: &str,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        Consumer::open(self.clone(), queue.to_owned(), consumer.to_owned(), config).await
    }

    /// The settle stream of consumer `consumer` of `queue`: settles deliveries fetched with
    /// [`Client::receive`] on one stream, where settles in flight together share one journal
    /// write. Fails at once when the queue does not exist.
    pub async fn settle_stream(&self, queue: &str, consumer: &str) -> Result<SettleStream> {
        SettleStream::open(self.clone(), queue.to_owned(), consumer.to_owned()).await
    }

    /// Opens a `Consume` stream driven by the caller: `requests` go to the server as they
    /// are sent (the first must be `open`), and the server's deliveries and settle answers
    /// come back in order. For callers that grant credit and settle on their own terms;
    /// [`Client::consumer`] does both for the common case. The channel is unbounded so that
    /// a caller reading answers is never blocked sending (credit bounds what is sent).
    pub async fn consume_stream(
        &self,
        requests: tokio::sync::mpsc::UnboundedReceiver<v1::ConsumeRequest>,
    ) -> Result<tonic::Streaming<v1::ConsumeResponse>> {
        let requests = tokio_stream::wrappers::UnboundedReceiverStream::new(requests);
        Ok(self.consumer_client().consume(requests).await?.into_inner())
    }

    // ---- Parked keys ----

    /// Holds `key`'s messages on the key-shared queue `queue` until [`Client::unpark`]:
    /// other keys keep flowing. A delivery in flight is not recalled. A queue that is not
    /// key-shared refuses (FAILED_PRECONDITION, kind conflict).
    pub async fn park(&self, queue: &str, key: impl Into<Bytes>) -> Result<()> {
        self.admin_client()
            .park_key(v1::ParkKeyRequest {
                queue: queue.into(),
                key: key.into(),
            })
            .await?;
        Ok(())
    }

    /// Releases a parked key: its messages are delivered again, in order.
    pub async fn unpark(&self, queue: &str, key: impl Into<Bytes>) -> Result<()> {
        self.admin_client()
            .unpark_key(v1::UnparkKeyRequest {
                queue: queue.into(),
                key: key.into(),
            })
            .await?;
        Ok(())
    }

    /// The keys parked on `queue`, in byte order, each with how many messages it holds.
    pub async fn parked_keys(&self, queue: &str) -> Result<Vec<v1::ParkedKey>> {
        Ok(self
            .admin_client()
            .list_parked_keys(v1::ListParkedKeysRequest {
                queue: queue.into(),
            })
            .await?
            .into_inner()
            .keys)
    }

    // ---- Dead letters ----

    /// Up to `max` messages of `dlq` after seq `after_seq` (from the first with `None`),
    /// without taking them.
    pub async fn peek(
        &self,
        dlq: &str,
        filter: Option<v1::DeadLetterFilter>,
        max: u32,
        after_seq: Option<u64>,
    ) -> Result<Vec<v1::Delivery>> {
        Ok(DeadLettersClient::new(self.channel.clone())
            .max_decoding_message_size(usize::MAX)
            .peek(v1::PeekRequest {
                dlq: dlq.into(),
                filter,
                max,
                after_seq,
            })
            .await?
            .into_inner()
            .letters)
    }
    pub async fn redrive(&self, request: v1::RedriveRequest) -> Result<v1::RedriveResponse> {
        Ok(DeadLettersClient::new(self.channel.clone())
            .redrive(request)
            .await?
            .into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_ulids_in_time_order() {
        let a = message::IdMinter::now().mint();
        std::thread::sleep(Duration::from_millis(2));
        let b = message::IdMinter::now().mint();
        assert_eq!(a.len(), 26);
        assert!(a < b);
    }
}
