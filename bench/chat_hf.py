#!/usr/bin/env python3
"""bench/chat_hf.py: transformers' apply_chat_template on the work of build/bench-chat (the peer of
bench/chat_vs_hf.sh).

Every record of a GSM8K-style JSONL file ({"question", "answer"}) becomes the conversation
[{"role": "user", "content": question}, {"role": "assistant", "content": answer}] (no system, no
tools, no template kwargs) and goes through
    tokenizer.apply_chat_template(messages, chat_template=<the template file's text>,
                                  tokenize=True, add_generation_prompt=False)
(render with jinja2 in transformers' sandbox, then the Rust tokenizer, add_special_tokens=False),
one record per call, on one thread (OMP_NUM_THREADS=1, RAYON_NUM_THREADS=1,
TOKENIZERS_PARALLELISM=false are set before the imports; torch is not needed). Only the loop is
timed: the tokenizer, the template and the records are loaded first, and one call renders record 1
beforehand so that the template is compiled (transformers caches the compiled template). No labels
are computed (the mask rule is tools/make_chat_fixtures.py's).

Prints exactly one line on stdout:
    PEER chat: <records> records in <seconds> s, <records/s> records/s
(and the token count on stderr).

usage: chat_hf.py --tokenizer DIR --chat-template FILE --data FILE [--limit N] [--any-version]
The versions below are pinned: other versions are refused unless --any-version is given.
"""
import argparse
import json
import os
import sys
import time

for _k, _v in (("OMP_NUM_THREADS", "1"), ("RAYON_NUM_THREADS", "1"), ("TOKENIZERS_PARALLELISM", "false"),
               ("TRANSFORMERS_VERBOSITY", "error")):
    os.environ[_k] = _v

PINNED = {"transformers": "5.24.0", "tokenizers": "0.23.3", "jinja2": "3.1.6"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizer_m2")
    ap.add_argument("--chat-template", default="../shared/templates/MiniMax-M2.jinja")
    ap.add_argument("--data", default="../shared/data/gsm8k/train.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="only the first N records (0: all)")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()

    import jinja2
    import tokenizers
    import transformers
    from transformers import AutoTokenizer
    have = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "jinja2": jinja2.__version__}
    if have != PINNED and not args.any_version:
        sys.exit(f"chat_hf.py: pinned {PINNED}, found {have} (--any-version to override)")

    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    with open(args.chat_template, encoding="utf-8") as f:
        template = f.read()
    convs = []
    with open(args.data, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            s = json.loads(line)
            convs.append([{"role": "user", "content": s["question"]},
                          {"role": "assistant", "content": s["answer"]}])
            if args.limit and len(convs) == args.limit:
                break
    if not convs:
        sys.exit(f"chat_hf.py: no records in {args.data}")
    tok.apply_chat_template(convs[0], chat_template=template, tokenize=True)  # compiles the template

    n_tokens = 0
    t0 = time.perf_counter()
    for msgs in convs:
        n_tokens += len(tok.apply_chat_template(msgs, chat_template=template, tokenize=True,
                                                add_generation_prompt=False)["input_ids"])
    dt = time.perf_counter() - t0

    print(f"chat_hf.py: transformers {have['transformers']}, tokenizers {have['tokenizers']}, jinja2 "
          f"{have['jinja2']}: {n_tokens} tokens", file=sys.stderr)
    print(f"PEER chat: {len(convs)} records in {dt:.3f} s, {len(convs) / dt:.1f} records/s", flush=True)


if __name__ == "__main__":
    main()
