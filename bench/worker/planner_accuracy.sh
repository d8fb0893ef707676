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
#   checkpointing budget both offload"). A build of only the two targets has no
#   build stamp: run it with HEADROOM_ALLOW_STALE_BUILD=1 (local/build_freshness.h).
# Measured: the step log's host_peak_bytes (the worker's memory monitor: the cgroup's
# working set, sampled every 5 ms during the step, core/memory/peak_sampler.h), the largest
# over the steps after the warm-up (the first steps grow the allocator's arenas and the
# first one includes the model load). The ratio is measured / planned. Beside it, per
# side of the plan: its state (everything but activations, logits and the rollout's
# prefill) against the working set at the end of that step, and its in-step part (the
# larger of the update's activations + logits and the rollout's prefill) against peak -
# end; the plan again with maxPromptLength at the longest prompt that step ran (the plan
# assumes every prompt at maxPromptLength; a text dataset's are shorter), and the padded
# tokens the step ran against promptsPerStep x groupSize x (maxPromptLength +
# maxResponseLength).
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
# The plan counts what a step allocates; the heap would add what it keeps resident of the
# tensors under the worker's 4 MiB mmap threshold (docs/design.md, "The host heap"). 64 KiB
# here unless the caller sets it (MALLOC_MMAP_THRESHOLD_=4194304 measures the default).
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-65536}
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
    # The same plan at the prompt length that ran: the measured step's longest prompt (the
    # rollout pads every row to it), from its padded tokens.
    /usr/bin/python3 - "$spec" "$work/$job-$lever/gen-0001/rank-0.log" "$WARMUP" "$work/$job-$lever.ran.yaml" <<'PY'
import json, sys, yaml
spec_path, log_path, warmup, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
spec = yaml.safe_load(open(spec_path))
g = spec["spec"]["grpo"]
steps = [json.loads(l) for l in open(log_path) if l.startswith("{") and '"host_peak_bytes"' in l]
top = max((r for r in steps if r.get("step", 0) > warmup), key=lambda r: r["host_peak_bytes"])
g["maxPromptLength"] = top["tokens"] // (g["promptsPerStep"] * g["groupSize"]) - g["maxResponseLength"]
yaml.safe_dump(spec, open(out, "w"), sort_keys=False)
PY
    "$HEADROOM" plan "$work/$job-$lever.ran.yaml" --json >"$work/$job-$lever.ran.plan.json"
    printf '%s\t%s\t%s\t%s\n' "$job" "$lever" "$work/$job-$lever.plan.json" \
      "$work/$job-$lever/gen-0001/rank-0.log" >>"$results"
    echo "ran $job / $lever" >&2
  done
done

/usr/bin/python3 - "$results" "$WARMUP" <<'PY'
import json, sys
import yaml
warmup = int(sys.argv[2])
mib = lambda b: f"{b / 2**20:.0f}"
print("host MiB per worker; peak = the step log's host_peak_bytes, the largest of the steps after the warm-up;")
print("end = host_bytes at the end of that step; in-step: plan = the larger of the update's activations + logits and")
print("the rollout's prefill (its row: what it adds above the update's), measured = peak - end;")
print("tokens = the padded tokens that step ran (all micro-batches; the plan assumes every row at maxPromptLength + maxResponseLength);")
print("at the prompts that ran: the same plan with maxPromptLength = that step's longest prompt")
print()
print("| job | lever | planned peak | measured peak | ratio | within 10% | planned state / end of step | planned in-step / peak - end | planned at the prompts that ran (ratio) | tokens ran / planned |")
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
    seq = spec["maxPromptLength"] + spec["maxResponseLength"]
    in_step = sum(c["host_bytes"] for c in plan["components"] if c["name"] in ("activations", "logits", "rollout prefill"))
    ran = json.load(open(plan_path.replace(".plan.json", ".ran.plan.json")))["host_total_bytes"]
    ratio = top["host_peak_bytes"] / planned
    label = lever + (" (no-op on CPU)" if lever == "offload" else "")
    print(f"| {job} | {label} | {mib(planned)} | {mib(top['host_peak_bytes'])} (steps {steps[0]['step']}-{steps[-1]['step']}) | "
          f"{ratio:.2f} | {'yes' if abs(ratio - 1) <= 0.10 else 'no'} | {mib(planned - in_step)} / {mib(top['host_bytes'])} | "
          f"{mib(in_step)} / {mib(top['host_peak_bytes'] - top['host_bytes'])} | {mib(ran)} ({top['host_peak_bytes'] / ran:.2f}) | "
          f"{top['tokens']} / {rows * seq} |")
PY
