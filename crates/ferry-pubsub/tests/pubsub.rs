//! The Pub/Sub front end over a real broker, driven by the generated `google.pubsub.v1`
//! clients over loopback gRPC.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use pb::publisher_client::PublisherClient;
use pb::subscriber_client::SubscriberClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;

use support::Served;

const TOPIC: &str = "projects/demo/topics/orders";
const SUB: &str = "projects/demo/subscriptions/billing";

impl Served {
    async fn clients(&self) -> (PublisherClient<Channel>, SubscriberClient<Channel>) {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        (
            PublisherClient::new(channel.clone()),
            SubscriberClient::new(channel),
        )
    }
}

fn message(data: &str, key: &str) -> pb::PubsubMessage {
    let mut m = pb::PubsubMessage {
        data: Bytes::copy_from_slice(data.as_bytes()),
        ordering_key: key.into(),
        ..Default::default()
    };
    m.attributes.insert("kind".into(), "order".into());
    m
}

async fn set_up(
    publisher: &mut PublisherClient<Channel>,
    subscriber: &mut SubscriberClient<Channel>,
    ordered: bool,
) {
    publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    subscriber
        .create_subscription(pb::Subscription {
            name: SUB.into(),
            topic: TOPIC.into(),
            ack_deadline_seconds: 20,
            enable_message_ordering: ordered,
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn publish(
    publisher: &mut PublisherClient<Channel>,
    messages: Vec<pb::PubsubMessage>,
) -> Vec<String> {
    publisher
        .publish(pb::PublishRequest {
            topic: TOPIC.into(),
            messages,
        })
        .await
        .unwrap()
        .into_inner()
        .message_ids
}

async fn pull(subscriber: &mut SubscriberClient<Channel>, max: i32) -> Vec<pb::ReceivedMessage> {
    #[allow(deprecated)]
    let request = pb::PullRequest {
        subscription: SUB.into(),
        max_messages: max,
        return_immediately: true,
    };
    subscriber
        .pull(request)
        .await
        .unwrap()
        .into_inner()
        .received_messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_messages_are_pulled_acknowledged_and_handed_back() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;

    let ids = publish(&mut publisher, vec![message("a", "k1"), message("b", "")]).await;
    assert_eq!(ids.len(), 2);
    let got = pull(&mut subscriber, 10).await;
    assert_eq!(got.len(), 2);
    let first = got[0].message.as_ref().unwrap();
    assert_eq!(first.data, Bytes::from_static(b"a"));
    assert_eq!(first.attributes["kind"], "order");
    assert_eq!(first.ordering_key, "k1");
    assert_eq!(first.message_id, ids[0]);
    assert!(first.publish_time.is_some());
    // No dead-letter policy: Pub/Sub leaves the attempt count unset.
    assert_eq!(got[0].delivery_attempt, 0);

    // One acknowledged, one handed back at once (deadline 0): only that one comes again.
    subscriber
        .acknowledge(pb::AcknowledgeRequest {
            subscription: SUB.into(),
            ack_ids: vec![got[0].ack_id.clone()],
        })
        .await
        .unwrap();
    subscriber
        .modify_ack_deadline(pb::ModifyAckDeadlineRequest {
            subscription: SUB.into(),
            ack_ids: vec![got[1].ack_id.clone()],
            ack_deadline_seconds: 0,
        })
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        let again = pull(&mut subscriber, 10).await;
        if !again.is_empty() || Instant::now() > deadline {
            break again;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].message.as_ref().unwrap().message_id, ids[1]);

    // A second ack of the first delivery is dropped, as Pub/Sub's best-effort acks are;
    // a malformed ack id is refused.
    subscriber
        .acknowledge(pb::AcknowledgeRequest {
            subscription: SUB.into(),
            ack_ids: vec![got[0].ack_id.clone(), again[0].ack_id.clone()],
        })
        .await
        .unwrap();
    let bad = subscriber
        .acknowledge(pb::AcknowledgeRequest {
            subscription: SUB.into(),
            ack_ids: vec!["not-an-ack-id".into()],
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(pull(&mut subscriber, 10).await.is_empty());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_and_subscriptions_are_the_brokers_and_listed_per_project() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, true).await;

    // The broker's own names: what the CLI and the other front ends see.
    assert!(served.broker.describe_topic("demo.orders").is_ok());
    let info = served.broker.describe_subscription("demo.billing").unwrap();
    assert_eq!(info.spec.topic.as_str(), "demo.orders");
    assert_eq!(info.spec.delivery.lease, Duration::from_secs(20));

    let got = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.topic, TOPIC);
    assert_eq!(got.ack_deadline_seconds, 20);
    assert!(got.enable_message_ordering);

    let topics = publisher
        .list_topics(pb::ListTopicsRequest {
            project: "projects/demo".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(topics.topics.len(), 1);
    assert_eq!(topics.topics[0].name, TOPIC);
    let other = publisher
        .list_topics(pb::ListTopicsRequest {
            project: "projects/other".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(other.topics.is_empty());
    let subs = publisher
        .list_topic_subscriptions(pb::ListTopicSubscriptionsRequest {
            topic: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(subs.subscriptions, vec![SUB.to_owned()]);

    // Errors from the broker's classification.
    let again = publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    let missing = publisher
        .publish(pb::PublishRequest {
            topic: "projects/demo/topics/nowhere".into(),
            messages: vec![message("x", "")],
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    // What is not carried out is refused and creates nothing.
    let pushed = subscriber
        .create_subscription(pb::Subscription {
            name: "projects/demo/subscriptions/pushed".into(),
            topic: TOPIC.into(),
            push_config: Some(pb::PushConfig {
                push_endpoint: "http://127.0.0.1:9/push".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(pushed.code(), Code::Unimplemented);
    let nothing = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: "projects/demo/subscriptions/pushed".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(nothing.code(), Code::NotFound);

    subscriber
        .delete_subscription(pb::DeleteSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap();
    publisher
        .delete_topic(pb::DeleteTopicRequest {
            topic: TOPIC.into(),
        })
        .await
        .unwrap();
    assert!(served.broker.describe_topic("demo.orders").is_err());
    served.stop().await;
}

/// A streaming pull sends no more than the client's `max_outstanding_messages` until some
/// are acknowledged; acks and deadline changes travel on the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_pull_keeps_to_its_flow_control() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;
    let messages = (0..10).map(|i| message(&i.to_string(), "")).collect();
    publish(&mut publisher, messages).await;

    let (requests, rx) = mpsc::channel(16);
    requests
        .send(pb::StreamingPullRequest {
            subscription: SUB.into(),
            stream_ack_deadline_seconds: 30,
            max_outstanding_messages: 3,
            client_id: "test-client".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut responses = subscriber
        .streaming_pull(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();

    let mut held = Vec::new();
    while held.len() < 3 {
        let response = responses.message().await.unwrap().expect("a response");
        held.extend(response.received_messages);
    }
    assert_eq!(held.len(), 3, "three outstanding at most");
    // Nothing more while three are outstanding.
    let more = tokio::time::timeout(Duration::from_millis(700), responses.message()).await;
    assert!(
        more.is_err(),
        "a fourth message came while three were outstanding"
    );

    // Acknowledge two and extend the third: two more come.
    requests
        .send(pb::StreamingPullRequest {
            ack_ids: vec![held[0].ack_id.clone(), held[1].ack_id.clone()],
            modify_deadline_seconds: vec![60],
            modify_deadline_ack_ids: vec![held[2].ack_id.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut next = Vec::new();
    while next.len() < 2 {
        let response = tokio::time::timeout(Duration::from_secs(10), responses.message())
            .await
            .expect("more after the acks")
            .unwrap()
            .expect("a response");
        next.extend(response.received_messages);
    }
    assert_eq!(next.len(), 2);
    let info = served.broker.describe_queue("demo.billing").unwrap();
    assert_eq!(info.stats.state.in_flight, 3, "{:?}", info.stats);
    assert_eq!(info.stats.acked, 2, "{:?}", info.stats);

    // An ack by the unary call frees the stream's room too (Google's Python client acks
    // that way).
    subscriber
        .acknowledge(pb::AcknowledgeRequest {
            subscription: SUB.into(),
            ack_ids: vec![next[0].ack_id.clone()],
        })
        .await
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .expect("one more after the unary ack")
        .unwrap()
        .expect("a response");
    assert_eq!(response.received_messages.len(), 1);
    drop(requests);
    served.stop().await;
}

/// What was published survives a restart of the server on the same directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_messages_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;
    let ids = publish(&mut publisher, vec![message("kept", "")]).await;
    drop((publisher, subscriber));
    let broker = served.broker.clone();
    served.stop().await;
    drop(broker);

    let served = Served::start(dir.path()).await;
    let (_, mut subscriber) = served.clients().await;
    let got = pull(&mut subscriber, 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message.as_ref().unwrap().message_id, ids[0]);
    served.stop().await;
}

/// Creates SUB on TOPIC with `settings` (name and topic filled in).
async fn subscribe_with(
    publisher: &mut PublisherClient<Channel>,
    subscriber: &mut SubscriberClient<Channel>,
    settings: pb::Subscription,
) -> pb::Subscription {
    publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    subscriber
        .create_subscription(pb::Subscription {
            name: SUB.into(),
            topic: TOPIC.into(),
            ..settings
        })
        .await
        .unwrap()
        .into_inner()
}

fn with_kind(data: &str, kind: &str) -> pb::PubsubMessage {
    let mut m = message(data, "");
    m.attributes.insert("kind".into(), kind.into());
    m
}

/// A filter in Pub/Sub's syntax becomes the subscription's filter in the broker (which the
/// CLI and console show in theirs), and only matching messages reach the subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_in_pubsubs_syntax_takes_only_matching_messages() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    let filter = r#"attributes.kind = "paid" OR hasPrefix(attributes.kind, "refund-")"#;
    let created = subscribe_with(
        &mut publisher,
        &mut subscriber,
        pb::Subscription {
            filter: filter.into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(created.filter, filter);
    let info = served.broker.describe_subscription("demo.billing").unwrap();
    assert_eq!(
        info.spec.filter.to_string(),
        r#"kind = "paid" or prefix(kind, "refund-")"#
    );
    let kinds = ["paid", "created", "refund-partial", "shipped"];
    publish(
        &mut publisher,
        kinds.iter().map(|k| with_kind(k, k)).collect(),
    )
    .await;
    let got = pull(&mut subscriber, 10).await;
    let mut taken: Vec<String> = got
        .iter()
        .map(|m| m.message.as_ref().unwrap().attributes["kind"].clone())
        .collect();
    taken.sort();
    assert_eq!(taken, ["paid", "refund-partial"]);

    let refused = subscriber
        .create_subscription(pb::Subscription {
            name: "projects/demo/subscriptions/mixed".into(),
            topic: TOPIC.into(),
            filter: "attributes:a AND attributes:b OR attributes:c".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    served.stop().await;
}

/// Under exactly-once delivery an ack whose lease has ended fails, naming the ack id as
/// Google's clients read it; on a stream it is confirmed as invalid. The setting is kept
/// across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_acks_report_the_ack_ids_that_did_not_take_effect() {
    use tonic_types::StatusExt;

    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    let created = subscribe_with(
        &mut publisher,
        &mut subscriber,
        pb::Subscription {
            enable_exactly_once_delivery: true,
            ..Default::default()
        },
    )
    .await;
    assert!(created.enable_exactly_once_delivery);
    publish(&mut publisher, vec![message("a", ""), message("b", "")]).await;
    let got = pull(&mut subscriber, 10).await;
    assert_eq!(got.len(), 2);
    // Handing the first back ends its lease: its ack id is no longer valid.
    subscriber
        .modify_ack_deadline(pb::ModifyAckDeadlineRequest {
            subscription: SUB.into(),
            ack_ids: vec![got[0].ack_id.clone()],
            ack_deadline_seconds: 0,
        })
        .await
        .unwrap();
    let failed = subscriber
        .acknowledge(pb::AcknowledgeRequest {
            subscription: SUB.into(),
            ack_ids: vec![got[0].ack_id.clone(), got[1].ack_id.clone()],
        })
        .await
        .unwrap_err();
    assert_eq!(failed.code(), Code::InvalidArgument);
    let info = failed.get_details_error_info().expect("an ErrorInfo");
    assert_eq!(info.reason, "EXACTLY_ONCE_ACKID_FAILURE");
    assert_eq!(
        info.metadata.keys().collect::<Vec<_>>(),
        [&got[0].ack_id],
        "only the stale ack id fails"
    );
    assert_eq!(
        info.metadata[&got[0].ack_id],
        "PERMANENT_FAILURE_INVALID_ACK_ID"
    );

    // The handed-back message comes again; on a stream, acks are confirmed.
    let (requests, rx) = mpsc::channel(4);
    requests
        .send(pb::StreamingPullRequest {
            subscription: SUB.into(),
            stream_ack_deadline_seconds: 30,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut responses = subscriber
        .streaming_pull(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        first
            .subscription_properties
            .unwrap()
            .exactly_once_delivery_enabled
    );
    assert_eq!(first.received_messages.len(), 1);
    let again = first.received_messages[0].ack_id.clone();
    requests
        .send(pb::StreamingPullRequest {
            ack_ids: vec![again.clone(), got[0].ack_id.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    let confirmed = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .acknowledge_confirmation
        .expect("a confirmation");
    assert_eq!(confirmed.ack_ids, [again]);
    assert_eq!(confirmed.invalid_ack_ids, [got[0].ack_id.clone()]);
    drop(requests);
    drop((publisher, subscriber, responses));

    served.stop().await;
    let served = Served::start(dir.path()).await;
    let (_, mut subscriber) = served.clients().await;
    let kept = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(kept.enable_exactly_once_delivery);
    served.stop().await;
}

/// A message handed back until its dead-letter policy's attempts are used up moves to the
/// dead-letter topic, counting `delivery_attempt` on the way and carrying Pub/Sub's
/// dead-letter attributes when it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_message_moves_to_the_dead_letter_topic_after_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    let failures = "projects/demo/topics/failures";
    publisher
        .create_topic(pb::Topic {
            name: failures.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    subscriber
        .create_subscription(pb::Subscription {
            name: "projects/demo/subscriptions/failures-audit".into(),
            topic: failures.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let created = subscribe_with(
        &mut publisher,
        &mut subscriber,
        pb::Subscription {
            dead_letter_policy: Some(pb::DeadLetterPolicy {
                dead_letter_topic: failures.into(),
                max_delivery_attempts: 5,
            }),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        created.dead_letter_policy.unwrap().dead_letter_topic,
        failures
    );
    let ids = publish(&mut publisher, vec![message("poison", "")]).await;

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut attempts = Vec::new();
    while attempts.len() < 5 && Instant::now() < deadline {
        for m in pull(&mut subscriber, 10).await {
            attempts.push(m.delivery_attempt);
            subscriber
                .modify_ack_deadline(pb::ModifyAckDeadlineRequest {
                    subscription: SUB.into(),
                    ack_ids: vec![m.ack_id],
                    ack_deadline_seconds: 0,
                })
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(attempts, [1, 2, 3, 4, 5]);

    let mut letters = Vec::new();
    while letters.is_empty() && Instant::now() < deadline {
        #[allow(deprecated)]
        let request = pb::PullRequest {
            subscription: "projects/demo/subscriptions/failures-audit".into(),
            max_messages: 10,
            return_immediately: true,
        };
        letters = subscriber
            .pull(request)
            .await
            .unwrap()
            .into_inner()
            .received_messages;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(letters.len(), 1, "the letter reached the dead-letter topic");
    let letter = letters[0].message.as_ref().unwrap();
    assert_eq!(letter.message_id, ids[0]);
    assert_eq!(letter.data, Bytes::from_static(b"poison"));
    assert_eq!(letter.attributes["kind"], "order");
    assert_eq!(
        letter.attributes["CloudPubSubDeadLetterSourceDeliveryCount"],
        "5"
    );
    assert_eq!(
        letter.attributes["CloudPubSubDeadLetterSourceSubscription"],
        "billing"
    );
    assert_eq!(
        letter.attributes["CloudPubSubDeadLetterSourceSubscriptionProject"],
        "demo"
    );
    assert_eq!(
        letters[0].delivery_attempt, 0,
        "no policy on the audit subscription"
    );
    assert!(
        pull(&mut subscriber, 10).await.is_empty(),
        "gone from the origin"
    );

    let missing = subscriber
        .create_subscription(pb::Subscription {
            name: "projects/demo/subscriptions/nowhere".into(),
            topic: TOPIC.into(),
            dead_letter_policy: Some(pb::DeadLetterPolicy {
                dead_letter_topic: "projects/demo/topics/nowhere".into(),
                max_delivery_attempts: 5,
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument, "{missing:?}");
    served.stop().await;
}

/// Seek to a time redelivers what was acknowledged since; a snapshot keeps the
/// unacknowledged messages of its moment and everything after, and seeking to it brings
/// exactly those back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_to_a_time_and_to_a_snapshot_bring_messages_back() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;
    publish(&mut publisher, vec![message("early", "")]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let between = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    publish(&mut publisher, vec![message("late", "")]).await;
    let got = pull(&mut subscriber, 10).await;
    assert_eq!(got.len(), 2);
    ack(&mut subscriber, &got).await;
    assert!(pull(&mut subscriber, 10).await.is_empty());

    subscriber
        .seek(pb::SeekRequest {
            subscription: SUB.into(),
            target: Some(pb::seek_request::Target::Time(prost_types::Timestamp {
                seconds: between.as_secs() as i64,
                nanos: between.subsec_nanos() as i32,
            })),
        })
        .await
        .unwrap();
    let again = pull(&mut subscriber, 10).await;
    assert_eq!(data(&again), ["late"]);

    // A snapshot while "late" is unacknowledged; then it is acknowledged and one more
    // published: the seek brings "late" and "later" back.
    let snapshot = "projects/demo/snapshots/before-deploy";
    let made = subscriber
        .create_snapshot(pb::CreateSnapshotRequest {
            name: snapshot.into(),
            subscription: SUB.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(made.topic, TOPIC);
    assert!(made.expire_time.is_some());
    ack(&mut subscriber, &again).await;
    publish(&mut publisher, vec![message("later", "")]).await;
    let latest = pull(&mut subscriber, 10).await;
    assert_eq!(data(&latest), ["later"]);
    ack(&mut subscriber, &latest).await;

    subscriber
        .seek(pb::SeekRequest {
            subscription: SUB.into(),
            target: Some(pb::seek_request::Target::Snapshot(snapshot.into())),
        })
        .await
        .unwrap();
    let mut back = data(&pull(&mut subscriber, 10).await);
    back.sort();
    assert_eq!(back, ["late", "later"]);

    let listed = subscriber
        .list_snapshots(pb::ListSnapshotsRequest {
            project: "projects/demo".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.snapshots.len(), 1);
    assert_eq!(listed.snapshots[0].name, snapshot);
    let of_topic = publisher
        .list_topic_snapshots(pb::ListTopicSnapshotsRequest {
            topic: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(of_topic.snapshots, [snapshot]);
    let twice = subscriber
        .create_snapshot(pb::CreateSnapshotRequest {
            name: snapshot.into(),
            subscription: SUB.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(twice.code(), Code::AlreadyExists);
    subscriber
        .delete_snapshot(pb::DeleteSnapshotRequest {
            snapshot: snapshot.into(),
        })
        .await
        .unwrap();
    let gone = subscriber
        .seek(pb::SeekRequest {
            subscription: SUB.into(),
            target: Some(pb::seek_request::Target::Snapshot(snapshot.into())),
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
    served.stop().await;
}

async fn ack(subscriber: &mut SubscriberClient<Channel>, messages: &[pb::ReceivedMessage]) {
    subscriber
        .acknowledge(pb::AcknowledgeRequest {
            subscription: SUB.into(),
            ack_ids: messages.iter().map(|m| m.ack_id.clone()).collect(),
        })
        .await
        .unwrap();
}

fn data(messages: &[pb::ReceivedMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.message.as_ref().unwrap().data).into_owned())
        .collect()
}

/// UpdateSubscription changes what its mask names, checked as at creation, and nothing
/// else; what Pub/Sub fixes at creation is refused. UpdateTopic changes the retention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_change_what_the_mask_names() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;
    let mask = |paths: &[&str]| {
        Some(prost_types::FieldMask {
            paths: paths.iter().map(|p| p.to_string()).collect(),
        })
    };
    let updated = subscriber
        .update_subscription(pb::UpdateSubscriptionRequest {
            subscription: Some(pb::Subscription {
                name: SUB.into(),
                ack_deadline_seconds: 60,
                enable_exactly_once_delivery: true,
                // Not in the mask: left as it is.
                message_retention_duration: Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                }),
                ..Default::default()
            }),
            update_mask: mask(&["ack_deadline_seconds", "enable_exactly_once_delivery"]),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(updated.ack_deadline_seconds, 60);
    assert!(updated.enable_exactly_once_delivery);
    let info = served.broker.describe_subscription("demo.billing").unwrap();
    assert_eq!(info.spec.delivery.lease, Duration::from_secs(60));
    assert_eq!(
        info.spec.delivery.default_ttl,
        Some(Duration::from_secs(7 * 24 * 3600)),
        "retention was not in the mask"
    );
    let got = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.ack_deadline_seconds, 60);
    assert!(got.enable_exactly_once_delivery);

    for (subscription, paths, code) in [
        (
            pb::Subscription {
                name: SUB.into(),
                filter: "attributes:x".into(),
                ..Default::default()
            },
            &["filter"][..],
            Code::InvalidArgument,
        ),
        (
            pb::Subscription {
                name: SUB.into(),
                ack_deadline_seconds: 601,
                ..Default::default()
            },
            &["ack_deadline_seconds"][..],
            Code::InvalidArgument,
        ),
        (
            pb::Subscription {
                name: SUB.into(),
                ..Default::default()
            },
            &[][..],
            Code::InvalidArgument,
        ),
    ] {
        let refused = subscriber
            .update_subscription(pb::UpdateSubscriptionRequest {
                subscription: Some(subscription),
                update_mask: mask(paths),
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), code, "{paths:?}: {refused:?}");
    }
    assert_eq!(
        served
            .broker
            .describe_subscription("demo.billing")
            .unwrap()
            .spec
            .delivery
            .lease,
        Duration::from_secs(60),
        "a refused update changes nothing"
    );

    let topic = publisher
        .update_topic(pb::UpdateTopicRequest {
            topic: Some(pb::Topic {
                name: TOPIC.into(),
                message_retention_duration: Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                }),
                ..Default::default()
            }),
            update_mask: mask(&["message_retention_duration"]),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(topic.message_retention_duration.unwrap().seconds, 3600);
    assert_eq!(
        served
            .broker
            .describe_topic("demo.orders")
            .unwrap()
            .spec
            .retention
            .max_age,
        Some(Duration::from_secs(3600))
    );
    served.stop().await;
}

/// `retain_acked_messages` holds when the topic keeps messages at least as long as the
/// subscription's retention: accepted then, refused otherwise, and the topic's retention
/// may not drop below it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retaining_acknowledged_messages_needs_a_topic_that_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    let hour = || {
        Some(prost_types::Duration {
            seconds: 3600,
            nanos: 0,
        })
    };
    publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            message_retention_duration: hour(),
            ..Default::default()
        })
        .await
        .unwrap();
    let too_long = subscriber
        .create_subscription(pb::Subscription {
            name: SUB.into(),
            topic: TOPIC.into(),
            retain_acked_messages: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(too_long.code(), Code::FailedPrecondition, "{too_long:?}");
    let created = subscriber
        .create_subscription(pb::Subscription {
            name: SUB.into(),
            topic: TOPIC.into(),
            retain_acked_messages: true,
            message_retention_duration: hour(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created.retain_acked_messages);
    let shorter = publisher
        .update_topic(pb::UpdateTopicRequest {
            topic: Some(pb::Topic {
                name: TOPIC.into(),
                message_retention_duration: Some(prost_types::Duration {
                    seconds: 1800,
                    nanos: 0,
                }),
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["message_retention_duration".into()],
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(shorter.code(), Code::FailedPrecondition, "{shorter:?}");
    let got = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(got.retain_acked_messages);
    served.stop().await;
}

/// A subscription with an expiration policy is deleted once unused for its ttl; use (a
/// pull) keeps it, and one without a ttl never expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_subscription_expires_after_its_ttl() {
    const DAY: i64 = 24 * 3600 * 1000;
    let dir = tempfile::tempdir().unwrap();
    let clock = ferry_storage::ManualClock::new(1_800_000_000_000);
    let config = ferry_broker::BrokerConfig {
        clock: std::sync::Arc::new(clock.clone()),
        ..Default::default()
    };
    let served = Served::start_with(dir.path(), config, false, |pubsub| {
        pubsub.with_expiry_sweep(Duration::from_millis(20))
    })
    .await;
    let (mut publisher, mut subscriber) = served.clients().await;
    let day = || {
        Some(pb::ExpirationPolicy {
            ttl: Some(prost_types::Duration {
                seconds: 24 * 3600,
                nanos: 0,
            }),
        })
    };
    let created = subscribe_with(
        &mut publisher,
        &mut subscriber,
        pb::Subscription {
            expiration_policy: day(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(created.expiration_policy, day());
    let forever = "projects/demo/subscriptions/forever";
    subscriber
        .create_subscription(pb::Subscription {
            name: forever.into(),
            topic: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let short = subscriber
        .create_subscription(pb::Subscription {
            name: "projects/demo/subscriptions/short".into(),
            topic: TOPIC.into(),
            expiration_policy: Some(pb::ExpirationPolicy {
                ttl: Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                }),
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(short.code(), Code::InvalidArgument);

    let exists = |subscriber: &mut SubscriberClient<Channel>, name: &'static str| {
        let mut subscriber = subscriber.clone();
        async move {
            subscriber
                .get_subscription(pb::GetSubscriptionRequest {
                    subscription: name.into(),
                })
                .await
                .is_ok()
        }
    };
    // Used most of a day later: kept, and the day starts again.
    clock.advance(DAY - 60_000);
    pull(&mut subscriber, 1).await;
    clock.advance(DAY / 2);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(exists(&mut subscriber, SUB).await, "used within its ttl");
    clock.advance(DAY);
    let deadline = Instant::now() + Duration::from_secs(10);
    while exists(&mut subscriber, SUB).await && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !exists(&mut subscriber, SUB).await,
        "deleted after its ttl unused"
    );
    assert!(exists(&mut subscriber, forever).await, "no ttl, no expiry");
    served.stop().await;
}

/// Labels, an expiration policy and exactly-once delivery are the front end's own record:
/// set at creation, changed by mask, shown back, and kept across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_ends_own_settings_change_by_mask_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    let labels = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let created = subscribe_with(
        &mut publisher,
        &mut subscriber,
        pb::Subscription {
            labels: labels(&[("team", "billing")]),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(created.labels, labels(&[("team", "billing")]));
    let two_days = Some(pb::ExpirationPolicy {
        ttl: Some(prost_types::Duration {
            seconds: 2 * 24 * 3600,
            nanos: 0,
        }),
    });
    subscriber
        .update_subscription(pb::UpdateSubscriptionRequest {
            subscription: Some(pb::Subscription {
                name: SUB.into(),
                labels: labels(&[("team", "payments"), ("tier", "gold")]),
                expiration_policy: two_days,
                retain_acked_messages: true,
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec![
                    "labels".into(),
                    "expiration_policy".into(),
                    "retain_acked_messages".into(),
                ],
            }),
        })
        .await
        .unwrap();
    let bad_label = subscriber
        .update_subscription(pb::UpdateSubscriptionRequest {
            subscription: Some(pb::Subscription {
                name: SUB.into(),
                labels: labels(&[("Team", "x")]),
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["labels".into()],
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(bad_label.code(), Code::InvalidArgument);
    drop((publisher, subscriber));
    served.stop().await;

    let served = Served::start(dir.path()).await;
    let (_, mut subscriber) = served.clients().await;
    let got = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        got.labels,
        labels(&[("team", "payments"), ("tier", "gold")])
    );
    assert_eq!(got.expiration_policy, two_days);
    assert!(got.retain_acked_messages);
    served.stop().await;
}

/// The topic and its subscription set up, one message published, then the topic deleted.
async fn deleted_topic_with_backlog(
    served: &Served,
    payload: &str,
) -> (PublisherClient<Channel>, SubscriberClient<Channel>) {
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;
    publish(&mut publisher, vec![message(payload, "")]).await;
    publisher
        .delete_topic(pb::DeleteTopicRequest {
            topic: TOPIC.into(),
        })
        .await
        .unwrap();
    (publisher, subscriber)
}

/// Deleting a topic that has subscriptions deletes it for Pub/Sub and keeps them: they show
/// `_deleted-topic_`, keep their backlog, and the topic's storage goes with the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_leaves_its_subscriptions_their_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = deleted_topic_with_backlog(&served, "kept").await;
    for code in [
        publisher
            .get_topic(pb::GetTopicRequest {
                topic: TOPIC.into(),
            })
            .await
            .unwrap_err()
            .code(),
        publisher
            .publish(pb::PublishRequest {
                topic: TOPIC.into(),
                messages: vec![message("late", "")],
            })
            .await
            .unwrap_err()
            .code(),
        publisher
            .delete_topic(pb::DeleteTopicRequest {
                topic: TOPIC.into(),
            })
            .await
            .unwrap_err()
            .code(),
        subscriber
            .create_subscription(pb::Subscription {
                name: "projects/demo/subscriptions/late".into(),
                topic: TOPIC.into(),
                ..Default::default()
            })
            .await
            .unwrap_err()
            .code(),
    ] {
        assert_eq!(code, Code::NotFound);
    }
    let listed = publisher
        .list_topics(pb::ListTopicsRequest {
            project: "projects/demo".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.topics.is_empty());
    let again = publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::FailedPrecondition);
    let shown = subscriber
        .get_subscription(pb::GetSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shown.topic, "_deleted-topic_");
    assert_eq!(data(&pull(&mut subscriber, 10).await), ["kept"]);

    subscriber
        .delete_subscription(pb::DeleteSubscriptionRequest {
            subscription: SUB.into(),
        })
        .await
        .unwrap();
    assert!(
        served.broker.describe_topic("demo.orders").is_err(),
        "gone with its last subscription"
    );
    publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    served.stop().await;
}

/// A deleted topic whose last subscription was deleted outside Pub/Sub (Ferry's own API) can
/// be created again: creating it clears the hidden topic first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_whose_subscriptions_went_elsewhere_can_be_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = deleted_topic_with_backlog(&served, "old").await;
    served.broker.delete_queue("demo.billing").await.unwrap();
    // Created again, as new: nothing of the old one's messages, and subscriptions attach.
    set_up(&mut publisher, &mut subscriber, false).await;
    publish(&mut publisher, vec![message("new", "")]).await;
    assert_eq!(data(&pull(&mut subscriber, 10).await), ["new"]);
    served.stop().await;
}

/// IAM on an endpoint that authenticates no one: the empty policy, every permission
/// granted, and a policy to set refused rather than kept unenforced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iam_answers_truthfully_for_an_open_endpoint() {
    use googleapis_tonic_google_iam_v1::google::iam::v1 as iam;
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let (mut publisher, mut subscriber) = served.clients().await;
    set_up(&mut publisher, &mut subscriber, false).await;
    let channel = Channel::from_shared(format!("http://{}", served.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut policies = iam::iam_policy_client::IamPolicyClient::new(channel);
    let policy = policies
        .get_iam_policy(iam::GetIamPolicyRequest {
            resource: TOPIC.into(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(policy.bindings.is_empty());
    let granted = policies
        .test_iam_permissions(iam::TestIamPermissionsRequest {
            resource: SUB.into(),
            permissions: vec!["pubsub.subscriptions.consume".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(granted.permissions, ["pubsub.subscriptions.consume"]);
    let set = policies
        .set_iam_policy(iam::SetIamPolicyRequest {
            resource: TOPIC.into(),
            policy: Some(policy),
            update_mask: None,
        })
        .await
        .unwrap_err();
    assert_eq!(set.code(), Code::Unimplemented);
    assert!(set.message().contains("authenticates no one"), "{set:?}");
    let missing = policies
        .get_iam_policy(iam::GetIamPolicyRequest {
            resource: "projects/demo/topics/nowhere".into(),
            options: None,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    served.stop().await;
}
