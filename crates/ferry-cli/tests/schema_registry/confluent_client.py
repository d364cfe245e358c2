"""Confluent's own Python client against Ferry's schema registry.

Usage: confluent_client.py URL [USER_INFO]

Registers OrderPlaced v1 and its consumer-first evolution v1.1 (an optional field with a
default), fetches them back by id and by version, checks compatibility, is refused a
breaking change with 409 / 40901, and sends one record through Confluent's
AvroSerializer and AvroDeserializer. Prints "every check passed" at the end.
"""

import json
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

URL = sys.argv[1]
CONF = {"url": URL}
if len(sys.argv) > 2:
    CONF["basic.auth.user.info"] = sys.argv[2]

SUBJECT = "orders-value"

V1 = json.dumps({
    "type": "record", "name": "OrderPlaced", "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount_cents", "type": "long"},
    ],
})
V1_1 = json.dumps({
    "type": "record", "name": "OrderPlaced", "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount_cents", "type": "long"},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
})
BREAKING = json.dumps({
    "type": "record", "name": "OrderPlaced", "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount_cents", "type": "string"},
    ],
})


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


client = SchemaRegistryClient(CONF)
check(sorted(client.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"], "schema types")

id1 = client.register_schema(SUBJECT, Schema(V1, "AVRO"))
# A fresh client, so the answer comes from the server and not the client's cache.
fresh = SchemaRegistryClient(CONF)
check(fresh.register_schema(SUBJECT, Schema(V1, "AVRO")) == id1, "the same schema again has the same id")
check(json.loads(fresh.get_schema(id1).schema_str) == json.loads(V1), "fetched by id")

check(fresh.test_compatibility(SUBJECT, Schema(V1_1, "AVRO")), "v1.1 is backward compatible")
id2 = fresh.register_schema(SUBJECT, Schema(V1_1, "AVRO"))
check(id2 != id1, "v1.1 has its own id")
latest = fresh.get_latest_version(SUBJECT)
check((latest.version, latest.schema_id) == (2, id2), "latest is v1.1 at version 2")
check(fresh.get_versions(SUBJECT) == [1, 2], "versions")
check(fresh.get_subjects() == [SUBJECT], "subjects")
found = fresh.lookup_schema(SUBJECT, Schema(V1, "AVRO"))
check((found.version, found.schema_id) == (1, id1), "lookup finds v1")

check(not fresh.test_compatibility(SUBJECT, Schema(BREAKING, "AVRO")), "a type change is incompatible")
try:
    fresh.register_schema(SUBJECT, Schema(BREAKING, "AVRO"))
    check(False, "a breaking change is refused")
except SchemaRegistryError as e:
    check(e.http_status_code == 409 and e.error_code == 40901, f"refused with 409/40901: {e}")
    check("amount_cents" in e.error_message, "the refusal names the field")
check(fresh.get_versions(SUBJECT) == [1, 2], "the refusal added no version")

try:
    fresh.register_schema("other-value", Schema('{"type": 12}', "JSON"))
    check(False, "an invalid JSON Schema is refused")
except SchemaRegistryError as e:
    check(e.error_code == 42201, f"invalid JSON Schema refused with 42201: {e}")

check(fresh.set_compatibility(SUBJECT, "FULL") == {"compatibility": "FULL"}, "subject level set")
check(fresh.get_compatibility(SUBJECT) == "FULL", "subject level read")

try:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
except ImportError as e:  # fastavro missing
    print(f"FAILED: the Avro serializer does not import: {e}")
    sys.exit(1)

serializer = AvroSerializer(fresh, V1_1, conf={"auto.register.schemas": False, "use.latest.version": True})
ctx = SerializationContext("orders", MessageField.VALUE)
record = {"order_id": "o-1", "amount_cents": 1250, "coupon": "SPRING"}
data = serializer(record, ctx)
check(data[0] == 0 and int.from_bytes(data[1:5], "big") == id2, "the serializer framed the record with v1.1's id")
deserializer = AvroDeserializer(SchemaRegistryClient(CONF))
check(deserializer(data, ctx) == record, "the deserializer read it back through the registry")

# JSON Schema through Confluent's JSON serializer: registered on first use under the
# topic's subject, framed with its id, read back through the registry.
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

SHIPPED = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "OrderShipped",
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "carrier": {"type": "string"}},
    "required": ["order_id"],
})
json_ctx = SerializationContext("shipments", MessageField.VALUE)
json_serializer = JSONSerializer(SHIPPED, fresh)
shipped = {"order_id": "o-1", "carrier": "dhl"}
json_data = json_serializer(shipped, json_ctx)
json_id = int.from_bytes(json_data[1:5], "big")
check(json_data[0] == 0 and fresh.get_latest_version("shipments-value").schema_id == json_id,
      "the JSON serializer registered its schema and framed the record with its id")
check(fresh.get_schema(json_id).schema_type == "JSON", "the registry keeps the schema's type")
json_deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(CONF))
check(json_deserializer(json_data, json_ctx) == shipped, "the JSON deserializer read it back")

print(f"ids {id1} {id2}")
print("every check passed")
