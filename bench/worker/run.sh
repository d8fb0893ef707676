#!/usr/bin/env bash
# Worker benchmark: one GRPO step (rollout + update) of the C++ worker against the same
# step in PyTorch eager (grpo_eager.py), on the tiny and small presets, same threads.
# Prints each side's JSON, then the ratios and the update phase's FLOP/s as a fraction of
# a plain matmul's.  Goals: C++/eager >= 2x on tiny, >= 1.2x on small; update >= 50% of
# matmul on small.
#   bench/worker/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
BENCH="$BUILD_DIR/bin/grpo_step_bench"
[ -x "$BENCH" ] || { echo "build $BENCH first: cmake --build $BUILD_DIR --target grpo_step_bench" >&2; exit 1; }
# Debian's python3-torch lives under /usr/bin/python3 (a pyenv python3 may shadow it).
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${HEADROOM_BENCH_THREADS:-2}
declare -A STEPS=([tiny]=20 [small]=3)
for preset in tiny small; do
  cpp=$("$BENCH" --preset "$preset" --steps "${STEPS[$preset]}" --threads "$THREADS")
  py=$("$PYTHON" bench/worker/grpo_eager.py --preset "$preset" --steps "${STEPS[$preset]}" --threads "$THREADS")
  echo "$cpp"
  echo "$py"
  "$PYTHON" - "$cpp" "$py" <<'PY'
import json, sys
c, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
goal = {"tiny": 2.0, "small": 1.2}[c["preset"]]
ratio = c["tokens_per_second"] / p["tokens_per_second"]
print(f'{c["preset"]:>5}: step tokens/s C++ {c["tokens_per_second"]:.0f} vs eager {p["tokens_per_second"]:.0f}'
      f' = {ratio:.2f}x (goal >= {goal}x)  rollout {p["rollout_seconds"]/c["rollout_seconds"]:.2f}x'
      f'  update {p["update_seconds"]/c["update_seconds"]:.2f}x')
print(f'{c["preset"]:>5}: update phase {c["update_flops_per_second"]/1e9:.1f} GFLOP/s ='
      f' {100*c["update_fraction_of_matmul"]:.0f}% of matmul {c["matmul_flops_per_second"]/1e9:.1f} GFLOP/s'
      + (' (goal >= 50%)' if c["preset"] == "small" else ''))
PY
done
