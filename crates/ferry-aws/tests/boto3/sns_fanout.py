"""boto3 (and the AWS CLI, when installed) against Ferry's SNS endpoint: one SNS topic
fanned out to four SQS queues, two of them FIFO, each with a dead-letter queue; an outbox
relay's publishes (MessageGroupId = the order, MessageDeduplicationId = the outbox row);
what each queue receives; filter policies on attributes and on the body; raw delivery;
PublishBatch; and the errors boto3 raises.

The local-development commands this topology is usually set up with subscribe a FIFO
queue to a *standard* topic, which AWS refuses ("FIFO SQS Queues can not be subscribed to
standard SNS topics"); Ferry refuses it the same way, and the working setup uses a FIFO
topic (`ecommerce-order-events.fifo`), which AWS lets deliver to FIFO and standard queues.

Usage: sns_fanout.py <endpoint-url>
"""

import json
import os
import shutil
import subprocess
import sys

import boto3
from botocore.config import Config

endpoint = sys.argv[1]
REGION = "us-east-1"
ACCOUNT = "000000000000"


def client(service):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}),
    )


sns = client("sns")
sqs = client("sqs")


def expect_error(code, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except sns.exceptions.ClientError as e:
        got = e.response["Error"]["Code"]
        assert got == code, f"expected {code}, got {got}: {e}"
        return e
    raise AssertionError(f"expected {code}, the call succeeded")


def queue_arn(name):
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def receive_all(url, expected, wait=5):
    """Receives until `expected` messages came (or a long poll comes back empty)."""
    got = []
    while len(got) < expected:
        out = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=wait,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        )
        messages = out.get("Messages", [])
        if not messages:
            break
        for m in messages:
            got.append(m)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return got


# --- The local-development commands, through the AWS CLI (awslocal is `aws
# --endpoint-url http://localhost:4566`).
aws = shutil.which("aws")
if aws:
    env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               AWS_DEFAULT_REGION=REGION)

    def cli(*args):
        return subprocess.run([aws, "--endpoint-url", endpoint, *args], env=env,
                              capture_output=True, text=True)

    out = cli("sns", "create-topic", "--name", "ecommerce-order-events")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["TopicArn"] == \
        f"arn:aws:sns:{REGION}:{ACCOUNT}:ecommerce-order-events"
    out = cli("sqs", "create-queue", "--queue-name", "inventory-reservation.fifo",
              "--attributes", "FifoQueue=true,ContentBasedDeduplication=false")
    assert out.returncode == 0, out.stderr
    out = cli("sns", "subscribe",
              "--topic-arn", f"arn:aws:sns:{REGION}:{ACCOUNT}:ecommerce-order-events",
              "--protocol", "sqs",
              "--notification-endpoint", queue_arn("inventory-reservation.fifo"))
    # AWS refuses a FIFO queue on a standard topic; so does Ferry.
    assert out.returncode != 0, out.stdout
    assert "InvalidParameter" in out.stderr, out.stderr
    assert "FIFO SQS Queues can not be subscribed to standard SNS topics" in out.stderr
    out = cli("sns", "create-topic", "--name", "ecommerce-order-events.fifo",
              "--attributes", "FifoTopic=true")
    assert out.returncode == 0, out.stderr
    out = cli("sns", "subscribe",
              "--topic-arn", f"arn:aws:sns:{REGION}:{ACCOUNT}:ecommerce-order-events.fifo",
              "--protocol", "sqs",
              "--notification-endpoint", queue_arn("inventory-reservation.fifo"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["SubscriptionArn"].startswith(
        f"arn:aws:sns:{REGION}:{ACCOUNT}:ecommerce-order-events.fifo:")
    out = cli("sns", "list-topics")
    assert out.returncode == 0, out.stderr
    # Cleared for the boto3 part, which makes the queues with their dead-letter queues.
    for args in [("sns", "delete-topic", "--topic-arn",
                  f"arn:aws:sns:{REGION}:{ACCOUNT}:ecommerce-order-events"),
                 ("sns", "delete-topic", "--topic-arn",
                  f"arn:aws:sns:{REGION}:{ACCOUNT}:ecommerce-order-events.fifo"),
                 ("sqs", "delete-queue", "--queue-url",
                  f"{endpoint}/{ACCOUNT}/inventory-reservation.fifo")]:
        out = cli(*args)
        assert out.returncode == 0, out.stderr
    print("aws cli: the local setup commands work (the standard-topic FIFO subscription "
          "refused as AWS refuses it)")
else:
    print("aws cli not installed: its part is skipped")

# --- The topology with boto3.
expect_error(
    "InvalidParameter", sns.create_topic, Name="ecommerce-order-events.fifo"
)  # a .fifo name without FifoTopic=true
topic = sns.create_topic(
    Name="ecommerce-order-events.fifo", Attributes={"FifoTopic": "true"}
)["TopicArn"]
# Idempotent with the same attributes.
assert sns.create_topic(
    Name="ecommerce-order-events.fifo", Attributes={"FifoTopic": "true"}
)["TopicArn"] == topic
expect_error(
    "InvalidParameter",
    sns.create_topic,
    Name="ecommerce-order-events.fifo",
    Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "true"},
)

queues = {
    # name: (fifo, visibility, max receives)
    "inventory-reservation.fifo": (True, "30", 5),
    "payment-processing.fifo": (True, "60", 3),
    "email-notifications": (False, "30", 5),
    "analytics-ingest": (False, "120", 10),
}
urls = {}
for name, (fifo, visibility, max_receives) in queues.items():
    dlq_name = name.replace(".fifo", "-dlq.fifo") if fifo else name + "-dlq"
    fifo_attrs = {"FifoQueue": "true"} if fifo else {}
    sqs.create_queue(QueueName=dlq_name, Attributes={**fifo_attrs, "MessageRetentionPeriod": "1209600"})
    urls[name] = sqs.create_queue(
        QueueName=name,
        Attributes={
            **fifo_attrs,
            "VisibilityTimeout": visibility,
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": queue_arn(dlq_name), "maxReceiveCount": max_receives}
            ),
        },
    )["QueueUrl"]

