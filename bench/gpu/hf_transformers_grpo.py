#!/usr/bin/env python3
"""The baseline for bench/gpu: the GRPO step a user would write with transformers.

Same shape as build/bin/hf_grpo_bench --device cuda: Qwen2ForCausalLM of Qwen2.5-0.5B's
shape (hidden 896, 24 layers, 14 / 2 heads, intermediate 4864, vocabulary 151,936, tied
head), random weights, fp32 master weights under bf16 autocast; 16 prompts x 4 samples of
5 prompt tokens; model.generate sampled at temperature 1 (no top-k / top-p, EOS never
ends a response, so every response is full length); old and reference log-probs without
gradients; the clipped surrogate (0.8 .. 1.2) + klCoef x k3 KL, token-mean, in
micro-batches of 8; grad-norm clip 1.0; fused AdamW. Rewards: the share of even token ids
in a response (a real function of the sample), advantages normalised within each group.

Prints one JSON object: tokens/s (prompt + response tokens of a step / median step time),
rollout / log-prob / update seconds, decode ms per token (rollout / response length) and
the allocator's peak allocated and reserved GPU memory over the timed steps.
"""
import argparse
import copy
import json
import statistics
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

GROUP = 4


def qwen_0_5b_config(layers, vocab):
    return Qwen2Config(vocab_size=vocab, hidden_size=896, intermediate_size=4864, num_hidden_layers=layers,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)


def response_log_probs(model, sequences, prompt_length, micro):
    """[B, R] log-probability of each response token; the caller decides about gradients."""
    out = []
    for i in range(0, sequences.shape[0], micro):
        s = sequences[i:i + micro]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(s).logits[:, prompt_length - 1:-1]
        out.append(torch.log_softmax(logits.float(), -1).gather(-1, s[:, prompt_length:, None]).squeeze(-1))
    return torch.cat(out)


def group_advantages(responses):
    rewards = (responses % 2 == 0).float().mean(1).view(-1, GROUP)
    return ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)).view(-1)


def update(model, optimizer, sequences, prompt_length, old, ref, advantages, micro, kl_coef):
    n = sequences.shape[0]
    for i in range(0, n, micro):
        lp = response_log_probs(model, sequences[i:i + micro], prompt_length, micro)
        ratio = torch.exp(lp - old[i:i + micro])
        adv = advantages[i:i + micro, None]
        surrogate = -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        log_ratio_ref = ref[i:i + micro] - lp
        kl = torch.exp(log_ratio_ref) - log_ratio_ref - 1
        loss = (surrogate + kl_coef * kl).mean() * (lp.shape[0] / n)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def step(model, ref_model, optimizer, prompts, args):
    times = {}
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        sequences = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, temperature=1.0,
                                   top_k=0, top_p=1.0, max_new_tokens=args.response_length,
                                   min_new_tokens=args.response_length, eos_token_id=None, pad_token_id=0)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    p = prompts.shape[1]
    with torch.no_grad():
        old = response_log_probs(model, sequences, p, args.micro_batch)
        ref = response_log_probs(ref_model, sequences, p, args.micro_batch)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    update(model, optimizer, sequences, p, old, ref, group_advantages(sequences[:, p:]), args.micro_batch, args.kl)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    times.update(step=t3 - t0, rollout=t1 - t0, logprob=t2 - t1, update=t3 - t2)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--batch", type=int, default=64, help="sequences per step (prompts x 4)")
    ap.add_argument("--prompt-length", type=int, default=5)
    ap.add_argument("--response-length", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--kl", type=float, default=0.001)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.batch % GROUP:
        ap.error("--batch must be a multiple of 4 (groups of 4 samples)")
    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    model = Qwen2ForCausalLM(qwen_0_5b_config(args.layers, args.vocab)).to(device)
    model.generation_config.eos_token_id = None
    ref_model = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
    prompts = torch.randint(3, args.vocab, (args.batch // GROUP, args.prompt_length), device=device)
    prompts = prompts.repeat_interleave(GROUP, 0)
    for _ in range(args.warmup):
        step(model, ref_model, optimizer, prompts, args)
    torch.cuda.reset_peak_memory_stats()
    runs = [step(model, ref_model, optimizer, prompts, args) for _ in range(args.steps)]
    med = lambda k: statistics.median(r[k] for r in runs)
    tokens = args.batch * (args.prompt_length + args.response_length)
    print(json.dumps({
        "impl": "transformers", "device": torch.cuda.get_device_name(), "layers": args.layers,
        "sequences": args.batch, "response_length": args.response_length, "steps": args.steps,
        "tokens_per_second": tokens / med("step"), "step_seconds": med("step"),
        "rollout_seconds": med("rollout"), "logprob_seconds": med("logprob"), "update_seconds": med("update"),
        "decode_ms_per_token": 1000 * med("rollout") / args.response_length,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
    }))


if __name__ == "__main__":
    main()
