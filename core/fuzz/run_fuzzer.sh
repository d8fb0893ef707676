#!/bin/sh
# Runs a libFuzzer binary for a bounded time from a seed corpus; fails on any crash,
# leak, sanitizer report or property violation (libFuzzer exits non-zero and leaves the
# input as crash-*/leak-* under ARTIFACTS).
#   run_fuzzer.sh FUZZER SECONDS WORKDIR SEED_DIR...
set -eu
fuzzer=$1; seconds=$2; workdir=$3; shift 3
if [ ! -x "$fuzzer" ]; then
  echo "run_fuzzer.sh: $fuzzer is not built (cmake --build <build> --target $(basename "$fuzzer"))" >&2
  exit 1
fi
mkdir -p "$workdir/corpus" "$workdir/artifacts"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="$workdir/artifacts/" "$workdir/corpus" "$@"
