#!/usr/bin/env bash
# Worker benchmark: one GRPO step (rollout + update) of the C++ worker against the same
# step in PyTorch eager (grpo_eager.py), on the tiny and small presets, same threads.
# Each side runs ROUNDS times, alternating, so a noisy neighbour on a shared machine hits
# both; each run reports its median step, and the ratio is of the medians over rounds.
# Prints each run's JSON, then the ratios and the update phase's FLOP/s as a fraction of
# a plain matmul's. Goals: C++/eager >= 2x on tiny, >= 1.2x on small; update >= 50% of
# matmul on small.
#   bench/worker/run.sh [BUILD_DIR]   (default: build; HEADROOM_BENCH_ROUNDS, default 5)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
BENCH="$BUILD_DIR/bin/grpo_step_bench"
[ -x "$BENCH" ] || { echo "build $BENCH first: cmake --build $BUILD_DIR --target grpo_step_bench" >&2; exit 1; }
# Debian's python3-torch lives under /usr/bin/python3 (a pyenv python3 may shadow it).
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${HEADROOM_BENCH_THREADS:-2}
ROUNDS=${HEADROOM_BENCH_ROUNDS:-5}
declare -A STEPS=([tiny]=40 [small]=5)
for preset in tiny small; do
  runs=()
  for ((r = 1; r <= ROUNDS; r++)); do
    cpp=$("$BENCH" --preset "$preset" --steps "${STEPS[$preset]}" --threads "$THREADS")
    py=$("$PYTHON" bench/worker/grpo_eager.py --preset "$preset" --steps "${STEPS[$preset]}" --threads "$THREADS")
    echo "$cpp"
    echo "$py"
    runs+=("$cpp" "$py")
  done
  "$PYTHON" - "${runs[@]}" <<'PY'
import json, statistics, sys
runs = [json.loads(a) for a in sys.argv[1:]]
cpp = [r for r in runs if r["impl"] == "cpp"]
eager = [r for r in runs if r["impl"] == "python-eager"]
med = lambda rs, k: statistics.median(r[k] for r in rs)
preset = cpp[0]["preset"]
goal = {"tiny": 2.0, "small": 1.2}[preset]
rounds = " ".join(f'{c["tokens_per_second"] / p["tokens_per_second"]:.2f}' for c, p in zip(cpp, eager))
ratio = med(cpp, "tokens_per_second") / med(eager, "tokens_per_second")
print(f'{preset:>5}: step tokens/s C++ {med(cpp, "tokens_per_second"):.0f} vs eager {med(eager, "tokens_per_second"):.0f}'
      f' = {ratio:.2f}x (goal >= {goal}x; per round {rounds})'
      f'  rollout {med(eager, "rollout_seconds") / med(cpp, "rollout_seconds"):.2f}x'
      f'  update+logprob {(med(eager, "update_seconds") + med(eager, "logprob_seconds")) / (med(cpp, "update_seconds") + med(cpp, "logprob_seconds")):.2f}x')
print(f'{preset:>5}: update phase {med(cpp, "update_flops_per_second") / 1e9:.1f} GFLOP/s ='
      f' {100 * med(cpp, "update_fraction_of_matmul"):.0f}% of matmul {med(cpp, "matmul_flops_per_second") / 1e9:.1f} GFLOP/s'
      + (' (goal >= 50%)' if preset == "small" else ''))
PY
done
