#!/usr/bin/env bash
# Judges Ferry's Pub/Sub endpoint by google-cloud-pubsub's own system tests.
#
# google-cloud-pubsub's system tests (tests/system.py in its source distribution, which
# ships no samples) are written for the real service; with PUBSUB_EMULATOR_HOST set the
# client library talks plaintext gRPC to an emulator at that address with anonymous
# credentials instead. This script points them at `ferry serve`:
#
#   1. installs, in a virtualenv of its cache directory, google-cloud-pubsub and the
#      tests' requirements (pytest, pytest-timeout, google-cloud-testutils, flaky, psutil),
#      pinned;
#   2. downloads google-cloud-pubsub's source distribution from PyPI and unpacks it in the
#      cache directory (the tests run with the same version of the library, installed);
#   3. starts `ferry serve` on a fresh temporary data directory, its Pub/Sub endpoint on a
#      free port;
#   4. runs tests/system.py with pytest and our plugin (scripts/compat/pubsub-python/),
#      which answers the suite's `google.auth.default()` with anonymous credentials and the
#      project GOOGLE_CLOUD_PROJECT names (see its docstring) and records each test's
#      outcome with its first error line or skip reason;
#   5. classifies: passed, failed, skipped by the suite, and excluded — the tests the client
#      library cannot run against any emulator (scripts/compat/pubsub-python/excluded.txt,
#      with why) — and prints the totals and the share passing of those not excluded and
#      not skipped.
#
# Usage: scripts/compat/pubsub-python.sh [--allowlist | --update-allowlist] [--ferry PATH]
#                                        [--report FILE] [PYTEST_NODE_ID…]
#   --allowlist          run only the allowlisted tests (scripts/compat/pubsub-python-allowlist.txt)
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

PUBSUB_VERSION=2.44.0 # the version scripts/python-packages.sh installs
REQUIREMENTS="google-cloud-pubsub==$PUBSUB_VERSION pytest==8.3.5 pytest-timeout==2.3.1 google-cloud-testutils==1.10.1 flaky==3.8.1 psutil==7.2.2"
# The project the tests make their topics and subscriptions in (any id Ferry accepts).
PROJECT=ferry-compat

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/compat/pubsub-python
ALLOWLIST=$ROOT/scripts/compat/pubsub-python-allowlist.txt
EXCLUDED=$HERE/excluded.txt
CACHE=${FERRY_COMPAT_CACHE:-$HOME/.cache/ferry-compat}/pubsub-python
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
      echo "pubsub-python: unknown option $1" >&2
      exit 2
      ;;
    *) ids+=("$1") ;;
  esac
  shift