subscriptions = {}
for name in queues:
    attributes = {}
    if name == "email-notifications":
        attributes = {"FilterPolicy": json.dumps({"event_type": ["OrderPlaced"]})}
    if name == "analytics-ingest":
        attributes = {"RawMessageDelivery": "true"}
    subscriptions[name] = sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn(name),
        Attributes=attributes,
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
# Subscribing again is the same subscription.
assert sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn("payment-processing.fifo"),
                     ReturnSubscriptionArn=True)["SubscriptionArn"] == subscriptions["payment-processing.fifo"]
listed = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
assert sorted(s["Endpoint"] for s in listed) == sorted(queue_arn(n) for n in queues), listed
assert all(s["Protocol"] == "sqs" and s["TopicArn"] == topic for s in listed)
attrs = sns.get_subscription_attributes(SubscriptionArn=subscriptions["analytics-ingest"])["Attributes"]
assert attrs["RawMessageDelivery"] == "true" and attrs["PendingConfirmation"] == "false", attrs
topic_attrs = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
assert topic_attrs["FifoTopic"] == "true" and topic_attrs["SubscriptionsConfirmed"] == "4", topic_attrs

# --- The outbox relay's publishes.
def event(order_id, event_type, n):
    return {
        "id": f"evt-{n}",
        "type": event_type,
        "version": "1.0",
        "source": "order-service",
        "payload": {"order_id": order_id, "subtotal_cents": 3998 + n},
    }

events = [
    ("row-1", event("ord_1", "OrderPlaced", 1)),
    ("row-2", event("ord_2", "OrderPlaced", 2)),
    ("row-3", event("ord_1", "OrderShipped", 3)),
]
message_ids = {}
for row_id, e in events:
    out = sns.publish(
        TopicArn=topic,
        Message=json.dumps(e),
        MessageGroupId=e["payload"]["order_id"],
        MessageDeduplicationId=row_id,
        MessageAttributes={"event_type": {"DataType": "String", "StringValue": e["type"]}},
    )
    assert out["SequenceNumber"], out
    message_ids[row_id] = out["MessageId"]
# The relay publishing row-1 again (it crashed before marking it processed) is a duplicate.
again = sns.publish(TopicArn=topic, Message=json.dumps(events[0][1]), MessageGroupId="ord_1",
                    MessageDeduplicationId="row-1")
assert again["MessageId"] == message_ids["row-1"], again

