"""kafka-python's admin client against Ferry's Kafka endpoint: a topic created with a
config, grown with create_partitions (and a shrink refused), its configs described,
altered incrementally and whole (an unknown key refused by the broker), the cluster
described, and records deleted before an offset (beginning_offsets moves).

Usage: admin.py HOST:PORT TOPIC. Prints "every check passed" at the end; the Rust side
then checks the settings landed in Ferry's topic."""

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import InvalidPartitionsError

BOOTSTRAP = sys.argv[1]
TOPIC = sys.argv[2]


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def configs(admin, config_filter="all"):
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, TOPIC)],
        include_synonyms=True,
        config_filter=config_filter,
    )
    return described["topic"][TOPIC]


admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)

# CreateTopics with a config Ferry maps.
admin.create_topics(
    [NewTopic(TOPIC, num_partitions=1, replication_factor=1,
              topic_configs={"retention.ms": "3600000"})]
)
got = configs(admin)
check(got["retention.ms"]["value"] == "3600000", f"retention.ms: {got['retention.ms']}")
check(got["cleanup.policy"]["value"] == "delete", f"cleanup.policy: {got['cleanup.policy']}")
check(got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG", got["retention.ms"])
check(got["retention.bytes"]["config_source"] == "DEFAULT_CONFIG", got["retention.bytes"])
modified = configs(admin, "modified")
check(set(modified) == {"retention.ms"}, f"only retention.ms is modified: {set(modified)}")

# CreatePartitions: grows, never shrinks.
admin.create_partitions({TOPIC: 3})
described = admin.describe_topics([TOPIC])
check(len(described[0]["partitions"]) == 3, f"three partitions: {described}")
try:
    admin.create_partitions({TOPIC: 2})
    raise AssertionError("shrinking must be refused")
except InvalidPartitionsError:
    pass

# IncrementalAlterConfigs (kafka-python's choice when the broker serves it).
result = admin.alter_configs(
    [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.bytes": "1048576"})]
)
check(result["topic"][TOPIC] == "OK", f"incremental: {result}")
got = configs(admin)
check(got["retention.bytes"]["value"] == "1048576", got["retention.bytes"])
check(got["retention.ms"]["value"] == "3600000", "an incremental change keeps the rest")

# AlterConfigs, whole: kafka-python sends the other modified keys along.
result = admin.alter_configs(
    [ConfigResource(ConfigResourceType.TOPIC, TOPIC,
                    configs={"cleanup.policy": "compact,delete"})],
    incremental=False,
)
check(result["topic"][TOPIC] == "OK", f"whole: {result}")
got = configs(admin)
check(got["cleanup.policy"]["value"] == "compact,delete", got["cleanup.policy"])
check(got["retention.ms"]["value"] == "3600000", got["retention.ms"])

# A key Ferry does not have: refused by the broker, not ignored.
result = admin.alter_configs(
    [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"min.insync.replicas": "2"})],
    raise_on_unknown=False,
)
check("InvalidConfig" in result["topic"][TOPIC], f"unknown key: {result}")

# DescribeCluster: this node.
cluster = admin.describe_cluster()
check(cluster["cluster_id"] == "ferry", f"cluster: {cluster}")
check(cluster["controller_id"] == 0, f"cluster: {cluster}")
check([b["broker_id"] for b in cluster["brokers"]] == [0], f"cluster: {cluster}")

# DeleteRecords: the earliest offset moves. Keys: the topic is compacted now.
producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, enable_idempotence=False)
for i in range(5):
    producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
producer.flush()
producer.close()
tp = TopicPartition(TOPIC, 0)
deleted = admin.delete_records({tp: 3})
check(deleted[tp]["low_watermark"] == 3, f"delete_records: {deleted}")
consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=None)
check(consumer.beginning_offsets([tp])[tp] == 3, "beginning_offsets moved")
check(consumer.end_offsets([tp])[tp] == 5, "end_offsets did not")
consumer.close()

admin.close()
print("every check passed")
