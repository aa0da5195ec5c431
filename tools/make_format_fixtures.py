#!/usr/bin/env python3
"""make_format_fixtures.py: transformers' renderings of the dataset-format fixtures.

For every record of the fixture files in tests/fixtures/formats (gsm8k.jsonl, messages.jsonl,
sharegpt.json, alpaca.jsonl) this turns the record into chat messages the way the formats are
defined (docs/data.md; sharegpt and alpaca as LLaMA-Factory reads them), keeping a message's
content as the file has it (a string, or a list of text parts), and records what transformers
produces with the test tokenizer and the extended MiniMax template (the one exports write,
read out of data/chat_template.c):
  rendered          apply_chat_template(tokenize=False)
  input_ids         apply_chat_template(tokenize=True)
  assistant_masks   return_assistant_tokens_mask=True
into tests/fixtures/formats/expected.json, which tests/data/data_formats.c (data_formats) compares
against data/dataset.c, data/chat_template.c and the sample labels. A record whose contents
are all part lists is also rendered with the tokenizer's own (original) template, which must
give the same text.

Run from the repository root:
    /work/pyref/bin/python tools/make_format_fixtures.py
The versions below are pinned: other versions are refused unless --any-version is given.
"""
import argparse
import json
import os
import re
import sys

PINNED = {"transformers": "5.24.0", "tokenizers": "0.23.3", "jinja2": "3.1.6"}
FILES = [("gsm8k", "gsm8k.jsonl"), ("messages", "messages.jsonl"), ("sharegpt", "sharegpt.json"),
         ("alpaca", "alpaca.jsonl")]


def c_string(source, name):
    """The value of the C string constant `name` in source: its concatenated literals, with
    the string macros (#define NAME "..." \\ ...) it uses expanded."""
    def literals(text):
        parts = []
        for lit, ident in re.findall(r'"((?:[^"\\]|\\.)*)"|\b([A-Z][A-Z0-9_]+)\b', text):
            if ident:
                d = re.search(r"#define " + ident + r"\b((?:.*\\\n)*.*)\n", source)
                parts.append(literals(d.group(1)))
            else:
                parts.append(lit.encode("latin-1").decode("unicode_escape"))
        return "".join(parts)
    m = re.search(r"static const char " + name + r"\[\] =(.*?);\n", source, re.S)
    return literals(m.group(1))


def records(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def to_messages(fmt, r):
    """HF chat messages of one record (content as in the file)."""
    if fmt == "gsm8k":
        return [{"role": "user", "content": r["question"]},
                {"role": "assistant", "content": r["answer"]}]
    if fmt == "messages":
        return [{"role": m["role"], "content": m["content"]} for m in r["messages"]]
    if fmt == "sharegpt":
        roles = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                 "system": "system"}
        out = [{"role": "system", "content": r["system"]}] if r.get("system") else []
        return out + [{"role": roles[t["from"]], "content": t["value"]}
                      for t in r["conversations"]]
    if fmt == "alpaca":
        out = [{"role": "system", "content": r["system"]}] if r.get("system") else []
        for q, a in r.get("history") or []:
            out += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        query = "\n".join(x for x in (r["instruction"], r.get("input") or "") if x)
        return out + [{"role": "user", "content": query},
                      {"role": "assistant", "content": r["output"]}]
    raise ValueError(fmt)


def text_of(m):
    """The text the template renders for a message (parts: the first for system and user,
    every text part joined for the assistant)."""
    c = m["content"]
    if isinstance(c, str):
        return c
    if m["role"] == "assistant":
        return "".join(p["text"] for p in c if p["type"] == "text")
    return c[0]["text"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizer")
    ap.add_argument("--dir", default="tests/fixtures/formats")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()

    import jinja2
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    have = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "jinja2": jinja2.__version__}
    if have != PINNED and not args.any_version:
        sys.exit(f"make_format_fixtures: pinned {PINNED}, found {have} (--any-version to override)")

    with open("data/chat_template.c", encoding="utf-8") as f:
        ext = c_string(f.read(), "minimax_template_ext")
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    original = tok.chat_template
    out = []
    for fmt, name in FILES:
        for i, r in enumerate(records(os.path.join(args.dir, name))):
            msgs = to_messages(fmt, r)
            rendered = tok.apply_chat_template(msgs, tokenize=False, chat_template=ext)
            if all(not isinstance(m["content"], str) for m in msgs):
                assert rendered == tok.apply_chat_template(msgs, tokenize=False,
                                                           chat_template=original), (name, i)
            enc = tok.apply_chat_template(msgs, tokenize=True, return_dict=True,
                                          return_assistant_tokens_mask=True, chat_template=ext)
            ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
            assert ids == tok(rendered, add_special_tokens=False)["input_ids"], (name, i)
            forms = sorted({"string" if isinstance(m["content"], str) else "parts" for m in msgs})
            out.append({"file": name, "format": fmt, "record": i, "content": forms,
                        "conversation": [{"role": m["role"], "text": text_of(m)} for m in msgs],
                        "rendered": rendered, "input_ids": ids, "assistant_masks": mask})
            print(f"{name}[{i}]: {len(msgs)} messages ({'+'.join(forms)}), {len(ids)} tokens, "
                  f"{sum(mask)} in the assistant mask")

    doc = {"generator": "tools/make_format_fixtures.py", "versions": have,
           "tokenizer": args.tokenizer, "template": ext, "cases": out}
    path = os.path.join(args.dir, "expected.json")
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k in ("generator", "versions", "tokenizer", "template"):
            f.write(f" {json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)},\n")
        f.write(' "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in out))
        f.write("\n ]\n}\n")
    os.replace(tmp, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
