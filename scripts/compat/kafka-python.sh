#!/usr/bin/env bash
# Judges Ferry's Kafka endpoint by kafka-python's own integration tests.
#
# kafka-python's integration tests (test/integration in its source distribution) normally
# start a Kafka they download; with KAFKA_URI set their fixtures use the broker at that
# address instead ("external"), and KAFKA_VERSION tells them which broker version to
# expect. This script points them at `ferry serve`:
#
#   1. installs, in a virtualenv of its cache directory, pytest, pytest-mock,
#      pytest-timeout, py and the compression libraries the tests use, pinned;
#   2. downloads kafka-python's source distribution from PyPI (it ships the tests) and
#      unpacks it in the cache directory; the tests run with that distribution's `kafka`;
#   3. starts `ferry serve` on a fresh temporary data directory, its Kafka endpoint on a
#      free port;
#   4. runs test/integration with pytest and our plugin (scripts/compat/kafka-python/),
#      which fills two gaps of the source distribution (see its docstring) and records
#      each test's outcome with its first error line or skip reason;
#   5. classifies: passed, failed, skipped by the suite, and excluded — the tests that need
#      several brokers or transactions (scripts/compat/kafka-python/excluded.txt, with
#      why) — and prints the totals and the share passing of those not excluded and not
#      skipped.
#
# Usage: scripts/compat/kafka-python.sh [--allowlist | --update-allowlist] [--ferry PATH]
#                                       [--report FILE] [PYTEST_NODE_ID…]
#   --allowlist          run only the allowlisted tests (scripts/compat/kafka-python-allowlist.txt)
#                        and fail if any of them does not pass
#   --update-allowlist   rewrite the allowlist with the tests that passed (whole runs only)
#   --ferry PATH         a built `ferry` binary (default $FERRY_BIN, else built with cargo, debug)
#   --report FILE        also write every test's `outcome<TAB>node id<TAB>detail` to FILE
#   PYTEST_NODE_ID…      run only these tests (ids as in the allowlist)
# Without --allowlist a whole or partial run still fails when an allowlisted test it ran
# does not pass (a regression), and lists the tests that pass but are not allowlisted.
# Environment:
#   FERRY_COMPAT_CACHE   cache directory (default $HOME/.cache/ferry-compat); never the repo
#   FERRY_BIN            a built `ferry` binary (as --ferry)
#   PYTHON               the interpreter for the virtualenv (default python3)
# Network: PyPI only.
set -euo pipefail

KAFKA_PYTHON_VERSION=3.0.12 # the version scripts/python-packages.sh installs
# The broker version the suite is told to expect: its own default (Fixture.kafka_version).
SUITE_KAFKA_VERSION=4.2.0
REQUIREMENTS="pytest==8.3.5 pytest-mock==3.14.0 pytest-timeout==2.3.1 py==1.11.0 lz4==4.4.5 zstandard==0.25.0 python-snappy==0.7.3 crc32c==2.7.1"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/compat/kafka-python
ALLOWLIST=$ROOT/scripts/compat/kafka-python-allowlist.txt
EXCLUDED=$HERE/excluded.txt
CACHE=${FERRY_COMPAT_CACHE:-$HOME/.cache/ferry-compat}/kafka-python
PYTHON=${PYTHON:-python3}

mode=run
report=
ids=()
while [ $# -gt 0 ]; do
  case $1 in
    --allowlist) mode=allowlist ;;
    --update-allowlist) mode=update ;;
    --ferry)
      FERRY_BIN=${2:?--ferry needs a path}
      shift
      ;;
    --report)
      report=${2:?--report needs a file}
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "kafka-python: unknown option $1" >&2
      exit 2
      ;;
    *) ids+=("$1") ;;
  esac
  shift
