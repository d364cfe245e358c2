"""kafka-python consumer groups against Ferry's Kafka endpoint: two consumers of one group
split a topic's partitions, one leaves and the other takes them all, commits, a consumer
started later resumes after the group's commits, the admin client lists, describes, reads
the offsets of and deletes groups. It leaves group "ferry-lagging" with a commit (offset 3
of partition 0, metadata "py-meta") for the caller to find as a Ferry group.

Usage: consumer_groups.py HOST:PORT. Prints "every check passed" at the end."""

import logging
import os
import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import CommitFailedError, KafkaTimeoutError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

BOOTSTRAP = sys.argv[1]
# kafka-python's warnings (failed joins, heartbeats, commits) go to stderr, which the
# Rust test prints when the script fails. KAFKA_PYTHON_LOG=DEBUG shows the group
# coordinator's every call (joins, syncs, heartbeats and their generations).
logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                    format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
logging.getLogger("kafka.coordinator").setLevel(os.environ.get("KAFKA_PYTHON_LOG", "WARNING"))
MEMBERS = []
TOPIC = "py-groups"
GROUP = "ferry-group"
PARTITIONS = 4


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def wait_for(condition, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        failed = [m for m in MEMBERS if m.error is not None]
        if failed:
            raise AssertionError(f"{failed[0].name} failed while waiting for {what}: "
                                 f"{failed[0].error!r}")
        if condition():
            return
        time.sleep(0.1)
    states = {m.name: (sorted(m.assigned), len(m.records), m.is_alive()) for m in MEMBERS}
    raise AssertionError(f"timed out waiting for {what}; members: {states}")


def new_consumer(group=GROUP, name="lagging"):
    return KafkaConsumer(
        bootstrap_servers=BOOTSTRAP,
        group_id=group,
        # Names the member ids and the I/O thread in the log: "py-a-…", "kafka-io-py-a".
        client_id=f"py-{name}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=300,
        # The rebalance timeout: how long a round waits for members to join again.
        max_poll_interval_ms=20_000,
    )


class Member(threading.Thread):
    """One consumer polling in its own thread (a rebalance needs every member to poll)."""

    def __init__(self, name, group=GROUP):
        super().__init__(daemon=True)
        self.name = name
        self.group = group
        self.records = []
        self.assigned = set()
        self.stop = threading.Event()
        self.commit_wanted = threading.Event()
        self.committed = threading.Event()
        self.error = None
        MEMBERS.append(self)

    def run(self):
        try:
            consumer = new_consumer(self.group, self.name)
            subscribe(consumer)
            while not self.stop.is_set():
                polled = consumer.poll(timeout_ms=100)
                for records in polled.values():
                    self.records.extend(records)
                self.assigned = {tp.partition for tp in consumer.assignment()}
                if self.commit_wanted.is_set() and try_commit(consumer):
                    self.commit_wanted.clear()
                    self.committed.set()
            consumer.close()
        except Exception as e:  # reported by the main thread
            self.error = e


def subscribe(consumer):
    """Subscribes to the topic with its metadata in hand before the first join.

    kafka-python 3.0.12 compares the topic metadata its leader assigned with against the
    latest it has, and joins again when they differ; the metadata it compares against is
    only taken when an update arrives after subscribe(). Joining before that update makes
    the leader join a second time at once, by itself (`topics()` fetches the update). That
    second join is what can strand it: kafka-python 3.0.12 drops a JoinGroup-SyncGroup
    exchange that ends between two polls, and one the leader started for its metadata is
    never asked for again, so it stays rebalancing, heartbeats off, until its session ends."""
    consumer.subscribe([TOPIC])
    check(TOPIC in consumer.topics(), "the topic is listed")
    check(consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS)),
          "the topic's partitions are known")


def try_commit(consumer, offsets=None):
    """A commit, or False when a rebalance of this consumer is under way.

    kafka-python 3.0.12 finishes a rebalance only inside poll(): a commit() made while its
    JoinGroup or SyncGroup is in flight retries REBALANCE_IN_PROGRESS until
    request_timeout_ms (305 s) without the rebalance ever completing, and the coordinator
    ends the member's session meanwhile. So the commit is bounded, and retried after the
    next poll, as a rebalance-interrupted commit is meant to be."""
    try:
        consumer.commit(offsets, timeout_ms=2_000)
        return True
    except (KafkaTimeoutError, CommitFailedError, RebalanceInProgressError) as e:
        logging.warning("commit deferred until the rebalance completes: %r", e)
        return False


