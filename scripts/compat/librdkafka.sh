#!/usr/bin/env bash
# Judges Ferry's Kafka endpoint by librdkafka's own test suite.
#
# librdkafka (the C client under confluent-kafka, kcat and the `rdkafka` crate) ships a
# test runner whose numbered tests expect a real broker named in `test.conf`. This script
# points them at `ferry serve`:
#
#   1. downloads the `rdkafka-sys` crate from crates.io (pinned, checksum verified): it
#      vendors librdkafka's whole source tree, `tests/` included;
#   2. configures and builds librdkafka and its test runner with gcc and make only (no TLS,
#      SASL, zstd or curl) in a cache directory outside the repository, once;
#   3. starts `ferry serve` on a fresh data directory with the Kafka endpoint on a free
#      port (or uses --bootstrap), and writes the runner's test.conf;
#   4. runs each numbered test (0000-0999) as its own runner process with
#      TEST_KAFKA_VERSION=2.4.0 (Produce v8 and Fetch v11 are Kafka 2.4's, so tests
#      gated on later brokers skip), leaving out the local tests (-L, and those named
#      `_mock`: they judge librdkafka against its in-process mock cluster, not a broker),
#      and not in quick mode (-Q skips every sub-test not marked quick without a word, so
#      whole tests would pass having run nothing); prints one line per test: PASSED,
#      FAILED with the runner's first failure, SKIPPED with the runner's reason, or
#      EXCLUDED with the reason given in scripts/compat/librdkafka-excluded.txt.
#
# A test listed in scripts/compat/librdkafka-allowlist.txt that does not pass fails the
# run (a regression); a test that passes and is not listed is reported. Network: crates.io
# only, on the first run.
#
# Usage: scripts/compat/librdkafka.sh [--allowlist | --subset FILE | --update-allowlist]
#                                     [--bootstrap HOST:PORT] [TEST_NUMBER…]
#   --allowlist          run only the allowlisted tests; fail if any does not pass
#   --subset FILE        the same for the tests listed in FILE (each must be allowlisted)
#   --update-allowlist   rewrite the allowlist with the tests that passed (whole runs only)
#   --bootstrap ADDR     test this Kafka endpoint instead of starting `ferry serve`
#   TEST_NUMBER…         run only these test numbers (e.g. 0001 0012)
# Environment:
#   FERRY_COMPAT_CACHE   where the source and the build are kept
#                        (default ${XDG_CACHE_HOME:-$HOME/.cache}/ferry-compat); never the repo
#   FERRY_LIBRDKAFKA_WORK  work directory: data, logs, test.conf, results
#                        (default ${TMPDIR:-/tmp}/ferry-librdkafka)
#   FERRY_BIN            a built `ferry` binary (default: built with cargo, debug)
#   FERRY_LIBRDKAFKA_TEST_TIMEOUT  seconds one runner process may take (default 900:
#                        0113_cooperative_rebalance's 25 sub-tests take about 10 min)
set -euo pipefail