done
if [ "$mode" != run ] && [ ${#ids[@]} -gt 0 ]; then
  echo "kafka-python: --allowlist and --update-allowlist take no test ids" >&2
  exit 2
fi
mkdir -p "$CACHE"
case $(cd "$CACHE" && pwd)/ in
  "$ROOT"/*)
    echo "kafka-python: FERRY_COMPAT_CACHE must be outside the repository" >&2
    exit 2
    ;;
esac

read_list() { sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$1"; }
if [ "$mode" = allowlist ]; then
  mapfile -t ids < <(read_list "$ALLOWLIST" | cut -f1)
  [ ${#ids[@]} -gt 0 ] || {
    echo "kafka-python: the allowlist is empty" >&2
    exit 1
  }
fi

# 1. The test requirements, pinned, in a virtualenv of the cache.
VENV=$CACHE/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.ferry-installed" 2>/dev/null)" != "$REQUIREMENTS" ]; then
  echo "kafka-python: installing $REQUIREMENTS"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip --quiet --disable-pip-version-check install $REQUIREMENTS
  echo "$REQUIREMENTS" >"$VENV/.ferry-installed"
fi

# 2. kafka-python's tests (and its code), from its source distribution on PyPI.
SRC=$CACHE/kafka_python-$KAFKA_PYTHON_VERSION
if [ ! -d "$SRC/test/integration" ]; then
  rm -rf "$CACHE/sdist" "$SRC"
  "$VENV/bin/python" -m pip --quiet --disable-pip-version-check download \
    --no-binary :all: --no-deps "kafka-python==$KAFKA_PYTHON_VERSION" -d "$CACHE/sdist"
  tar -xzf "$CACHE/sdist/kafka_python-$KAFKA_PYTHON_VERSION.tar.gz" -C "$CACHE"
  if [ ! -d "$SRC/test/integration" ]; then
    echo "kafka-python: the $KAFKA_PYTHON_VERSION source distribution has no test/integration" >&2
    exit 1
  fi
fi

# 3. Ferry, on a fresh data directory, its Kafka endpoint on a free port.
if [ -z "${FERRY_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --quiet -p ferry-cli --bin ferry)
  FERRY_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/ferry
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ferry-kafka-python.XXXXXX")
LOG=$WORK/ferry.log
# The group session bounds a test broker is given (kafka-python's own test brokers set
# group.min.session.timeout.ms=1000 and group.max.session.timeout.ms=60000, so its tests
# may ask for short sessions).
FERRY_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS=1000 FERRY_KAFKA_GROUP_MAX_SESSION_TIMEOUT_MS=60000 \
  "$FERRY_BIN" serve --data-dir "$WORK/data" --grpc 127.0.0.1:0 --no-http --no-aws \
  --no-pubsub --kafka-addr 127.0.0.1:0 >"$LOG" 2>&1 &
FERRY_PID=$!
trap 'kill "$FERRY_PID" 2>/dev/null || true; wait "$FERRY_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
addr=
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^ferry: serving Kafka on \([0-9.]*:[0-9]*\) .*/\1/p' "$LOG")
  [ -n "$addr" ] && break
  if ! kill -0 "$FERRY_PID" 2>/dev/null; then
    echo "kafka-python: ferry serve exited:" >&2
    cat "$LOG" >&2
    exit 1
  fi
  sleep 0.1
done
[ -n "$addr" ] || {
  echo "kafka-python: ferry serve did not start:" >&2
  cat "$LOG" >&2
  exit 1
}
echo "kafka-python: kafka-python $KAFKA_PYTHON_VERSION's integration tests against ferry serve at $addr"

# 4. The suite. KAFKA_ROOT names an empty directory: the fixtures insist that a Kafka
# distribution's directory exists even when they only use the external broker.
OUTCOMES=$WORK/outcomes.tsv
mkdir -p "$WORK/no-kafka-distribution"
targets=("${ids[@]}")
[ ${#targets[@]} -gt 0 ] || targets=(test/integration)
set +e
(
  cd "$SRC"
  env KAFKA_URI="tcp://$addr" KAFKA_VERSION=$SUITE_KAFKA_VERSION \
    KAFKA_ROOT="$WORK/no-kafka-distribution" FERRY_KP_SRC="$SRC" FERRY_KP_OUTCOMES="$OUTCOMES" \
    PYTHONPATH="$SRC:$HERE" \
    "$VENV/bin/python" -m pytest -p ferry_kafka_python -p no:cacheprovider \
    -o addopts= -o log_level=WARNING --timeout 120 --timeout-method=thread \
    -q --tb=line --color=no -W ignore::DeprecationWarning "${targets[@]}"
)
set -e
[ -s "$OUTCOMES" ] || {
  echo "kafka-python: pytest recorded no outcomes" >&2
  exit 1
}
[ -z "$report" ] || cp "$OUTCOMES" "$report"

# 5. Classification.
"$VENV/bin/python" - "$OUTCOMES" "$ALLOWLIST" "$EXCLUDED" "$mode" "${ids[@]}" <<'EOF'
import sys

outcomes_path, allowlist_path, excluded_path, mode = sys.argv[1:5]
only = set(sys.argv[5:])


def entries(path):
    out = {}
    for line in open(path):
        line = line.split("#", 1)[0].rstrip()
        if line.strip():
            nodeid, _, why = line.partition("\t")
            out[nodeid.strip()] = why.strip()
    return out


outcomes = {}
for line in open(outcomes_path):
    outcome, nodeid, detail = line.rstrip("\n").split("\t", 2)
    outcomes[nodeid] = (outcome, detail)
allowed = entries(allowlist_path)
excluded = entries(excluded_path)

def selected(nodeid):
    return not only or nodeid in only or nodeid.split("[", 1)[0] in only

counts = {"passed": [], "failed": [], "skipped": [], "excluded": []}
for nodeid, (outcome, detail) in sorted(outcomes.items()):
    if nodeid in excluded:
        counts["excluded"].append(nodeid)
        print(f"kafka-python: excluded ({excluded[nodeid]}), {outcome}: {nodeid}")
    else:
        counts[outcome].append(nodeid)
        if outcome != "passed":
            print(f"kafka-python: {outcome}: {nodeid}: {detail}")
eligible = len(counts["passed"]) + len(counts["failed"])
share = 100.0 * len(counts["passed"]) / eligible if eligible else 0.0
print(f"kafka-python: {len(counts['passed'])} passed, {len(counts['failed'])} failed, "
      f"{len(counts['skipped'])} skipped by the suite, {len(counts['excluded'])} excluded, "
      f"of {len(outcomes)}; {len(counts['passed'])} of the {eligible} that are neither "
      f"excluded nor skipped pass ({share:.1f} %)")
if mode == "update":
    with open(allowlist_path, "w") as out:
        out.write("# kafka-python's integration tests that pass against Ferry "
                  "(scripts/compat/kafka-python.sh).\n")
        out.write("# A test listed here that fails is a regression.\n")
        for nodeid in counts["passed"]:
            out.write(nodeid + "\n")
    print(f"kafka-python: allowlist rewritten: {len(counts['passed'])} tests")
    sys.exit(0)
for nodeid in counts["passed"]:
    if nodeid not in allowed:
        print(f"kafka-python: newly passing (not allowlisted yet): {nodeid}")
regressions = sorted(n for n in allowed if selected(n) and outcomes.get(n, ("not run",))[0] != "passed")
for nodeid in regressions:
    print(f"kafka-python: REGRESSION: allowlisted test {outcomes.get(nodeid, ('not run',))[0]}: {nodeid}")
sys.exit(1 if regressions else 0)
EOF
