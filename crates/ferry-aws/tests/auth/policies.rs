//! Queue and topic policies over the socket: a key of another account gets exactly what a
//! policy grants its account (AddPermission, SetQueueAttributes, SetTopicAttributes) and
//! loses it when the grant goes; an explicit Deny refuses a key of the endpoint's own
//! account; a policy with an element Ferry would not enforce is refused and changes
//! nothing.

use serde_json::{Value, json};

use crate::support::{ADMIN, CONSUMER, PARTNER, PARTNER_ACCOUNT, PUBLISHER, Served};

const ORDERS_ARN: &str = "arn:aws:sqs:us-east-1:000000000000:orders";
const NEWS_ARN: &str = "arn:aws:sns:us-east-1:000000000000:news";

async fn with_orders() -> Served {
    let served = Served::start().await;
    served
        .sqs_ok(ADMIN, "CreateQueue", json!({"QueueName": "orders"}))
        .await;
    served
}

fn send(served: &Served) -> Value {
    json!({"QueueUrl": served.url("orders"), "MessageBody": "hello"})
}

fn receive(served: &Served) -> Value {
    json!({"QueueUrl": served.url("orders"), "WaitTimeSeconds": 0})
}

/// The queue's Policy attribute as the admin reads it (`None`: not set).
async fn policy_of(served: &Served, queue: &str) -> Option<String> {
    let input = json!({"QueueUrl": served.url(queue), "AttributeNames": ["Policy"]});
    let out = served.sqs_ok(ADMIN, "GetQueueAttributes", input).await;
    out["Attributes"]["Policy"].as_str().map(str::to_owned)
}

async fn set_policy(served: &Served, policy: &Value) -> crate::support::Reply {
    let input = json!({
        "QueueUrl": served.url("orders"),
        "Attributes": {"Policy": policy.to_string()},
    });
    let auth = crate::support::Auth::Signed(crate::support::signer(ADMIN, "sqs"));
    served.sqs(&auth, "SetQueueAttributes", input).await
}

#[tokio::test]
async fn another_accounts_key_gets_exactly_what_add_permission_grants_until_it_is_removed() {
    let served = with_orders().await;
    // Its own account lets it do anything; this account's queue grants it nothing yet.
    let message = served
        .sqs_denied(PARTNER, "SendMessage", send(&served))
        .await;
    assert!(
        message.contains("arn:aws:iam::111111111111:user/partner")
            && message.contains("another account")
            && message.contains("sqs:SendMessage"),
        "{message}"
    );
    served
        .sqs_denied(PARTNER, "GetQueueUrl", json!({"QueueName": "orders"}))
        .await;
    served
        .sqs_ok(
            ADMIN,
            "AddPermission",
            json!({
                "QueueUrl": served.url("orders"),
                "Label": "partner-send",
                "AWSAccountIds": [PARTNER_ACCOUNT],
                "Actions": ["SendMessage", "GetQueueUrl"],
            }),
        )
        .await;
    served.sqs_ok(PARTNER, "SendMessage", send(&served)).await;
    let batch = json!({
        "QueueUrl": served.url("orders"),
        "Entries": [{"Id": "a", "MessageBody": "x"}],
    });
    served.sqs_ok(PARTNER, "SendMessageBatch", batch).await;
    let url = served
        .sqs_ok(PARTNER, "GetQueueUrl", json!({"QueueName": "orders"}))
        .await;
    assert_eq!(url["QueueUrl"], served.url("orders"));
    assert_eq!(served.messages("orders").await, (2, 0));
    // Only the granted actions.
    served
        .sqs_denied(PARTNER, "ReceiveMessage", receive(&served))
        .await;
    served
        .sqs_denied(
            PARTNER,
            "PurgeQueue",
            json!({"QueueUrl": served.url("orders")}),
        )
        .await;
    assert_eq!(served.messages("orders").await, (2, 0));
    // AWS lists only the caller's own account's queues.
    let listed = served.sqs_ok(PARTNER, "ListQueues", json!({})).await;
    assert_eq!(listed.get("QueueUrls"), None, "{listed}");

    served
        .sqs_ok(
            ADMIN,
            "RemovePermission",
            json!({"QueueUrl": served.url("orders"), "Label": "partner-send"}),
        )
        .await;
    served
        .sqs_denied(PARTNER, "SendMessage", send(&served))
        .await;
    assert_eq!(served.messages("orders").await, (2, 0));
}

#[tokio::test]
async fn a_policy_set_with_set_queue_attributes_grants_another_account_what_it_names() {
    let served = with_orders().await;
    let grant = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "partner-sends",
            "Effect": "Allow",
            "Principal": {"AWS": PARTNER_ACCOUNT},
            "Action": "sqs:SendMessage",
            "Resource": ORDERS_ARN,
        }],
    });
    let reply = set_policy(&served, &grant).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    served.sqs_ok(PARTNER, "SendMessage", send(&served)).await;
    served
        .sqs_denied(PARTNER, "ReceiveMessage", receive(&served))
        .await;
    assert_eq!(served.messages("orders").await, (1, 0));

    // Everything a policy can grant, but not what AWS keeps to the queue's own account.
    let everything = json!({"Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
        "Action": "SQS:*",
    }]});
    let reply = set_policy(&served, &everything).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let received = served
        .sqs_ok(PARTNER, "ReceiveMessage", receive(&served))
        .await;
    assert_eq!(received["Messages"].as_array().map(Vec::len), Some(1));
    let message = served
        .sqs_denied(
            PARTNER,
            "SetQueueAttributes",
            json!({"QueueUrl": served.url("orders"), "Attributes": {"Policy": ""}}),
        )
        .await;
    assert!(message.contains("own account only"), "{message}");
    served
        .sqs_denied(
            PARTNER,
            "DeleteQueue",
            json!({"QueueUrl": served.url("orders")}),
        )
        .await;
    assert!(served.has_queue("orders"));
    assert!(policy_of(&served, "orders").await.is_some());
}

