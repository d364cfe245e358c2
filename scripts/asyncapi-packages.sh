#!/usr/bin/env bash
# What the AsyncAPI validation test (crates/ferry-topology/tests/asyncapi_parser.rs, which
# runs crates/ferry-topology/tests/asyncapi/validate.mjs) checks documents with: from the
# npm registry the exact versions that crates/ferry-topology/tests/asyncapi/package-lock.json
# pins of `@asyncapi/parser` (the official parser and validator) and its Avro and Protobuf
# schema parsers. Node.js 20 and npm are the machine's. node_modules is installed by
# `npm ci`, never committed, and kept while it matches the lock, so a second run installs
# nothing; `--prefer-offline` takes packages from npm's cache when it has them.
# Under CI=true the test fails instead of skipping when the packages are missing, so every
# script that runs the suite installs them first.
set -euo pipefail
scripts=$(cd "$(dirname "$0")" && pwd)
cd "$scripts/../crates/ferry-topology/tests/asyncapi"

# npm ci deletes node_modules and installs it again every time: it runs only when the lock
# differs from the one the last whole install recorded (written after npm ci succeeded).
stamp=node_modules/.installed-lock.sha256
if ! sha256sum --status -c "$stamp" 2>/dev/null; then
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null
  sha256sum package-lock.json >"$stamp"
fi
