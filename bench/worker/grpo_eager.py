#!/usr/bin/env python3
"""The baseline for bench/worker: one GRPO step in straightforward PyTorch eager.

Same model (a preset of worker/model/hf_causal_lm.h, core/spec/model_presets.h: Llama-style
pre-norm decoder, RMSNorm, rotary and learned absolute positions, q/k/v/o projections,
SwiGLU MLP, untied head, no biases, PyTorch's default init), same batch (reverse 3 digits, 16 prompts x 8 samples, prompt 5
tokens, up to 6 response tokens), a KV cache allocated once, temperature sampling, EOS
stop and masks, responses restricted to digits + EOS (as the worker's policy is), verl-style GRPO loss (token-mean), AdamW, grad-norm clip 1.0.
Prints one JSON object with the same keys grpo_step_bench prints.

On a GPU (--device cuda, bench/gpu/run.sh) the forwards run under bf16 autocast over fp32
weights, as the worker's do, with micro-batches of --micro-batch rows in the update, and
--compile wraps the model in torch.compile (PyTorch 2.x): the baselines a user would write.
"""
import argparse
import contextlib
import json
import math
import random
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS, VOCAB = 0, 1, 2, 32
# The response alphabet: EOS and the ten digits; everything else gets -inf.
ALLOWED = torch.full((VOCAB,), float("-inf"))
ALLOWED[2:13] = 0
PRESETS = {"tiny": (2, 64, 4, 256), "small": (6, 512, 8, 2048), "base": (18, 768, 12, 3072)}


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(h)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.ln1, self.ln2 = RMSNorm(h), RMSNorm(h)
        self.q, self.k, self.v, self.o = (nn.Linear(h, h, bias=False) for _ in range(4))
        self.gate, self.up, self.down = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False), nn.Linear(f, h, bias=False)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


class Model(nn.Module):
    def __init__(self, layers, h, heads, f, max_seq):
        super().__init__()
        self.h, self.heads, d = h, heads, h // heads
        self.tok, self.pos = nn.Embedding(VOCAB, h), nn.Embedding(max_seq, h)
        self.blocks = nn.ModuleList(Block(h, f) for _ in range(layers))
        self.norm, self.head = RMSNorm(h), nn.Linear(h, VOCAB, bias=False)
        # PyTorch's default initialisation, as the worker's model uses (worker/model/hf_causal_lm.h).
        self.register_buffer("mask", torch.full((max_seq, max_seq), float("-inf")).triu(1))
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
        freqs = torch.outer(torch.arange(max_seq).float(), inv_freq)
        emb = torch.cat((freqs, freqs), -1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, tokens, cache=None, start=0):
        b, t = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(start, start + t, device=tokens.device))
        cos, sin = self.cos[start:start + t, None, :], self.sin[start:start + t, None, :]
        for i, blk in enumerate(self.blocks):
            n1 = blk.ln1(x)
            q, k = blk.q(n1).view(b, t, self.heads, -1), blk.k(n1).view(b, t, self.heads, -1)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), blk.v(n1).view(b, t, self.heads, -1).transpose(1, 2)
            if cache is not None:
                cache[i, 0, :b, :, start:start + t] = k
                cache[i, 1, :b, :, start:start + t] = v
                k, v = cache[i, 0, :b, :, :start + t], cache[i, 1, :b, :, :start + t]
            att = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if t > 1:
                att = att + self.mask[start:start + t, :start + t]
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, self.h)
            x = x + blk.o(y)
            n2 = blk.ln2(x)
            x = x + blk.down(F.silu(blk.gate(n2)) * blk.up(n2))
        return self.head(self.norm(x))


def make_batch(step, prompts, group, digits):
    rng = random.Random(step)
    rows, answers = [], []
    for _ in range(prompts):
        d = [rng.randrange(10) for _ in range(digits)]
        rows += [[BOS] + [3 + x for x in d] + [15]] * group
        answers += [[3 + x for x in reversed(d)]] * group
    return torch.tensor(rows), answers


