#!/usr/bin/env python3
"""make_chat_fixtures.py: test tokenizers with the MiniMax-M2 / M3 chat tokens, and transformers'
renderings, token ids and training labels of chat data through the released M2 and M3 templates.

Writes:
  tests/fixtures/tokenizer_m2/   tokenizer.json: tests/fixtures/tokenizer/tokenizer.json (6144-token
  tests/fixtures/tokenizer_m3/   byte-level BPE, MiniMax-Text-01 special tokens 0-4) less its last
                                 TRIM merges and their tokens (ids 6128-6143), so that the chat tokens
                                 fit the tiny models' 6144 rows (recipes/configs/tiny-m2.json), with
                                 the chat tokens of M2 (M3) appended by `tokenizers` as special added
                                 tokens (AddedToken(special=True, normalized=False, lstrip=False,
                                 rstrip=False, single_word=False), ids 6128 on, in the order of
                                 M2_TOKENS / M3_TOKENS below); tokenizer_config.json: GPT2Tokenizer,
                                 add_bos_token / add_eos_token false, bos ]~!b[, eos [e~[, unk
                                 <end_of_document>, added_tokens_decoder for every added token, NO
                                 chat_template (the template is always passed explicitly)
  tests/fixtures/chat/gsm8k_m2_digest.txt, gsm8k_m3_digest.txt
                                 one line per GSM8K train record, messages [user: question,
                                 assistant: answer], no system, no template kwargs:
                                 "<n_ids> <fnv(ids)> <n_trained> <fnv(labels)> <fnv(text bytes)>"
                                 (hashes as 16 lower-case hex digits)
  tests/fixtures/chat/multiturn.jsonl
                                 the hand-written agentic conversations of
                                 tools/chat_fixture_cases.py, one {"messages", "tools"?} record a line
  tests/fixtures/chat/multiturn_expected.json
                                 those records rendered by M2, M3 (thinking_mode undefined) and M3
                                 (thinking_mode "enabled"), each with reasoning_history
                                 "as_template" and "split": every sample's text, ids and labels,
                                 its trained character / byte ranges; the header holds the versions,
                                 the rule, the template sha256s and the generation prompts seen

Hash (the same FNV-1a 64 as tools/make_tokenizer_fixtures.py and tests/data/data_tokenizer.c's
fnv_u32 / fnv_bytes): h = 0xcbf29ce484222325; for each value v: h ^= v; h = h * 0x100000001b3 mod 2^64.
The values are WHOLE 32-bit words, one per id or label (v = the int32 value as uint32, so the label
-100 is 0xffffff9c), not the 4 little-endian bytes of each; for the text they are the UTF-8 bytes.

The mask rule (templates without {% generation %} marks; tests compare the C data pipeline with it).
A sample is (messages, tools) after these normalisations, in order: the pipeline's "loss" key
(ms-swift's convention: false = not trained) is read and removed from every message; top-level
keys whose value is null are dropped; an assistant tool call's function.arguments given as a JSON
string is parsed into an object (as vLLM does; both templates iterate arguments.items());
transformers then aliases reasoning_content / reasoning / thinking itself.
T = tokenizer.apply_chat_template(messages, tools=tools, chat_template=<template file's text>,
tokenize=False, add_generation_prompt=False, **template_kwargs). For each trained assistant message
i, the k-th among the sample's assistant messages: its turn starts at the k-th "]~b]ai\\n" of T and
ends just after the first "[e~[" from there (the "\\n" after it is not part of the turn). GP_i =
render(messages[:i], add_generation_prompt=True) minus render(messages[:i], False) (asserted to be
a prefix). h = the longest common prefix, in code points, of the turn's text and GP_i; when it is
shorter than GP_i and holds a line break, h is cut back to just after its last line break (the
role line: a reply that begins like the rest of the prompt, "<" against M2's "<think>", keeps
that character). Trained
characters: [turn_start + h, turn_end). Token offsets come from tokenizer(T,
add_special_tokens=False, return_offsets_mapping=True) (its ids are asserted equal to
apply_chat_template(tokenize=True)'s); a token is trained iff its character span overlaps a trained
range; labels = the id where trained, -100 elsewhere, not shifted.
Which assistant messages are trained: "as_template": one sample per conversation, every assistant
message unless "loss": false. "split": one sample per user message k, messages[:e_k] with e_k the
index of the next user message (or the end); trained: the assistant messages between user k and
e_k, less those with "loss": false; assistant messages before the first user message are never
trained. In both modes a sample with no trained message is dropped.

Run from the repository root (needs ../shared/templates and ../shared/data/gsm8k/train.jsonl):
    /work/pyref/bin/python tools/make_chat_fixtures.py
Options: --skip-gsm8k (tokenizers and multiturn only; the header then lacks generation_prompts_gsm8k),
--templates DIR, --gsm8k FILE.
The versions below are pinned: other versions are refused unless --any-version is given.
"""
import argparse
import copy
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_fixture_cases  # noqa: E402

