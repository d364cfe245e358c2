"""An idempotent producer (acks all, five requests in flight, retries) for the Kafka crash
test, which SIGKILLs and restarts the server under it: kafka-python, or librdkafka through
confluent-kafka.

Usage: producer.py HOST:PORT TOPIC COUNT produce
         (kafka-python) or
       producer.py HOST:PORT TOPIC COUNT produce-librdkafka
         sends "n-0" … "n-<COUNT-1>" to partition 0, one every few ms, then flushes; prints
         "acked <n> <offset>" for each record acknowledged, "failed <n> <error>" for each
         that failed for good, and "done" at the end.
       producer.py HOST:PORT TOPIC COUNT consume
         prints "record <offset> <value>" for every record of partition 0, then "done"."""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

BOOTSTRAP, TOPIC, COUNT, MODE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def say(line):
    print(line, flush=True)


if MODE == "produce":
    producer = KafkaProducer(
        bootstrap_servers=BOOTSTRAP,
        acks="all",
        enable_idempotence=True,
        max_in_flight_requests_per_connection=5,
        linger_ms=5,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=500,
        request_timeout_ms=5_000,
        delivery_timeout_ms=120_000,
    )
    for n in range(COUNT):
        future = producer.send(TOPIC, value=f"n-{n}".encode(), partition=0)
        future.add_callback(lambda meta, n=n: say(f"acked {n} {meta.offset}"))
        future.add_errback(lambda error, n=n: say(f"failed {n} {error!r}"))
        time.sleep(0.003)
    producer.flush(timeout=120)
    producer.close()
    say("done")
elif MODE == "produce-librdkafka":
    from confluent_kafka import Producer

    def delivered(error, message):
        n = int(message.value().decode()[2:])
        if error is None:
            say(f"acked {n} {message.offset()}")
        else:
            say(f"failed {n} {error!r}")

    producer = Producer({
        "bootstrap.servers": BOOTSTRAP,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 5,
        "retry.backoff.ms": 50,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "message.timeout.ms": 120_000,
    })
    for n in range(COUNT):
        producer.produce(TOPIC, value=f"n-{n}".encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
        time.sleep(0.003)
    left = producer.flush(120)
    if left:
        raise SystemExit(f"{left} records neither delivered nor failed in 120 s")
    say("done")
elif MODE == "consume":
    consumer = KafkaConsumer(
        bootstrap_servers=BOOTSTRAP, group_id=None, enable_auto_commit=False,
        consumer_timeout_ms=5_000,
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    for record in consumer:
        say(f"record {record.offset} {record.value.decode()}")
        if record.offset + 1 >= end:
            break
    consumer.close()
    say("done")
else:
    raise SystemExit(f"unknown mode {MODE}")
