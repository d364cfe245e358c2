#!/usr/bin/env bash
# The web console's screenshots in docs/console/ (login, overview, queue, dead letters, topic,
# topology; 1280x800 PNGs): the browser test (crates/ferry-cli/tests/console.rs) builds
# `ferry`, starts `ferry serve` with its sample content (a queue with ready messages and a
# dead letter, a topic with a subscription) and runs console.mjs, which saves each page it
# checks when FERRY_CONSOLE_SCREENSHOTS names a directory. For the docs only; CI does not
# run this (the same test runs there without screenshots).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
scripts/console-packages.sh
mkdir -p docs/console
FERRY_CONSOLE_SCREENSHOTS=$ROOT/docs/console \
  cargo test --workspace --test console -- --nocapture
ls -l docs/console/*.png
