//! What each SQS and SNS action needs of an access key, in Ferry's permissions, on the
//! queue or topic its input names — the whole table in one place:
//!
//! | actions | need |
//! |---|---|
//! | SQS SendMessage, SendMessageBatch; SNS Publish, PublishBatch | `publish` on the queue / topic |
//! | SQS ReceiveMessage, DeleteMessage(Batch), ChangeMessageVisibility(Batch) | `consume` on the queue, `dead_letters` on a dead-letter queue ([`Action::to_read`]) |
//! | SQS CreateQueue, DeleteQueue, SetQueueAttributes, PurgeQueue, TagQueue, UntagQueue, AddPermission, RemovePermission, Start/List/CancelMessageMoveTask | `admin` on the queue (the source queue for move tasks; a cancel's handle names it) |
//! | SNS CreateTopic, DeleteTopic, SetTopicAttributes, TagResource, UntagResource, AddPermission, RemovePermission | `admin` on the topic |
//! | SQS GetQueueUrl, GetQueueAttributes, ListQueueTags, ListDeadLetterSourceQueues; SNS GetTopicAttributes, ListTagsForResource, ListSubscriptionsByTopic, GetSubscriptionAttributes | any right (publish, consume, dead_letters, admin) on the queue / topic: the look-ups every sender and receiver makes |
//! | SQS ListQueues, ListDeadLetterSourceQueues' answer; SNS ListTopics, ListSubscriptions | a valid key; only the names it holds some right on are listed |
//! | SNS Subscribe | `consume` on the topic and `publish` on the subscribed queue (its deliveries are writes to it) |
//! | SNS Unsubscribe, SetSubscriptionAttributes, ConfirmSubscription | `consume` on the topic |
//! | STS GetCallerIdentity | a valid key only, as in AWS |
//!
//! Beside these needs, the queue's or topic's resource policy is asked about the action
//! ([`grant`]; `policy.rs` evaluates it, `mod.rs` says how its answer combines with the
//! key's permissions).
//!
//! A name the input does not give (a missing parameter, an ARN of another account) is
//! needed on every name (`admin:#`, …): the check fails closed rather than leaving it to
//! the action to refuse the input. So does an action this table does not name — an
//! unknown one, or one added to the dispatcher without a line here — which needs `admin`
//! on every name.

use ferry_access::Action;
use serde_json::{Map, Value};

use crate::location::Location;

/// A right on one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Right {
    /// One Ferry action.
    Do(Action),
    /// Reading a queue: `consume`, or `dead_letters` on a dead-letter queue.
    Read,
    /// Any right on the name: publish, consume, dead_letters or admin.
    See,
}

/// What a name is the name of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Queue,
    Topic,
}

/// A right on the queue or topic a request touches; `name: None` when its input names
/// none, in which case the right is needed on every name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub right: Right,
    pub name: Option<String>,
    pub on: Kind,
}

/// What a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// Every one of these rights.
    Needs(Vec<Need>),
    /// A valid key; the answer lists only what the key may see.
    Listing,
}

fn on_queue(right: Right, name: Option<String>) -> Requirement {
    Requirement::Needs(vec![Need {
        right,
        name,
        on: Kind::Queue,
    }])
}

fn on_topic(right: Right, name: Option<String>) -> Requirement {
    Requirement::Needs(vec![Need {
        right,
        name,
        on: Kind::Topic,
    }])
}

