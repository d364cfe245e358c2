#!/usr/bin/env bash
# The Kafka endpoint against Ferry's gRPC API: `ferry-bench kafka` (see docs/benchmarks.md,
# "The Kafka endpoint with librdkafka").
#
#   1. builds librdkafka's `rdkafka_performance` (examples/rdkafka_performance.c) from the
#      librdkafka sources scripts/compat/librdkafka.sh uses — the rdkafka-sys crate's
#      vendored tree, pinned and checksum-verified, downloaded from crates.io once into
#      the cache — with the same configure options, outside the repository;
#   2. builds `ferry` and `ferry-bench` in release (unless FERRY_BIN and FERRY_BENCH_BIN
#      are given);
#   3. runs `ferry-bench kafka --serve …`, which starts one `ferry serve` on a fresh data
#      directory with the Kafka endpoint on a free port, passing on every argument given
#      here (e.g. --messages 50000 --rounds 3 --partitions 4).
#
# Usage: scripts/bench/kafka.sh [ferry-bench kafka arguments…]
# Environment:
#   FERRY_COMPAT_CACHE  where librdkafka's source and build are kept
#                       (default ${XDG_CACHE_HOME:-$HOME/.cache}/ferry-compat); never the repo
#   FERRY_BIN, FERRY_BENCH_BIN  built binaries (default: built with cargo --release)
#   FERRY_KAFKA_BENCH_OUT  where kafka.md and kafka.json go
#                       (default ${TMPDIR:-/tmp}/ferry-kafka-bench)
#   The profile is the workspace's release profile; CARGO_PROFILE_RELEASE_* variables
#   change it as cargo reads them (docs/benchmarks.md says how the published run was built).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COMPAT=$ROOT/scripts/compat/librdkafka.sh
CACHE=${FERRY_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry-compat}
OUT=${FERRY_KAFKA_BENCH_OUT:-${TMPDIR:-/tmp}/ferry-kafka-bench}

say() { echo "kafka bench: $*"; }
die() {
  echo "kafka bench: $*" >&2
  exit 1
}

# The pinned source and build options are librdkafka.sh's: one place to change them.
pinned() { sed -n "s/^$1=//p" "$COMPAT" | head -n1 | tr -d '"'; }
RDKAFKA_SYS_VERSION=$(pinned RDKAFKA_SYS_VERSION)
RDKAFKA_SYS_SHA256=$(pinned RDKAFKA_SYS_SHA256)
CONFIGURE_OPTIONS=$(pinned CONFIGURE_OPTIONS)
[ -n "$RDKAFKA_SYS_VERSION" ] && [ -n "$RDKAFKA_SYS_SHA256" ] && [ -n "$CONFIGURE_OPTIONS" ] ||
  die "could not read the pinned librdkafka source from $COMPAT"

mkdir -p "$CACHE" "$OUT"
for dir in "$CACHE" "$OUT"; do
  case $(cd "$dir" && pwd)/ in
    "$ROOT"/*) die "$dir is inside the repository; the cache and output must be outside it" ;;
  esac
done

# 1. The source, as librdkafka.sh fetches it.
SRC=$CACHE/rdkafka-sys-$RDKAFKA_SYS_VERSION/librdkafka
if [ ! -f "$SRC/examples/rdkafka_performance.c" ]; then
  crate=$CACHE/rdkafka-sys-$RDKAFKA_SYS_VERSION.crate
  say "downloading rdkafka-sys $RDKAFKA_SYS_VERSION"
  curl -sSfL --retry 3 -o "$crate.part" \
    "https://static.crates.io/crates/rdkafka-sys/rdkafka-sys-$RDKAFKA_SYS_VERSION.crate"
  echo "$RDKAFKA_SYS_SHA256  $crate.part" | sha256sum -c --quiet - ||
    die "rdkafka-sys $RDKAFKA_SYS_VERSION's checksum does not match the pinned one"
  mv "$crate.part" "$crate"
  rm -rf "$CACHE/rdkafka-sys-$RDKAFKA_SYS_VERSION"
  tar -xzf "$crate" -C "$CACHE"
  [ -f "$SRC/examples/rdkafka_performance.c" ] || die "the crate has no examples/rdkafka_performance.c"
fi

# 2. The library (shared with librdkafka.sh's build: same options, same stamp), then the tool.
TOOL=$SRC/examples/rdkafka_performance
STAMP=$SRC/.ferry-built
build_log=$CACHE/rdkafka-performance-build.log
if [ "$(cat "$STAMP" 2>/dev/null)" != "$CONFIGURE_OPTIONS" ] || [ ! -f "$SRC/src/librdkafka.a" ]; then
  for tool in gcc make; do
    command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/debian-packages.sh)"
  done
  say "building librdkafka in $SRC (once)"
  (
    cd "$SRC"
    # The crate's archive drops the executable bits of the configure scripts.
    chmod +x configure lds-gen.py mklove/modules/* 2>/dev/null || true
    # shellcheck disable=SC2086
    ./configure $CONFIGURE_OPTIONS
    make -j"$(nproc)" libs
  ) >"$build_log" 2>&1 || {
    tail -n 40 "$build_log" >&2
    die "the build failed; its log: $build_log"
  }
  echo "$CONFIGURE_OPTIONS" >"$STAMP"
fi
if [ ! -x "$TOOL" ] || [ "$SRC/src/librdkafka.a" -nt "$TOOL" ]; then
  make -C "$SRC/examples" rdkafka_performance >>"$build_log" 2>&1 || {
    tail -n 40 "$build_log" >&2
    die "building rdkafka_performance failed; its log: $build_log"
  }
fi

# 3. Ferry.
if [ -z "${FERRY_BIN:-}" ] || [ -z "${FERRY_BENCH_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --release --quiet -p ferry-cli -p ferry-bench --bins)
  target=${CARGO_TARGET_DIR:-$ROOT/target}/release
  FERRY_BIN=${FERRY_BIN:-$target/ferry}
  FERRY_BENCH_BIN=${FERRY_BENCH_BIN:-$target/ferry-bench}
fi

say "librdkafka $("$TOOL" -h 2>&1 | sed -n 's/.*librdkafka version \([^ ]*\).*/\1/p' | head -n1) rdkafka_performance against $FERRY_BIN"
exec "$FERRY_BENCH_BIN" kafka --serve "$FERRY_BIN" --rdkafka-performance "$TOOL" --out "$OUT" "$@"
