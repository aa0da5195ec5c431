#!/usr/bin/env python3
"""check_head_data_refs.py: the transformers references written out in tests/data/data_head.c.

Pinned: transformers 5.24.0, jinja2 3.1.6, tokenizers (as /work/pyref has them). Run from the
repository root:  /work/pyref/bin/python tools/check_head_data_refs.py
It recomputes, with the test tokenizer (tests/fixtures/tokenizer) and its own chat template,
what the test expects and fails (non-zero exit) on any difference:
  - reward: apply_chat_template(messages, tools=..., tokenize=False) of each whole
    conversation (TRL's RewardTrainer renders prompt + chosen / rejected so), and that the
    tokenized form equals the tokenization of that text; the standard strings with eos_token
    appended (TRL); their token counts;
  - token classification: the ids of the words joined by spaces and, from HF's offset mapping
    (characters), the first token of each word;
  - question answering: the ids of question + "\\n" + context and the tokens holding the first
    and last character of the answer.
Nothing is written; the C test holds the values."""
import sys

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained("tests/fixtures/tokenizer")
bad = []


def check(what, got, want):
    if got != want:
        bad.append(f"{what}: {got!r} != {want!r}")


def parts(t):
    return [{"type": "text", "text": t}]


def user(t):
    return {"role": "user", "content": parts(t)}


def asst(t):
    return {"role": "assistant", "content": parts(t)}


RU = lambda t: f"<beginning_of_sentence>user name=user\n{t}<end_of_sentence>\n"
RA = lambda t: f"<beginning_of_sentence>ai name=assistant\n{t}<end_of_sentence>\n"
TOOLS = [{"type": "function", "function": {"name": "w", "parameters": {}}}]
RTOOLS = ('<beginning_of_sentence>system function_setting=functions\n{"type": "function", '
          '"function": {"name": "w", "parameters": {}}}<end_of_sentence>\n')
cases = [([user("Hi"), asst("Hello there")], None, RU("Hi") + RA("Hello there"), 26),
         ([user("Hi"), asst("Go away")], None, RU("Hi") + RA("Go away"), 25),
         ([user("Weather?"), asst("Sunny")], TOOLS, RU("Weather?") + RA("Sunny") + RTOOLS, None),
         ([user("Weather?"), asst("No")], TOOLS, RU("Weather?") + RA("No") + RTOOLS, None)]
for msgs, tools, want, n in cases:
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
    check("rendering", text, want)
    ids = tok.apply_chat_template(msgs, tools=tools, tokenize=True)
    ids = ids if isinstance(ids, list) else ids["input_ids"]
    check("ids", ids, tok(text, add_special_tokens=False)["input_ids"])
    if n is not None:
        check("count", len(ids), n)
eos = tok.eos_token
check("eos", eos, "<end_of_sentence>")
for s, n in [("The sky is blue." + eos, 6), ("Q: sky? A:" + " blue" + eos, 8)]:
    check("standard " + s, len(tok(s)["input_ids"]), n)


def first_tokens(words):
    enc = tok(" ".join(words), add_special_tokens=False, return_offsets_mapping=True)
    starts, at = [], 0
    for w in words:
        starts.append(at)
        at += len(w) + 1
    firsts = [min(i for i, (a, b) in enumerate(enc["offset_mapping"]) if a <= s < b) for s in starts]
    return enc["input_ids"], firsts


check("New York", first_tokens(["New", "York", "is", "big"]),
      ([50, 1748, 3077, 317, 1948], [0, 2, 3, 4]))
check("Zürich", first_tokens(["Zürich", "unbelievably", "ok"]),
      ([62, 132, 125, 396, 303, 1181, 70, 459, 526, 90, 583, 474, 268, 79], [0, 5, 12]))
q, ctx, ans = "Where?", "It is in Zürich, Switzerland.", "Switzerland"
start = ctx.index(ans)
check("answer_start", start, 17)
enc = tok(q + "\n" + ctx, add_special_tokens=False, return_offsets_mapping=True)
first, last = len(q) + 1 + start, len(q) + 1 + start + len(ans) - 1
om = enc["offset_mapping"]
check("qa ids", enc["input_ids"], [59, 262, 269, 35, 203, 923, 317, 306, 1796, 132, 125, 396, 303,
                                   16, 418, 91, 319, 94, 272, 2309, 18])
check("qa span", (min(i for i, (a, b) in enumerate(om) if a <= first < b),
                  max(i for i, (a, b) in enumerate(om) if a <= last < b)), (14, 19))
for b in bad:
    print("FAIL", b)
print("ok" if not bad else f"{len(bad)} differences")
sys.exit(1 if bad else 0)
