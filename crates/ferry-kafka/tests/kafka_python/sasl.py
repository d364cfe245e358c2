"""kafka-python against Ferry's Kafka endpoint with SASL: authenticates with the mechanism
given (the user is a token's name, the password the token), creates, produces to and
consumes from a topic the token may use, is refused a topic it may not publish to
(TopicAuthorizationFailedError), does not see that topic in the topic list, and fails to
connect with a wrong token.

Usage: sasl.py HOST:PORT SECURITY_PROTOCOL MECHANISM [CA_FILE]. Prints "every check passed"
at the end."""

import logging
import os
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAuthorizationFailedError

BOOTSTRAP, PROTOCOL, MECHANISM = sys.argv[1:4]
CA_FILE = sys.argv[4] if len(sys.argv) > 4 else None
if os.environ.get("KAFKA_PYTHON_DEBUG"):
    logging.basicConfig(level=logging.DEBUG)
USER, TOKEN = "orders-service", "orders-token-7f3a9c"
TOPIC = "orders." + MECHANISM.lower().replace("-", "")


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def security(password=TOKEN):
    settings = dict(
        bootstrap_servers=BOOTSTRAP,
        security_protocol=PROTOCOL,
        sasl_mechanism=MECHANISM,
        sasl_plain_username=USER,
        sasl_plain_password=password,
    )
    if CA_FILE:
        settings["ssl_cafile"] = CA_FILE
    return settings


admin = KafkaAdminClient(**security())
admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
listed = admin.list_topics()
check(TOPIC in listed, f"the topic is listed: {listed}")
check("payments" not in listed, f"a topic the token may not see is not listed: {listed}")

producer = KafkaProducer(enable_idempotence=False, max_block_ms=10_000, **security())
sent = [producer.send(TOPIC, value=f"v{i}".encode()).get(timeout=10).offset for i in range(3)]
check(sent == [0, 1, 2], f"offsets {sent}")
try:
    producer.send("payments", value=b"no").get(timeout=10)
    raise AssertionError("publishing to payments must be refused")
except TopicAuthorizationFailedError:
    pass
producer.close()

consumer = KafkaConsumer(group_id=None, consumer_timeout_ms=10_000, **security())
tp = TopicPartition(TOPIC, 0)
consumer.assign([tp])
consumer.seek(tp, 0)
got = []
for record in consumer:
    got.append(record.value)
    if len(got) == 3:
        break
check(got == [b"v0", b"v1", b"v2"], f"consumed {got}")
consumer.close()

admin.delete_topics([TOPIC])
admin.close()

# A wrong token: the client cannot connect, and says why (kafka-python logs the
# SaslAuthenticationFailedError with the endpoint's message, then gives up bootstrapping).
class Recorder(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


recorder = Recorder()
logging.getLogger("kafka").addHandler(recorder)
logging.getLogger("kafka").setLevel(logging.INFO)
try:
    KafkaProducer(bootstrap_timeout_ms=3_000, **security("wrong-token"))
    raise AssertionError("a wrong token must not authenticate")
except KafkaError as e:
    print(f"wrong token refused: {type(e).__name__}")
failures = [m for m in recorder.messages if "SaslAuthenticationFailedError" in m]
check(
    any("wrong user name or token" in m for m in failures),
    f"the refusal is SASL_AUTHENTICATION_FAILED with its reason: {recorder.messages}",
)

print("every check passed")
