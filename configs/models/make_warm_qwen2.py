#!/usr/bin/python3
"""Writes the example real job's starting model, qwen2-tiny-addition/model.safetensors: the
randomly initialised Qwen2ForCausalLM of make_tiny_qwen2.py after a short supervised warm-up,
so that it half knows the task when GRPO starts, as a pretrained or instruction-tuned model
does in real fine-tuning.

The warm-up reads configs/data/addition-text/warmup.jsonl, a split of its own that shares no
question with train.jsonl or heldout.jsonl (make_addition_text.py), renders each question as
the job does (chatml, no system message), and trains on the answer alone ("14" then
<|im_end|>) with cross-entropy over the response tokens: AdamW, a fixed number of steps from a
fixed seed, stopped early on purpose so that the model answers some held-out questions right
and is unsure of the rest. It prints the greedy exact accuracy on each split; the job's
worker measures the held-out one again before its first step.

Needs only Debian's python3-torch (apt-get install python3-torch). The tokenizer is the
byte-level BPE of tokenizer.json, applied here for ASCII text (all this dataset has); the
model is the same equations as transformers' Qwen2 (and worker/model/hf_causal_lm.cc). The
same torch on the same CPU writes the same bytes; another CPU's float rounding may differ in
the last bits.

    /usr/bin/python3 configs/models/make_tiny_qwen2.py   # config.json (and random weights)
    /usr/bin/python3 configs/models/make_warm_qwen2.py   # model.safetensors, warmed up
"""
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_qwen2  # noqa: E402  (the random initialisation and the safetensors writer)

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "qwen2-tiny-addition")
DATA = os.path.join(HERE, "..", "data", "addition-text")
SEED = 20261128
STEPS = 80
BATCH = 32
LEARNING_RATE = 3e-3
MAX_NEW_TOKENS = 8  # the job's grpo.maxResponseLength

# The pre-tokenizer's regex (tokenizer.json) with \p{L} and \p{N} narrowed to ASCII.
PRETOKENIZE = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*"
                         r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_to_unicode():
    """GPT-2's byte-level alphabet: every byte as a printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class Tokenizer:
    def __init__(self, directory):
        with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
        self.vocab = dict(tok["model"]["vocab"])
        self.special = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tok["model"]["merges"]]
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.bytes = byte_to_unicode()
        self.split = re.compile("(" + "|".join(re.escape(s) for s in self.special) + ")")

    def bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == math.inf:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return [self.vocab[p] for p in parts]

    def encode(self, text):
        assert text.isascii(), "this tokenizer port handles ASCII text only"
        ids = []
        for piece in self.split.split(text):
            if piece in self.special:
                ids.append(self.special[piece])
                continue
            for word in PRETOKENIZE.findall(piece):
                ids += self.bpe("".join(self.bytes[b] for b in word.encode()))
        return ids

    def decode(self, ids):
        inverse = {v: k for k, v in self.vocab.items()}
        to_byte = {c: b for b, c in self.bytes.items()}
        return bytes(to_byte[c] for i in ids if i in inverse for c in inverse[i]).decode(errors="replace")


def chatml(question):
    # worker/tasks/chat_prompt.h, chatml with an empty system message.
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def read(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def reference(record):
    return record["answer"].split("####")[-1].strip()


class Qwen2:
    """Qwen2ForCausalLM's forward (tied embeddings, q/k/v biases, rotary, GQA, SwiGLU)."""

    def __init__(self, config, weights):
        self.c, self.w = config, weights
        self.heads, self.kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        self.head_dim = config["hidden_size"] // self.heads

    def rms_norm(self, x, weight):
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"]))

    def rotary(self, positions):
        d = self.head_dim
        inv = 1.0 / (self.c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        freqs = positions.float()[..., None] * inv
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos()[:, None], emb.sin()[:, None]  # [batch, 1, seq, d]

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

    def forward(self, ids, positions, mask):
        """ids, positions [B, T]; mask [B, 1, T, T] bool (True = may attend). Logits [B, T, V]."""
        w, B, T = self.w, ids.shape[0], ids.shape[1]
        x = w["model.embed_tokens.weight"][ids]
        cos, sin = self.rotary(positions)
        for i in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[p + "self_attn.q_proj.weight"], w[p + "self_attn.q_proj.bias"])
            k = F.linear(h, w[p + "self_attn.k_proj.weight"], w[p + "self_attn.k_proj.bias"])
            v = F.linear(h, w[p + "self_attn.v_proj.weight"], w[p + "self_attn.v_proj.bias"])
            q = q.view(B, T, self.heads, self.head_dim).transpose(1, 2)
            k = k.view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            v = v.view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(~mask, float("-inf"))
            a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + F.linear(a, w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            gate = F.linear(h, w[p + "mlp.gate_proj.weight"])
            up = F.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(gate) * up, w[p + "mlp.down_proj.weight"])
        x = self.rms_norm(x, w["model.norm.weight"])
        return x @ w["model.embed_tokens.weight"].t()


