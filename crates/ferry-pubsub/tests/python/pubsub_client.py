"""Google's Python client for Pub/Sub (google-cloud-pubsub) against Ferry's front end.

Run with PUBSUB_EMULATOR_HOST set to the front end's address: the client then speaks
plaintext gRPC without credentials, as it does to Google's emulator. Prints "every check
passed" at the end; any failed check raises.
"""

import collections
import sys
import threading
import time

from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.cloud.pubsub_v1.subscriber import exceptions as subscriber_exceptions

PROJECT = "ferry-test"
publisher = pubsub_v1.PublisherClient(
    publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
)
subscriber = pubsub_v1.SubscriberClient()
topic = publisher.topic_path(PROJECT, "orders")
ordered = subscriber.subscription_path(PROJECT, "ordered")
plain = subscriber.subscription_path(PROJECT, "plain")


def check(condition, what):
    if not condition:
        raise AssertionError(what)


# Topics and subscriptions.
publisher.create_topic(name=topic)
try:
    publisher.create_topic(name=topic)
    raise AssertionError("a second create_topic succeeded")
except exceptions.AlreadyExists:
    pass
subscriber.create_subscription(
    request={"name": ordered, "topic": topic, "enable_message_ordering": True,
             "ack_deadline_seconds": 30}
)
subscriber.create_subscription(request={"name": plain, "topic": topic})
got = subscriber.get_subscription(subscription=ordered)
check(got.topic == topic and got.enable_message_ordering, f"get_subscription: {got}")
check(got.ack_deadline_seconds == 30, f"ack deadline: {got.ack_deadline_seconds}")
names = [t.name for t in publisher.list_topics(request={"project": f"projects/{PROJECT}"})]
check(names == [topic], f"list_topics: {names}")
subs = sorted(publisher.list_topic_subscriptions(request={"topic": topic}))
check(subs == sorted([ordered, plain]), f"list_topic_subscriptions: {subs}")
try:
    subscriber.create_subscription(
        request={"name": subscriber.subscription_path(PROJECT, "pushed"), "topic": topic,
                 "push_config": {"push_endpoint": "http://127.0.0.1:9/push"}}
    )
    raise AssertionError("a push subscription was accepted")
except exceptions.MethodNotImplemented:
    pass
try:
    publisher.publish(publisher.topic_path(PROJECT, "nowhere"), b"x").result(timeout=30)
    raise AssertionError("a publish to a missing topic succeeded")
except exceptions.NotFound:
    pass

# Publish with ordering keys: two keys, interleaved.
KEYS = ["customer-1", "customer-2"]
PER_KEY = 25
futures = []
for i in range(PER_KEY):
    for key in KEYS:
        futures.append(
            publisher.publish(topic, f"{key}:{i}".encode(), ordering_key=key, seq=str(i))
        )
ids = [f.result(timeout=30) for f in futures]
check(len(set(ids)) == len(ids), "message ids are unique")

# Streaming pull with flow control on the ordered subscription: each key in order.
received = collections.defaultdict(list)
most_outstanding = 0
outstanding = 0
lock = threading.Lock()
done = threading.Event()


def on_message(message):
    global outstanding, most_outstanding
    with lock:
        outstanding += 1
        most_outstanding = max(most_outstanding, outstanding)
    time.sleep(0.01)
    key, number = message.data.decode().split(":")
    check(message.ordering_key == key, f"ordering key {message.ordering_key} for {key}")
    check(message.attributes["seq"] == number, "attributes arrive")
    with lock:
        received[key].append(int(number))
        outstanding -= 1
        if sum(len(v) for v in received.values()) == PER_KEY * len(KEYS):
            done.set()
    message.ack()


flow = pubsub_v1.types.FlowControl(max_messages=5)
stream = subscriber.subscribe(ordered, callback=on_message, flow_control=flow)
finished = done.wait(timeout=60)
stream.cancel()
try:
    stream.result(timeout=30)
