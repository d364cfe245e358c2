"""Broker-side schema validation as Confluent's Python clients see it, against a real
`ferry serve`.

Usage: kafka_producer.py BOOTSTRAP REGISTRY_URL TOPIC

Creates TOPIC with confluent.value.schema.validation=true through the AdminClient and
reads the config back; registers OrderPlaced v1 through AvroSerializer and produces a
record through the Kafka listener (accepted); produces garbage, a record of another
subject's schema, and an OrderPlaced whose nested field is corrupt (each refused with
INVALID_RECORD); then consumes the topic and decodes what it holds with
AvroDeserializer. Then the same with JSON Schema on TOPIC-json: JSONSerializer registers
and frames a document (accepted), a framed document the schema refuses gets
INVALID_RECORD, and JSONDeserializer reads back the accepted one only. Prints the
refusals' messages and, at the end, "every check passed".
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

BOOTSTRAP, REGISTRY_URL, TOPIC = sys.argv[1], sys.argv[2], sys.argv[3]

ORDER_PLACED = json.dumps({
    "type": "record", "name": "OrderPlaced", "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": {
            "type": "record", "name": "Customer",
            "fields": [{"name": "email", "type": "string"}],
        }},
        {"name": "amount_cents", "type": "long"},
    ],
})
REFUND = json.dumps({
    "type": "record", "name": "Refund", "namespace": "shop",
    "fields": [{"name": "amount", "type": "double"}],
})


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
created = admin.create_topics([NewTopic(
    TOPIC, num_partitions=1, replication_factor=1,
    config={"confluent.value.schema.validation": "true"},
)])
created[TOPIC].result(timeout=15)
check(True, "topic created with confluent.value.schema.validation=true")
resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
configs = admin.describe_configs([resource])[resource].result(timeout=15)
check(configs["confluent.value.schema.validation"].value == "true",
      "DescribeConfigs reads confluent.value.schema.validation=true")

registry = SchemaRegistryClient({"url": REGISTRY_URL})
orders = AvroSerializer(registry, ORDER_PLACED)
refunds = AvroSerializer(registry, REFUND)
value = SerializationContext(TOPIC, MessageField.VALUE)
order = {"order_id": "o-1", "customer": {"email": "ada@example.com"}, "amount_cents": 1250}
good = orders(order, value)
check(registry.get_latest_version(f"{TOPIC}-value").schema.schema_str is not None,
      "OrderPlaced v1 registered under <topic>-value")
refund = refunds({"amount": 12.5}, SerializationContext("refunds", MessageField.VALUE))

# The same record with customer.email's length made negative (zig-zag 0x01 is -1): the
# wire-format prefix and order_id are fine, the nested field is not.
email_at = 5 + 1 + len("o-1")
corrupt = good[:email_at] + b"\x01" + good[email_at + 1:]

results = {}


def report(name):
    def delivered(err, msg):
        results[name] = err
    return delivered


# No retries: a refusal is final, and a retry must not hide what the broker answered.
producer = Producer({
    "bootstrap.servers": BOOTSTRAP, "retries": 0, "message.timeout.ms": 15000,
    "linger.ms": 0,
})
for name, payload in [("good", good), ("garbage", b"not avro at all"),
                      ("refund", refund), ("corrupt", corrupt)]:
    producer.produce(TOPIC, value=payload, on_delivery=report(name))
    producer.flush(15)

check(results.get("good") is None, "the serialized OrderPlaced is accepted")
for name in ["garbage", "refund", "corrupt"]:
    err = results.get(name)
    check(err is not None and err.code() == KafkaError.INVALID_RECORD,
          f"{name} is refused with INVALID_RECORD (got {err!r})")
    print(f"refused {name}: {err.str()}")

consumer = Consumer({
    "bootstrap.servers": BOOTSTRAP, "group.id": "schema-enforcement",
    "auto.offset.reset": "earliest", "enable.auto.commit": False,
})
consumer.subscribe([TOPIC])
decode = AvroDeserializer(registry)
received = []
deadline = time.time() + 20
while time.time() < deadline:
    msg = consumer.poll(1.0)
    if msg is None:
        if received:
            break
        continue
    check(msg.error() is None, f"consume without error ({msg.error()!r})")
    received.append(decode(msg.value(), value))
consumer.close()
check(received == [order], f"the topic holds the accepted record only, decoded ({received!r})")

# JSON Schema, through Confluent's JSON serializer.
JSON_TOPIC = f"{TOPIC}-json"
admin.create_topics([NewTopic(
    JSON_TOPIC, num_partitions=1, replication_factor=1,
    config={"confluent.value.schema.validation": "true"},
)])[JSON_TOPIC].result(timeout=15)
SHIPPED = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "OrderShipped", "type": "object",
    "properties": {"order_id": {"type": "string"},
                   "lines": {"type": "array", "items": {
                       "type": "object", "properties": {"qty": {"type": "integer"}}}}},
    "required": ["order_id"],
})
json_value = SerializationContext(JSON_TOPIC, MessageField.VALUE)
shipped = {"order_id": "o-1", "lines": [{"qty": 2}]}
json_good = JSONSerializer(SHIPPED, registry)(shipped, json_value)
json_id = int.from_bytes(json_good[1:5], "big")
check(registry.get_latest_version(f"{JSON_TOPIC}-value").schema_id == json_id,
      "OrderShipped registered under <topic>-json-value")
# The serializer checks documents itself, so the bad one is framed by hand, as a client
# without that check would send it.
json_bad = json_good[:5] + json.dumps({"order_id": "o-2", "lines": [{"qty": "two"}]}).encode()
for name, payload in [("json good", json_good), ("json bad", json_bad)]:
    producer.produce(JSON_TOPIC, value=payload, on_delivery=report(name))
    producer.flush(15)
check(results.get("json good") is None, "the serialized OrderShipped is accepted")
err = results.get("json bad")
check(err is not None and err.code() == KafkaError.INVALID_RECORD,
      f"a document the schema refuses gets INVALID_RECORD (got {err!r})")

consumer = Consumer({
    "bootstrap.servers": BOOTSTRAP, "group.id": "schema-enforcement-json",
    "auto.offset.reset": "earliest", "enable.auto.commit": False,
})
consumer.subscribe([JSON_TOPIC])
decode_json = JSONDeserializer(None, schema_registry_client=registry)
received = []
deadline = time.time() + 20
while time.time() < deadline:
    msg = consumer.poll(1.0)
    if msg is None:
        if received:
            break
        continue
    check(msg.error() is None, f"consume without error ({msg.error()!r})")
    received.append(decode_json(msg.value(), json_value))
consumer.close()
check(received == [shipped], f"the JSON topic holds the accepted document only ({received!r})")
print("every check passed")
