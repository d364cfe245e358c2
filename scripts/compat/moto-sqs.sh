#!/usr/bin/env bash
# Judges Ferry's SQS endpoint by moto's own SQS test suite.
#
# moto (https://pypi.org/project/moto/) is a mock of AWS whose tests can run in "server
# mode": with TEST_SERVER_MODE=true every boto3 client they make is pointed at
# TEST_SERVER_MODE_ENDPOINT, and `POST <endpoint>/moto-api/reset` is called between tests.
# This script points them at `ferry serve` instead:
#
#   1. installs, in a virtualenv of its work directory, moto (for its test helpers and
#      its dependencies: boto3, botocore…), pytest, pytest-timeout and freezegun, pinned;
#   2. downloads moto's source distribution from PyPI (it ships moto's tests) and unpacks
#      it in the work directory;
#   3. starts `ferry serve` on a fresh data directory with the test-only reset route on
#      (`--aws-test-reset`), the SQS endpoint on localhost:5000 (the address moto's tests
#      expect queue URLs to have in server mode) and the account moto's tests assume;
#   4. runs tests/test_sqs with pytest and compares each test's outcome with the
#      allowlist, crates/ferry-aws/tests/compat/moto-sqs-allowlist.txt.
#
# It fails when an allowlisted test does not pass (a regression) and lists the tests that
# pass but are not allowlisted yet. Network: PyPI only.
#
# Usage: scripts/compat/moto-sqs.sh [--update-allowlist] [PYTEST_NODE_ID…]
#   --update-allowlist   rewrite the allowlist with the tests that passed (whole runs only)
#   PYTEST_NODE_ID…      run only these tests (ids as in the allowlist); the allowlist is
#                        then checked for them alone
# Environment:
#   FERRY_MOTO_WORK   work directory (default ${TMPDIR:-/tmp}/ferry-moto-sqs); never the repo
#   FERRY_BIN         a built `ferry` binary (default: built with cargo, debug)
#   FERRY_MOTO_PORT   the SQS endpoint's port (default 5000)
#   PYTHON            the interpreter for the virtualenv (default python3)
set -euo pipefail

MOTO_VERSION=5.2.1
PYTEST_VERSION=8.3.5
PYTEST_TIMEOUT_VERSION=2.3.1
FREEZEGUN_VERSION=1.5.1
ACCOUNT_ID=123456789012 # moto.core.DEFAULT_ACCOUNT_ID, in the URLs and ARNs the tests expect

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ALLOWLIST=$ROOT/crates/ferry-aws/tests/compat/moto-sqs-allowlist.txt
WORK=${FERRY_MOTO_WORK:-${TMPDIR:-/tmp}/ferry-moto-sqs}
PORT=${FERRY_MOTO_PORT:-5000}
PYTHON=${PYTHON:-python3}

update=false
ids=()
for arg in "$@"; do
  case $arg in
    --update-allowlist) update=true ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) ids+=("$arg") ;;
  esac