except Exception:
    pass
check(finished, f"streaming pull got {dict(received)}")
for key in KEYS:
    check(received[key] == list(range(PER_KEY)), f"{key} in order: {received[key]}")
check(most_outstanding <= 5, f"flow control: {most_outstanding} outstanding")

# Synchronous pull on the other subscription: a nack (deadline 0) comes back, acks stay.
deadline = time.time() + 30
messages = []
while len(messages) < PER_KEY * len(KEYS) and time.time() < deadline:
    response = subscriber.pull(request={"subscription": plain, "max_messages": 100})
    messages.extend(response.received_messages)
check(len(messages) == PER_KEY * len(KEYS), f"pulled {len(messages)}")
handed_back = messages[0]
subscriber.modify_ack_deadline(
    request={"subscription": plain, "ack_ids": [handed_back.ack_id], "ack_deadline_seconds": 0}
)
subscriber.acknowledge(
    request={"subscription": plain, "ack_ids": [m.ack_id for m in messages[1:]]}
)
again = []
while not again and time.time() < deadline:
    again = subscriber.pull(request={"subscription": plain, "max_messages": 10}).received_messages
check(len(again) == 1, f"redelivered: {len(again)}")
check(again[0].message.message_id == handed_back.message.message_id, "the handed-back message")
subscriber.acknowledge(request={"subscription": plain, "ack_ids": [again[0].ack_id]})


def pull_all(subscription, count, timeout=30):
    """Pulls until `count` messages came or the time is up."""
    deadline = time.time() + timeout
    got = []
    while len(got) < count and time.time() < deadline:
        response = subscriber.pull(
            request={"subscription": subscription, "max_messages": count - len(got)},
            timeout=10,
        )
        got.extend(response.received_messages)
    return got


# A filter in Pub/Sub's syntax, on a topic of its own.
events = publisher.topic_path(PROJECT, "events")
publisher.create_topic(name=events)
filtered = subscriber.subscription_path(PROJECT, "filtered")
FILTER = 'attributes.kind = "paid" OR hasPrefix(attributes.kind, "refund-")'
subscriber.create_subscription(request={"name": filtered, "topic": events, "filter": FILTER})
check(subscriber.get_subscription(subscription=filtered).filter == FILTER, "the filter reads back")
for kind in ["paid", "created", "refund-partial", "shipped"]:
    publisher.publish(events, kind.encode(), kind=kind).result(timeout=30)
got = pull_all(filtered, 2)
check(sorted(m.message.attributes["kind"] for m in got) == ["paid", "refund-partial"],
      f"the filter took {[m.message.attributes['kind'] for m in got]}")
subscriber.acknowledge(request={"subscription": filtered, "ack_ids": [m.ack_id for m in got]})
check(not subscriber.pull(request={"subscription": filtered, "max_messages": 10},
                          timeout=10).received_messages,
      "nothing else passed the filter")
try:
    subscriber.create_subscription(
        request={"name": subscriber.subscription_path(PROJECT, "badly-filtered"),
                 "topic": events, "filter": "attributes.kind = paid"}
    )
    raise AssertionError("a malformed filter was accepted")
except exceptions.InvalidArgument:
    pass
subscriber.delete_subscription(subscription=filtered)

# A dead-letter policy: a message handed back until its attempts are used up moves to the
# dead-letter topic, with delivery_attempt counting on the way.
dead = publisher.topic_path(PROJECT, "dead-letters")
publisher.create_topic(name=dead)
audit = subscriber.subscription_path(PROJECT, "dead-letter-audit")
subscriber.create_subscription(request={"name": audit, "topic": dead})
retried = subscriber.subscription_path(PROJECT, "retried")
subscriber.create_subscription(request={
    "name": retried, "topic": events,
    "dead_letter_policy": {"dead_letter_topic": dead, "max_delivery_attempts": 5},
})
policy = subscriber.get_subscription(subscription=retried).dead_letter_policy
check(policy.dead_letter_topic == dead and policy.max_delivery_attempts == 5, f"policy: {policy}")
poison_id = publisher.publish(events, b"poison", kind="poison").result(timeout=30)
attempts = []
deadline = time.time() + 60
while len(attempts) < 5 and time.time() < deadline:
    for m in pull_all(retried, 1, timeout=5):
        attempts.append(m.delivery_attempt)
        subscriber.modify_ack_deadline(
            request={"subscription": retried, "ack_ids": [m.ack_id], "ack_deadline_seconds": 0}
        )
