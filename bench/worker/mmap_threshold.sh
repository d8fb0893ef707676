#!/usr/bin/env bash
# What the worker's fixed mmap threshold costs in step time (docs/design.md, "The host
# heap"): grpo_step_bench on the tiny and small presets with glibc's default (a dynamic
# threshold) and with the threshold the worker sets at start (4 MiB: every tensor of at
# least that size gets its own mapping, returned to the kernel when freed, and its pages
# are faulted in fresh when allocated again). The bench binary does not set it itself, so
# MALLOC_MMAP_THRESHOLD_ in its environment is the switch (glibc applies it at start, the
# same as the worker's mallopt). Runs alternate off/on so a noisy neighbour hits both;
# prints per preset the ratio of the median step times, on / off.
#   bench/worker/mmap_threshold.sh [BUILD_DIR]   (HEADROOM_BENCH_ROUNDS, default 3;
#   HEADROOM_BENCH_PRESETS, default "tiny small"; HEADROOM_BENCH_THRESHOLD, default the
#   worker's 4194304 bytes)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
BENCH="$BUILD_DIR/bin/grpo_step_bench"
[ -x "$BENCH" ] || { echo "build $BENCH first: HEADROOM_BUILD_TARGETS=grpo_step_bench scripts/build.sh" >&2; exit 1; }
ROUNDS=${HEADROOM_BENCH_ROUNDS:-3}
PRESETS=${HEADROOM_BENCH_PRESETS:-tiny small}
# worker/telemetry/heap_trim.h, kWorkerMmapThresholdBytes
THRESHOLD=${HEADROOM_BENCH_THRESHOLD:-4194304}
declare -A STEPS=([tiny]=40 [small]=5 [base]=3)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for preset in $PRESETS; do
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "off $("$BENCH" --preset "$preset" --steps "${STEPS[$preset]}" --threads 2)" | tee -a "$out"
    echo "on $(MALLOC_MMAP_THRESHOLD_=$THRESHOLD "$BENCH" --preset "$preset" --steps "${STEPS[$preset]}" --threads 2)" |
      tee -a "$out"
  done
done
/usr/bin/python3 - "$out" "$THRESHOLD" <<'PY'
import json, statistics, sys
threshold = sys.argv[2]
runs = {}
for line in open(sys.argv[1]):
    mode, _, js = line.partition(" ")
    r = json.loads(js)
    runs.setdefault(r["preset"], {"off": [], "on": []})[mode].append(r)
med = lambda rs, k: statistics.median(r[k] for r in rs)
for preset, by in runs.items():
    off, on = med(by["off"], "step_seconds_median"), med(by["on"], "step_seconds_median")
    ratios = [b["step_seconds_median"] / a["step_seconds_median"] for a, b in zip(by["off"], by["on"])]
    per_round = " ".join(f"{x:.2f}" for x in ratios)
    print(f"{preset:>5}: median step {on * 1e3:.1f} ms with the threshold fixed at {threshold} bytes vs {off * 1e3:.1f} ms "
          f"with glibc's dynamic one = {on / off:.2f}x; per round (off, on back to back) {per_round}, "
          f"median {statistics.median(ratios):.2f}x; update "
          f'{med(by["on"], "update_seconds") / med(by["off"], "update_seconds"):.2f}x, rollout '
          f'{med(by["on"], "rollout_seconds") / med(by["off"], "rollout_seconds"):.2f}x')
PY
