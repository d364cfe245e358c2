#!/usr/bin/env bash
# The Python packages the test suite drives Ferry with, from PyPI: the official gRPC packages
# for the contract test from another language (crates/ferry-server/tests/python_client.rs),
# boto3 for the SQS front end's client test (crates/ferry-aws/tests/boto3.rs).
# Under CI=true a test whose package is missing fails instead of skipping, so every script
# that runs the suite installs them first.
set -euo pipefail
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  grpcio grpcio-tools boto3