check(attempts == [1, 2, 3, 4, 5], f"delivery attempts: {attempts}")
letters = pull_all(audit, 1)
check(len(letters) == 1, f"dead letters: {len(letters)}")
letter = letters[0].message
check(letter.message_id == poison_id and letter.data == b"poison", f"the letter: {letter}")
check(letter.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5",
      f"dead-letter attributes: {dict(letter.attributes)}")
check(letter.attributes["CloudPubSubDeadLetterSourceSubscription"] == "retried",
      f"dead-letter attributes: {dict(letter.attributes)}")
subscriber.acknowledge(request={"subscription": audit, "ack_ids": [letters[0].ack_id]})
check(not subscriber.pull(request={"subscription": retried, "max_messages": 10},
                          timeout=10).received_messages, "gone from its subscription")
subscriber.delete_subscription(subscription=retried)
subscriber.delete_subscription(subscription=audit)
publisher.delete_topic(topic=dead)

# Exactly-once delivery: every ack answers whether it took effect.
once = subscriber.subscription_path(PROJECT, "exactly-once")
subscriber.create_subscription(
    request={"name": once, "topic": events, "enable_exactly_once_delivery": True}
)
check(subscriber.get_subscription(subscription=once).enable_exactly_once_delivery,
      "exactly-once reads back")
for i in range(5):
    publisher.publish(events, f"once-{i}".encode(), kind="once").result(timeout=30)
statuses = []
once_done = threading.Event()


def on_once(message):
    statuses.append(message.ack_with_response().result(timeout=30))
    if len(statuses) == 5:
        once_done.set()


once_stream = subscriber.subscribe(once, callback=on_once)
once_finished = once_done.wait(timeout=60)
once_stream.cancel()
try:
    once_stream.result(timeout=30)
except Exception:
    pass
check(once_finished, f"exactly-once acks: {statuses}")
check(all(s == subscriber_exceptions.AcknowledgeStatus.SUCCESS for s in statuses),
      f"exactly-once acks: {statuses}")
publisher.publish(events, b"stale", kind="once").result(timeout=30)
stale = pull_all(once, 1)
check(len(stale) == 1, "the message to hand back")
subscriber.modify_ack_deadline(
    request={"subscription": once, "ack_ids": [stale[0].ack_id], "ack_deadline_seconds": 0}
)
try:
    subscriber.acknowledge(request={"subscription": once, "ack_ids": [stale[0].ack_id]})
    raise AssertionError("an ack of an ended lease succeeded under exactly-once delivery")
except exceptions.InvalidArgument:
    pass
subscriber.delete_subscription(subscription=once)

# Seek back in time: what was acknowledged since comes again.
replayed = subscriber.subscription_path(PROJECT, "replayed")
subscriber.create_subscription(request={"name": replayed, "topic": events})
for i in range(3):
    publisher.publish(events, f"replay-{i}".encode(), kind="replay").result(timeout=30)
first = pull_all(replayed, 3)
check(len(first) == 3, f"pulled {len(first)}")
subscriber.acknowledge(request={"subscription": replayed, "ack_ids": [m.ack_id for m in first]})
before = min(m.message.publish_time for m in first)
subscriber.seek(request={"subscription": replayed, "time": before})
second = pull_all(replayed, 3)
check(sorted(m.message.data for m in second) == [b"replay-0", b"replay-1", b"replay-2"],
      f"after the seek: {[m.message.data for m in second]}")
