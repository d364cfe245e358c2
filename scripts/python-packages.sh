#!/usr/bin/env bash
# The Python packages the test suite drives Ferry with, from PyPI: the official gRPC packages
# for the contract test from another language (crates/ferry-server/tests/python_client.rs),
# boto3 for the SQS front end's client test (crates/ferry-aws/tests/boto3.rs) and the
# order-events example (crates/ferry-cli/tests/aws_order_events.rs), the AWS CLI v1 and
# LocalStack's `awslocal` wrapper for the local-setup test (crates/ferry-cli/tests/aws_cli.rs;
# awscli pins the botocore, and so the boto3, it runs with), and kafka-python (pure Python)
# for the Kafka front end's client test (crates/ferry-kafka/tests/kafka_python.rs) and its
# crash test (crates/ferry-cli/tests/kafka_crash.rs), with lz4 and zstandard, the codecs
# kafka-python compresses lz4 and zstd batches with; confluent-kafka (whose wheels bundle
# librdkafka) for the crash test's librdkafka producer and for the producer and consumer
# modelled on a typical service's (crates/ferry-kafka/tests/confluent.rs); moto's server
# mode (`moto_server`) as a second SQS/SNS engine for the SDK's `sqs://` conformance run
# (crates/ferry-conformance/tests/sqs.rs), the version scripts/compat/moto-sqs.sh pins;
# aiokafka, the asyncio Kafka client, for its client test (crates/ferry-kafka/tests/aiokafka.rs);
# confluent-kafka's `avro`, `json` and `protobuf` extras (its schema-registry client's httpx,
# attrs, cachetools and authlib; fastavro, jsonschema and protobuf for its serializers),
# pinned fastavro, for the schema registry's client tests (crates/ferry-cli/tests/
# schema_registry.rs, schema_enforcement.rs); Google's google-cloud-pubsub for the Pub/Sub
# front end's client test (crates/ferry-pubsub/tests/python_client.rs).
# Under CI=true a test whose package is missing fails instead of skipping, so every script
# that runs the suite installs them first.
set -euo pipefail
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  grpcio grpcio-tools boto3 awscli==1.45.11 awscli-local==0.23.0 kafka-python==3.0.12 lz4==4.4.5 zstandard==0.25.0 'confluent-kafka[avro,json,protobuf]==2.12.1' fastavro==1.13.1 'moto[server]==5.2.1' aiokafka==0.14.0 google-cloud-pubsub==2.44.0