PINNED = {"transformers": "5.24.0", "tokenizers": "0.23.3", "jinja2": "3.1.6"}

BASE_TOKENIZER = "tests/fixtures/tokenizer"
TRIM = 16  # the base's last merges dropped: M3's 12 chat tokens fit in 6144 ids
M2_TOKENS = ["]~!b[", "]~b]", "[e~[", "<think>", "</think>", "<minimax:tool_call>",
             "</minimax:tool_call>"]
M3_TOKENS = M2_TOKENS + ["<mm:think>", "</mm:think>", "]<]minimax[>[", "]<]image[>[", "]<]video[>["]
TOKENIZERS = {  # dir name: (added tokens, bos, eos, unk)
    "tokenizer_m2": (M2_TOKENS, "]~!b[", "[e~[", "<end_of_document>"),
    "tokenizer_m3": (M3_TOKENS, "]~!b[", "[e~[", "<end_of_document>"),
}
# (name, template file, tokenizer dir, template kwargs)
CONFIGS = [
    ("m2", "MiniMax-M2.jinja", "tests/fixtures/tokenizer_m2", {}),
    ("m3", "MiniMax-M3.jinja", "tests/fixtures/tokenizer_m3", {}),
    ("m3_thinking_enabled", "MiniMax-M3.jinja", "tests/fixtures/tokenizer_m3", {"thinking_mode": "enabled"}),
]
MODES = ["as_template", "split"]
AI_HEADER = "]~b]ai\n"
TURN_END = "[e~["
CHAT_DIR = "tests/fixtures/chat"


def fnv(values):
    h = 0xCBF29CE484222325
    for v in values:
        h ^= v & 0xFFFFFFFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


# ------------------------------------------------------------------------------------------------
# 1. tokenizers


def trimmed_base(root):
    """The base tokenizer.json without its last TRIM vocabulary ids and the merges that make or use
    them (BPE merges in rank order: the dropped tokens are made by the last merges)."""
    j = json.load(open(os.path.join(root, BASE_TOKENIZER, "tokenizer.json"), encoding="utf-8"))
    vocab = j["model"]["vocab"]
    n = len(vocab)
    gone = {t for t, i in vocab.items() if i >= n - TRIM}
    assert len(gone) == TRIM and all(a["id"] < n - TRIM for a in j["added_tokens"])
    def pair(m):
        return m if isinstance(m, list) else m.split(" ", 1)

    merges = [m for m in j["model"]["merges"] if not ({pair(m)[0], pair(m)[1], "".join(pair(m))} & gone)]
    assert len(j["model"]["merges"]) - len(merges) == TRIM, "merges dropped != tokens dropped"
    j["model"]["vocab"] = {t: i for t, i in vocab.items() if t not in gone}
    j["model"]["merges"] = merges
    return json.dumps(j, ensure_ascii=False)


