"""boto3 against Ferry's SQS endpoint: queues, attributes, send/receive/delete, batches,
FIFO, long polls and the error codes boto3 raises. botocore does not check SQS's MD5
digests itself, so this script checks every one against its own implementation of AWS's
documented algorithm.

Usage: sqs_client.py <endpoint-url>
"""

import base64
import hashlib
import json
import struct
import sys
import time

import boto3
from botocore.config import Config

endpoint = sys.argv[1]
sqs = boto3.client(
    "sqs",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="test",
    aws_secret_access_key="test",
    config=Config(retries={"max_attempts": 1}),
)


def md5_of_attributes(attributes):
    encoded = b""
    for name in sorted(attributes, key=lambda n: n.encode()):
        value = attributes[name]
        data_type = value["DataType"]
        encoded += struct.pack(">I", len(name.encode())) + name.encode()
        encoded += struct.pack(">I", len(data_type.encode())) + data_type.encode()
        if "BinaryValue" in value:
            raw = value["BinaryValue"]
            encoded += b"\x02" + struct.pack(">I", len(raw)) + raw
        else:
            raw = value["StringValue"].encode()
            encoded += b"\x01" + struct.pack(">I", len(raw)) + raw
    return hashlib.md5(encoded).hexdigest()


def md5(text):
    return hashlib.md5(text.encode()).hexdigest()


def expect_error(code, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except sqs.exceptions.ClientError as e:
        got = e.response["Error"]["Code"]
        assert got == code, f"expected {code}, got {got}: {e}"
        return e
    raise AssertionError(f"expected {code}, the call succeeded")


# Queues and attributes.
url = sqs.create_queue(QueueName="boto-orders", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
assert url.endswith("/000000000000/boto-orders"), url
assert sqs.create_queue(QueueName="boto-orders", Attributes={"VisibilityTimeout": "30"})["QueueUrl"] == url
try:
    sqs.create_queue(QueueName="boto-orders", Attributes={"VisibilityTimeout": "31"})
    raise AssertionError("a different VisibilityTimeout was accepted")
except sqs.exceptions.QueueNameExists:
    pass
assert sqs.get_queue_url(QueueName="boto-orders")["QueueUrl"] == url
try:
    sqs.get_queue_url(QueueName="no-such-queue")
    raise AssertionError("a missing queue was found")
except sqs.exceptions.QueueDoesNotExist as e:
    assert e.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue", e.response
assert url in sqs.list_queues(QueueNamePrefix="boto-")["QueueUrls"]
sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0", "MaximumMessageSize": "65536"})
attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
assert attributes["MaximumMessageSize"] == "65536", attributes
assert attributes["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:boto-orders", attributes
sqs.tag_queue(QueueUrl=url, Tags={"team": "orders"})
assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "orders"}

# Send, receive, delete, with attributes of every type.
message_attributes = {
    "kind": {"DataType": "String", "StringValue": "order.created"},
    "count": {"DataType": "Number", "StringValue": "3"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe"},
    "unit": {"DataType": "String.unit", "StringValue": "kg"},
}
body = '{"order": 7, "note": "naïve"}'
sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=message_attributes)
assert sent["MD5OfMessageBody"] == md5(body), sent
assert sent["MD5OfMessageAttributes"] == md5_of_attributes(message_attributes), sent
got = sqs.receive_message(
    QueueUrl=url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"], WaitTimeSeconds=1
)["Messages"]
assert len(got) == 1, got
message = got[0]
assert message["Body"] == body
assert message["MD5OfBody"] == md5(message["Body"])
assert message["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\x01\xfe"
assert message["MD5OfMessageAttributes"] == md5_of_attributes(message["MessageAttributes"])
assert message["Attributes"]["ApproximateReceiveCount"] == "1"
sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
expect_error("ReceiptHandleIsInvalid", sqs.delete_message, QueueUrl=url, ReceiptHandle="forged")

# Batches.
entries = [
    {"Id": f"m{i}", "MessageBody": f"batch {i}", "MessageAttributes": {"i": {"DataType": "Number", "StringValue": str(i)}}}
    for i in range(10)
]
result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
assert len(result["Successful"]) == 10 and not result.get("Failed"), result
for entry in result["Successful"]:
    i = int(entry["Id"][1:])
    assert entry["MD5OfMessageBody"] == md5(f"batch {i}")
    assert entry["MD5OfMessageAttributes"] == md5_of_attributes(entries[i]["MessageAttributes"])
expect_error("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", sqs.send_message_batch, QueueUrl=url,
             Entries=[{"Id": "x", "MessageBody": "a"}, {"Id": "x", "MessageBody": "b"}])
received = []
while len(received) < 10:
    page = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=1)
    for m in page.get("Messages", []):
        assert m["MD5OfBody"] == md5(m["Body"])
        assert m["MD5OfMessageAttributes"] == md5_of_attributes(m["MessageAttributes"])
        received.append(m)
assert sorted(m["Body"] for m in received) == sorted(f"batch {i}" for i in range(10))
changed = sqs.change_message_visibility_batch(
    QueueUrl=url, Entries=[{"Id": "v", "ReceiptHandle": received[0]["ReceiptHandle"], "VisibilityTimeout": 60}]
)
assert [e["Id"] for e in changed["Successful"]] == ["v"], changed
deleted = sqs.delete_message_batch(
    QueueUrl=url, Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)]
)
assert len(deleted["Successful"]) == 10, deleted

