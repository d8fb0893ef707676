#!/usr/bin/env bash
# The planner's accuracy per memory lever on the CPU: for the example text job
# (configs/addition-text-qwen2.yaml) and a preset job (configs/reverse-tiny.yaml, made
# longer so the token-driven part is a visible share of the peak), each lever set (none,
# activation checkpointing, a token budget, both, offload) is run for a few steps with
# `headroom run --no-guard`, and the host step peak the worker measured is compared with
# `headroom plan`'s host total for the same spec.
#   bench/worker/planner_accuracy.sh [BUILD_DIR]
#   HEADROOM_ACCURACY_STEPS (default 5), HEADROOM_ACCURACY_WARMUP (default 2),
#   HEADROOM_ACCURACY_JOBS (default "text preset"; "deep" is the preset job with 8 blocks,
#   where checkpointing has blocks to save), HEADROOM_ACCURACY_LEVERS (default "none
#   checkpointing budget both offload"), MALLOC_MMAP_THRESHOLD_ (default: the worker's own,
#   4 MiB; see below). A build of only the two targets has no
#   build stamp: run it with HEADROOM_ALLOW_STALE_BUILD=1 (local/build_freshness.h).
# Measured: the step log's host_peak_bytes (the worker's memory monitor: the cgroup's
# working set, sampled every 5 ms during the step, core/memory/peak_sampler.h), the largest
# over the steps after the warm-up (the first steps grow the allocator's arenas and the
# first one includes the model load). The ratio is measured / planned. Beside it, per
# side of the plan: its state (everything but activations, logits and the rollout's
# prefill) against the working set at the end of that step, and its in-step part (the
# larger of the update's activations + logits and the rollout's prefill) against peak -
# end; the prompt length the plan counts (the longest the job's data holds, `headroom plan`
# asks headroom-worker) against the longest the measured step ran, and the padded tokens
# the step ran against promptsPerStep x groupSize x (that planned length +
# maxResponseLength).
# One unmeasured run comes first: a memory cgroup is charged for the file pages its
# process reads first (LibTorch's code, about 117 MiB), so the first worker after a build
# or a quiet hour would carry them and the others not.
# Offload on the CPU: the parameters' and the optimizer's home is already host memory, so
# offloadParams/offloadOptimizer move nothing (worker/sharding/flat_parameter_group.cc,
# sharded_adamw.cc) and the plan counts nothing different; the row shows that both stay
# where "none" is, not a separate effect.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
HEADROOM="$BUILD_DIR/bin/headroom"
if [ ! -x "$HEADROOM" ] || [ ! -x "$BUILD_DIR/bin/headroom-worker" ]; then
  echo "build $HEADROOM and headroom-worker first:" \
    "HEADROOM_BUILD_TARGETS=\"headroom headroom-worker\" scripts/build.sh" >&2
  exit 1
fi
STEPS=${HEADROOM_ACCURACY_STEPS:-5}
WARMUP=${HEADROOM_ACCURACY_WARMUP:-2}
JOBS=${HEADROOM_ACCURACY_JOBS:-text preset}
LEVERS=${HEADROOM_ACCURACY_LEVERS:-none checkpointing budget both offload}
# The worker fixes glibc's mmap threshold at 4 MiB (docs/design.md, "The host heap"):
# tensors under it come from the heap, which keeps what a phase freed resident through the
# step. The plan counts what a step allocates; MALLOC_MMAP_THRESHOLD_=65536 in the
# environment gives every activation its own mapping, so that the measured peak is that
# too, and the difference between the two runs is the heap's share.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One spec per job and lever set: the job's own fields, a few steps, no held-out
# evaluation or checkpoint inside the measured steps.
variant() {  # job lever out.yaml
  /usr/bin/python3 - "$1" "$2" "$3" "$STEPS" <<'PY'
import sys, yaml
job, lever, out, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if job == "text":
    spec = yaml.safe_load(open("configs/addition-text-qwen2.yaml"))
    budget = 2048  # tokens, against microBatchSize 128 x (64 + 8) = 9216
else:
    spec = yaml.safe_load(open("configs/reverse-tiny.yaml"))
    # Longer prompts and responses, more rows: the tiny preset's activations must be a
    # visible share of the peak or the comparison says nothing about them.
    spec["spec"]["task"]["digits"] = 12  # the most the task allows: prompts of 14 tokens
    spec["spec"]["grpo"].update(promptsPerStep=64, maxPromptLength=14, maxResponseLength=13, microBatchSize=512)
    if job == "deep":
        spec["spec"]["model"]["layers"] = 8
    budget = 4096  # tokens, against 512 x (14 + 13) = 13824
s = spec["spec"]
s["grpo"]["steps"] = steps
s["checkpoint"] = {"everySteps": steps, "keep": 1}
s["task"].get("dataset", {}).pop("heldOut", None)
if lever in ("checkpointing", "both"):
    s["grpo"]["activationCheckpointing"] = True
if lever in ("budget", "both"):
    s["grpo"]["maxTokensPerMicroBatch"] = budget
if lever == "offload":
    s["sharding"]["offloadOptimizer"] = True  # offloadParams needs stage 3, these jobs run stage 1
spec["metadata"]["name"] = f"accuracy-{job}-{lever}"
yaml.safe_dump(spec, open(out, "w"), sort_keys=False)
PY
}