def make_tokenizers(root):
    from tokenizers import AddedToken, Tokenizer
    from transformers import AutoTokenizer
    base_cfg = json.load(open(os.path.join(root, BASE_TOKENIZER, "tokenizer_config.json"), encoding="utf-8"))
    for name, (tokens, bos, eos, unk) in TOKENIZERS.items():
        out = os.path.join(root, "tests/fixtures", name)
        os.makedirs(out, exist_ok=True)
        tok = Tokenizer.from_str(trimmed_base(root))
        n0 = tok.get_vocab_size(with_added_tokens=True)
        added = tok.add_special_tokens([AddedToken(t, single_word=False, lstrip=False, rstrip=False,
                                                   normalized=False, special=True) for t in tokens])
        assert added == len(tokens), (name, added)
        ids = [tok.token_to_id(t) for t in tokens]
        assert ids == list(range(n0, n0 + len(tokens))), (name, ids)
        tok.save(os.path.join(out, "tokenizer.json"), pretty=False)
        j = json.load(open(os.path.join(out, "tokenizer.json"), encoding="utf-8"))
        decoder = {}
        for a in j["added_tokens"]:
            decoder[str(a["id"])] = {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                        "single_word", "special")}
        cfg = {k: v for k, v in base_cfg.items() if k != "chat_template"}
        cfg.update({"add_bos_token": False, "add_eos_token": False, "bos_token": bos, "eos_token": eos,
                    "unk_token": unk, "tokenizer_class": "GPT2Tokenizer", "added_tokens_decoder": decoder})
        with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2, ensure_ascii=False)
            f.write("\n")
        # checks: transformers loads it, each token is one id, glued in text too
        hf = AutoTokenizer.from_pretrained(out)
        assert getattr(hf, "chat_template", None) is None, f"{name}: unexpected chat_template"
        assert (hf.bos_token, hf.eos_token, hf.unk_token) == (bos, eos, unk), name
        for t, i in zip(tokens, ids):
            assert hf(t, add_special_tokens=False)["input_ids"] == [i], (name, t)
            assert hf("x" + t + "y", add_special_tokens=False)["input_ids"][1:-1] == [i], (name, t)
        glued = "".join(tokens)
        assert hf(glued, add_special_tokens=False)["input_ids"] == ids, (name, glued)
        print(f"wrote {out}: {len(tokens)} added special tokens, ids {ids[0]}..{ids[-1]}")


# ------------------------------------------------------------------------------------------------
# 2. the mask rule


def normalise(messages):
    """Returns (messages for the template, per-message loss flag). See the docstring."""
    out, loss = [], []
    for m in messages:
        loss.append(m.get("loss"))
        m = {k: copy.deepcopy(v) for k, v in m.items() if k != "loss" and v is not None}
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            calls = []
            for c in m["tool_calls"]:
                c = dict(c)
                if isinstance(c.get("function"), dict):
                    fn = dict(c["function"])
                    if isinstance(fn.get("arguments"), str):
                        fn["arguments"] = json.loads(fn["arguments"])
                    c["function"] = fn
                calls.append(c)
            m["tool_calls"] = calls
        out.append(m)
    return out, loss


class Renderer:
    def __init__(self, tokenizer_dir, template_text, kwargs):
        from transformers import AutoTokenizer
        self.tok = AutoTokenizer.from_pretrained(tokenizer_dir)
        self.tpl = template_text
        self.kwargs = kwargs
        self.gps = {}  # generation prompt -> how many times seen
        self.id_mismatch = []

    def render(self, messages, tools, agp):
        return self.tok.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                            chat_template=self.tpl, tokenize=False,
                                            add_generation_prompt=agp, **self.kwargs)

    def gen_prompt(self, messages, tools):
        with_gp = self.render(messages, tools, True)
        without = self.render(messages, tools, False)
        assert with_gp.startswith(without), "render(add_generation_prompt=False) is not a prefix"
        gp = with_gp[len(without):]
        self.gps[gp] = self.gps.get(gp, 0) + 1
        return gp

    def sample(self, messages, tools, trained, where):
        """messages: normalised; trained: indices of the trained assistant messages."""
        text = self.render(messages, tools, False)
        assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        starts, at = [], 0
        while True:
            at = text.find(AI_HEADER, at)
            if at < 0:
                break
            starts.append(at)
            at += len(AI_HEADER)
        assert len(starts) == len(assistants), f"{where}: {len(starts)} headers, {len(assistants)} assistants"
        spans = []
        for i in trained:
            s = starts[assistants.index(i)]
            e = text.find(TURN_END, s)
            assert e >= 0, f"{where}: turn of message {i} does not end"
            e += len(TURN_END)
            gp = self.gen_prompt(messages[:i], tools)
            turn = text[s:e]
            h = 0
            while h < min(len(turn), len(gp)) and turn[h] == gp[h]:
                h += 1
            if h < len(gp) and turn.rfind("\n", 0, h) >= 0:  # a partial match: its role line only
                h = turn.rfind("\n", 0, h) + 1
            spans.append([s + h, e])
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        direct = self.tok.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                              chat_template=self.tpl, tokenize=True,
                                              add_generation_prompt=False, **self.kwargs)["input_ids"]
        if direct != ids:
            self.id_mismatch.append(where)
        labels = [t if any(a < e and b > s for s, e in spans) else -100
                  for t, (a, b) in zip(ids, enc["offset_mapping"])]
        return text, ids, labels, spans


