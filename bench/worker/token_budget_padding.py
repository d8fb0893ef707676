#!/usr/bin/env python3
"""Padded tokens per step of the example text job (configs/addition-text-qwen2.yaml) cut
into micro-batches three ways: microBatchSize rows padded to the step's longest prompt
(the split without a budget), and grpo.maxTokensPerMicroBatch micro-batches trimmed to
their own lengths, in row order and sorted by length (core/memory/micro_batches.h, the
rule restated here; tests/core/micro_batches_test.cc holds the C++ to the same examples).

The prompts are the dataset's questions in the job's chatml format, tokenized by the
job's tokenizer (`headroom-worker tokenize`); every response is taken at its full
maxResponseLength (the reference answers are all longer than 8 tokens), so the budget's
gain here comes from prompt lengths alone.

usage: bench/worker/token_budget_padding.py BUILD_DIR [BUDGET ...]   (default 2048 4096)
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPTS, GROUP, MICRO, RESPONSE = 32, 8, 128, 8  # the job's grpo fields, one worker


def prompt_lengths(build):
    texts = []
    with open(os.path.join(ROOT, "configs/data/addition-text/train.jsonl")) as f:
        for line in f:
            q = json.loads(line)["question"]
            texts.append(json.dumps("<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"))
    out = subprocess.run([os.path.join(build, "bin/headroom-worker"), "tokenize", "--model",
                          os.path.join(ROOT, "configs/models/qwen2-tiny-addition")],
                         input="\n".join(texts) + "\n", capture_output=True, text=True, check=True).stdout
    return [len(json.loads(line)) for line in out.splitlines()]


def split(rows, budget, sort):
    order = sorted(range(len(rows)), key=lambda i: -sum(rows[i])) if sort else range(len(rows))
    groups, cur, p, q = [], [], 0, 0
    for i in order:
        pp, qq = max(p, rows[i][0]), max(q, rows[i][1])
        if cur and (len(cur) + 1 > MICRO or (len(cur) + 1) * (pp + qq) > budget):
            groups.append(cur)
            cur, (p, q) = [i], rows[i]
        else:
            cur.append(i)
            p, q = pp, qq
    return groups + [cur] if cur else groups


def padded(rows, g):
    return len(g) * (max(rows[i][0] for i in g) + max(rows[i][1] for i in g))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    budgets = [int(b) for b in sys.argv[2:]] or [2048, 4096]
    lengths = prompt_lengths(build)
    steps = len(lengths) // PROMPTS
    print(f"{len(lengths)} prompts of {min(lengths)}..{max(lengths)} tokens, {steps} steps of "
          f"{PROMPTS} x {GROUP} rows, responses {RESPONSE}, microBatchSize {MICRO}")
    for budget in budgets:
        total = {"rows": 0, "unsorted": 0, "sorted": 0, "real": 0}
        largest = {"rows": 0, "unsorted": 0, "sorted": 0}
        for s in range(steps):
            rows = [(lengths[i], RESPONSE) for i in range(s * PROMPTS, (s + 1) * PROMPTS) for _ in range(GROUP)]
            longest = max(r[0] for r in rows) + RESPONSE
            for k in range(0, len(rows), MICRO):
                n = min(MICRO, len(rows) - k)
                total["rows"] += n * longest
                largest["rows"] = max(largest["rows"], n * longest)
            for name, sort in (("unsorted", False), ("sorted", True)):
                for g in split(rows, budget, sort):
                    total[name] += padded(rows, g)
                    largest[name] = max(largest[name], padded(rows, g))
            total["real"] += sum(a + b for a, b in rows)
        per = {k: v / steps for k, v in total.items()}
        print(f"budget {budget}: padded tokens per step: rows {per['rows']:.0f}, budget unsorted "
              f"{per['unsorted']:.0f}, budget sorted {per['sorted']:.0f} (real {per['real']:.0f}); padding "
              f"{1 - per['real'] / per['rows']:.1%} / {1 - per['real'] / per['unsorted']:.1%} / "
              f"{1 - per['real'] / per['sorted']:.1%}; largest micro-batch {largest['rows']} / "
              f"{largest['unsorted']} / {largest['sorted']} tokens")


if __name__ == "__main__":
    main()