#[tokio::test]
async fn an_explicit_deny_refuses_a_key_of_the_endpoints_own_account() {
    let served = with_orders().await;
    served.sqs_ok(PUBLISHER, "SendMessage", send(&served)).await;
    let deny = json!({"Statement": [
        {"Effect": "Deny",
         "Principal": {"AWS": "arn:aws:iam::000000000000:user/orders-publisher"},
         "Action": "sqs:Send*", "Resource": ORDERS_ARN},
        {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage"},
    ]});
    let reply = set_policy(&served, &deny).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let message = served
        .sqs_denied(PUBLISHER, "SendMessage", send(&served))
        .await;
    assert!(message.contains("explicitly denies"), "{message}");
    served
        .sqs_denied(CONSUMER, "ReceiveMessage", receive(&served))
        .await;
    // The statements name only these: the admin key still sends.
    served.sqs_ok(ADMIN, "SendMessage", send(&served)).await;
    assert_eq!(served.messages("orders").await, (2, 0));
    // The owner can lift it.
    let reply = set_policy(&served, &json!({"Statement": []})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    served.sqs_ok(PUBLISHER, "SendMessage", send(&served)).await;
}

#[tokio::test]
async fn a_policy_ferry_would_not_enforce_whole_is_refused_and_changes_nothing() {
    let served = with_orders().await;
    for (policy, named) in [
        (
            json!({"Statement": [{"Effect": "Allow", "NotPrincipal": {"AWS": PARTNER_ACCOUNT},
                "Action": "sqs:SendMessage"}]}),
            "NotPrincipal",
        ),
        (
            json!({"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "sqs:*",
                "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}]}),
            "IpAddress",
        ),
    ] {
        let reply = set_policy(&served, &policy).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_eq!(reply.query_error(), "InvalidAttributeValue");
        assert!(reply.body.contains(named), "{}", reply.body);
        assert_eq!(policy_of(&served, "orders").await, None);
    }
    let auth = crate::support::Auth::Signed(crate::support::signer(ADMIN, "sqs"));
    let create = json!({"QueueName": "jobs", "Attributes": {"Policy": "{not json"}});
    let reply = served.sqs(&auth, "CreateQueue", create).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(!served.has_queue("jobs"));
}

fn assert_sns_denied(reply: &crate::support::Reply) {
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "AuthorizationError");
}

#[tokio::test]
async fn a_topic_policy_grants_another_account_publish_and_nothing_else() {
    let served = Served::start().await;
    let reply = served
        .sns(ADMIN, &[("Action", "CreateTopic"), ("Name", "news")])
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let publish = [
        ("Action", "Publish"),
        ("TopicArn", NEWS_ARN),
        ("Message", "hi"),
    ];
    assert_sns_denied(&served.sns(PARTNER, &publish).await);

    let unsupported = json!({"Statement": [{"Effect": "Allow", "Principal": "*",
        "Action": "sns:Publish", "Condition": {"Bool": {"aws:SecureTransport": "true"}}}]})
    .to_string();
    let reply = served
        .sns(
            ADMIN,
            &[
                ("Action", "SetTopicAttributes"),
                ("TopicArn", NEWS_ARN),
                ("AttributeName", "Policy"),
                ("AttributeValue", &unsupported),
            ],
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "InvalidParameter");
    assert!(reply.body.contains("Bool"), "{}", reply.body);
    assert_sns_denied(&served.sns(PARTNER, &publish).await);

    let grant = json!({"Version": "2008-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
        "Action": "SNS:Publish", "Resource": NEWS_ARN,
    }]})
    .to_string();
    let reply = served
        .sns(
            ADMIN,
            &[
                ("Action", "SetTopicAttributes"),
                ("TopicArn", NEWS_ARN),
                ("AttributeName", "Policy"),
                ("AttributeValue", &grant),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = served.sns(PARTNER, &publish).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!reply.xml("MessageId").is_empty());
    let attributes = [("Action", "GetTopicAttributes"), ("TopicArn", NEWS_ARN)];
    assert_sns_denied(&served.sns(PARTNER, &attributes).await);
    let listed = served.sns(PARTNER, &[("Action", "ListTopics")]).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.all("TopicArn").is_empty(), "{}", listed.body);
}

#[tokio::test]
async fn sts_names_another_accounts_key_in_its_account() {
    let served = Served::start().await;
    let reply = served
        .form(
            &crate::support::Auth::Signed(crate::support::signer(PARTNER, "sts")),
            &[("Action", "GetCallerIdentity"), ("Version", "2011-06-15")],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.xml("Account"), PARTNER_ACCOUNT);
    assert_eq!(reply.xml("Arn"), "arn:aws:iam::111111111111:user/partner");
}
