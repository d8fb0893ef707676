#!/usr/bin/python3
"""Writes qwen2-deep-long/: the long-prompt drill's model (configs/drill-long-prompts.yaml).
The example model's tokenizer and shape (configs/models/qwen2-tiny-addition, hidden 64, 4
heads), with LAYERS blocks instead of 2 and random weights (make_tiny_qwen2.py's
initialisation, same seed): the update keeps every block's activations for backward while
the rollout's prefill holds one block's at a time, so with depth a long batch's peak is the
update's micro-batch, which a token budget cuts. It knows nothing; the drill measures
memory, not learning.

    /usr/bin/python3 configs/models/make_deep_qwen2.py
"""
import json
import os
import shutil

import make_tiny_qwen2 as tiny

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "qwen2-deep-long")
LAYERS = 8


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copyfile(os.path.join(tiny.OUT, name), os.path.join(OUT, name))
    vocab_size, ids = tiny.tokenizer_facts()
    config = tiny.model_config(vocab_size, ids)
    config["num_hidden_layers"] = config["max_window_layers"] = LAYERS
    weights = tiny.random_weights(config)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(OUT, "model.safetensors"), "wb") as f:
        f.write(tiny.safetensors_bytes(weights))
    count = sum(t.numel() for t in weights.values())
    print(f"{OUT}: vocab {vocab_size}, {LAYERS} layers, {count} parameters")


if __name__ == "__main__":
    main()
