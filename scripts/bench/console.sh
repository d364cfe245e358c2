#!/usr/bin/env bash
# The web console under load (see docs/benchmarks.md, "Console"): starts one `ferry serve` on
# a fresh data directory (HTTP on a free port, a token of its own), and runs
# crates/ferry-cli/tests/console/bench.mjs against it, which fills it (1,000 queues, 100,000
# dead letters by default) and prints a table of timings: the console's API reads, and the
# page's loads in Debian's Chromium. The server is stopped and its data removed at the end.
#
# Usage: scripts/bench/console.sh [--ferry BIN] [--queues N] [--dead-letters N] [--runs N]
#   --ferry BIN   the `ferry` binary to measure (default: built here with cargo --release)
#   the others go to bench.mjs (defaults 1000, 100000, 5).
# Needs node, /usr/bin/chromium and the npm packages: scripts/console-packages.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPTS=$ROOT/crates/ferry-cli/tests/console

say() { echo "console bench: $*"; }
die() {
  echo "console bench: $*" >&2
  exit 1
}

FERRY_BIN=""
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --ferry)
      [ $# -ge 2 ] || die "--ferry takes the path of a ferry binary"
      FERRY_BIN=$2
      shift 2
      ;;
    --queues | --dead-letters | --runs)
      [ $# -ge 2 ] || die "$1 takes a number"
      args+=("$1" "$2")
      shift 2
      ;;
    *) die "unknown argument $1 (see the usage at the top of $0)" ;;
  esac
done

command -v node >/dev/null || die "node is missing (Node.js 20 or later)"
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is missing (bash scripts/console-packages.sh)"
[ -f "$SCRIPTS/node_modules/playwright-core/package.json" ] ||
  die "the npm packages are missing (bash scripts/console-packages.sh)"

if [ -z "$FERRY_BIN" ]; then
  say "building ferry (release)"
  (cd "$ROOT" && cargo build --release --quiet -p ferry-cli --bin ferry)
  FERRY_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/ferry
fi
[ -x "$FERRY_BIN" ] || die "$FERRY_BIN is not an executable"

work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-console-bench.XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

token=bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
cat >"$work/ferry.toml" <<EOF
[[auth.tokens]]
name = "bench"
sha256 = "$("$FERRY_BIN" token hash "$token")"
permissions = ["admin:#", "publish:#", "consume:#", "dead_letters:#"]
EOF

"$FERRY_BIN" serve --grpc 127.0.0.1:0 --http 127.0.0.1:0 --no-kafka --no-aws --no-pubsub \
  --config "$work/ferry.toml" --data-dir "$work/data" >"$work/serve.log" 2>&1 &
server_pid=$!
http=""
for _ in $(seq 1 300); do
  http=$(sed -n 's|^ferry: serving HTTP on \(http://[^ ]*\).*|\1|p' "$work/serve.log" | head -n1)
  [ -n "$http" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$http" ] || {
  cat "$work/serve.log" >&2
  die "ferry serve did not say where it serves HTTP"
}

say "$("$FERRY_BIN" --version) at $http, data in $work/data; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$SCRIPTS"
FERRY_URL=$http FERRY_TOKEN=$token node bench.mjs "${args[@]}"
