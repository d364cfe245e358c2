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
publisher.delete_topic(topic=events)

subscriber.delete_subscription(subscription=ordered)
subscriber.delete_subscription(subscription=plain)
publisher.delete_topic(topic=topic)
try:
    subscriber.get_subscription(subscription=plain)
    raise AssertionError("a deleted subscription was found")
except exceptions.NotFound:
    pass
print("every check passed")
sys.stdout.flush()