fn text<'a>(input: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// What an SQS action needs (the action as the JSON protocol's target or the query
/// protocol's `Action` names it).
pub fn sqs(action: &str, input: &Map<String, Value>, here: &Location) -> Requirement {
    let queue = || text(input, "QueueUrl").and_then(|url| here.queue_of_url(url).ok());
    let source =
        || text(input, "SourceArn").and_then(|arn| here.queue_of_arn(arn).map(str::to_owned));
    match action {
        "SendMessage" | "SendMessageBatch" => on_queue(Right::Do(Action::Publish), queue()),
        "ReceiveMessage"
        | "DeleteMessage"
        | "DeleteMessageBatch"
        | "ChangeMessageVisibility"
        | "ChangeMessageVisibilityBatch" => on_queue(Right::Read, queue()),
        "CreateQueue" => on_queue(
            Right::Do(Action::Admin),
            text(input, "QueueName").map(str::to_owned),
        ),
        "DeleteQueue" | "SetQueueAttributes" | "PurgeQueue" | "TagQueue" | "UntagQueue"
        | "AddPermission" | "RemovePermission" => on_queue(Right::Do(Action::Admin), queue()),
        "StartMessageMoveTask" | "ListMessageMoveTasks" => {
            on_queue(Right::Do(Action::Admin), source())
        }
        // The handle names the task's source queue, and the task is looked up among that
        // queue's own: admin on the source is what cancelling needs.
        "CancelMessageMoveTask" => on_queue(
            Right::Do(Action::Admin),
            text(input, "TaskHandle")
                .and_then(crate::actions::move_tasks::decode_handle)
                .and_then(|(_, arn)| here.queue_of_arn(&arn).map(str::to_owned)),
        ),
        "GetQueueUrl" => on_queue(Right::See, text(input, "QueueName").map(str::to_owned)),
        "GetQueueAttributes" | "ListQueueTags" | "ListDeadLetterSourceQueues" => {
            on_queue(Right::See, queue())
        }
        "ListQueues" => Requirement::Listing,
        // An action without a known queue needs admin on every name: fails closed.
        _ => on_queue(Right::Do(Action::Admin), None),
    }
}

/// The topic an SNS topic ARN of this account and region names.
fn topic_of_arn(arn: &str, here: &Location) -> Option<String> {
    let rest = arn.strip_prefix("arn:aws:sns:")?;
    let mut parts = rest.split(':');
    let (region, account, name) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none()
        && region == here.region
        && account == here.account_id
        && !name.is_empty())
    .then(|| name.to_owned())
}

/// The topic of a subscription ARN (`<topic ARN>:<id>`).
fn topic_of_subscription(arn: &str, here: &Location) -> Option<String> {
    topic_of_arn(arn.rsplit_once(':')?.0, here)
}

/// What an SNS action needs.
pub fn sns(action: &str, input: &Map<String, Value>, here: &Location) -> Requirement {
    let topic = |key: &str| text(input, key).and_then(|arn| topic_of_arn(arn, here));
    let subscription_topic =
        || text(input, "SubscriptionArn").and_then(|arn| topic_of_subscription(arn, here));
    match action {
        "Publish" => on_topic(
            Right::Do(Action::Publish),
            topic("TopicArn").or_else(|| topic("TargetArn")),
        ),
        "PublishBatch" => on_topic(Right::Do(Action::Publish), topic("TopicArn")),
        "CreateTopic" => on_topic(
            Right::Do(Action::Admin),
            text(input, "Name").map(str::to_owned),
        ),
        "DeleteTopic" | "SetTopicAttributes" | "AddPermission" | "RemovePermission" => {
            on_topic(Right::Do(Action::Admin), topic("TopicArn"))
        }
        "TagResource" | "UntagResource" => on_topic(Right::Do(Action::Admin), topic("ResourceArn")),
        "GetTopicAttributes" | "ListSubscriptionsByTopic" => {
            on_topic(Right::See, topic("TopicArn"))
        }
        "ListTagsForResource" => on_topic(Right::See, topic("ResourceArn")),
        "GetSubscriptionAttributes" => on_topic(Right::See, subscription_topic()),
        "Subscribe" => Requirement::Needs(vec![
            Need {
                right: Right::Do(Action::Consume),
                name: topic("TopicArn"),
                on: Kind::Topic,
            },
            Need {
                right: Right::Do(Action::Publish),
                name: text(input, "Endpoint")
                    .and_then(|arn| here.queue_of_arn(arn))
                    .map(str::to_owned),
                on: Kind::Queue,
            },
        ]),
        "Unsubscribe" | "SetSubscriptionAttributes" => {
            on_topic(Right::Do(Action::Consume), subscription_topic())
        }
        "ConfirmSubscription" => on_topic(Right::Do(Action::Consume), topic("TopicArn")),
        "ListTopics" | "ListSubscriptions" => Requirement::Listing,
        _ => on_topic(Right::Do(Action::Admin), None),
    }
}