def reward(resp, answer):
    text = []
    for tok in resp:
        if tok == EOS:
            break
        text.append(tok)
    if EOS in resp and text == answer:
        return 1.0
    if not text:
        return 0.0
    matches = sum(a == b for a, b in zip(text, answer))
    return 0.5 * matches / max(len(text), len(answer))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def step(model, opt, cache, step_index, args):
    dev = torch.device(args.device)
    allowed = ALLOWED.to(dev)
    prompts, answers = make_batch(step_index, args.prompts, args.group, 3)
    prompts = prompts.to(dev)
    n, p, r = prompts.shape[0], prompts.shape[1], args.max_response
    sync(dev)
    t0 = time.perf_counter()
    with torch.no_grad(), autocast(dev):
        seq = torch.full((n, p + r), PAD, device=dev)
        seq[:, :p] = prompts
        mask = torch.zeros(n, r, device=dev)
        alive = torch.ones(n, dtype=torch.bool, device=dev)
        logits = model(prompts, cache, 0)[:, -1].float() + allowed
        for t in range(r):
            nxt = torch.multinomial(F.softmax(logits / args.temperature, -1), 1).squeeze(1)
            nxt = torch.where(alive, nxt, torch.full_like(nxt, PAD))
            seq[:, p + t] = nxt
            mask[:, t] = alive.float()
            alive = alive & (nxt != EOS)
            if not alive.any() or t == r - 1:
                break
            logits = model(nxt.unsqueeze(1), cache, p + t)[:, -1].float() + allowed
    sync(dev)
    t_rollout = time.perf_counter() - t0

    responses = seq[:, p:].tolist()
    rewards = torch.tensor([reward(responses[i], answers[i]) for i in range(n)], device=dev)
    g = rewards.view(-1, 8)
    adv = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-6)).view(-1, 1)

    # PAD after a stop is outside the response alphabet (-inf): read EOS there instead, as
    # the worker does, so masked positions stay finite (-inf * 0 would be NaN).
    targets = torch.where(seq[:, p:] == PAD, torch.full_like(seq[:, p:], EOS), seq[:, p:])

    def logprobs(rows):
        with autocast(dev):
            logits = model(seq[rows, :-1])[:, p - 1:].float() + allowed
        return torch.log_softmax(logits / args.temperature, -1).gather(-1, targets[rows].unsqueeze(-1)).squeeze(-1)

    micro = args.micro_batch or n
    batches = [slice(i, min(i + micro, n)) for i in range(0, n, micro)]
    t1 = time.perf_counter()
    with torch.no_grad():
        old = torch.cat([logprobs(b) for b in batches])
    sync(dev)
    t_logprob = time.perf_counter() - t1

    t2 = time.perf_counter()
    opt.zero_grad()
    tokens = mask.sum()
    for b in batches:  # token-mean over the whole batch, accumulated micro-batch by micro-batch
        ratio = torch.exp(torch.clamp(logprobs(b) - old[b], -20, 20))
        loss_mat = torch.maximum(-adv[b] * ratio, -adv[b] * torch.clamp(ratio, 0.8, 1.28))
        ((loss_mat * mask[b]).sum() / tokens).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sync(dev)
    t_update = time.perf_counter() - t2
    return t_rollout, t_logprob, t_update, n * (p + r), float(mask.sum())


def autocast(device):
    """bf16 autocast on CUDA (as the worker computes there); nothing on CPU."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-response", type=int, default=6)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=0, help="update rows per backward (0: the whole batch)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2.x)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    dev = torch.device(args.device)
    layers, h, heads, f = PRESETS[args.preset]
    model = Model(layers, h, heads, f, 5 + args.max_response).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, **({"fused": True} if dev.type == "cuda" else {}))
    if args.compile:
        model = torch.compile(model, dynamic=True)
    rows = args.prompts * args.group
    cache_dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32  # what autocast's k/v projections return
    cache = torch.zeros(layers, 2, rows, heads, 5 + args.max_response, h // heads, dtype=cache_dtype, device=dev)  # allocated once
    for s in range(args.warmup):
        step(model, opt, cache, s, args)
    total = rollout = logprob = update = 0.0
    tokens = generated = 0
    step_seconds = []
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for s in range(args.steps):
        t = time.perf_counter()
        ro, lp, up, tok, gen = step(model, opt, cache, args.warmup + s, args)
        step_seconds.append(time.perf_counter() - t)
        total += step_seconds[-1]
        rollout, logprob, update, tokens, generated = rollout + ro, logprob + lp, update + up, tokens + tok, generated + gen
    print(json.dumps({
        "impl": "python-compile" if args.compile else "python-eager", "preset": args.preset, "device": args.device, "threads": args.threads, "steps": args.steps,
        "parameters": sum(p.numel() for p in model.parameters()),
        "step_seconds_median": statistics.median(step_seconds), "step_seconds": total / args.steps, "rollout_seconds": rollout / args.steps,
        "logprob_seconds": logprob / args.steps, "update_seconds": update / args.steps,
        # The median step, as grpo_step_bench: a noisy neighbour moves the mean.
        "tokens_per_second": tokens / args.steps / statistics.median(step_seconds), "generated_tokens_per_step": generated / args.steps,
        "torch": torch.__version__,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if dev.type == "cuda" else 0,
    }))


if __name__ == "__main__":
    main()