# Long poll: a message sent while a receive waits is handed to it.
started = time.monotonic()
assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
assert time.monotonic() - started >= 0.9

# FIFO.
fifo = sqs.create_queue(
    QueueName="boto-jobs.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
)["QueueUrl"]
first = sqs.send_message(QueueUrl=fifo, MessageBody="a", MessageGroupId="g1")
sqs.send_message(QueueUrl=fifo, MessageBody="b", MessageGroupId="g1")
sqs.send_message(QueueUrl=fifo, MessageBody="c", MessageGroupId="g2")
duplicate = sqs.send_message(QueueUrl=fifo, MessageBody="a", MessageGroupId="g1")
assert duplicate["MessageId"] == first["MessageId"]
assert "SequenceNumber" in first
# As many of a group as fit, in order, then the next group; the retry of an attempt id
# answers the same messages.
receive = dict(QueueUrl=fifo, MaxNumberOfMessages=2, MessageSystemAttributeNames=["All"],
               ReceiveRequestAttemptId="attempt-1")
page = sqs.receive_message(**receive)["Messages"]
assert [m["Body"] for m in page] == ["a", "b"], [m["Body"] for m in page]
assert page[0]["Attributes"]["MessageGroupId"] == "g1"
assert sqs.receive_message(**receive)["Messages"] == page
expect_error("InvalidParameterValue", sqs.receive_message, QueueUrl=fifo,
             ReceiveRequestAttemptId="not valid")
rest = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
assert [m["Body"] for m in rest] == ["c"], [m["Body"] for m in rest]
sqs.send_message(QueueUrl=fifo, MessageBody="d", MessageGroupId="g1")
sqs.delete_message(QueueUrl=fifo, ReceiptHandle=page[0]["ReceiptHandle"])
assert "Messages" not in sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)
sqs.delete_message(QueueUrl=fifo, ReceiptHandle=page[1]["ReceiptHandle"])
page = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
assert [m["Body"] for m in page] == ["d"], [m["Body"] for m in page]
expect_error("MissingParameter", sqs.send_message, QueueUrl=fifo, MessageBody="x")

# Purge and delete.
sqs.purge_queue(QueueUrl=url)
expect_error("AWS.SimpleQueueService.PurgeQueueInProgress", sqs.purge_queue, QueueUrl=url)
sqs.delete_queue(QueueUrl=url)
try:
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    raise AssertionError("a deleted queue answered")
except sqs.exceptions.QueueDoesNotExist:
    pass
# Permissions become statements of the queue's Policy (enforced only with access keys:
# this endpoint is open).
sqs.add_permission(QueueUrl=fifo, Label="l", AWSAccountIds=["000000000000"],
                   Actions=["SendMessage"])
policy = json.loads(
    sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["Policy"])["Attributes"]["Policy"])
assert [s["Sid"] for s in policy["Statement"]] == ["l"], policy
assert policy["Statement"][0]["Action"] == "SQS:SendMessage", policy
sqs.remove_permission(QueueUrl=fifo, Label="l")
expect_error("InvalidParameterValue", sqs.remove_permission, QueueUrl=fifo, Label="l")
print("boto3: every check passed")