RDKAFKA_SYS_VERSION=4.9.0+2.10.0
RDKAFKA_SYS_SHA256=5230dca48bc354d718269f3e4353280e188b610f7af7e2fcf54b7a79d5802872
LIBRDKAFKA_VERSION=${RDKAFKA_SYS_VERSION#*+}
CONFIGURE_OPTIONS="--disable-ssl --disable-gssapi --disable-zstd --disable-curl --disable-lz4-ext --enable-zlib"
TEST_KAFKA_VERSION=2.4.0

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ALLOWLIST=$ROOT/scripts/compat/librdkafka-allowlist.txt
EXCLUDED=$ROOT/scripts/compat/librdkafka-excluded.txt
CACHE=${FERRY_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry-compat}
WORK=${FERRY_LIBRDKAFKA_WORK:-${TMPDIR:-/tmp}/ferry-librdkafka}
TEST_TIMEOUT=${FERRY_LIBRDKAFKA_TEST_TIMEOUT:-900}

say() { echo "librdkafka: $*"; }
die() {
  echo "librdkafka: $*" >&2
  exit 1
}

mode=all
list_file=
bootstrap=
numbers=()
while [ $# -gt 0 ]; do
  case $1 in
    --allowlist) mode=list list_file=$ALLOWLIST ;;
    --subset)
      [ $# -ge 2 ] || die "--subset needs a file"
      mode=list list_file=$2
      shift
      ;;
    --update-allowlist) mode=update ;;
    --bootstrap)
      [ $# -ge 2 ] || die "--bootstrap needs HOST:PORT"
      bootstrap=$2
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    [0-9][0-9][0-9][0-9]) numbers+=("$1") ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done
if [ "$mode" = update ] && [ ${#numbers[@]} -gt 0 ]; then
  die "--update-allowlist needs a whole run (no test numbers)"
fi
for dir in "$CACHE" "$WORK"; do
  mkdir -p "$dir"
  case $(cd "$dir" && pwd)/ in
    "$ROOT"/*) die "$dir is inside the repository; the cache and work directories must be outside it" ;;
  esac
done

# Reads a list file: one test name per line, `#` comments.
read_list() { sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$1"; }

# 1. librdkafka's source, from the rdkafka-sys crate.
SRC=$CACHE/rdkafka-sys-$RDKAFKA_SYS_VERSION/librdkafka
if [ ! -f "$SRC/tests/test.c" ]; then
  crate=$CACHE/rdkafka-sys-$RDKAFKA_SYS_VERSION.crate
  say "downloading rdkafka-sys $RDKAFKA_SYS_VERSION (librdkafka $LIBRDKAFKA_VERSION)"
  curl -sSfL --retry 3 -o "$crate.part" \
    "https://static.crates.io/crates/rdkafka-sys/rdkafka-sys-$RDKAFKA_SYS_VERSION.crate"
  echo "$RDKAFKA_SYS_SHA256  $crate.part" | sha256sum -c --quiet - ||
    die "rdkafka-sys $RDKAFKA_SYS_VERSION's checksum does not match the pinned one"
  mv "$crate.part" "$crate"
  rm -rf "$CACHE/rdkafka-sys-$RDKAFKA_SYS_VERSION"
  tar -xzf "$crate" -C "$CACHE"
  [ -f "$SRC/tests/test.c" ] || die "rdkafka-sys $RDKAFKA_SYS_VERSION has no librdkafka/tests"
fi

# 2. The library and the test runner, built once per source and options.
RUNNER=$SRC/tests/test-runner
STAMP=$SRC/.ferry-built
if [ "$(cat "$STAMP" 2>/dev/null)" != "$CONFIGURE_OPTIONS" ] || [ ! -x "$RUNNER" ]; then
  for tool in gcc g++ make; do
    command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/debian-packages.sh)"
  done
  say "building librdkafka $LIBRDKAFKA_VERSION and its test runner in $SRC (once)"
  started=$SECONDS
  build_log=$CACHE/librdkafka-build.log
  (
    cd "$SRC"
    # The crate's archive drops the executable bits of the configure scripts.
    chmod +x configure lds-gen.py mklove/modules/* tests/*.sh tests/*.py 2>/dev/null || true
    # shellcheck disable=SC2086
    ./configure $CONFIGURE_OPTIONS
    make -j"$(nproc)" libs
    make -C tests -j"$(nproc)" test-runner
  ) >"$build_log" 2>&1 || {
    tail -n 40 "$build_log" >&2
    die "the build failed; its log: $build_log"
  }
  echo "$CONFIGURE_OPTIONS" >"$STAMP"
  say "built in $((SECONDS - started)) s"
fi

# The numbered tests, in the runner's order, from its table in test.c, and the local ones:
# those flagged TEST_F_LOCAL (no broker needed) and those named `_mock`, which start
# librdkafka's in-process mock cluster themselves. Neither says anything of Ferry, so
# they are not run.
table=$(sed -n '/^struct test tests\[\] = {/,/^};/p' "$SRC/tests/test.c" | tr '\n' ' ' |
  grep -oE '_TEST\(0[0-9]{3}_[A-Za-z0-9_]+ *,[^,)]*' | sed -E 's/^_TEST\(([^ ,]+) *, *(.*)/\1 \2/')
all_tests=$(cut -d' ' -f1 <<<"$table")
local_tests=$(awk '/TEST_F_LOCAL/ || $1 ~ /_mock(_|$)/ {print $1}' <<<"$table")
[ "$(wc -l <<<"$all_tests")" -gt 100 ] || die "could not read the test table of $SRC/tests/test.c"
declare -A wanted_names=()
if [ "$mode" = list ]; then
  [ -f "$list_file" ] || die "no list $list_file"
  allowed=$(read_list "$ALLOWLIST")
  while read -r name; do
    grep -qxF "$name" <<<"$all_tests" || die "$name (in $list_file) is not a test of librdkafka $LIBRDKAFKA_VERSION"
    grep -qxF "$name" <<<"$allowed" || die "$name (in $list_file) is not allowlisted"
    wanted_names[$name]=1
    numbers+=("${name%%_*}")
  done < <(read_list "$list_file")
  [ ${#wanted_names[@]} -gt 0 ] || die "$list_file lists no test"
elif [ ${#numbers[@]} -eq 0 ]; then
  mapfile -t numbers < <(sed 's/_.*//' <<<"$all_tests")
fi
mapfile -t numbers < <(printf '%s\n' "${numbers[@]}" | sort -u)

# 3. The broker: ferry serve on a fresh data directory, unless one is given.
FERRY_PID=
stop_ferry() {
  if [ -n "$FERRY_PID" ]; then
    kill "$FERRY_PID" 2>/dev/null || true
    wait "$FERRY_PID" 2>/dev/null || true
    FERRY_PID=
  fi
}
trap stop_ferry EXIT
start_ferry() {
  local log=$WORK/ferry.log data=$WORK/data
  rm -rf "$data"
  # Four partitions for an auto-created topic: the broker setting of the suite's own test
  # clusters (tests/scenarios/default.json, num_partitions), which its tests assume.
  FERRY_KAFKA_DEFAULT_PARTITIONS=4 "$FERRY_BIN" serve --data-dir "$data" --grpc 127.0.0.1:0 --no-http --no-aws \
    --no-pubsub --kafka-addr 127.0.0.1:0 >"$log" 2>&1 &
  FERRY_PID=$!
  for _ in $(seq 1 100); do
    bootstrap=$(sed -n 's/.*serving Kafka on \([0-9.:]*\).*/\1/p' "$log" | head -n1)
    [ -n "$bootstrap" ] && return 0
    kill -0 "$FERRY_PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  die "ferry serve did not start"
}
own_ferry=false
if [ -z "$bootstrap" ]; then
  own_ferry=true
  if [ -z "${FERRY_BIN:-}" ]; then
    (cd "$ROOT" && cargo build --quiet -p ferry-cli --bin ferry)
    FERRY_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/ferry
  fi
  start_ferry
fi
CONF=$WORK/test.conf
write_conf() {
  # Only the broker: every other setting is the runner's default.
  echo "bootstrap.servers=$bootstrap" >"$CONF"
}
write_conf
say "librdkafka $LIBRDKAFKA_VERSION's tests against $bootstrap (as Kafka $TEST_KAFKA_VERSION)"

# 4. Each test number in its own runner process.
RESULTS=$WORK/results.txt
: >"$RESULTS"
mkdir -p "$WORK/logs"
declare -A excluded=()
while IFS='|' read -r name reason; do
  excluded[$name]=$reason
done < <(sed 's/#.*//; /^[[:space:]]*$/d; s/[[:space:]]*|[[:space:]]*/|/' "$EXCLUDED" 2>/dev/null || true)

record() { # name outcome reason
  printf '%s %s %s\n' "$1" "$2" "$3" | tee -a "$RESULTS"
}
run_started=$SECONDS
for number in "${numbers[@]}"; do
  names=$(grep "^${number}_" <<<"$all_tests" || true)
  [ -n "$names" ] || die "librdkafka $LIBRDKAFKA_VERSION has no test $number"
  if [ ${#wanted_names[@]} -gt 0 ]; then
    names=$(while read -r n; do if [ -n "${wanted_names[$n]:-}" ]; then echo "$n"; fi; done <<<"$names")
  fi
  to_run=()
  while read -r name; do
    if [ -n "${excluded[$name]:-}" ]; then
      record "$name" EXCLUDED "${excluded[$name]}"
    elif grep -qxF "$name" <<<"$local_tests"; then
      record "$name" SKIPPED "local test: needs no broker, or runs its own mock cluster"
    else
      to_run+=("$name")
    fi
  done <<<"$names"
  [ ${#to_run[@]} -gt 0 ] || continue
  log=$WORK/logs/$number.log
  set +e
  # (The braces keep bash's own "Aborted" notice of a runner that aborts out of the output.)
  { (
    cd "$SRC/tests"
    TESTS=$number TEST_KAFKA_VERSION=$TEST_KAFKA_VERSION RDKAFKA_TEST_CONF=$CONF \
      TESTS_SKIP="" RDKAFKA_GITVER="$LIBRDKAFKA_VERSION" \
      LD_LIBRARY_PATH="$SRC/src:$SRC/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout -k 10 "$TEST_TIMEOUT" ./test-runner -L -p1
  ) >"$log" 2>&1; } 2>/dev/null
  status=$?
  set -e
  # The runner's summary: `| <name> | <STATE> | <secs>s | <first failure or skip reason>`.
  summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^\| *[0-9]{4}_' || true)
  for name in "${to_run[@]}"; do
    line=$(grep -E "^\| *$name +\|" <<<"$summary" | head -n1 || true)
    if [ -z "$line" ]; then
      # No summary: the runner aborted (a failure in its main thread, a crash) or was
      # stopped. The test's own failure, if it wrote one, is the reason.
      plain=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
      # A sub-test's failure names it: `### Test "<name> (<sub-test>:<line>)" failed at`.
      failure=$(grep -A1 -m1 -E "^### Test \"$name( \(|\")" <<<"$plain" | tail -n1 || true)
      main_failure=$(grep -A1 -m1 -F '### Test "<MAIN>" failed at' <<<"$plain" | tail -n1 || true)
      case $status in
        124) why="no result: the runner was stopped after ${TEST_TIMEOUT} s" ;;
        *) why="no result: the runner exited with status $status" ;;
      esac
      if [ -n "$failure" ]; then
        record "$name" FAILED "$failure"
      elif ! grep -qF "Running test $name =" <<<"$plain"; then
        record "$name" FAILED "not run: the runner ended before it (${main_failure:-$why})"
      elif grep -qF "Test $name PASSED" <<<"$plain"; then
        record "$name" FAILED "passed, then the runner failed: ${main_failure:-$why}"
      else
        record "$name" FAILED "${main_failure:-$why}"
      fi
      continue
    fi
    state=$(awk -F'|' '{gsub(/ /, "", $3); print $3}' <<<"$line")
    reason=$(awk -F'|' '{for (i = 5; i <= NF; i++) printf "%s%s", $i, (i < NF ? "|" : "")}' <<<"$line" |
      sed 's/^ *//; s/ *$//')
    case $state in
      PASSED) record "$name" PASSED "" ;;
      FAILED | RUNNING) record "$name" FAILED "${reason:-the runner gave no reason (see $log)}" ;;
      SKIPPED) record "$name" SKIPPED "${reason:-skipped by the runner}" ;;
      *) record "$name" FAILED "state $state: ${reason}" ;;
    esac
  done
  # A broker that died fails what follows; it is restarted and the test says why.
  if $own_ferry && ! kill -0 "$FERRY_PID" 2>/dev/null; then
    say "ferry serve exited during $number; restarting it (log: $WORK/ferry.log)"
    cp "$WORK/ferry.log" "$WORK/ferry-exited-$number.log"
    FERRY_PID=
    start_ferry
    write_conf
  fi
