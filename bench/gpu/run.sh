#!/usr/bin/env bash
# GPU benchmark: one GRPO step of the worker (hf_grpo_bench --device cuda) against the step
# a user would write with transformers (hf_transformers_grpo.py), on the Qwen2.5-0.5B
# shape, 64 sequences x (5 prompt + RESPONSE) tokens, on one GPU. Each side runs ROUNDS
# times, alternating, so a noisy neighbour hits both; ratios are of the medians over rounds.
# Prints each run's figures, then tokens/s, rollout / log-prob / update seconds, decode ms
# per token and peak GPU memory of each side, and the ratios. Goals: tokens/s >= 3x
# transformers', decode <= 5 ms per token, update no slower than transformers'.
# Memory: both sides report the caching allocator's peak reserved bytes (the goal compares
# those: what the device really gives up) and peak allocated bytes (printed beside it).
# Then the base preset against plain PyTorch eager and torch.compile (below).
# Sized to finish within 8 minutes on one H100 (the default 2 + 1 rounds).
#   bench/gpu/run.sh BUILD_DIR   (a CUDA build; HEADROOM_GPU_BENCH_ROUNDS, default 2;
#                                 HEADROOM_GPU_BENCH_RESPONSE, default 256;
#                                 HEADROOM_GPU_BENCH_COMPILE=0 leaves out torch.compile)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:?usage: bench/gpu/run.sh BUILD_DIR (a CUDA build)}
BENCH="$BUILD_DIR/bin/hf_grpo_bench"
[ -x "$BENCH" ] || { echo "build $BENCH first: cmake --build $BUILD_DIR --target hf_grpo_bench" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
ROUNDS=${HEADROOM_GPU_BENCH_ROUNDS:-2}
RESPONSE=${HEADROOM_GPU_BENCH_RESPONSE:-256}
runs=()
for ((r = 1; r <= ROUNDS; r++)); do
  ours=$("$BENCH" --device cuda --response-length "$RESPONSE" --batch 64 --steps 2 --warmup 1)
  echo "$ours"
  theirs=$("$PYTHON" bench/gpu/hf_transformers_grpo.py --response-length "$RESPONSE" --batch 64 --steps 2 --warmup 1)
  echo "$theirs"
  runs+=("$ours" "$theirs")
done
"$PYTHON" - "$RESPONSE" "${runs[@]}" <<'PY'
import json, re, statistics, sys

response = int(sys.argv[1])
STEP = re.compile(r"step tokens/s\s+([\d.]+)\s+\(median step ([\d.]+) s over \d+: rollout ([\d.]+), "
                  r"log-probs ([\d.]+), update ([\d.]+)")
PEAK = re.compile(r"memory GPU step peak\s+measured\s+(\S+ \S+)")
RESERVED = re.compile(r"memory GPU reserved peak\s+(\S+ \S+)")
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def ours(text):
    m = STEP.search(text)
    if not m:
        sys.exit("run.sh: hf_grpo_bench printed no 'step tokens/s' line")
    tps, step, rollout, logprob, update = map(float, m.groups())
    peak, reserved = PEAK.search(text), RESERVED.search(text)
    value, unit = peak.group(1).split() if peak else ("nan", "B")
    r_value, r_unit = reserved.group(1).split() if reserved else ("nan", "B")
    return {"tokens_per_second": tps, "step_seconds": step, "rollout_seconds": rollout,
            "logprob_seconds": logprob, "update_seconds": update,
            "decode_ms_per_token": 1000 * rollout / response,
            "peak_allocated_bytes": float(value) * UNITS[unit],
            "peak_reserved_bytes": float(r_value) * UNITS[r_unit]}


args = sys.argv[2:]
mine = [ours(a) for a in args[0::2]]
base = [json.loads(a) for a in args[1::2]]
med = lambda rs, k: statistics.median(r[k] for r in rs)
gib = lambda b: b / 2**30
for name, rs in (("hf_grpo_bench", mine), ("transformers", base)):
    print(f"{name:>14}: {med(rs, 'tokens_per_second'):8.0f} tokens/s  step {med(rs, 'step_seconds'):.2f} s"
          f"  rollout {med(rs, 'rollout_seconds'):.2f} s  log-probs {med(rs, 'logprob_seconds'):.2f} s"
          f"  update {med(rs, 'update_seconds'):.2f} s  decode {med(rs, 'decode_ms_per_token'):.1f} ms/token"
          f"  peak allocated {gib(med(rs, 'peak_allocated_bytes')):.1f} GiB"
          f"  reserved {gib(med(rs, 'peak_reserved_bytes')):.1f} GiB")
ratio = lambda k: med(mine, k) / med(base, k)
rounds = " ".join(f"{m['tokens_per_second'] / b['tokens_per_second']:.2f}" for m, b in zip(mine, base))
print(f"ratio: tokens/s {ratio('tokens_per_second'):.2f}x (goal >= 3x; per round {rounds})"
      f"  rollout {1 / ratio('rollout_seconds'):.2f}x  update {1 / ratio('update_seconds'):.2f}x (goal >= 1x)"
      f"  decode {med(mine, 'decode_ms_per_token'):.1f} ms/token (goal <= 5)"
      f"  peak reserved {ratio('peak_reserved_bytes'):.2f} of transformers' (goal <= 1;"
      f" allocated {ratio('peak_allocated_bytes'):.2f})")
PY

# The base preset (grpo_step_bench, 128M parameters) against the same step in plain PyTorch
# (bench/worker/grpo_eager.py under bf16 autocast), eager and torch.compile: 512 prompts x 8
# samples, prompt 5 + up to 16 response tokens, update micro-batches of 512. Goals: >= 1.3x
# eager's tokens/s, >= 1.1x torch.compile's, peak reserved memory <= eager's.
# HEADROOM_GPU_BENCH_BASE_ROUNDS rounds (default 1: torch.compile's warm-up is most of a round).
BASE_ROUNDS=${HEADROOM_GPU_BENCH_BASE_ROUNDS:-1}
BASE_BENCH="$BUILD_DIR/bin/grpo_step_bench"
if [ ! -x "$BASE_BENCH" ]; then
  echo "base preset: build $BASE_BENCH to compare it (cmake --build $BUILD_DIR --target grpo_step_bench)" >&2
  exit 0
fi
SHAPE=(--prompts 512 --group 8 --micro-batch 512 --steps 5 --warmup 2 --threads 8)
base_runs=()
for ((r = 1; r <= BASE_ROUNDS; r++)); do
  # Each run's line is printed as soon as it ends: torch.compile's warm-up is long, and a
  # run cut short still shows the others.
  ours=$("$BASE_BENCH" --preset base --device cuda --response 16 "${SHAPE[@]}")
  echo "$ours"
  eager=$("$PYTHON" bench/worker/grpo_eager.py --preset base --device cuda --max-response 16 "${SHAPE[@]}")
  echo "$eager"
  base_runs+=("$ours" "$eager")
  if [ "${HEADROOM_GPU_BENCH_COMPILE:-1}" != 0 ]; then
    compiled=$("$PYTHON" bench/worker/grpo_eager.py --preset base --device cuda --max-response 16 --compile "${SHAPE[@]}")
    echo "$compiled"
    base_runs+=("$compiled")
  fi
done
"$PYTHON" - "${base_runs[@]}" <<'PY'
import json, statistics, sys

runs = [json.loads(a) for a in sys.argv[1:]]
by = {impl: [r for r in runs if r["impl"] == impl] for impl in ("cpp", "python-eager", "python-compile")}
by = {impl: rs for impl, rs in by.items() if rs}  # no python-compile with HEADROOM_GPU_BENCH_COMPILE=0
med = lambda impl, k: statistics.median(r[k] for r in by[impl])
for impl, rs in by.items():
    print(f"base {impl:>14}: {med(impl, 'tokens_per_second'):8.0f} tokens/s  step {med(impl, 'step_seconds_median'):.3f} s"
          f"  rollout {med(impl, 'rollout_seconds'):.3f} s  update {med(impl, 'update_seconds'):.3f} s"
          f"  peak reserved {med(impl, 'peak_reserved_bytes') / 2**30:.1f} GiB")
tps = lambda impl: med(impl, "tokens_per_second")
versus_compile = f"{tps('cpp') / tps('python-compile'):.2f}x" if "python-compile" in by else "(not run)"
print(f"base ratio: {tps('cpp') / tps('python-eager'):.2f}x eager (goal >= 1.3x), "
      f"{versus_compile} torch.compile (goal >= 1.1x), peak reserved "
      f"{med('cpp', 'peak_reserved_bytes') / max(med('python-eager', 'peak_reserved_bytes'), 1):.2f} of eager's (goal <= 1)")
PY