for name in ["inventory-reservation.fifo", "payment-processing.fifo"]:
    got = receive_all(urls[name], 3)
    assert len(got) == 3, (name, got)
    envelopes = [json.loads(m["Body"]) for m in got]
    for env in envelopes:
        assert env["Type"] == "Notification" and env["TopicArn"] == topic, env
        assert env["MessageAttributes"]["event_type"]["Type"] == "String", env
    # Per order, in publish order.
    for order in ["ord_1", "ord_2"]:
        ids = [json.loads(env["Message"])["id"] for env in envelopes
               if json.loads(env["Message"])["payload"]["order_id"] == order]
        assert ids == sorted(ids), (name, order, ids)
    assert {m["Attributes"]["MessageGroupId"] for m in got} == {"ord_1", "ord_2"}, got
    assert {env["MessageId"] for env in envelopes} == set(message_ids.values())

email = receive_all(urls["email-notifications"], 2)
assert sorted(json.loads(json.loads(m["Body"])["Message"])["id"] for m in email) == ["evt-1", "evt-2"], email
assert receive_all(urls["email-notifications"], 1, wait=1) == []

analytics = receive_all(urls["analytics-ingest"], 3)
assert sorted(json.loads(m["Body"])["id"] for m in analytics) == ["evt-1", "evt-2", "evt-3"], analytics
assert all(m["MessageAttributes"]["event_type"]["DataType"] == "String" for m in analytics)

# --- PublishBatch and its errors.
batch = sns.publish_batch(
    TopicArn=topic,
    PublishBatchRequestEntries=[
        {"Id": "a", "Message": "one", "MessageGroupId": "g", "MessageDeduplicationId": "b1"},
        {"Id": "b", "Message": "two", "MessageGroupId": "g"},  # no dedup id: fails alone
    ],
)
assert [s["Id"] for s in batch["Successful"]] == ["a"], batch
assert batch["Failed"][0]["Id"] == "b" and batch["Failed"][0]["Code"] == "InvalidParameter", batch
expect_error("EmptyBatchRequest", sns.publish_batch, TopicArn=topic, PublishBatchRequestEntries=[])
expect_error("BatchEntryIdsNotDistinct", sns.publish_batch, TopicArn=topic,
             PublishBatchRequestEntries=[{"Id": "x", "Message": "m", "MessageGroupId": "g",
                                          "MessageDeduplicationId": "1"}] * 2)
expect_error("TooManyEntriesInBatchRequest", sns.publish_batch, TopicArn=topic,
             PublishBatchRequestEntries=[{"Id": f"e{i}", "Message": "m", "MessageGroupId": "g",
                                          "MessageDeduplicationId": str(i)} for i in range(11)])

# --- Errors.
expect_error("NotFound", sns.publish, TopicArn=f"arn:aws:sns:{REGION}:{ACCOUNT}:nope", Message="m")
expect_error("InvalidParameter", sns.publish, TopicArn=topic, Message="m")  # no group id
expect_error("InvalidParameter", sns.subscribe, TopicArn=topic, Protocol="http",
             Endpoint="http://example.com/hook")
expect_error("InvalidParameter", sns.subscribe, TopicArn=topic, Protocol="sqs",
             Endpoint=queue_arn("q"), Attributes={"FilterPolicy": "{\"a\": \"not a list\"}"})
expect_error("NotFound", sns.get_subscription_attributes,
             SubscriptionArn=f"{topic}:00000000-0000-4000-a000-000000000000")

# --- Tags, listing, unsubscribe, delete. (An empty list is sent as an empty value.)
assert sns.create_topic(Name="tagless", Tags=[])["TopicArn"].endswith(":tagless")
sns.untag_resource(ResourceArn=topic, TagKeys=[])
sns.tag_resource(ResourceArn=topic, Tags=[{"Key": "team", "Value": "orders"}])
assert sns.list_tags_for_resource(ResourceArn=topic)["Tags"] == [{"Key": "team", "Value": "orders"}]
sns.untag_resource(ResourceArn=topic, TagKeys=["team"])
assert sns.list_tags_for_resource(ResourceArn=topic)["Tags"] == []
assert topic in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
sns.unsubscribe(SubscriptionArn=subscriptions["analytics-ingest"])
assert len(sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]) == 3
sns.delete_topic(TopicArn=topic)
sns.delete_topic(TopicArn=topic)  # idempotent
expect_error("NotFound", sns.get_topic_attributes, TopicArn=topic)
assert all(s["TopicArn"] != topic for s in sns.list_subscriptions()["Subscriptions"])

print("every check passed")