/// SQS actions a queue's policy can grant another account: AWS's cross-account
/// permissions do not apply to the rest (AddPermission, RemovePermission, CreateQueue,
/// DeleteQueue, SetQueueAttributes, TagQueue, UntagQueue, ListQueueTags, ListQueues and
/// the message-move tasks), which only the queue's own account may call.
const SQS_CROSS_ACCOUNT: [&str; 8] = [
    "SendMessage",
    "ReceiveMessage",
    "DeleteMessage",
    "ChangeMessageVisibility",
    "GetQueueAttributes",
    "GetQueueUrl",
    "PurgeQueue",
    "ListDeadLetterSourceQueues",
];

/// SNS actions a topic's policy can grant another account: those SNS takes in a topic
/// policy. Creating topics, tagging, and acting on subscriptions stay the topic's own
/// account's.
const SNS_CROSS_ACCOUNT: [&str; 8] = [
    "Publish",
    "Subscribe",
    "GetTopicAttributes",
    "SetTopicAttributes",
    "DeleteTopic",
    "ListSubscriptionsByTopic",
    "AddPermission",
    "RemovePermission",
];

/// What a resource policy is asked about a need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The action as policies name it: `sqs:SendMessage`, `sns:Publish`.
    pub action: String,
    /// Whether a policy can grant it to another account at all.
    pub cross_account: bool,
}