def left_padded(rows, pad):
    """Rows of ids left-padded to one length: ids, positions counted from each row's first
    real token, and a causal mask that never attends to padding."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    real = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r)
        real[i, width - len(r):] = True
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)
    causal = torch.tril(torch.ones(width, width, dtype=torch.bool))
    mask = causal[None, None] & real[:, None, None, :]
    mask |= torch.eye(width, dtype=torch.bool)[None, None]  # a padding row attends to itself
    return ids, positions, mask


def greedy_accuracy(model, tok, records, stops, pad):
    """Exact accuracy of greedy answers (the last number of the response, as the gsm8k reward
    reads it), and the answers."""
    with torch.no_grad():
        rows = [tok.encode(chatml(r["question"])) for r in records]
        done = [False] * len(rows)
        out = [[] for _ in rows]
        for _ in range(MAX_NEW_TOKENS):
            ids, positions, mask = left_padded([r + o for r, o in zip(rows, out)], pad)
            nxt = model.forward(ids, positions, mask)[:, -1].argmax(-1).tolist()
            for i, t in enumerate(nxt):
                if done[i]:
                    continue
                if t in stops:
                    done[i] = True
                else:
                    out[i].append(t)
        # A finished row keeps being fed its own text; its answer is fixed once it stopped.
    answers = [tok.decode(o) for o in out]
    right = 0
    for r, a in zip(records, answers):
        numbers = re.findall(r"-?[0-9]+", a)
        right += bool(numbers) and numbers[-1] == reference(r)
    return right / len(records), answers


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # one summation order: the same bytes on every run
    vocab_size, ids = make_tiny_qwen2.tokenizer_facts()
    config = make_tiny_qwen2.model_config(vocab_size, ids)
    weights = {k: v.clone().requires_grad_(True) for k, v in make_tiny_qwen2.random_weights(config).items()}
    model = Qwen2(config, weights)
    tok = Tokenizer(MODEL)
    eos, pad = config["eos_token_id"], ids["<|endoftext|>"]
    stops = {eos, pad}
    warmup, train, heldout = read("warmup.jsonl"), read("train.jsonl"), read("heldout.jsonl")
    seen = {r["question"] for r in warmup}
    assert not seen & {r["question"] for r in train + heldout}, "warm-up questions must be neither trained nor held out"

    examples = []
    for r in warmup:
        prompt = tok.encode(chatml(r["question"]))
        examples.append((prompt, tok.encode(reference(r)) + [eos]))
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(weights.values(), lr=LEARNING_RATE, weight_decay=0.0)
    for step in range(STEPS):
        batch = [examples[i] for i in torch.randint(len(examples), (BATCH,), generator=gen).tolist()]
        rows = [p + a for p, a in batch]
        ids_, positions, mask = left_padded(rows, pad)
        logits = model.forward(ids_, positions, mask)
        width = ids_.shape[1]
        target = torch.full_like(ids_, -100)
        for i, (p, a) in enumerate(batch):
            target[i, width - len(a) - 1:width - 1] = torch.tensor(a)  # logits at t predict token t + 1
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 10 == 0:
            print(f"step {step + 1}: loss {loss.item():.4f}")

    for name, records in (("warm-up", warmup), ("train", train[:200]), ("held-out", heldout)):
        accuracy, answers = greedy_accuracy(model, tok, records, stops, pad)
        print(f"{name}: greedy exact accuracy {100 * accuracy:.1f}% ({len(records)} questions); "
              f"first answers {answers[:3]}")
    final = {k: v.detach() for k, v in weights.items()}
    with open(os.path.join(MODEL, "model.safetensors"), "wb") as f:
        f.write(make_tiny_qwen2.safetensors_bytes(final))
    print(f"{MODEL}/model.safetensors: {sum(t.numel() for t in final.values())} parameters, "
          f"{STEPS} warm-up steps of {BATCH}")


if __name__ == "__main__":
    main()
