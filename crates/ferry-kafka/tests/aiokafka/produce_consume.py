"""aiokafka (the asyncio Kafka client) against Ferry's Kafka endpoint: the admin client
creates a topic and creates and deletes another; an idempotent producer (acks=all, gzip)
sends keyed records with headers; a consumer of a group reads them all and commits, by
hand, only the first half of each partition; a second consumer of the group resumes right
after those commits, reads the rest and commits them. It leaves topic TOPIC with RECORDS
records and group GROUP committed at each partition's end for the caller to check.

Usage: produce_consume.py HOST:PORT TOPIC GROUP. Prints "every check passed" at the end."""

import asyncio
import logging
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

BOOTSTRAP, TOPIC, GROUP = sys.argv[1:4]
SCRATCH = TOPIC + "-scratch"
PARTITIONS = 2
RECORDS = 10
# aiokafka's warnings go to stderr, which the Rust test prints when the script fails.
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def record(i):
    """The i-th record: its key, value and headers."""
    return (f"k{i % 4}".encode(), f"order {i}".encode(),
            [("type", b"order.created"), ("n", str(i).encode())])


async def admin():
    client = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await client.start()
    try:
        await client.create_topics([
            NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1),
            NewTopic(SCRATCH, num_partitions=1, replication_factor=1),
        ])
        topics = await client.list_topics()
        check(TOPIC in topics and SCRATCH in topics, f"both created: {topics}")
        await client.delete_topics([SCRATCH])
        topics = await client.list_topics()
        check(SCRATCH not in topics, f"{SCRATCH} deleted: {topics}")
        check(TOPIC in topics, f"{TOPIC} kept: {topics}")
    finally:
        await client.close()


async def produce():
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all",
                                enable_idempotence=True, compression_type="gzip")
    await producer.start()
    placed = {}
    try:
        for i in range(RECORDS):
            key, value, headers = record(i)
            meta = await producer.send_and_wait(TOPIC, value, key=key, headers=headers)
            placed[i] = (meta.partition, meta.offset)
    finally:
        await producer.stop()
    for p in range(PARTITIONS):
        offsets = [o for (part, o) in placed.values() if part == p]
        check(offsets == list(range(len(offsets))),
              f"partition {p} got offsets 0.. in send order: {offsets}")
    check(len({placed[i][0] for i in range(RECORDS)}) == PARTITIONS,
          f"the keys spread over both partitions: {placed}")
    return placed


def consumer():
    return AIOKafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                            enable_auto_commit=False, auto_offset_reset="earliest")


async def read(c, count):
    got = []
    async with asyncio.timeout(30):
        while len(got) < count:
            for batch in (await c.getmany(timeout_ms=500)).values():
                got.extend(batch)
    return got


def index(msg):
    """The record number a consumed message carries, after checking it whole."""
    n = int(dict(msg.headers)["n"])
    key, value, headers = record(n)
    # Compared as a mapping: Ferry's headers are a map, so a record comes back with its
    # headers in name order, not in the order the producer listed them.
    check((msg.key, msg.value, dict(msg.headers)) == (key, value, dict(headers))
          and len(msg.headers) == len(headers), f"record {n} as sent: {msg}")
    return n


async def main():
    await admin()
    placed = await produce()
    ends = {p: sum(1 for (part, _) in placed.values() if part == p)
            for p in range(PARTITIONS)}
    halves = {p: ends[p] // 2 for p in range(PARTITIONS)}

    first = consumer()
    await first.start()
    try:
        got = await read(first, RECORDS)
        check(sorted(index(m) for m in got) == list(range(RECORDS)), "every record once")
        await first.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(halves[p], "half")
                            for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            committed = await first.committed(TopicPartition(TOPIC, p))
            check(committed == halves[p], f"partition {p} committed {committed}")
    finally:
        await first.stop()

    second = consumer()
    await second.start()
    try:
        rest = RECORDS - sum(halves.values())
        got = await read(second, rest)
        check(len(got) == rest, f"only the records after the commits: {got}")
        for m in got:
            check(m.offset >= halves[m.partition], f"resumed after the commit: {m}")
            check(placed[index(m)] == (m.partition, m.offset), f"where it was put: {m}")
        await second.commit()
        for p in range(PARTITIONS):
            committed = await second.committed(TopicPartition(TOPIC, p))
            check(committed == ends[p], f"partition {p} committed to its end: {committed}")
    finally:
        await second.stop()
    print("every check passed")


asyncio.run(main())