def samples_of(messages, loss, mode):
    """[(end, trained indices)] for one conversation (messages already normalised)."""
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and loss[i] is not False]
    if mode == "as_template":
        out = [(len(messages), assistants)]
    else:
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        out = []
        for k, u in enumerate(users):
            e = users[k + 1] if k + 1 < len(users) else len(messages)
            out.append((e, [i for i in assistants if u < i < e]))
    return [(e, t) for e, t in out if t]


def utf8_spans(text, spans):
    at = [0]
    for ch in text:
        at.append(at[-1] + len(ch.encode("utf-8")))
    return [[at[a], at[b]] for a, b in spans]


# ------------------------------------------------------------------------------------------------
# 3. fixtures


def gsm8k_digest(renderer, data, out_path):
    lines, trained_total = [], 0
    for n, line in enumerate(open(data, encoding="utf-8"), 1):
        s = json.loads(line)
        msgs, loss = normalise([{"role": "user", "content": s["question"]},
                                {"role": "assistant", "content": s["answer"]}])
        (end, trained), = samples_of(msgs, loss, "as_template")
        text, ids, labels, _ = renderer.sample(msgs, None, trained, f"gsm8k line {n}")
        nt = sum(1 for x in labels if x != -100)
        trained_total += nt
        lines.append(f"{len(ids)} {fnv(ids):016x} {nt} {fnv(labels):016x} {fnv(text.encode('utf-8')):016x}\n")
    with open(out_path, "w") as f:
        f.writelines(lines)
    print(f"wrote {out_path}: {len(lines)} records, {trained_total} trained tokens")
    return len(lines)


