#!/usr/bin/env python3
"""make_tokenizer_bytes.py: tests/fixtures/tokenizer_bytes, tests/fixtures/tokenizer cut to the
260 ids of the tiny FP8 MiniMax-M2 fixture (tests/fixtures/models/tiny_m2_fp8, vocab_size 260)
so that minimax-train can fine-tune it (tests/train/run_export.sh): four of the five special
tokens (ids 0-3; "<function_call>", which the chat template never writes, is left out), the
256-symbol byte-level alphabet (ids 4-259) and no merges (one token per byte).
tokenizer_config.json (its chat template, eos_token) is the source's less that token. Standard
library only:

    python3 tools/make_tokenizer_bytes.py
"""
import json
import os

SRC = "tests/fixtures/tokenizer"
OUT = "tests/fixtures/tokenizer_bytes"
VOCAB = 260

tok = json.load(open(os.path.join(SRC, "tokenizer.json")))
DROP = "<function_call>"
old = tok["model"]["vocab"]
gone = old[DROP]
vocab = {k: v - (v > gone) for k, v in old.items() if k != DROP and v < VOCAB + 1}
assert len(vocab) == VOCAB and sorted(vocab.values()) == list(range(VOCAB))
tok["model"]["vocab"] = vocab
tok["model"]["merges"] = []
tok["added_tokens"] = [t for t in tok["added_tokens"] if t["content"] != DROP]
assert all(vocab[t["content"]] == t["id"] for t in tok["added_tokens"])
cfg = json.load(open(os.path.join(SRC, "tokenizer_config.json")))
cfg["added_tokens_decoder"] = {k: v for k, v in cfg["added_tokens_decoder"].items() if v["content"] != DROP}
os.makedirs(OUT, exist_ok=True)
for name, obj in (("tokenizer.json", tok), ("tokenizer_config.json", cfg)):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
print(f"{OUT}: {len(vocab)} ids, no merges")
