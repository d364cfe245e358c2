#!/usr/bin/env bash
# Does the SDK limit a peer? Each engine measured by its own tool on this machine, beside the
# suite's figure for the same engine through the SDK; written to $OUT/crosscheck.txt.
#
#   bench/crosscheck.sh            # after bench/compare.sh (it calls this itself)
#
# Inputs (compare.sh sets them; the defaults are its ports):
#   OUT               where results.json is and crosscheck.txt goes (docs/bench)
#   SCALE             the suite's scale, which sizes the tools' runs too
#   REDIS_DEFAULT     host:port of the stock-persistence Redis (127.0.0.1:6301)
#   REDIS_ALWAYS      host:port of the appendfsync-always Redis (127.0.0.1:6302)
#   PG                the PostgreSQL the suite used (host, user, database)
#
# The tools:
#   Redis       redis-benchmark, pipelined XADD of 128-byte entries over 4 connections, as the
#               suite's backlog publishers send them.
#   PostgreSQL  pgbench with two custom scripts over a plain jobs table: batched INSERTs (the
#               publish side) and a SKIP LOCKED batch delete (the consume side), 4 clients each,
#               as the suite's four consumers take work.
#   NATS        nats-server's own JetStream benchmarks (BenchmarkJetStreamPublish and
#               BenchmarkJetStreamConsume, in the server's Go sources), built from Debian's
#               package of the server's source with Debian's Go. The `nats bench` command of the
#               nats CLI is not in any registry this machine reaches. These benchmarks start an
#               in-process server of Debian's version (2.9) with the stock file store (no fsync
#               per write), so they compare with `nats-default`, and use 1 KiB messages.
#   RabbitMQ    none: its benchmark tool (PerfTest) is a Java program distributed outside the
#               registries this machine reaches; say so in the file.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-docs/bench}
SCALE=${SCALE:-1}
REDIS_DEFAULT=${REDIS_DEFAULT:-127.0.0.1:6301}
REDIS_ALWAYS=${REDIS_ALWAYS:-127.0.0.1:6302}
PG_HOST=${PG_HOST:-127.0.0.1}
PG_USER=${PG_USER:-postgres}
PG_DB=${PG_DB:-test}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
WORK=${BENCH_WORK:-$TARGET/bench-run}/crosscheck
mkdir -p "$WORK"
scaled() { python3 -c "print(max($2, int($1 * $SCALE)))"; }

# Debian's Go and the nats-server source package; everything else is on the machine already.
ensure_debian() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}
ensure_debian redis-tools postgresql-client golang-go golang-github-nats-io-nats-server-dev

redis_xadd() {
  local addr=$1 n
  n=$(scaled 400000 1000)
  redis-benchmark -h "${addr%:*}" -p "${addr#*:}" -n "$n" -c 4 -P 100 -q \
    XADD bench-crosscheck '*' f "$(head -c 128 /dev/zero | tr '\0' x)" 2>&1 |
    tr '\r' '\n' | grep -v '^$' | tail -1 |
    sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'
}

pg() { psql -h "$PG_HOST" -U "$PG_USER" -d "$PG_DB" -qAt "$@"; }
pgbench_rows_per_sec() {
  local script=$1 batch=$2 transactions=$3 tps
  tps=$(pgbench -h "$PG_HOST" -U "$PG_USER" -n -c 4 -j 2 -t "$transactions" -f "$script" "$PG_DB" 2>&1 |
    sed -nE 's/^tps = ([0-9.]+).*/\1/p' | head -1)
  python3 -c "print(round($tps * $batch))"
}
postgres_skip_locked() {
  local batch=500 per_client
  # Four clients, each publishing (then draining) its share of the rows in batches of 500.
  per_client=$(scaled 100 10)
  pg -c "DROP TABLE IF EXISTS ferry_crosscheck_jobs" \
     -c "CREATE TABLE ferry_crosscheck_jobs (id bigserial PRIMARY KEY, payload bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
  cat > "$WORK/pg-publish.sql" <<SQL
INSERT INTO ferry_crosscheck_jobs (payload) SELECT convert_to(repeat('x', 128), 'UTF8') FROM generate_series(1, $batch);
SQL
  cat > "$WORK/pg-consume.sql" <<SQL
WITH picked AS (
  SELECT id FROM ferry_crosscheck_jobs ORDER BY id LIMIT $batch FOR UPDATE SKIP LOCKED
)
DELETE FROM ferry_crosscheck_jobs j USING picked WHERE j.id = picked.id;
SQL
  PG_PUBLISH=$(pgbench_rows_per_sec "$WORK/pg-publish.sql" "$batch" "$per_client")
  PG_CONSUME=$(pgbench_rows_per_sec "$WORK/pg-consume.sql" "$batch" "$per_client")
  pg -c "DROP TABLE ferry_crosscheck_jobs"
}

