#!/usr/bin/env python3
"""make_template_fixtures.py: reference renderings of the MiniMax-Text-01 chat template.

For a handful of GSM8K-like conversations (with and without a system turn, multi-turn, the
generation prompt, Unicode, whitespace at the span edges, special-token look-alikes) this writes
what transformers' apply_chat_template produces with the test tokenizer:
  rendered          apply_chat_template(tokenize=False)
  input_ids         apply_chat_template(tokenize=True) (add_special_tokens=False, as transformers does)
  assistant_masks   return_assistant_tokens_mask=True (from the template's {% generation %} block)
into tests/fixtures/template/chat_cases.json, which tests/data/data_chat.c (data_chat_text01)
compares against the Jinja engine's renders and the sample builder (data/chat.h, data/sample.h), and
tests/apps/data_cli.c (data_cli_render) against `minimax-data render`.

Run from the repository root:
    /work/pyref/bin/python tools/make_template_fixtures.py
Options: --tokenizer DIR (default tests/fixtures/tokenizer), --out FILE.
The versions below are pinned: other versions are refused unless --any-version is given.
"""
import argparse
import json
import os
import sys

PINNED = {"transformers": "5.24.0", "tokenizers": "0.23.3", "jinja2": "3.1.6"}

SYSTEM = "You are a helpful assistant that solves grade-school math problems step by step."

Q1 = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
      "May. How many clips did Natalia sell altogether in April and May?")
A1 = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
      "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")
A1_STRIPPED = ("Natalia sold 48/2 = 24 clips in May.\n"
               "Natalia sold 48+24 = 72 clips altogether in April and May.\n#### 72")
Q2 = ("Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
      "How much did she earn?")
A2 = ("Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n"
      "Working 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10")


def conv(*turns):
    return [{
    "role" : r, "text" : t} for r, t in turns]


CASES = [
    ("gsm8k_user_assistant", conv(("user", Q1), ("assistant", A1)), False),
    ("gsm8k_system", conv(("system", SYSTEM), ("user", Q2), ("assistant", A2)), False),
    ("gsm8k_stripped", conv(("user", Q1), ("assistant", A1_STRIPPED)), False),
    ("multi_turn", conv(("system", SYSTEM), ("user", Q1), ("assistant", A1), ("user", Q2),
                        ("assistant", A2)), False),
    ("generation_prompt", conv(("system", SYSTEM), ("user", Q2)), True),
    ("generation_prompt_no_system", conv(("user", Q1)), True),
    ("unicode", conv(("user", "Ein Caf\u00e9 verkauft 12 Croissants zu je 3 \u5143 \U0001f950. "
                              "Wie viel kosten sie? Na\u0308he, \u0646\u0635"),
                     ("assistant", "12 \u00d7 3 = <<12*3=36>>36 \u5143 \U0001f950\n#### 36")), False),
    ("whitespace_edges", conv(("user", "  What is 1234567890 + 9876543210?\t\n"),
                              ("assistant", "  1234567890 + 9876543210 = "
                                            "<<1234567890+9876543210=11111111100>>11111111100\n\n"
                                            "#### 11111111100  ")), False),
    ("special_lookalikes", conv(("system", "Answer <end_of_sentence and nothing else>"),
                                ("user", "Is <beginning_of_sentence> a token? 2*3?"),
                                ("assistant", "2*3 = <<2*3=6>>6 <end_of_sentence> <<\n#### 6")),
     False),
]


def hf_messages(c):
#The MiniMax template indexes content[0]['text'] : content is a list of parts.
    return [{
    "role" : m["role"], "content" : [ {"type" : "text", "text" : m["text"]} ]} for m in c]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizer")
    ap.add_argument("--out", default="tests/fixtures/template/chat_cases.json")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()

    import jinja2
    import tokenizers
    import transformers
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    have = {
    "transformers" : transformers.__version__, "tokenizers" : tokenizers.__version__,
        "jinja2" : jinja2.__version__}
    if have != PINNED and not args.any_version:
        sys.exit(f"make_template_fixtures: pinned {PINNED}, found {have} (--any-version to override)")

    tok = AutoTokenizer.from_pretrained(args.tokenizer)
#A variant with a "\n " merge(Ċ Ġ) : then a token straddles the start of an assistant span,
#which shows how transformers masks partly covered tokens.Its ids are not the test
#tokenizer's, so the C test only checks the mask against these offsets.
    with open(os.path.join(args.tokenizer, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    vocab, merges = tj["model"]["vocab"], tj["model"]["merges"]
    vocab["\u010a\u0120"] = max(max(vocab.values()), *(a["id"] for a in tj["added_tokens"])) + 1
    merges.insert(0, "\u010a \u0120" if isinstance(merges[0], str) else ["\u010a", "\u0120"])
    straddle = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(tj)),
                                       chat_template=tok.chat_template)

    out_cases = []
    for name, c, agp in CASES + [("straddle_" + n, c, agp) for n, c, agp in CASES
                                 if n == "whitespace_edges"]:
        t = straddle if name.startswith("straddle_") else tok
        msgs = hf_messages(c)
        rendered = t.apply_chat_template(msgs, tokenize=False, add_generation_prompt=agp)
        enc = t.apply_chat_template(msgs, tokenize=True, return_dict=True,
                                    return_assistant_tokens_mask=True, add_generation_prompt=agp)
        ids = list(enc["input_ids"])
        mask = list(enc["assistant_masks"])
#apply_chat_template encodes the rendered text without adding special tokens
        plain = t(rendered, add_special_tokens=False, return_offsets_mapping=True)
        assert ids == plain["input_ids"], name
        assert len(mask) == len(ids), name
#character offsets->byte offsets into the UTF - 8 text
        byte_at = [0]
        for ch in rendered:
            byte_at.append(byte_at[-1] + len(ch.encode("utf-8")))
        offsets = [byte_at[i] for a, b in plain["offset_mapping"] for i in (a, b)]
        out_cases.append({"name": name, "add_generation_prompt": agp, "messages": c,
                          "rendered": rendered, "test_tokenizer": t is tok, "input_ids": ids,
                          "offsets": offsets, "assistant_masks": mask})
        print(f"{name}: {len(ids)} tokens, {sum(mask)} in the assistant mask")

    doc = {"generator": "tools/make_template_fixtures.py", "versions": have,
           "tokenizer": args.tokenizer, "cases": out_cases}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k in ("generator", "versions", "tokenizer"):
            f.write(f" {json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)},\n")
        f.write(' "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in out_cases))
        f.write("\n ]\n}\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