done
if [ "$mode" != run ] && [ ${#ids[@]} -gt 0 ]; then
  echo "pubsub-python: --allowlist and --update-allowlist take no test ids" >&2
  exit 2
fi
mkdir -p "$CACHE"
case $(cd "$CACHE" && pwd)/ in
  "$ROOT"/*)
    echo "pubsub-python: FERRY_COMPAT_CACHE must be outside the repository" >&2
    exit 2
    ;;
esac

read_list() { sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$1"; }
if [ "$mode" = allowlist ]; then
  mapfile -t ids < <(read_list "$ALLOWLIST" | cut -f1)
  [ ${#ids[@]} -gt 0 ] || {
    echo "pubsub-python: the allowlist is empty" >&2
    exit 1
  }
fi

# 1. The library and the test requirements, pinned, in a virtualenv of the cache.
VENV=$CACHE/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.ferry-installed" 2>/dev/null)" != "$REQUIREMENTS" ]; then
  echo "pubsub-python: installing $REQUIREMENTS"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip --quiet --disable-pip-version-check install $REQUIREMENTS
  echo "$REQUIREMENTS" >"$VENV/.ferry-installed"
fi

# 2. google-cloud-pubsub's system tests, from its source distribution on PyPI.
SRC=$CACHE/google_cloud_pubsub-$PUBSUB_VERSION
if [ ! -f "$SRC/tests/system.py" ]; then
  rm -rf "$CACHE/sdist" "$SRC"
  "$VENV/bin/python" -m pip --quiet --disable-pip-version-check download \
    --no-binary :all: --no-deps "google-cloud-pubsub==$PUBSUB_VERSION" -d "$CACHE/sdist"
  tar -xzf "$CACHE/sdist/google_cloud_pubsub-$PUBSUB_VERSION.tar.gz" -C "$CACHE"
  if [ ! -f "$SRC/tests/system.py" ]; then
    echo "pubsub-python: the $PUBSUB_VERSION source distribution has no tests/system.py" >&2
    exit 1
  fi
fi

# 3. Ferry, on a fresh data directory, its Pub/Sub endpoint on a free port.
if [ -z "${FERRY_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --quiet -p ferry-cli --bin ferry)
  FERRY_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/ferry
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ferry-pubsub-python.XXXXXX")
LOG=$WORK/ferry.log
"$FERRY_BIN" serve --data-dir "$WORK/data" --grpc 127.0.0.1:0 --no-http --no-aws --no-kafka \
  --pubsub-addr 127.0.0.1:0 >"$LOG" 2>&1 &
FERRY_PID=$!
trap 'kill "$FERRY_PID" 2>/dev/null || true; wait "$FERRY_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
addr=
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^ferry: serving Google Cloud Pub\/Sub on \([0-9.]*:[0-9]*\) .*/\1/p' "$LOG")
  [ -n "$addr" ] && break
  if ! kill -0 "$FERRY_PID" 2>/dev/null; then
    echo "pubsub-python: ferry serve exited:" >&2
    cat "$LOG" >&2
    exit 1
  fi
  sleep 0.1
done
[ -n "$addr" ] || {
  echo "pubsub-python: ferry serve did not start:" >&2
  cat "$LOG" >&2
  exit 1
}
echo "pubsub-python: google-cloud-pubsub $PUBSUB_VERSION's system tests against ferry serve at $addr"

# 4. The suite. The tests run from the unpacked distribution (tests/ is a package there);
# `google` comes from the virtualenv, where the same version is installed with its
# generated code. No credentials are looked for: see the plugin. No bytecode is written, so
# that importing the plugin leaves nothing in the repository.
OUTCOMES=$WORK/outcomes.tsv
targets=("${ids[@]}")
[ ${#targets[@]} -gt 0 ] || targets=(tests/system.py)
set +e
(
  cd "$SRC"
  env -u GOOGLE_APPLICATION_CREDENTIALS PYTHONDONTWRITEBYTECODE=1 PUBSUB_EMULATOR_HOST="$addr" \
    GOOGLE_CLOUD_PROJECT=$PROJECT FERRY_PS_OUTCOMES="$OUTCOMES" PYTHONPATH="$HERE" \
    "$VENV/bin/python" -m pytest -p ferry_pubsub_python -p no:cacheprovider \
    -o addopts= -o log_level=WARNING --timeout 120 --timeout-method=thread \
    -q --tb=short --color=no -W ignore::DeprecationWarning "${targets[@]}" >"$WORK/pytest.log" 2>&1
)
status=$?
set -e
tail -n 1 "$WORK/pytest.log"
[ -s "$OUTCOMES" ] || {
  echo "pubsub-python: pytest recorded no outcomes (exit $status):" >&2
  tail -n 40 "$WORK/pytest.log" >&2
  exit 1
}
[ -z "$report" ] || cp "$OUTCOMES" "$report"

# 5. Classification.
"$VENV/bin/python" - "$OUTCOMES" "$ALLOWLIST" "$EXCLUDED" "$mode" "${ids[@]}" <<'PY'
import re
import sys

outcomes_path, allowlist_path, excluded_path, mode = sys.argv[1:5]
only = set(sys.argv[5:])


def entries(path):
    out = {}
    try:
        lines = open(path).readlines()
    except FileNotFoundError:
        return out
    for line in lines:
        line = line.split("#", 1)[0].rstrip()
        if line.strip():
            nodeid, _, why = line.partition("\t")
            out[nodeid.strip()] = why.strip()
    return out


def pattern(entry):
    # `*` is the only wildcard: node ids hold `[` and `]`, which must match themselves.
    return re.compile(".*".join(re.escape(part) for part in entry.split("*")) + r"\Z")


outcomes = {}
for line in open(outcomes_path):
    outcome, nodeid, detail = line.rstrip("\n").split("\t", 2)
    outcomes[nodeid] = (outcome, detail)
allowed = entries(allowlist_path)
excluded = [(pattern(entry), why) for entry, why in entries(excluded_path).items()]


def exclusion(nodeid):
    return next((why for matcher, why in excluded if matcher.match(nodeid)), None)


def selected(nodeid):
    return not only or nodeid in only or nodeid.split("[", 1)[0] in only


counts = {"passed": [], "failed": [], "skipped": [], "excluded": []}
for nodeid, (outcome, detail) in sorted(outcomes.items()):
    why = exclusion(nodeid)
    if why is not None:
        counts["excluded"].append(nodeid)
        print(f"pubsub-python: excluded ({why}), {outcome}: {nodeid}")
    else:
        counts[outcome].append(nodeid)
        if outcome != "passed":
            print(f"pubsub-python: {outcome}: {nodeid}: {detail}")
eligible = len(counts["passed"]) + len(counts["failed"])
share = 100.0 * len(counts["passed"]) / eligible if eligible else 0.0
print(f"pubsub-python: {len(counts['passed'])} passed, {len(counts['failed'])} failed, "
      f"{len(counts['skipped'])} skipped by the suite, {len(counts['excluded'])} excluded, "
      f"of {len(outcomes)}; {len(counts['passed'])} of the {eligible} that are neither "
      f"excluded nor skipped pass ({share:.1f} %)")
if mode == "update":
    with open(allowlist_path, "w") as out:
        out.write("# google-cloud-pubsub's system tests that pass against Ferry "
                  "(scripts/compat/pubsub-python.sh).\n")
        out.write("# A test listed here that fails is a regression.\n")
        for nodeid in counts["passed"]:
            out.write(nodeid + "\n")
    print(f"pubsub-python: allowlist rewritten: {len(counts['passed'])} tests")
    sys.exit(0)
for nodeid in counts["passed"]:
    if nodeid not in allowed:
        print(f"pubsub-python: newly passing (not allowlisted yet): {nodeid}")
regressions = sorted(n for n in allowed if selected(n) and outcomes.get(n, ("not run",))[0] != "passed")
for nodeid in regressions:
    print(f"pubsub-python: REGRESSION: allowlisted test {outcomes.get(nodeid, ('not run',))[0]}: {nodeid}")
sys.exit(1 if regressions else 0)
PY
