"""The order-events topology: one SNS topic fanned out to four SQS queues, each with its
dead-letter queue, as the architecture's queue table describes them.

The topic is FIFO (`ecommerce-order-events.fifo`): AWS refuses to subscribe a FIFO queue to
a standard topic, and refuses MessageDeduplicationId on a standard topic, so the design's
FIFO queues (inventory, payment) and the relay's deduplication by outbox row need a FIFO
topic. A FIFO topic delivers to the standard queues (email, analytics) as well.
"""

import json

import boto3
from botocore.config import Config

REGION = "us-east-1"
ACCOUNT = "000000000000"
TOPIC = "ecommerce-order-events.fifo"

DAY = 24 * 3600

# name: (visibility timeout s, retention s, max receives) -- the design's queue table.
QUEUES = {
    "inventory-reservation.fifo": (30, 7 * DAY, 5),
    "payment-processing.fifo": (60, 7 * DAY, 3),
    "email-notifications": (30, 4 * DAY, 5),
    "analytics-ingest": (120, 14 * DAY, 10),
}
# Every dead-letter queue keeps its messages 14 days.
DLQ_RETENTION = 14 * DAY


def clients(endpoint_url):
    """SNS and SQS clients for `endpoint_url`; the same code talks to AWS without it."""

    def client(service):
        return boto3.client(
            service,
            endpoint_url=endpoint_url,
            region_name=REGION,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"max_attempts": 2}),
        )

    return client("sns"), client("sqs")


def dlq_name(queue):
    """A FIFO queue's dead-letter queue must be FIFO too, so its name ends in `.fifo`."""
    return queue[: -len(".fifo")] + "-dlq.fifo" if queue.endswith(".fifo") else queue + "-dlq"


def queue_arn(name):
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def create(sns, sqs):
    """Creates (or finds, unchanged) the topic, the queues and the subscriptions.
    Returns (topic ARN, {queue: URL}, {queue: its DLQ's URL}, {queue: subscription ARN})."""
    topic = sns.create_topic(Name=TOPIC, Attributes={"FifoTopic": "true"})["TopicArn"]
    urls, dlq_urls, subscriptions = {}, {}, {}
    for name, (visibility, retention, max_receives) in QUEUES.items():
        fifo = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        dlq = dlq_name(name)
        dlq_urls[name] = sqs.create_queue(
            QueueName=dlq,
            Attributes={**fifo, "MessageRetentionPeriod": str(DLQ_RETENTION)},
        )["QueueUrl"]
        urls[name] = sqs.create_queue(
            QueueName=name,
            Attributes={
                **fifo,
                "VisibilityTimeout": str(visibility),
                "MessageRetentionPeriod": str(retention),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": queue_arn(dlq), "maxReceiveCount": max_receives}
                ),
            },
        )["QueueUrl"]
        subscriptions[name] = sns.subscribe(
            TopicArn=topic,
            Protocol="sqs",
            Endpoint=queue_arn(name),
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
    return topic, urls, dlq_urls, subscriptions
