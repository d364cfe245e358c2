"""boto3 against an endpoint with access keys: botocore's own SigV4 signing is accepted
with the right secret and refused with a wrong one, an unknown key or none, with the
codes botocore raises, and so is a presigned STS URL; each key may do what its permissions say and no more, in SQS (JSON
protocol), SNS and STS.

The keys are configured by the test that runs this script (tests/boto3.rs):
  AKIDADMIN / admin-secret: every right on every name;
  AKIDPUBLISHER / publisher-secret, user orders-publisher: publish:orders, publish:news.

Usage: auth_keys.py <endpoint-url>
"""

import sys
import urllib.error
import urllib.request

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint = sys.argv[1]
ADMIN = ("AKIDADMIN", "admin-secret")
PUBLISHER = ("AKIDPUBLISHER", "publisher-secret")
ACCOUNT = "000000000000"


def client(service, key, secret, **config):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}, **config),
    )


def expect_error(code, status, call, **kwargs):
    try:
        call(**kwargs)
    except ClientError as e:
        got = e.response["Error"]["Code"]
        assert got == code, f"expected {code}, got {got}: {e}"
        got_status = e.response["ResponseMetadata"]["HTTPStatusCode"]
        assert got_status == status, f"{code}: expected HTTP {status}, got {got_status}"
        return e
    raise AssertionError(f"expected {code}, the call succeeded")


# SQS: signed requests work; refusals carry AWS's codes.
admin_sqs = client("sqs", *ADMIN)
orders = admin_sqs.create_queue(QueueName="orders")["QueueUrl"]
payments = admin_sqs.create_queue(QueueName="payments")["QueueUrl"]
publisher_sqs = client("sqs", *PUBLISHER)
publisher_sqs.send_message(QueueUrl=orders, MessageBody="hello")
expect_error("AccessDenied", 403, publisher_sqs.send_message, QueueUrl=payments, MessageBody="x")
expect_error("AccessDenied", 403, publisher_sqs.receive_message, QueueUrl=orders)
expect_error("AccessDenied", 403, publisher_sqs.purge_queue, QueueUrl=orders)
assert publisher_sqs.list_queues()["QueueUrls"] == [orders]
assert publisher_sqs.get_queue_url(QueueName="orders")["QueueUrl"] == orders
received = admin_sqs.receive_message(QueueUrl=orders, WaitTimeSeconds=1)["Messages"]
assert [m["Body"] for m in received] == ["hello"], received
assert "Messages" not in admin_sqs.receive_message(QueueUrl=payments)

expect_error("SignatureDoesNotMatch", 403, client("sqs", ADMIN[0], "wrong").list_queues)
expect_error("InvalidClientTokenId", 403, client("sqs", "AKIDSTRANGER", "x").list_queues)
unsigned = client("sqs", None, None, signature_version=UNSIGNED)
expect_error("MissingAuthenticationToken", 403, unsigned.list_queues)

# STS: who the key is.
identity = client("sts", *PUBLISHER).get_caller_identity()
assert identity["Account"] == ACCOUNT, identity
assert identity["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/orders-publisher", identity
assert identity["UserId"].startswith("AIDA"), identity
root = client("sts", *ADMIN).get_caller_identity()
assert root["Arn"] == f"arn:aws:iam::{ACCOUNT}:root", root
expect_error("SignatureDoesNotMatch", 403, client("sts", PUBLISHER[0], "wrong").get_caller_identity)

# A presigned GetCallerIdentity URL (what tools hand to a third party to prove who they
# are) works as a plain GET; changed, it does not.
url = client("sts", *PUBLISHER).generate_presigned_url(
    "get_caller_identity", ExpiresIn=60, HttpMethod="GET"
)
assert "X-Amz-Signature=" in url, url
with urllib.request.urlopen(url) as answer:
    text = answer.read().decode()
assert f"<Arn>arn:aws:iam::{ACCOUNT}:user/orders-publisher</Arn>" in text, text
try:
    urllib.request.urlopen(url.replace("Version=2011-06-15", "Version=2011-06-15&Extra=1"))
    raise AssertionError("a changed presigned URL was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 403 and b"<Code>SignatureDoesNotMatch</Code>" in e.read(), e

# SNS: publish where allowed, AuthorizationError elsewhere.
admin_sns = client("sns", *ADMIN)
news = admin_sns.create_topic(Name="news")["TopicArn"]
alerts = admin_sns.create_topic(Name="alerts")["TopicArn"]
admin_sns.subscribe(TopicArn=news, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders")
publisher_sns = client("sns", *PUBLISHER)
publisher_sns.publish(TopicArn=news, Message="news")
expect_error("AuthorizationError", 403, publisher_sns.publish, TopicArn=alerts, Message="x")
expect_error("AuthorizationError", 403, publisher_sns.create_topic, Name="orders-events")
assert [t["TopicArn"] for t in publisher_sns.list_topics()["Topics"]] == [news]
expect_error("SignatureDoesNotMatch", 403, client("sns", PUBLISHER[0], "wrong").publish, TopicArn=news, Message="x")
received = admin_sqs.receive_message(QueueUrl=orders, WaitTimeSeconds=1)["Messages"]
assert len(received) == 1 and '"Message":"news"' in received[0]["Body"].replace(" ", ""), received

print("every check passed")