subscriber.acknowledge(request={"subscription": replayed, "ack_ids": [m.ack_id for m in second]})
snapshot = subscriber.snapshot_path(PROJECT, "before-replay")
subscriber.create_snapshot(request={"name": snapshot, "subscription": replayed})
publisher.publish(events, b"after-snapshot", kind="replay").result(timeout=30)
after = pull_all(replayed, 1)
subscriber.acknowledge(request={"subscription": replayed, "ack_ids": [m.ack_id for m in after]})
subscriber.seek(request={"subscription": replayed, "snapshot": snapshot})
from_snapshot = pull_all(replayed, 1)
check([m.message.data for m in from_snapshot] == [b"after-snapshot"],
      f"after the seek to the snapshot: {[m.message.data for m in from_snapshot]}")
subscriber.acknowledge(
    request={"subscription": replayed, "ack_ids": [m.ack_id for m in from_snapshot]}
)
subscriber.delete_snapshot(request={"snapshot": snapshot})
subscriber.delete_subscription(subscription=replayed)
publisher.delete_topic(topic=events)

subscriber.delete_subscription(subscription=ordered)
subscriber.delete_subscription(subscription=plain)
publisher.delete_topic(topic=topic)
try:
    subscriber.get_subscription(subscription=plain)
    raise AssertionError("a deleted subscription was found")
except exceptions.NotFound:
    pass
# Schemas: a topic with an Avro schema and the JSON encoding takes valid messages, marked
# with the schema's attributes, and refuses the others.
from google.cloud.pubsub import SchemaServiceClient  # noqa: E402
from google.pubsub_v1.types import Encoding, Schema  # noqa: E402

schema_client = SchemaServiceClient()
avro_schema = schema_client.schema_path(PROJECT, "reading")
schema_client.create_schema(
    request={
        "parent": f"projects/{PROJECT}",
        "schema_id": "reading",
        "schema": Schema(
            type_=Schema.Type.AVRO,
            definition='{"type":"record","name":"Reading","fields":'
                       '[{"name":"celsius","type":"double"}]}',
        ),
    }
)
check(schema_client.get_schema(request={"name": avro_schema}).revision_id == "1",
      "the first revision")
try:
    schema_client.validate_message(
        request={"parent": f"projects/{PROJECT}", "name": avro_schema,
                 "message": b'{"celsius":"warm"}', "encoding": Encoding.JSON}
    )
    raise AssertionError("an invalid message validated")
except exceptions.InvalidArgument:
    pass
readings = publisher.topic_path(PROJECT, "readings")
publisher.create_topic(
    request={"name": readings,
             "schema_settings": {"schema": avro_schema, "encoding": Encoding.JSON}}
)
check(publisher.get_topic(topic=readings).schema_settings.schema == avro_schema,
      "the topic's schema")
read = subscriber.subscription_path(PROJECT, "read")
subscriber.create_subscription(request={"name": read, "topic": readings})
try:
    publisher.publish(readings, b'{"celsius":"warm"}').result(timeout=30)
    raise AssertionError("a message the schema refuses was published")
except exceptions.InvalidArgument:
    pass
publisher.publish(readings, b'{"celsius":21.5}').result(timeout=30)
[reading] = pull_all(read, 1)
attributes = dict(reading.message.attributes)
check(attributes.get("googclient_schemaname") == avro_schema
      and attributes.get("googclient_schemaencoding") == "JSON"
      and attributes.get("googclient_schemarevisionid") == "1",
      f"schema attributes: {attributes}")
subscriber.acknowledge(request={"subscription": read, "ack_ids": [reading.ack_id]})
subscriber.delete_subscription(subscription=read)
publisher.delete_topic(topic=readings)
schema_client.delete_schema(request={"name": avro_schema})

print("every check passed")
sys.stdout.flush()
