#!/usr/bin/python3
"""Writes addition-text/train.jsonl and heldout.jsonl: addition questions written as text, in
GSM8K's form (the reference answer after "####"), for the example real job
(configs/addition-text-qwen2.yaml) and its end-to-end test.

Operands are single digits so that a small model trained from random weights on two CPU cores
earns rewards within a short run; the phrasings differ in length so prompts of a batch have
different token counts (left padding is exercised). Deterministic: same output every run.

    /usr/bin/python3 configs/data/make_addition_text.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "addition-text")

PHRASINGS = [
    "What is {a} + {b}?",
    "What is {a} plus {b}?",
    "Add {a} and {b}.",
    "Compute {a} + {b}.",
    "Tom has {a} apples and gets {b} more. How many apples does he have now?",
    "A box holds {a} red balls and {b} blue balls. How many balls are in the box?",
]


def record(rng):
    a, b = rng.randrange(10), rng.randrange(10)
    question = rng.choice(PHRASINGS).format(a=a, b=b)
    return {"question": question, "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}


def write(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20261126)
    write(os.path.join(OUT, "train.jsonl"), [record(rng) for _ in range(2000)])
    write(os.path.join(OUT, "heldout.jsonl"), [record(rng) for _ in range(200)])


if __name__ == "__main__":
    main()
