"""kafka-python against Ferry's Kafka endpoint: creates a topic with the admin client,
produces with keys and headers (uncompressed, gzip, lz4 and zstd; acks 1, and acks all as
an idempotent producer with an id from InitProducerId), and consumes what it produced with
partitions assigned by hand (no consumer group); keeps a producer's own timestamp; an old
producer (api_version 0.10: Produce v2, magic 1 in a gzip wrapper); reads a record
published through Ferry's own API (its key, headers and timestamp are given in the
environment); and looks up offsets by time.

Usage: produce_consume.py HOST:PORT. Prints "every check passed" at the end."""

import os
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

BOOTSTRAP = sys.argv[1]


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def consume_all(topic, partition, expected, start=0):
    consumer = KafkaConsumer(
        bootstrap_servers=BOOTSTRAP,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, start)
    got = []
    for record in consumer:
        got.append(record)
        if len(got) == expected:
            break
    consumer.close()
    return got


# Topics through the admin client.
admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic("py-orders", num_partitions=3, replication_factor=1)])
try:
    admin.create_topics([NewTopic("py-orders", num_partitions=3, replication_factor=1)])
    raise AssertionError("creating the topic twice must fail")
except TopicAlreadyExistsError:
    pass
check("py-orders" in admin.list_topics(), "the topic is listed")

# Produce: keys, headers, acks 1 and all, compressed and not. With acks "all" kafka-python
# 3 is idempotent by default (InitProducerId, sequence numbers); acks 1 turns it off.
try:
    import lz4.frame  # noqa: F401
    import zstandard  # noqa: F401

    codecs = [None, "gzip", "lz4", "zstd"]
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    print("SKIPPING lz4 and zstd: pip packages lz4 and zstandard missing "
          "(bash scripts/python-packages.sh)", file=sys.stderr)
    codecs = [None, "gzip"]
sent = []
for compression in codecs:
    for acks in [1, "all"]:
        producer = KafkaProducer(
            bootstrap_servers=BOOTSTRAP,
            acks=acks,
            compression_type=compression,
        )
        for i in range(5):
            key = f"order-{i}".encode()
            value = f"{compression}-{acks}-{i}".encode()
            headers = [("type", b"order.created"), ("n", str(i).encode())]
            meta = producer.send(
                "py-orders", key=key, value=value, headers=headers, partition=1
            ).get(timeout=10)
            check(meta.partition == 1, "landed on the partition asked for")
            sent.append((meta.offset, key, value))
        producer.flush()
        manager = producer._transaction_manager
        if acks == "all":
            check(
                manager is not None and manager.producer_id_and_epoch.producer_id >= 0,
                "an idempotent producer with an id from InitProducerId",
            )
        producer.close()
offsets = [o for o, _, _ in sent]
check(offsets == list(range(len(sent))), f"offsets are consecutive from 0: {offsets}")

# Consume them back, by hand-assigned partition.
got = consume_all("py-orders", 1, len(sent))
check(len(got) == len(sent), f"consumed {len(got)} of {len(sent)}")
for record, (offset, key, value) in zip(got, sent):
    check(record.offset == offset, "offsets match")
    check(record.key == key and record.value == value, "key and value match")
    check(dict(record.headers)["type"] == b"order.created", "headers survive")
    check(record.timestamp > 1_600_000_000_000, "a real timestamp")
    check(record.timestamp_type == 0, "CreateTime")
# From the middle.
middle = consume_all("py-orders", 1, 3, start=7)
check([r.offset for r in middle] == [7, 8, 9], "reading from an offset")

# The producer's own timestamps are kept (CreateTime), not replaced by the broker's.
producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
stamped = producer.send("py-stamped", value=b"old", timestamp_ms=1_500_000_000_000).get(timeout=10)
producer.close()
[record] = consume_all("py-stamped", 0, 1, start=stamped.offset)
check(record.timestamp == 1_500_000_000_000, f"the producer's CreateTime: {record.timestamp}")

# An old producer: api_version (0, 10) speaks Produce v2 with message format v1
# (magic 1), compressed in a gzip wrapper, and is not idempotent.
old_producer = KafkaProducer(
    bootstrap_servers=BOOTSTRAP, api_version=(0, 10), compression_type="gzip"
)
old_sent = [
    old_producer.send("py-old", key=b"k", value=f"old-{i}".encode(),
                      timestamp_ms=1_550_000_000_000 + i).get(timeout=10)
    for i in range(3)
]
old_producer.close()
old_got = consume_all("py-old", 0, 3, start=old_sent[0].offset)
check([r.value for r in old_got] == [b"old-0", b"old-1", b"old-2"], "magic 1 through Produce v2")
check([r.timestamp for r in old_got] == [1_550_000_000_000 + i for i in range(3)],
      "magic 1 timestamps kept")

# Offsets by time and the ends.
consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=None)
tp = TopicPartition("py-orders", 1)
check(consumer.beginning_offsets([tp])[tp] == 0, "earliest is 0")
check(consumer.end_offsets([tp])[tp] == len(sent), "latest is the count")
found = consumer.offsets_for_times({tp: got[4].timestamp})[tp]
check(found is not None and found.offset <= 4, f"offset for a time: {found}")
future = consumer.offsets_for_times({tp: int(time.time() * 1000) + 3_600_000})[tp]
check(future is None, "no offset after the last record")
consumer.close()

# A record published through Ferry's own API.
topic = os.environ.get("FERRY_PUBLISHED_TOPIC")
if topic:
    [record] = consume_all(topic, 0, 1)
    check(record.key == os.environ["FERRY_PUBLISHED_KEY"].encode(), "Ferry's key")
    check(record.value == os.environ["FERRY_PUBLISHED_VALUE"].encode(), "Ferry's payload")
    check(
        dict(record.headers).get("type") == os.environ["FERRY_PUBLISHED_TYPE"].encode(),
        "Ferry's headers",
    )
    check(
        record.timestamp == int(os.environ["FERRY_PUBLISHED_AT"]),
        f"Ferry's publish time: {record.timestamp}",
    )

admin.delete_topics(["py-orders"])
check("py-orders" not in admin.list_topics(), "the topic is gone")
admin.close()
print("every check passed")