def produce(n, prefix):
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, enable_idempotence=False)
    for i in range(n):
        producer.send(TOPIC, key=f"k{i}".encode(), value=f"{prefix}{i}".encode(),
                      partition=i % PARTITIONS)
    producer.flush()
    producer.close()


admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
produce(40, "first-")

# Two members split the partitions.
a = Member("a")
a.start()
wait_for(lambda: a.assigned == set(range(PARTITIONS)), "a alone to hold every partition")
b = Member("b")
b.start()
wait_for(
    lambda: a.assigned and b.assigned and not (a.assigned & b.assigned)
    and a.assigned | b.assigned == set(range(PARTITIONS)),
    "a and b to split the partitions",
)
described = admin.describe_groups([GROUP])[GROUP]
check(described["group_state"] == "Stable", f"the group is stable: {described}")
check(described["protocol_type"] == "consumer", f"protocol type: {described}")
check(len(described["members"]) == 2, f"two members: {described}")
wait_for(lambda: len({r.value for r in a.records + b.records}) == 40, "all 40 records read")
for member in (a, b):
    member.commit_wanted.set()
    check(member.committed.wait(10), f"{member.name} committed")
    check(member.error is None, f"{member.name}: {member.error}")

# b leaves: a takes every partition.
b.stop.set()
b.join(10)
check(b.error is None, f"b: {b.error}")
wait_for(lambda: a.assigned == set(range(PARTITIONS)), "a to take b's partitions")
produce(8, "second-")
wait_for(lambda: sum(r.value.startswith(b"second-") for r in a.records) == 8,
         "a to read the second batch")
a.committed.clear()
a.commit_wanted.set()
check(a.committed.wait(10), "a committed")
a.stop.set()
a.join(10)
check(a.error is None, f"a: {a.error}")

# A consumer started later resumes after the group's commits.
produce(4, "third-")
c = Member("c")
c.start()
wait_for(lambda: len(c.records) >= 4, "c to read what came after the commits")
time.sleep(1)
values = sorted(r.value for r in c.records)
check(values == sorted(f"third-{i}".encode() for i in range(4)),
      f"c reads only the records after the commits: {values}")
c.stop.set()
c.join(10)
check(c.error is None, f"c: {c.error}")

# The admin client's view of the (now empty) group.
listed = {g["group_id"]: g for g in admin.list_groups()}
check(GROUP in listed, f"the group is listed: {listed}")
check(listed[GROUP]["protocol_type"] == "consumer", f"listed: {listed[GROUP]}")
stable = admin.list_groups(states_filter=["Stable"])
check(all(g["group_id"] != GROUP for g in stable), f"not stable once empty: {stable}")
offsets = admin.list_group_offsets({GROUP: None})[GROUP]
check(
    {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == TOPIC}
    == {p: 12 for p in range(PARTITIONS)},
    f"12 records committed on each partition: {offsets}",
)
check(admin.describe_groups([GROUP])[GROUP]["group_state"] == "Empty", "empty")

# A group with a commit and metadata, left for the caller to find as a Ferry group.
lagging = new_consumer("ferry-lagging")
subscribe(lagging)
lagging_offsets = {TopicPartition(TOPIC, 0): OffsetAndMetadata(3, "py-meta", -1)}
wait_for(lambda: lagging.poll(timeout_ms=100) is not None and lagging.assignment()
         and try_commit(lagging, lagging_offsets),
         "the lagging consumer's assignment and commit")
committed = lagging.committed(TopicPartition(TOPIC, 0))
check(committed == 3, f"committed offset read back: {committed}")
lagging.close()

deleted = dict(admin.delete_groups([GROUP, "no-such-group"]))
check(deleted == {GROUP: "OK", "no-such-group": "GroupIdNotFoundError"},
      f"group deleted, an unknown one not found: {deleted}")
check(GROUP not in {g["group_id"] for g in admin.list_groups()}, "the group is gone")
admin.close()
print("every check passed")