results="$work/results.tsv"
first_job=${JOBS%% *}
variant "$first_job" none "$work/warm.yaml"
"$HEADROOM" run "$work/warm.yaml" --no-guard --workdir "$work/warm" >"$work/warm.log" 2>&1 ||
  { echo "the warm-up run failed:" >&2; tail -n 20 "$work/warm.log" >&2; exit 1; }
for job in $JOBS; do
  for lever in $LEVERS; do
    spec="$work/$job-$lever.yaml"
    variant "$job" "$lever" "$spec"
    "$HEADROOM" plan "$spec" --json >"$work/$job-$lever.plan.json"
    if ! "$HEADROOM" run "$spec" --no-guard --workdir "$work/$job-$lever" >"$work/$job-$lever.run.log" 2>&1; then
      echo "headroom run failed for $job/$lever:" >&2
      tail -n 20 "$work/$job-$lever.run.log" >&2
      exit 1
    fi
    printf '%s\t%s\t%s\t%s\n' "$job" "$lever" "$work/$job-$lever.plan.json" \
      "$work/$job-$lever/gen-0001/rank-0.log" >>"$results"
    echo "ran $job / $lever" >&2
  done
done

/usr/bin/python3 - "$results" "$WARMUP" <<'PY'
import json, os, sys
import yaml
warmup = int(sys.argv[2])
mib = lambda b: f"{b / 2**20:.0f}"
threshold = os.environ.get("MALLOC_MMAP_THRESHOLD_")
print(f"glibc mmap threshold: {threshold + ' bytes (MALLOC_MMAP_THRESHOLD_)' if threshold else 'the worker default, 4 MiB'}")
print("host MiB per worker; peak = the step log's host_peak_bytes, the largest of the steps after the warm-up;")
print("end = host_bytes at the end of that step; in-step: plan = the larger of the update's activations + logits and")
print("the rollout's prefill (its row: what it adds above the update's), measured = peak - end;")
print("prompt: the length the plan counts (the data's longest, capped at maxPromptLength) / the longest that step ran;")
print("tokens = the padded tokens that step ran (all micro-batches) / promptsPerStep x groupSize x (planned prompt + maxResponseLength)")
print()
print("| job | lever | planned peak | measured peak | ratio | within 10% | planned state / end of step | planned in-step / peak - end | prompt planned / ran | tokens ran / planned |")
print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    job, lever, plan_path, log_path = line.rstrip("\n").split("\t")
    plan = json.load(open(plan_path))
    steps = [json.loads(l) for l in open(log_path) if l.startswith("{") and '"host_peak_bytes"' in l]
    steps = [r for r in steps if r.get("step", 0) > warmup]
    top = max(steps, key=lambda r: r["host_peak_bytes"])
    planned = plan["host_total_bytes"]
    spec = yaml.safe_load(open(plan_path.replace(".plan.json", ".yaml")))["spec"]["grpo"]
    rows = spec["promptsPerStep"] * spec["groupSize"]
    prompt = plan["prompt_length"]
    ran_prompt = top["tokens"] // rows - spec["maxResponseLength"]  # the rollout pads every row to the step's longest
    in_step = sum(c["host_bytes"] for c in plan["components"] if c["name"] in ("activations", "logits", "rollout prefill"))
    ratio = top["host_peak_bytes"] / planned
    label = lever + (" (no-op on CPU)" if lever == "offload" else "")
    print(f"| {job} | {label} | {mib(planned)} | {mib(top['host_peak_bytes'])} (steps {steps[0]['step']}-{steps[-1]['step']}) | "
          f"{ratio:.2f} | {'yes' if abs(ratio - 1) <= 0.10 else 'no'} | {mib(planned - in_step)} / {mib(top['host_bytes'])} | "
          f"{mib(in_step)} / {mib(top['host_peak_bytes'] - top['host_bytes'])} | {prompt} / {ran_prompt} | "
          f"{top['tokens']} / {rows * (prompt + spec['maxResponseLength'])} |")
PY
