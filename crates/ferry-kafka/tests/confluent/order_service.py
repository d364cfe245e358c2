"""A typical service's Kafka producer and consumer, with confluent-kafka, against Ferry's
Kafka endpoint.

The classes follow the common pattern of a service that publishes JSON events and
processes them at least once: a producer with acks=all, idempotence and snappy
compression; a consumer in a group with automatic commits off that commits each message
after handling it, and sends a message its handler fails on to `<topic>.dlq`. The pattern
is usually written with the dead-letter `produce` called on the consumer, which
confluent-kafka's Consumer does not have: here the consumer owns a Producer for it.

The checks: every event delivered (acks=all, idempotent, snappy); the first consumer
handles some events (one fails and goes to the DLQ) and stops; a second consumer in the
same group resumes after the first one's commits — each event handled exactly once across
both — and the DLQ holds the failed event with its key, value and headers.

Usage: order_service.py HOST:PORT. Prints "every check passed" at the end; any failure
raises with what was expected."""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
TOPIC = "orders"
DLQ = f"{TOPIC}.dlq"
GROUP = "order-service"
WAIT_S = 30


def check(condition, what):
    if not condition:
        raise AssertionError(what)


class OrderEventProducer:
    """Publishes JSON events with a content type header; delivery reports are kept."""

    def __init__(self, bootstrap_servers, client_id="order-producer"):
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "client.id": client_id,
                "acks": "all",
                "enable.idempotence": True,
                "compression.type": "snappy",
                # A fatal idempotence error (the broker cannot give a producer id) must
                # fail the run, not be retried until the message times out.
                "message.timeout.ms": WAIT_S * 1000,
            }
        )
        self.delivered = []
        self.failed = []

    def produce(self, topic, key, value, headers=None):
        headers_list = [("content-type", b"application/json")]
        if headers:
            headers_list.extend((k, v.encode()) for k, v in headers.items())
        self.producer.produce(
            topic=topic,
            key=key.encode(),
            value=json.dumps(value).encode(),
            headers=headers_list,
            callback=self._delivery_report,
        )
        self.producer.poll(0)

    def flush(self):
        left = self.producer.flush(WAIT_S)
        check(left == 0, f"{left} message(s) not delivered within {WAIT_S} s")

    def _delivery_report(self, err, msg):
        if err:
            self.failed.append(err)
        else:
            self.delivered.append((msg.topic(), msg.partition(), msg.offset()))


class OrderEventConsumer:
    """Handles events at least once: commits each after its handler returns, and sends
    one its handler raises on to `<topic>.dlq` (then commits it: it is dealt with)."""

    def __init__(self, bootstrap_servers, group_id, topics):
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "max.poll.interval.ms": 300000,
                # A member that went away without leaving is noticed within this, not
                # Kafka's default 45 s.
                "session.timeout.ms": 10000,
            }
        )
        # confluent-kafka's Consumer cannot produce: the dead letters go through a Producer.
        self.dlq_producer = Producer(
            {"bootstrap.servers": bootstrap_servers, "acks": "all"}
        )
        self.consumer.subscribe(topics)

    def process_messages(self, handler, limit, timeout=1.0):
        """Handles up to `limit` messages, waiting at most WAIT_S for each."""
        handled = 0
        idle_since = time.monotonic()
        while handled < limit:
            check(
                time.monotonic() - idle_since < WAIT_S,
                f"no message within {WAIT_S} s after {handled} of {limit}",
            )
            msg = self.consumer.poll(timeout)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            idle_since = time.monotonic()
            try:
                value = json.loads(msg.value().decode())
                handler(value, msg.key().decode() if msg.key() else None, msg.headers() or [])
            except Exception:
                self._send_to_dlq(msg)
            # Synchronous, so that a consumer started after close() finds the commit.
            self.consumer.commit(message=msg, asynchronous=False)
            handled += 1

    def close(self):
        self.consumer.close()

    def _send_to_dlq(self, msg):
        self.dlq_producer.produce(
            f"{msg.topic()}.dlq", key=msg.key(), value=msg.value(), headers=msg.headers()
        )
        left = self.dlq_producer.flush(WAIT_S)
        check(left == 0, "the dead letter was not delivered")


# The topics, created up front: two partitions for the events, one for the DLQ.
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for future in admin.create_topics(
    [NewTopic(TOPIC, num_partitions=2, replication_factor=1), NewTopic(DLQ, 1, 1)]
).values():
    future.result(WAIT_S)

# Produce ten events over six customers (keys), one of them poisoned.
producer = OrderEventProducer(BOOTSTRAP)
events = []
for i in range(10):
    event = {"order": i, "total": 10 + i, "poison": i == 4}
    key = f"customer-{i % 6}"
    events.append((key, event))
    producer.produce(TOPIC, key, event, headers={"event-type": "order.created"})
producer.flush()
check(not producer.failed, f"delivery failed: {producer.failed}")
check(len(producer.delivered) == 10, f"ten deliveries, got {producer.delivered}")

handled = []


def handler(value, key, headers):
    check(
        ("content-type", b"application/json") in headers
        and ("event-type", b"order.created") in headers,
        f"headers of order {value['order']}: {headers}",
    )
    if value["poison"]:
        raise ValueError("cannot handle a poisoned order")
    handled.append((key, value["order"]))


# The first consumer handles six messages and stops (a deploy, a crash after a commit).
first = OrderEventConsumer(BOOTSTRAP, GROUP, [TOPIC])
first.process_messages(handler, limit=6)
first.close()
first_run = list(handled)

# A second consumer in the same group resumes after the first one's commits.
second = OrderEventConsumer(BOOTSTRAP, GROUP, [TOPIC])
second.process_messages(handler, limit=4)
# Nothing more: everything was committed once.
extra = second.consumer.poll(3.0)
check(
    extra is None or (extra.error() and extra.error().code() == KafkaError._PARTITION_EOF),
    f"a message handled twice: {extra and extra.value()}",
)
committed = second.consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], WAIT_S)
second.close()

expected = sorted((key, event["order"]) for key, event in events if not event["poison"])
check(sorted(handled) == expected, f"each good order handled once: {sorted(handled)}")
check(len(first_run) in (5, 6), f"the first consumer handled {first_run}")
by_partition = {}
for _, p, o in producer.delivered:
    by_partition[p] = max(by_partition.get(p, -1), o)
for tp in committed:
    check(
        tp.offset == by_partition.get(tp.partition, -1) + 1,
        f"partition {tp.partition} committed at {tp.offset}, not after its last message",
    )

# The poisoned order is in the DLQ with its key, value and headers.
reader = Consumer(
    {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": "dlq-reader",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
)
reader.assign([TopicPartition(DLQ, 0, 0)])
dead = None
deadline = time.monotonic() + WAIT_S
while dead is None and time.monotonic() < deadline:
    msg = reader.poll(1.0)
    if msg is not None and not msg.error():
        dead = msg
reader.close()
check(dead is not None, "the poisoned order is in the DLQ")
check(dead.key() == b"customer-4", f"DLQ key {dead.key()}")
check(json.loads(dead.value())["order"] == 4, f"DLQ value {dead.value()}")
check(("event-type", b"order.created") in (dead.headers() or []), f"DLQ headers {dead.headers()}")

print("every check passed")
