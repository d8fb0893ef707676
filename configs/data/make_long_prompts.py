#!/usr/bin/python3
"""Writes long-prompts/train.jsonl for the long-prompt drill (configs/drill-long-prompts.yaml):
short addition questions ("What is 3 + 6?", about 16 tokens once the chat format wraps them,
with configs/models/qwen2-tiny-addition's tokenizer) where about 1 prompt in 50 carries a
long preamble, 20 to 30 times the typical prompt (about 350 to 480 tokens), as one long
prompt in a dataset of short ones meets a batch shape sized for the short ones.

The worker visits a dataset in an order shuffled per epoch from task.seed
(worker/tasks/jsonl_dataset.h, DatasetOrder: a Fisher-Yates shuffle drawn from SplitMix64
counters, replicated below), so the long prompts are placed at the positions that order
visits at global indices FIRST_LONG, FIRST_LONG + 50, ...: with the drill's seed and 4
prompts a step, the first long batch is step 11 (the 11th step), after ten short ones.
Deterministic: the same output every run.

    /usr/bin/python3 configs/data/make_long_prompts.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "long-prompts")
RECORDS = 500
SEED = 1  # the drill's task.seed
EVERY = 50  # one long prompt in EVERY
FIRST_LONG = 41  # the global index of the first: step 11 at 4 prompts a step
MASK = (1 << 64) - 1

# A sentence of about 57 tokens with the drill model's tokenizer; a long prompt repeats it
# 6 to 8 times (about 350 to 470 tokens with the question and the chat format).
FILLER = "Tom has 3 cups. Ann puts 4 more cups on the shelf, and the cups stay there all day. "


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def mix_key(a, b, c=0, d=0):
    return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d)


def permutation(size, seed, epoch):
    """DatasetOrder::Permutation (worker/tasks/jsonl_dataset.cc)."""
    order = list(range(size))
    key = mix_key(seed, 0x6461746173657421, epoch)
    counter = 0
    for i in range(size - 1, 0, -1):
        counter += 1
        value = splitmix64((key + 0x632BE59BD9B4E019 * counter) & MASK)
        j = value % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def main():
    rng = random.Random(20261129)
    order = permutation(RECORDS, SEED, 0)
    long_records = {order[g] for g in range(FIRST_LONG, RECORDS, EVERY)}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "train.jsonl"), "w", encoding="utf-8") as f:
        for i in range(RECORDS):
            a, b = rng.randint(0, 9), rng.randint(0, 9)
            question = f"What is {a} + {b}?"
            if i in long_records:
                question = FILLER * rng.randint(6, 8) + question
            f.write(json.dumps({"question": question, "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}) + "\n")


if __name__ == "__main__":
    main()