/// What the policy of `need`'s queue or topic is asked about `action`, a request to
/// `service`. A batch is its single action, as SQS and SNS authorize it. A need on the
/// other service's resource — SNS Subscribe's queue — is asked about `sqs:SendMessage`:
/// the subscription's deliveries are writes to it.
pub fn grant(service: Kind, action: &str, need: &Need) -> Grant {
    if need.on != service {
        return Grant {
            action: "sqs:SendMessage".into(),
            cross_account: true,
        };
    }
    let single = match action {
        "SendMessageBatch" => "SendMessage",
        "DeleteMessageBatch" => "DeleteMessage",
        "ChangeMessageVisibilityBatch" => "ChangeMessageVisibility",
        "PublishBatch" => "Publish",
        other => other,
    };
    let (prefix, grantable): (&str, &[&str]) = match service {
        Kind::Queue => ("sqs", &SQS_CROSS_ACCOUNT),
        Kind::Topic => ("sns", &SNS_CROSS_ACCOUNT),
    };
    Grant {
        action: format!("{prefix}:{single}"),
        cross_account: grantable.contains(&single),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn here() -> Location {
        Location {
            account_id: "123456789012".into(),
            region: "eu-west-1".into(),
        }
    }

    fn input(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    fn needs(right: Right, name: &str) -> Requirement {
        on_queue(right, Some(name.to_owned()))
    }

    fn topic_needs(right: Right, name: &str) -> Requirement {
        on_topic(right, Some(name.to_owned()))
    }

    const URL: &str = "http://localhost:4566/123456789012/orders";
    const TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:news";

    #[test]
    fn grants_name_the_single_action_and_only_some_cross_account() {
        let need = |on| Need {
            right: Right::Do(Action::Publish),
            name: Some("orders".into()),
            on,
        };
        let batch = grant(Kind::Queue, "SendMessageBatch", &need(Kind::Queue));
        assert_eq!(batch.action, "sqs:SendMessage");
        assert!(batch.cross_account);
        assert!(!grant(Kind::Queue, "SetQueueAttributes", &need(Kind::Queue)).cross_account);
        assert!(!grant(Kind::Queue, "ListQueueTags", &need(Kind::Queue)).cross_account);
        assert_eq!(
            grant(Kind::Topic, "PublishBatch", &need(Kind::Topic)).action,
            "sns:Publish"
        );
        assert!(!grant(Kind::Topic, "TagResource", &need(Kind::Topic)).cross_account);
        let delivery = grant(Kind::Topic, "Subscribe", &need(Kind::Queue));
        assert_eq!(delivery.action, "sqs:SendMessage");
        assert!(delivery.cross_account);
    }

    #[test]
    fn sqs_sends_need_publish_on_the_queue() {
        for action in ["SendMessage", "SendMessageBatch"] {
            assert_eq!(
                sqs(action, &input(json!({"QueueUrl": URL})), &here()),
                needs(Right::Do(Action::Publish), "orders"),
                "{action}"
            );
        }
    }

    #[test]
    fn sqs_receives_and_settles_read_the_queue() {
        for action in [
            "ReceiveMessage",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
            "ChangeMessageVisibilityBatch",
        ] {
            assert_eq!(
                sqs(action, &input(json!({"QueueUrl": URL})), &here()),
                needs(Right::Read, "orders"),
                "{action}"
            );
        }
    }

    #[test]
    fn sqs_administration_needs_admin_on_the_queue() {
        for action in [
            "DeleteQueue",
            "SetQueueAttributes",
            "PurgeQueue",
            "TagQueue",
            "UntagQueue",
            "AddPermission",
            "RemovePermission",
        ] {
            assert_eq!(
                sqs(action, &input(json!({"QueueUrl": URL})), &here()),
                needs(Right::Do(Action::Admin), "orders"),
                "{action}"
            );
        }
        assert_eq!(
            sqs("CreateQueue", &input(json!({"QueueName": "jobs"})), &here()),
            needs(Right::Do(Action::Admin), "jobs")
        );
        let source = json!({"SourceArn": "arn:aws:sqs:eu-west-1:123456789012:orders.dlq"});
        assert_eq!(
            sqs("StartMessageMoveTask", &input(source), &here()),
            needs(Right::Do(Action::Admin), "orders.dlq")
        );
        // {"taskId":"t1","sourceArn":"arn:aws:sqs:eu-west-1:123456789012:orders.dlq"}
        let handle = "eyJ0YXNrSWQiOiJ0MSIsInNvdXJjZUFybiI6ImFybjphd3M6c3FzOmV1LXdlc3QtMToxMjM0NTY3ODkwMTI6b3JkZXJzLmRscSJ9";
        assert_eq!(
            sqs(
                "CancelMessageMoveTask",
                &input(json!({ "TaskHandle": handle })),
                &here()
            ),
            needs(Right::Do(Action::Admin), "orders.dlq")
        );
        // A handle that names no queue of this endpoint needs admin on every name.
        assert_eq!(
            sqs(
                "CancelMessageMoveTask",
                &input(json!({"TaskHandle": "x"})),
                &here()
            ),
            on_queue(Right::Do(Action::Admin), None)
        );
    }

    #[test]
    fn sqs_look_ups_need_any_right_and_lists_are_filtered() {
        assert_eq!(
            sqs(
                "GetQueueUrl",
                &input(json!({"QueueName": "orders"})),
                &here()
            ),
            needs(Right::See, "orders")
        );
        for action in [
            "GetQueueAttributes",
            "ListQueueTags",
            "ListDeadLetterSourceQueues",
        ] {
            assert_eq!(
                sqs(action, &input(json!({"QueueUrl": URL})), &here()),
                needs(Right::See, "orders"),
                "{action}"
            );
        }
        assert_eq!(
            sqs("ListQueues", &input(json!({})), &here()),
            Requirement::Listing
        );
    }

    #[test]
    fn sqs_without_a_readable_queue_or_with_an_unknown_action_fails_closed() {
        assert_eq!(
            sqs("SendMessage", &input(json!({})), &here()),
            on_queue(Right::Do(Action::Publish), None)
        );
        let other_account = json!({"QueueUrl": "http://localhost:4566/999999999999/orders"});
        assert_eq!(
            sqs("ReceiveMessage", &input(other_account), &here()),
            on_queue(Right::Read, None)
        );
        assert_eq!(
            sqs("Bogus", &input(json!({"QueueUrl": URL})), &here()),
            on_queue(Right::Do(Action::Admin), None)
        );
    }

    #[test]
    fn sns_publishes_need_publish_on_the_topic() {
        for action in ["Publish", "PublishBatch"] {
            assert_eq!(
                sns(action, &input(json!({"TopicArn": TOPIC})), &here()),
                topic_needs(Right::Do(Action::Publish), "news"),
                "{action}"
            );
        }
        assert_eq!(
            sns("Publish", &input(json!({"TargetArn": TOPIC})), &here()),
            topic_needs(Right::Do(Action::Publish), "news")
        );
    }

    #[test]
    fn sns_administration_needs_admin_on_the_topic() {
        assert_eq!(
            sns("CreateTopic", &input(json!({"Name": "news"})), &here()),
            topic_needs(Right::Do(Action::Admin), "news")
        );
        for action in [
            "DeleteTopic",
            "SetTopicAttributes",
            "AddPermission",
            "RemovePermission",
        ] {
            assert_eq!(
                sns(action, &input(json!({"TopicArn": TOPIC})), &here()),
                topic_needs(Right::Do(Action::Admin), "news"),
                "{action}"
            );
        }
        for action in ["TagResource", "UntagResource"] {
            assert_eq!(
                sns(action, &input(json!({"ResourceArn": TOPIC})), &here()),
                topic_needs(Right::Do(Action::Admin), "news"),
                "{action}"
            );
        }
    }

    #[test]
    fn sns_subscribing_needs_consume_on_the_topic_and_publish_on_the_queue() {
        let subscribe = json!({
            "TopicArn": TOPIC,
            "Protocol": "sqs",
            "Endpoint": "arn:aws:sqs:eu-west-1:123456789012:inbox",
        });
        assert_eq!(
            sns("Subscribe", &input(subscribe), &here()),
            Requirement::Needs(vec![
                Need {
                    right: Right::Do(Action::Consume),
                    name: Some("news".into()),
                    on: Kind::Topic,
                },
                Need {
                    right: Right::Do(Action::Publish),
                    name: Some("inbox".into()),
                    on: Kind::Queue,
                },
            ])
        );
        let subscription = json!({"SubscriptionArn": format!("{TOPIC}:0b7c1f5e")});
        for action in ["Unsubscribe", "SetSubscriptionAttributes"] {
            assert_eq!(
                sns(action, &input(subscription.clone()), &here()),
                topic_needs(Right::Do(Action::Consume), "news"),
                "{action}"
            );
        }
        assert_eq!(
            sns("GetSubscriptionAttributes", &input(subscription), &here()),
            topic_needs(Right::See, "news")
        );
        assert_eq!(
            sns(
                "ConfirmSubscription",
                &input(json!({"TopicArn": TOPIC})),
                &here()
            ),
            topic_needs(Right::Do(Action::Consume), "news")
        );
    }

    #[test]
    fn sns_look_ups_need_any_right_and_lists_are_filtered() {
        for action in ["GetTopicAttributes", "ListSubscriptionsByTopic"] {
            assert_eq!(
                sns(action, &input(json!({"TopicArn": TOPIC})), &here()),
                topic_needs(Right::See, "news"),
                "{action}"
            );
        }
        assert_eq!(
            sns(
                "ListTagsForResource",
                &input(json!({"ResourceArn": TOPIC})),
                &here()
            ),
            topic_needs(Right::See, "news")
        );
        for action in ["ListTopics", "ListSubscriptions"] {
            assert_eq!(
                sns(action, &input(json!({})), &here()),
                Requirement::Listing
            );
        }
    }

    #[test]
    fn sns_arns_of_another_account_or_region_name_no_topic() {
        let foreign = json!({"TopicArn": "arn:aws:sns:us-east-1:123456789012:news"});
        assert_eq!(
            sns("Publish", &input(foreign), &here()),
            on_topic(Right::Do(Action::Publish), None)
        );
        assert_eq!(
            sns("CreatePlatformApplication", &input(json!({})), &here()),
            on_topic(Right::Do(Action::Admin), None)
        );
    }
}
