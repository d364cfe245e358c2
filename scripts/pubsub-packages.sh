#!/usr/bin/env bash
# Google's Node.js client for Pub/Sub, for the Pub/Sub front end's client test
# (crates/ferry-pubsub/tests/node_client.rs, which runs tests/node/pubsub_client.mjs): the
# exact versions crates/ferry-pubsub/tests/node/package-lock.json pins, from the npm
# registry, with the machine's Node.js 20 and npm (the client's 5.x line is the last that
# runs on Node.js 20). node_modules is installed by `npm ci`, never committed, and kept
# while it matches the lock, so a second run installs nothing. The Python client comes
# from scripts/python-packages.sh.
# Under CI=true a test whose package is missing fails instead of skipping, so every script
# that runs the suite installs them first.
set -euo pipefail
cd "$(cd "$(dirname "$0")" && pwd)/../crates/ferry-pubsub/tests/node"

# npm ci deletes node_modules and installs it again every time: it runs only when the lock
# differs from the one the last whole install recorded (written after npm ci succeeded).
stamp=node_modules/.installed-lock.sha256
if ! sha256sum --status -c "$stamp" 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  sha256sum package-lock.json >"$stamp"
fi
