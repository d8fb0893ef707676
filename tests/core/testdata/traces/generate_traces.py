#!/usr/bin/env python3
"""Generates the guard's replay traces from the failure reports in docs/design.md.

Deterministic (a seeded random.Random per trace), so the committed CSVs can be rebuilt
exactly: python3 tests/core/testdata/traces/generate_traces.py [OUTDIR]

Each trace is what a worker would have measured per step if nothing stopped it (rows go
on past the step that crosses the limit, so tests can tell where that step is). Columns
per docs/design.md: step,host_bytes,gpu_bytes,host_peak_bytes,gpu_peak_bytes,tokens,
host_limit_bytes,gpu_limit_bytes. The '# ' header lines say which report a trace models
and what the guard must do; tests/core/replay_test.cc holds the same expectations.
"""
import os
import random
import sys

MiB = 1 << 20
GiB = 1 << 30


def write(outdir, name, about, rows):
    path = os.path.join(outdir, name + ".csv")
    with open(path, "w") as f:
        for line in about:
            f.write("# " + line + "\n")
        f.write("step,host_bytes,gpu_bytes,host_peak_bytes,gpu_peak_bytes,tokens,"
                "host_limit_bytes,gpu_limit_bytes\n")
        for r in rows:
            f.write(",".join(str(int(round(v))) for v in r) + "\n")


def row(step, host, gpu, host_peak, gpu_peak, tokens, host_limit, gpu_limit):
    return (step, host, gpu, max(host_peak, host), max(gpu_peak, gpu), tokens, host_limit, gpu_limit)


def host_leak_linear(rng):
    # verl/EasyR1: host RAM grows linearly every step until the worker is killed (~7 steps).
    limit = 1 * GiB
    rows = []
    for t in range(9):
        tokens = 3072 + rng.randint(-150, 150)
        end = 500 * MiB + 75 * MiB * t + rng.gauss(0, 3) * MiB
        peak = end + 24 * MiB + rng.gauss(0, 1) * MiB
        rows.append(row(t, end, 0, peak, 0, tokens, limit, 0))
    return ["linear host leak (rollout engine keeps references): +75 MiB/step, 1 GiB limit",
            "expect: a host decision (restart) before the step whose peak crosses the limit (7)"], rows


