#!/usr/bin/env bash
# Memory levers on the CPU: one GRPO step of a Qwen2-shaped model (hf_grpo_bench) with each
# lever off and on, alternating runs so a noisy neighbour hits both. Prints per lever the
# step time ratio (on / off; the goal for activation checkpointing is at most 1.35x), the
# measured step transient (activations + logits, from RSS) and the planner's figure for it.
#   bench/worker/levers.sh [BUILD_DIR]   (HEADROOM_BENCH_ROUNDS, default 3)
# The shape: 4 layers of Qwen2.5-0.5B's width, vocabulary 32000, 16 sequences of
# 5 + 128 tokens, micro-batch 8 (override with HEADROOM_LEVERS_SHAPE).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
BENCH="$BUILD_DIR/bin/hf_grpo_bench"
[ -x "$BENCH" ] || { echo "build $BENCH first: cmake --build $BUILD_DIR --target hf_grpo_bench" >&2; exit 1; }
ROUNDS=${HEADROOM_BENCH_ROUNDS:-3}
SHAPE=${HEADROOM_LEVERS_SHAPE:---layers 4 --vocab 32000 --response-length 128 --batch 16 --micro-batch 8 --steps 2 --warmup 1 --threads 2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  for ac in 0 1; do
    # shellcheck disable=SC2086
    "$BENCH" $SHAPE --activation-checkpointing "$ac" | sed "s/^/ac=$ac /" | tee -a "$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import re, statistics, sys
runs = {"0": [], "1": []}
for line in open(sys.argv[1]):
    ac, _, rest = line.partition(" ")
    ac = ac.split("=")[1]
    m = re.search(r"median step ([0-9.]+) s.*update ([0-9.]+);", rest)
    if m:
        runs[ac].append({"step": float(m.group(1)), "update": float(m.group(2))})
    m = re.match(r"memory activations\+logits\s+measured\s+(\S+ \S+)\s+plan\s+(\S+ \S+)\s+planner error\s+(\S+)", rest)
    if m:
        runs[ac][-1].update(measured=m.group(1), planned=m.group(2), error=m.group(3))
med = lambda ac, k: statistics.median(r[k] for r in runs[ac])
print(f"activation checkpointing: step {med('1', 'step'):.3f} s vs {med('0', 'step'):.3f} s off = "
      f"{med('1', 'step') / med('0', 'step'):.2f}x (goal <= 1.35x); update phase "
      f"{med('1', 'update') / med('0', 'update'):.2f}x")
for ac, name in (("0", "off"), ("1", "on")):
    last = runs[ac][-1]
    print(f"  {name}: activations+logits measured {last.get('measured', '?')}, planned "
          f"{last.get('planned', '?')} (planner error {last.get('error', '?')})")
PY
