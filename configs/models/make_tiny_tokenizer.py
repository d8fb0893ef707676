#!/usr/bin/env python3
"""Trains the small byte-level BPE tokenizer of the example real job (qwen2-tiny-addition).

A real Qwen2 tokenizer has 151k entries; this one has 512, so the example job's model (and its
[tokens x vocab] logits) stays small enough for two CPU cores, while the tokenizer is built
exactly like Qwen2's: NFC normaliser, Qwen2's Split regex (isolated) then ByteLevel without
its own regex, ByteLevel decoder, and the chatml special tokens <|endoftext|> (padding),
<|im_start|>, <|im_end|> (end of turn). It is trained with Hugging Face `tokenizers` on the
example dataset's questions and answers rendered in chatml, so the model needs few tokens per
prompt. Writes into qwen2-tiny-addition/: tokenizer.json, tokenizer_config.json,
generation_config.json. `tokenizers` is not in Debian: this ran on a GPU machine that has it
(README, "The GPU worker"). The model weights are made separately (make_tiny_qwen2.py) with
vocab_size from this tokenizer.

    python3 configs/models/make_tiny_tokenizer.py
"""
import json
import os

import tokenizers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "qwen2-tiny-addition")
DATA = os.path.join(HERE, "..", "data", "addition-text", "train.jsonl")
VOCAB_SIZE = 512
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SYSTEMS = ["", "Please reason step by step, and put your final answer after ####.",
           "You are a helpful assistant."]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def texts():
    with open(DATA, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    for i, r in enumerate(records):
        system = SYSTEMS[i % len(SYSTEMS)]
        head = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
        yield head + f"<|im_start|>user\n{r['question']}<|im_end|>\n<|im_start|>assistant\n"
        yield r["answer"] + "<|im_end|>"


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = tokenizers.Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts(), trainer)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIALS}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "add_bos_token": False, "clean_up_tokenization_spaces": False, "model_max_length": 512,
        "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for t, i in ids.items()},
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    generation = {"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "pad_token_id": ids["<|endoftext|>"]}
    with open(os.path.join(OUT, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
        f.write("\n")
    print(f"vocab {tok.get_vocab_size()} specials {ids} (tokenizers {tokenizers.__version__})")


if __name__ == "__main__":
    main()
