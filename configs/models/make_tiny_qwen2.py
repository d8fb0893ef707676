#!/usr/bin/python3
"""Writes the weights of the example real job's model (qwen2-tiny-addition): a randomly
initialised Qwen2ForCausalLM sized for two CPU cores, whose vocabulary is the small tokenizer
beside it (make_tiny_tokenizer.py wrote tokenizer.json, tokenizer_config.json and
generation_config.json).

Writes qwen2-tiny-addition/config.json and model.safetensors: hidden 64, 2 layers, 4 heads
(head_dim 16), 2 key/value heads, tied embeddings, vocab_size = the tokenizer's highest id + 1.
Initialised as transformers initialises Qwen2 (Qwen2PreTrainedModel._init_weights): linear and
embedding weights normal(0, 0.02), biases 0, RMSNorm weights 1, from a fixed seed, so the
output is the same on every run of the same torch. These random weights know nothing;
make_warm_qwen2.py starts from the same initialisation (random_weights below, in memory),
warms it up on its own split of the dataset and writes the model.safetensors that is
committed, which the example job and its end-to-end test (tests/e2e/text_job_test.cc)
train with GRPO. Run this one for config.json, then make_warm_qwen2.py.

The safetensors file is written by hand (8-byte little-endian header length, JSON header, raw
little-endian float32 data), as tests/worker/fixtures/hf/make_fixtures.py does, so this needs
only Debian's python3-torch.

    /usr/bin/python3 configs/models/make_tiny_qwen2.py
"""
import json
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "qwen2-tiny-addition")
SEED = 20261126
STD = 0.02


def tokenizer_facts():
    """(vocab size, id of token text) from tokenizer.json and tokenizer_config.json."""
    with open(os.path.join(OUT, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    ids = dict(tok["model"]["vocab"])
    for added in tok.get("added_tokens", []):
        ids[added["content"]] = added["id"]
    return max(ids.values()) + 1, ids


def token_name(config_value):
    return config_value["content"] if isinstance(config_value, dict) else config_value


def model_config(vocab_size, ids):
    with open(os.path.join(OUT, "tokenizer_config.json"), encoding="utf-8") as f:
        tok_config = json.load(f)
    eos = ids[token_name(tok_config["eos_token"])]
    pad = token_name(tok_config.get("pad_token"))
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "vocab_size": vocab_size, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "rope_scaling": None, "tie_word_embeddings": True, "hidden_act": "silu",
        "use_sliding_window": False, "sliding_window": 512, "max_window_layers": 2,
        "attention_dropout": 0.0, "initializer_range": STD, "use_cache": True,
        # As Qwen2.5-Instruct's config: bos is <|endoftext|>, eos the end of turn.
        "bos_token_id": ids[pad] if pad else eos, "eos_token_id": eos,
        "torch_dtype": "float32", "transformers_version": "4.45.0",
    }


def random_weights(config):
    gen = torch.Generator().manual_seed(SEED)
    h, inter, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    d = h // nh

    def normal(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32) * STD

    w = {"model.embed_tokens.weight": normal(v, h)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = torch.ones(h)
        w[p + "self_attn.q_proj.weight"] = normal(nh * d, h)
        w[p + "self_attn.q_proj.bias"] = torch.zeros(nh * d)
        w[p + "self_attn.k_proj.weight"] = normal(nkv * d, h)
        w[p + "self_attn.k_proj.bias"] = torch.zeros(nkv * d)
        w[p + "self_attn.v_proj.weight"] = normal(nkv * d, h)
        w[p + "self_attn.v_proj.bias"] = torch.zeros(nkv * d)
        w[p + "self_attn.o_proj.weight"] = normal(h, nh * d)
        w[p + "post_attention_layernorm.weight"] = torch.ones(h)
        w[p + "mlp.gate_proj.weight"] = normal(inter, h)
        w[p + "mlp.up_proj.weight"] = normal(inter, h)
        w[p + "mlp.down_proj.weight"] = normal(h, inter)
    w["model.norm.weight"] = torch.ones(h)
    return w


def safetensors_bytes(tensors):
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        raw = tensors[name].to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header so data starts 8-aligned
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def main():
    vocab_size, ids = tokenizer_facts()
    config = model_config(vocab_size, ids)
    weights = random_weights(config)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(OUT, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(weights))
    count = sum(t.numel() for t in weights.values())
    print(f"{OUT}: vocab {vocab_size}, {count} parameters")


if __name__ == "__main__":
    main()