done
elapsed=$((SECONDS - run_started))

passed=$(grep -c ' PASSED ' "$RESULTS" || true)
failed=$(grep -c ' FAILED ' "$RESULTS" || true)
skipped=$(grep -c ' SKIPPED ' "$RESULTS" || true)
excl=$(grep -c ' EXCLUDED ' "$RESULTS" || true)
say "$passed passed, $failed failed, $skipped skipped, $excl excluded, in $elapsed s (results: $RESULTS)"

if [ "$mode" = update ]; then
  {
    echo "# librdkafka $LIBRDKAFKA_VERSION's tests that pass against Ferry (scripts/compat/librdkafka.sh)."
    echo "# A test listed here that does not pass is a regression."
    awk '$2 == "PASSED" {print $1}' "$RESULTS"
  } >"$ALLOWLIST"
  say "allowlist rewritten: $passed tests"
  exit 0
fi
regressions=0
while read -r name; do
  [ -n "${wanted_names[$name]:-}" ] || [ "$mode" = all ] || continue
  outcome=$(awk -v n="$name" '$1 == n {print $2}' "$RESULTS")
  [ -n "$outcome" ] || continue # a number not run this time
  if [ "$outcome" != PASSED ]; then
    say "REGRESSION: allowlisted test $outcome: $name"
    regressions=$((regressions + 1))
  fi
done < <(read_list "$ALLOWLIST" 2>/dev/null || true)
while read -r name; do
  grep -qxF "$name" < <(read_list "$ALLOWLIST" 2>/dev/null || true) ||
    say "newly passing (not allowlisted yet): $name"
done < <(awk '$2 == "PASSED" {print $1}' "$RESULTS")
[ "$regressions" -eq 0 ]