def write_json(path, header, key, items):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write(f' {json.dumps(key)}: [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in items))
        f.write("\n ]\n}\n")
    os.replace(tmp, path)
    with open(path, encoding="utf-8") as f:
        assert json.load(f)[key] == json.loads(json.dumps(items))
    print(f"wrote {path}: {len(items)} {key}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default="../shared/templates")
    ap.add_argument("--gsm8k", default="../shared/data/gsm8k/train.jsonl")
    ap.add_argument("--skip-gsm8k", action="store_true")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import jinja2
    import tokenizers
    import transformers
    have = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "jinja2": jinja2.__version__}
    if have != PINNED and not args.any_version:
        sys.exit(f"make_chat_fixtures: pinned {PINNED}, found {have} (--any-version to override)")
    root = os.getcwd()
    if not os.path.isdir(os.path.join(root, BASE_TOKENIZER)):
        sys.exit("make_chat_fixtures: run from the repository root")

    make_tokenizers(root)

    templates = {}
    for _, rel, _, _ in CONFIGS:
        with open(os.path.join(args.templates, rel), "rb") as f:
            raw = f.read()
        templates[rel] = (raw.decode("utf-8"), hashlib.sha256(raw).hexdigest())
    renderers = {name: Renderer(tdir, templates[rel][0], kw) for name, rel, tdir, kw in CONFIGS}

    os.makedirs(CHAT_DIR, exist_ok=True)
    if not args.skip_gsm8k:
        for name in ("m2", "m3"):
            gsm8k_digest(renderers[name], args.gsm8k, os.path.join(CHAT_DIR, f"gsm8k_{name}_digest.txt"))
    gsm8k_gps = {name: dict(r.gps) for name, r in renderers.items()}
    for r in renderers.values():
        r.gps = {}

    records = chat_fixture_cases.records()
    with open(os.path.join(CHAT_DIR, "multiturn.jsonl"), "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    records = [json.loads(line) for line in open(os.path.join(CHAT_DIR, "multiturn.jsonl"), encoding="utf-8")]
    print(f"wrote {CHAT_DIR}/multiturn.jsonl: {len(records)} records")
    items, counts, unstable = [], {}, {}
    for name, rel, tdir, kw in CONFIGS:
        r = renderers[name]
        for mode in MODES:
            for line, rec in enumerate(records, 1):
                msgs, loss = normalise(rec["messages"])
                tools = rec.get("tools")
                samples = []
                for end, trained in samples_of(msgs, loss, mode):
                    sub = msgs[:end]
                    where = f"{name} {mode} record {line} end {end}"
                    text, ids, labels, spans = r.sample(sub, tools, trained, where)
                    for i in trained:  # diagnostic: the history re-rendered differently (M2 drops reasoning)
                        if not text.startswith(r.render(sub[:i], tools, False)):
                            unstable[(name, mode)] = unstable.get((name, mode), 0) + 1
                    samples.append({"record": line, "messages_end": end, "trained_messages": trained,
                                    "trained_chars": spans, "trained_bytes": utf8_spans(text, spans),
                                    "text": text, "ids": ids, "labels": labels})
                counts[(name, mode)] = counts.get((name, mode), 0) + len(samples)
                items.append({"config": name, "template": rel, "template_kwargs": kw, "reasoning_history": mode,
                              "record": line, "samples": samples})

    header = {
        "generator": "tools/make_chat_fixtures.py (records: tools/chat_fixture_cases.py, as tests/fixtures/chat/multiturn.jsonl)",
        "versions": have,
        "python": sys.version.split()[0],
        "templates_dir": "../shared/templates",
        "templates": {rel: sha for rel, (_, sha) in templates.items()},
        "configs": [{"name": name, "template": rel, "tokenizer": tdir, "template_kwargs": kw,
                     "generation_prompts": sorted(renderers[name].gps),
                     **({"generation_prompts_gsm8k": sorted(gsm8k_gps[name])} if gsm8k_gps[name] else {}),
                     "samples": {mode: counts[(name, mode)] for mode in MODES}}
                    for name, rel, tdir, kw in CONFIGS],
        "normalisations": [
            "the pipeline's 'loss' key is read (false: the message is not trained) and removed from every message",
            "top-level message keys whose value is null are dropped (transformers does it too)",
            "assistant tool_calls[*].function.arguments given as a JSON string are parsed into an object (as vLLM does)",
            "reasoning_content / reasoning / thinking are aliased by transformers (_alias_reasoning_fields)",
        ],
        "rule": ("T = apply_chat_template(messages, tools, chat_template, tokenize=False, add_generation_prompt=False, "
                 "**template_kwargs). A trained assistant message i (the k-th assistant message of the sample) has its "
                 "turn from the k-th '" + AI_HEADER.replace("\n", "\\n") + "' of T to just after the first '" + TURN_END +
                 "' from there. GP_i = render(messages[:i], add_generation_prompt=True) minus render(messages[:i], "
                 "False); h = longest common prefix (code points) of the turn and GP_i, cut back to just after its last "
                 "line break when shorter than GP_i and holding one; trained characters [turn_start "
                 "+ h, turn_end). A token is trained iff its offset span (tokenizer(T, add_special_tokens=False, "
                 "return_offsets_mapping=True)) overlaps a trained range; labels = id or -100, not shifted. "
                 "as_template: one sample per record, every assistant message unless loss false. split: one sample per "
                 "user message k with messages[:e_k] (e_k = next user message or end), trained = the assistant messages "
                 "between user k and e_k unless loss false. Samples with no trained message are dropped."),
        "format": ("items: one per (config, reasoning_history, record), record = 1-based line in multiturn.jsonl; "
                   "samples in order, each: messages_end (the sample is messages[:messages_end]), trained_messages "
                   "(indices), trained_chars / trained_bytes ([start, end) in code points / UTF-8 bytes of text), text, "
                   "ids, labels"),
        "id_mismatches": {name: r.id_mismatch for name, r in renderers.items()},
        "history_not_prefix": {f"{n} {m}": c for (n, m), c in sorted(unstable.items())},
    }
    write_json(os.path.join(CHAT_DIR, "multiturn_expected.json"), header, "items", items)
    for name, r in renderers.items():
        print(f"{name}: generation prompts {sorted(set(r.gps) | set(gsm8k_gps[name]))!r}; "
              f"samples {dict((m, counts[(name, m)]) for m in MODES)}; apply_chat_template ids != offset "
              f"tokenization: {len(r.id_mismatch)}")
    print(f"trained turns whose prefix rendering is not a prefix of the sample: {header['history_not_prefix']}")
    if any(r.id_mismatch for r in renderers.values()):
        sys.exit("apply_chat_template(tokenize=True) differs from tokenizer(T) (see id_mismatches)")


if __name__ == "__main__":
    main()