def host_staircase_offload(rng):
    # With parameter offload the same leak grows as a staircase: a stair every other step.
    limit = 2 * GiB
    rows = []
    for t in range(22):
        tokens = 4096 + rng.randint(-200, 200)
        end = 900 * MiB + 120 * MiB * ((t + 1) // 2) + rng.gauss(0, 3) * MiB
        peak = end + 40 * MiB + rng.gauss(0, 2) * MiB
        gpu = 6 * GiB + rng.gauss(0, 20) * MiB
        rows.append(row(t, end, gpu, peak, gpu + 1 * GiB, tokens, limit, 16 * GiB))
    return ["host leak with parameter offload: +120 MiB every second step (staircase), 2 GiB limit",
            "expect: a host decision before the step whose peak crosses the limit"], rows


def host_offload_fill(rng):
    # Offloaded parameters/optimizer state fill host RAM over the first steps: GPU fine,
    # host at 95.5%, killed. The level approaches a point above the limit.
    limit = 8 * GiB
    rows = []
    for t in range(8):
        tokens = 8192 + rng.randint(-300, 300)
        frac = 1.04 - 0.5 * (0.6 ** t)
        end = frac * limit + rng.gauss(0, 5) * MiB
        peak = end + 0.01 * limit
        gpu = 9 * GiB + rng.gauss(0, 30) * MiB
        rows.append(row(t, end, gpu, peak, gpu + 2 * GiB, tokens, limit, 24 * GiB))
    return ["offloaded state fills host RAM (54% -> 93% -> 100%), GPU at ~45%",
            "expect: a host decision (state does not fit: reshard or disableOffload) before the limit"], rows


def gpu_long_prompt_spike(rng):
    # A batch of very long prompts (max_prompt_length 22000, ~1100 prompts) spikes GPU
    # memory at step 4 and crashes the actor. Activations follow tokens.
    limit = 80 * GiB
    rows = []
    per_token = 0.1 * MiB
    for t in range(8):
        tokens = 200000 + rng.randint(-20000, 20000)
        if t == 4:
            tokens = 600000
        end = 40 * GiB + rng.gauss(0, 50) * MiB
        peak = end + per_token * tokens + rng.gauss(0, 80) * MiB
        host = 30 * GiB + rng.gauss(0, 40) * MiB
        rows.append(row(t, host, end, host + 1 * GiB, peak, tokens, 64 * GiB, limit))
    return ["long-prompt batch at step 4: GPU peak = 40 GiB + 0.1 MiB/token; 600k tokens vs ~200k",
            "expect: a GPU decision (shrinkMicroBatch) at step 3, knowing step 4's tokens"], rows


def host_gencache_fragmentation(rng):
    # Freeing and rebuilding the generation cache every step fragments host memory: the
    # end-of-step level climbs irregularly and the generation peak rides on top.
    limit = 16 * GiB
    rows = []
    level = 6 * GiB
    for t in range(7):
        tokens = 16384 + rng.randint(-500, 500)
        if t > 0:
            level += 2 * GiB + rng.uniform(-0.3, 0.3) * GiB
        peak = level + 3 * GiB + rng.gauss(0, 20) * MiB
        rows.append(row(t, level, 0, peak, 0, tokens, limit, 0))
    return ["generation cache rebuilt every step: host +2 GiB/step (irregular), generation peak +3 GiB",
            "expect: a host decision (restart) before the generation whose peak crosses the limit"], rows


def gpu_missing_backward(rng):
    # A missing backward keeps activations alive: GPU memory climbs linearly, OOM at step 6-7.
    limit = 24 * GiB
    rows = []
    for t in range(8):
        tokens = 12288 + rng.randint(-400, 400)
        end = 8 * GiB + 2.5 * GiB * t + rng.gauss(0, 30) * MiB
        peak = end + 3 * GiB + rng.gauss(0, 30) * MiB
        host = 5 * GiB + rng.gauss(0, 20) * MiB
        rows.append(row(t, host, end, host + 300 * MiB, peak, tokens, 32 * GiB, limit))
    return ["activations kept alive by a missing backward: GPU +2.5 GiB/step, 24 GiB device",
            "expect: a GPU decision (restart) before the step whose peak crosses the limit (6)"], rows


def host_steady_near_threshold(rng):
    limit = 4 * GiB
    rows = []
    for t in range(30):
        tokens = 2048 + rng.randint(-100, 100)
        end = 0.865 * limit + rng.gauss(0, 0.004) * limit
        peak = end + 0.012 * limit + rng.gauss(0, 0.002) * limit
        rows.append(row(t, end, 0, peak, 0, tokens, limit, 0))
    return ["steady at ~87% of the limit with noise, threshold 90%",
            "expect: no action at any step"], rows


def host_sawtooth(rng):
    # A cache that fills for five steps and is flushed: tops at 84%, never a trend.
    limit = 4 * GiB
    rows = []
    for t in range(30):
        phase = (t + 3) % 5
        tokens = 2048 + rng.randint(-100, 100)
        end = (0.60 + 0.06 * phase) * limit + rng.gauss(0, 0.003) * limit
        peak = end + 0.02 * limit
        rows.append(row(t, end, 0, peak, 0, tokens, limit, 0))
    return ["sawtooth: +6% of the limit per step for five steps, then a flush back to 60%",
            "expect: no action at any step (a naive linear extrapolation at the top would fire)"], rows


def host_warmup_plateau(rng):
    # Warm-up (optimizer state, allocator arenas) grows fast, then levels off at ~78%.
    limit = 4 * GiB
    rows = []
    for t in range(25):
        tokens = 2048 + rng.randint(-100, 100)
        frac = 0.78 - 0.38 * (0.5 ** t)
        end = frac * limit + rng.gauss(0, 0.002) * limit
        peak = end + 0.03 * limit
        rows.append(row(t, end, 0, peak, 0, tokens, limit, 0))
    return ["warm-up from 40% levelling off at 78%, threshold 90%",
            "expect: no action at any step"], rows


def gpu_capacity_steady(rng):
    # Flat state with activation peaks that follow a varying token count, all below the
    # threshold: the guard must follow the spikes without acting.
    limit = 80 * GiB
    rows = []
    for t in range(30):
        tokens = int(150000 + rng.uniform(-1, 1) * 60000)
        end = 45 * GiB + rng.gauss(0, 60) * MiB
        peak = end + 0.12 * MiB * tokens + rng.gauss(0, 60) * MiB
        host = 20 * GiB + rng.gauss(0, 30) * MiB
        rows.append(row(t, host, end, host + 512 * MiB, peak, tokens, 64 * GiB, limit))
    return ["GPU state flat at 45 GiB, activation peak 0.12 MiB/token with 90k-210k tokens (max ~70 GiB)",
            "expect: no action at any step"], rows


def host_warmup_steep(rng):
    # Modelled on a run the guard used to restart: the generation cache and optimizer state
    # fill over the first steps, +15, +11, +8 points of the limit per step (64% at step 3),
    # and level off at 84%. A restart only starts the warm-up again.
    limit = 16 * GiB
    rows = []
    for t in range(30):
        tokens = 8192 + rng.randint(-300, 300)
        frac = 0.84 - 0.54 * (0.73 ** t)
        end = frac * limit + rng.gauss(0, 0.002) * limit
        peak = end + 0.04 * limit + rng.gauss(0, 0.001) * limit
        rows.append(row(t, end, 0, peak, 0, tokens, limit, 0))
    return ["steep warm-up: +15, +11, +8 points per step (64% at step 3), levelling off at 84%",
            "expect: no action at any step (growth is slowing; the limit is never in reach)"], rows


def host_sawtooth_first_tooth(rng):
    # Modelled on a run the guard used to restart: a cache grows +8 points per step from 48%
    # to 80% and is collected every fifth step; the trace starts at the bottom of the first
    # tooth, so the guard sees a steady climb before it has seen any drop.
    limit = 8 * GiB
    rows = []
    for t in range(30):
        tokens = 4096 + rng.randint(-200, 200)
        end = (0.48 + 0.08 * (t % 5)) * limit + rng.gauss(0, 0.002) * limit
        peak = end + 0.02 * limit
        rows.append(row(t, end, 0, peak, 0, tokens, limit, 0))
    return ["sawtooth from its first tooth: 48% -> 80% at +8 points per step, collected every fifth step",
            "expect: no action at any step (at step 4, 80%, the next step stays below the limit)"], rows


def host_level_shift(rng):
    # A false alarm reported on real runs: host memory flat at 30% of 128 GiB jumps once by
    # 28% of the limit at step 4 (the first long batch; optimizer state; a cache sized
    # once) and stays at 58% for 55 steps. The guard used to restart at step 5 on a leak of
    # "17.6 GiB/step"; a restarted worker jumps again at the same step.
    limit = 128 * GiB
    gpu_limit = 80 * GiB
    rows = []
    for t in range(60):
        tokens = 6144 + rng.randint(-250, 250)
        frac = 0.30 + (0.28 if t >= 4 else 0.0)
        end = frac * limit + rng.gauss(0, 0.002) * limit
        peak = end + 0.02 * limit + rng.gauss(0, 0.001) * limit
        gpu = 0.55 * gpu_limit + rng.gauss(0, 0.001) * gpu_limit
        rows.append(row(t, end, gpu, peak, gpu + 0.03 * gpu_limit, tokens, limit, gpu_limit))
    return ["one jump, then a plateau: host flat at 30% of 128 GiB, +28% of the limit at step 4, flat at 58%",
            "expect: no action at any step; the reasons call the jump a level shift"], rows


def gpu_level_shift(rng):
    # The same on the GPU: reserved memory jumps by 35% of 80 GiB at step 6 (a KV cache
    # sized once) and stays at 66%; the guard used to call it "a leak confirmed over 10
    # steps" and restart at step 9.
    limit = 128 * GiB
    gpu_limit = 80 * GiB
    rows = []
    for t in range(60):
        tokens = 6144 + rng.randint(-250, 250)
        gpu = (0.31 + (0.35 if t >= 6 else 0.0)) * gpu_limit + rng.gauss(0, 0.002) * gpu_limit
        gpu_peak = gpu + 0.03 * gpu_limit + rng.gauss(0, 0.001) * gpu_limit
        host = 0.25 * limit + rng.gauss(0, 0.001) * limit
        rows.append(row(t, host, gpu, host + 0.01 * limit, gpu_peak, tokens, limit, gpu_limit))
    return ["one jump on the GPU: reserved flat at 31% of 80 GiB, +35% of the limit at step 6, flat at 66%",
            "expect: no action at any step; the reasons call the jump a level shift"], rows


TRACES = [host_leak_linear, host_staircase_offload, host_offload_fill, gpu_long_prompt_spike,
          host_gencache_fragmentation, gpu_missing_backward, host_steady_near_threshold,
          host_sawtooth, host_warmup_plateau, gpu_capacity_steady, host_warmup_steep,
          host_sawtooth_first_tooth, host_level_shift, gpu_level_shift]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for i, make in enumerate(TRACES):
        about, rows = make(random.Random(1000 + i))
        write(outdir, make.__name__, about, rows)


if __name__ == "__main__":
    main()
