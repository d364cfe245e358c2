#!/usr/bin/env bash
# The README's test command with every core kept busy by another program, on demand: a test
# that passes on a quiet machine and fails only here leans on wall-clock time (a sleep, a
# fixed timeout) where it should use the injectable clock, an event, or a deadline that
# scales. CI runs the suite on a quiet machine; run this before trusting a new timing.
#
#   scripts/stressed-tests.sh                     # the whole suite under `stress-ng --cpu N`
#   scripts/stressed-tests.sh -p ferry --test request_reply_nats
#   STRESS_CPUS=4 scripts/stressed-tests.sh       # more load than cores
#
# Arguments go to `cargo test` after `--workspace` is replaced by them. The build happens
# before the load starts, so the load falls on the tests and not on the compiler.
set -euo pipefail
export CI=true   # a missing service fails its tests instead of skipping them
cd "$(dirname "$0")/.."
# shellcheck source=services.sh
source scripts/services.sh

if ! command -v stress-ng >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null
fi
ensure_machine_services
scripts/python-packages.sh
scripts/debian-packages.sh
scripts/console-packages.sh
scripts/asyncapi-packages.sh

args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--workspace)
cpus=${STRESS_CPUS:-$(nproc)}

echo "== build"
cargo test "${args[@]}" --no-run

echo "== tests under stress-ng --cpu $cpus"
stress-ng --cpu "$cpus" --timeout 0 --quiet &
stress_pid=$!
trap 'kill "$stress_pid" 2>/dev/null || true; wait "$stress_pid" 2>/dev/null || true' EXIT
log=$(mktemp)
status=0
cargo test "${args[@]}" --no-fail-fast 2>&1 | tee "$log" || status=$?
echo "== summary"
grep -E '^test .* FAILED$|^    [a-z_:]+$' "$log" | sort -u || true
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
exit "$status"
