"""The Kafka side of beyond_kafka.rs, with kafka-python against Ferry's Kafka endpoint.

Usage:
  kafka_side.py produce HOST:PORT TOPIC KEY=VALUE...
      An idempotent producer (acks=all) sends each record with its key, in the order given,
      and prints one line per record: "KEY VALUE PARTITION OFFSET".
  kafka_side.py group HOST:PORT TOPIC GROUP COUNT
      A consumer of group GROUP reads TOPIC from the earliest offset until it has COUNT
      records (or 30 s pass), commits, and prints one line per record: "KEY VALUE".
"""

import logging
import sys
import time

from kafka import KafkaConsumer, KafkaProducer

# kafka-python's warnings go to stderr, which the Rust test prints when the script fails.
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def produce(bootstrap, topic, pairs):
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=0,
    )
    futures = []
    for pair in pairs:
        key, value = pair.split("=", 1)
        # One at a time, waiting for each: the records of a key land in send order.
        meta = producer.send(topic, key=key.encode(), value=value.encode()).get(timeout=30)
        futures.append((key, value, meta))
    producer.flush()
    producer.close()
    for key, value, meta in futures:
        print(key, value, meta.partition, meta.offset)


def group(bootstrap, topic, group_id, count):
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    records = []
    deadline = time.time() + 30
    while len(records) < count and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.commit()
    consumer.close()
    for r in records:
        print(r.key.decode(), r.value.decode())


if __name__ == "__main__":
    mode, bootstrap, topic = sys.argv[1:4]
    if mode == "produce":
        produce(bootstrap, topic, sys.argv[4:])
    elif mode == "group":
        group(bootstrap, topic, sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit(f"unknown mode {mode!r}: produce or group")