nats_server_benchmarks() {
  local src=/usr/share/gocode/src/github.com/nats-io/nats-server/server
  if [ ! -x "$WORK/nats-server.test" ]; then
    (cd "$src" && GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE="$WORK/go-cache" \
      go test -c -o "$WORK/nats-server.test" .)
  fi
  # `-test.bench` splits its pattern at slashes, one part per level, so each benchmark is its own run.
  (cd "$WORK" && ./nats-server.test -test.run '^$' -test.benchtime 3s \
    -test.bench '^BenchmarkJetStreamPublish$/^N=1,R=1,MsgSz=1024b,Subjs=1$/^Async\[W:4000\]$' &&
    ./nats-server.test -test.run '^$' -test.benchtime 3s \
    -test.bench '^BenchmarkJetStreamConsume$/^N=1,R=1,MsgSz=1024b$/^PULL\[Durable\]$') 2>&1 |
    tee "$WORK/nats-bench.txt" >/dev/null
  # ns/op of one message -> messages per second.
  NATS_PUBLISH=$(awk '/BenchmarkJetStreamPublish/ && /ns\/op/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ns/op") printf "%d", 1e9 / $i }' "$WORK/nats-bench.txt")
  NATS_CONSUME=$(awk '/BenchmarkJetStreamConsume/ && /ns\/op/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ns/op") printf "%d", 1e9 / $i }' "$WORK/nats-bench.txt")
}

echo "== cross-check: the engines' own tools"
REDIS_ALWAYS_XADD=$(redis_xadd "$REDIS_ALWAYS")
REDIS_DEFAULT_XADD=$(redis_xadd "$REDIS_DEFAULT")
postgres_skip_locked
nats_server_benchmarks

python3 - "$OUT" <<PY
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
results = json.loads((out / "results.json").read_text())

def sdk(workload, target, phase):
    for w in results["workloads"]:
        if w["workload"]["name"] != workload:
            continue
        for t in w["targets"]:
            if t["target"] == target and t["status"] == "ran":
                return t["figures"][phase]["msgs_per_sec"]
    return None

rows = [
    # (engine, tool, what the tool measured, its msgs/s, the SDK's figure: workload, target, phase)
    ("redis-always", "redis-benchmark XADD, 128 B, 4 clients, pipeline 100", "publish",
     float("$REDIS_ALWAYS_XADD"), ("backlog-drain-1m-128b", "redis-always", "publish")),
    ("redis-default", "redis-benchmark XADD, 128 B, 4 clients, pipeline 100", "publish",
     float("$REDIS_DEFAULT_XADD"), ("backlog-drain-1m-128b", "redis-default", "publish")),
    ("postgres-sync", "pgbench, INSERT of 500 rows a transaction, 4 clients", "publish",
     float("$PG_PUBLISH"), ("backlog-drain-1m-128b", "postgres-sync", "publish")),
    ("postgres-sync", "pgbench, SKIP LOCKED delete of 500 rows a transaction, 4 clients", "consume",
     float("$PG_CONSUME"), ("backlog-drain-1m-128b", "postgres-sync", "consume")),
    ("nats-default", "nats-server 2.9 BenchmarkJetStreamPublish, 1 KiB, async window 4000", "publish",
     float("${NATS_PUBLISH:-0}"), ("backlog-drain-1m-128b", "nats-default", "publish")),
    ("nats-default", "nats-server 2.9 BenchmarkJetStreamConsume, 1 KiB, durable pull", "consume",
     float("${NATS_CONSUME:-0}"), ("backlog-drain-1m-128b", "nats-default", "consume")),
]
lines = [f"Scale $SCALE. Each engine's own tool beside the SDK's figure for the same engine in this run "
         "(backlog-drain-1m-128b); 'within 2x' when the two differ by less than a factor of two.", ""]
for engine, tool, phase, own, (workload, target, sdk_phase) in rows:
    mine = sdk(workload, target, sdk_phase)
    if mine is None or own <= 0:
        verdict = "not compared (a figure is missing)"
        mine_text = "-" if mine is None else f"{mine:,.0f}"
    else:
        ratio = mine / own
        verdict = f"SDK/tool {ratio:.2f} -> " + ("within 2x" if 0.5 <= ratio <= 2.0 else "OUTSIDE 2x (see docs/benchmarks.md)")
        mine_text = f"{mine:,.0f}"
    lines.append(f"{engine:14} {phase:8} tool {own:>12,.0f} msgs/s   SDK {mine_text:>12} msgs/s   {verdict}")
    lines.append(f"{'':14} {'':8} ({tool})")
lines += ["", "rabbitmq-quorum: no own tool here (RabbitMQ's PerfTest is a Java program distributed outside the registries this machine reaches)."]
text = "\n".join(lines) + "\n"
(out / "crosscheck.txt").write_text(text)
print(text)
PY