done
if $update && [ ${#ids[@]} -gt 0 ]; then
  echo "moto-sqs: --update-allowlist needs a whole run (no test ids)" >&2
  exit 2
fi
case $(cd "$(dirname "$WORK")" 2>/dev/null && pwd)/ in
  "$ROOT"/*)
    echo "moto-sqs: FERRY_MOTO_WORK must be outside the repository" >&2
    exit 2
    ;;
esac
mkdir -p "$WORK"

# 1. The Python side, pinned.
VENV=$WORK/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --quiet --disable-pip-version-check)
wanted="moto[server]==$MOTO_VERSION pytest==$PYTEST_VERSION pytest-timeout==$PYTEST_TIMEOUT_VERSION freezegun==$FREEZEGUN_VERSION"
if [ "$(cat "$VENV/.ferry-installed" 2>/dev/null)" != "$wanted" ]; then
  echo "moto-sqs: installing $wanted"
  # shellcheck disable=SC2086
  "${PIP[@]}" install $wanted
  echo "$wanted" >"$VENV/.ferry-installed"
fi

# 2. moto's tests, from its source distribution on PyPI.
SRC=$WORK/moto-$MOTO_VERSION
if [ ! -d "$SRC/tests/test_sqs" ]; then
  rm -rf "$WORK/sdist" "$SRC"
  "${PIP[@]}" download --no-binary :all: --no-deps "moto==$MOTO_VERSION" -d "$WORK/sdist"
  tar -xzf "$WORK/sdist/moto-$MOTO_VERSION.tar.gz" -C "$WORK"
  if [ ! -d "$SRC/tests/test_sqs" ]; then
    echo "moto-sqs: moto $MOTO_VERSION's source distribution has no tests/test_sqs" >&2
    exit 1
  fi
fi

# 3. Ferry, on a fresh data directory.
if [ -z "${FERRY_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --quiet -p ferry-cli --bin ferry)
  FERRY_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/ferry
fi
DATA=$WORK/data
rm -rf "$DATA"
LOG=$WORK/ferry.log
FERRY_AWS_ACCOUNT_ID=$ACCOUNT_ID "$FERRY_BIN" serve --data-dir "$DATA" \
  --grpc 127.0.0.1:0 --no-http --no-kafka --no-pubsub --aws-addr "127.0.0.1:$PORT" --aws-test-reset >"$LOG" 2>&1 &
FERRY_PID=$!
trap 'kill "$FERRY_PID" 2>/dev/null || true; wait "$FERRY_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q "serving Amazon SQS" "$LOG" && break
  if ! kill -0 "$FERRY_PID" 2>/dev/null; then
    echo "moto-sqs: ferry serve exited:" >&2
    cat "$LOG" >&2
    exit 1
  fi
  sleep 0.1
done
grep -q "serving Amazon SQS" "$LOG" || {
  echo "moto-sqs: ferry serve did not start:" >&2
  cat "$LOG" >&2
  exit 1
}

# 4. The suite, in moto's server mode against Ferry.
OUTCOMES=$WORK/outcomes.txt
rm -f "$OUTCOMES"
targets=("${ids[@]}")
[ ${#targets[@]} -gt 0 ] || targets=(tests/test_sqs)
set +e
(
  cd "$SRC"
  env TEST_SERVER_MODE=true TEST_SERVER_MODE_ENDPOINT="http://localhost:$PORT" \
    AWS_DEFAULT_REGION=us-east-1 FERRY_MOTO_OUTCOMES="$OUTCOMES" \
    PYTHONPATH="$ROOT/scripts/compat" \
    "$VENV/bin/python" -m pytest -p moto_outcomes -p no:cacheprovider --continue-on-collection-errors --timeout 120 \
    -q --tb=line --color=auto "${targets[@]}"
)
set -e
[ -s "$OUTCOMES" ] || {
  echo "moto-sqs: pytest recorded no outcomes" >&2
  exit 1
}

"$VENV/bin/python" - "$OUTCOMES" "$ALLOWLIST" "$update" "${ids[@]}" <<'EOF'
import sys

outcomes_path, allowlist_path, update = sys.argv[1:4]
only = set(sys.argv[4:])
outcomes = {}
for line in open(outcomes_path):
    outcome, nodeid = line.rstrip("\n").split(" ", 1)
    outcomes[nodeid] = outcome
allowed = set()
try:
    for line in open(allowlist_path):
        line = line.split("#", 1)[0].strip()
        if line:
            allowed.add(line)
except FileNotFoundError:
    pass

def selected(nodeid):
    return not only or nodeid in only or nodeid.split("[", 1)[0] in only

passed = sorted(n for n, o in outcomes.items() if o == "passed")
failed = sorted(n for n, o in outcomes.items() if o == "failed")
skipped = sorted(n for n, o in outcomes.items() if o == "skipped")
total = len(outcomes)
print(f"moto-sqs: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped, "
      f"of {total}")
regressions = sorted(n for n in allowed if selected(n) and outcomes.get(n) != "passed")
new = sorted(n for n in passed if n not in allowed)
for n in new:
    print(f"moto-sqs: newly passing (not allowlisted yet): {n}")
if update == "true":
    with open(allowlist_path, "w") as out:
        out.write("# moto's SQS tests that pass against Ferry (scripts/compat/moto-sqs.sh).\n")
        out.write("# A test listed here that fails is a regression.\n")
        for n in passed:
            out.write(n + "\n")
    print(f"moto-sqs: allowlist rewritten: {len(passed)} tests")
    sys.exit(0)
for n in regressions:
    print(f"moto-sqs: REGRESSION: allowlisted test {outcomes.get(n, 'not run')}: {n}")
sys.exit(1 if regressions else 0)
EOF
