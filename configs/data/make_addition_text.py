#!/usr/bin/python3
"""Writes addition-text/train.jsonl, heldout.jsonl and warmup.jsonl: addition questions written
as text, in GSM8K's form (the reference answer after "####"), for the example real job
(configs/addition-text-qwen2.yaml) and its end-to-end test.

Operands are single digits so that a small model on two CPU cores can learn them within a
short run; six phrasings, two of them with a name, things and colours drawn at random,
differ in length, so prompts of a batch have different token counts (left padding is
exercised), and few questions repeat. Three splits that share no question:
  heldout.jsonl   200 questions, each once: what the job scores its model on;
  warmup.jsonl    1,000 questions, each once: the supervised warm-up that makes the starting
                  model (configs/models/make_warm_qwen2.py), so the model has never seen a
                  question it is trained or scored on;
  train.jsonl     2,000 records of questions in neither: what GRPO trains on (a question may
                  repeat here, as the short phrasings have only 100 each).
The splits share the sums, not the questions: "What is 3 + 6?" may be held out while
"Add 3 and 6." is trained on. Deterministic: same output every run.

    /usr/bin/python3 configs/data/make_addition_text.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "addition-text")
HELDOUT, WARMUP, TRAIN_RECORDS = 200, 1000, 2000

NAMES = ["Tom", "Ann", "Sam", "Lily", "Ben", "Mia", "Omar", "Zoe"]
THINGS = ["apples", "pens", "cards", "shells", "coins", "books", "stamps", "cups"]
COLORS = ["red", "blue", "green", "white", "black", "yellow"]
PHRASINGS = [
    "What is {a} + {b}?",
    "What is {a} plus {b}?",
    "Add {a} and {b}.",
    "Compute {a} + {b}.",
    "{name} has {a} {things} and gets {b} more. How many {things} does {name} have now?",
    "A box holds {a} {color} {things} and {b} {other} {things}. How many {things} are in the box?",
]


def question(rng):
    a, b = rng.randrange(10), rng.randrange(10)
    color, other = rng.sample(COLORS, 2)
    text = rng.choice(PHRASINGS).format(a=a, b=b, name=rng.choice(NAMES), things=rng.choice(THINGS), color=color,
                                        other=other)
    return text, a, b


def record(text, a, b):
    return {"question": text, "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}


def write(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20261126)
    used = set()

    def split(count, distinct):
        """count questions none of the earlier splits has; each once when distinct."""
        out, mine = [], set()
        while len(out) < count:
            q = question(rng)
            if q[0] in used or (distinct and q[0] in mine):
                continue
            mine.add(q[0])
            out.append(q)
        used.update(mine)
        return out

    heldout = split(HELDOUT, distinct=True)
    warmup = split(WARMUP, distinct=True)
    train = split(TRAIN_RECORDS, distinct=False)
    write(os.path.join(OUT, "heldout.jsonl"), [record(*q) for q in heldout])
    write(os.path.join(OUT, "warmup.jsonl"), [record(*q) for q in warmup])
    write(os.path.join(OUT, "train.jsonl"), [record(*q) for q in train])


if __name__ == "__main__":
    main()
