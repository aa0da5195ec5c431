#!/usr/bin/env python3
"""make_tokenizer_fixtures.py: the project's test tokenizer and HF reference outputs for it.

Trains two byte-level BPE tokenizers on GSM8K (question + answer texts) with HF `tokenizers`,
with the MiniMax-Text-01 special tokens, and writes into tests/fixtures/tokenizer/:
  tokenizer.json          variant A: GPT-2 style, ByteLevel(use_regex=true) pre-tokenizer
  tokenizer_config.json   MiniMax-Text-01 tokenizer_config (GPT2Tokenizer, chat template, spec 9)
  tokenizer_split.json    variant B: Sequence[Split(GPT-4 style regex), ByteLevel(use_regex=false)]
  cases.json              adversarial + seeded random strings with HF ids and byte offsets for
                          A, B and patched variants of A (Split behaviours, invert, prefix space,
                          trim_offsets, legacy merges, ignore_merges, extra added tokens),
                          HF decode() outputs, HF vocab sizes and token ids, and the versions
  gsm8k_digest.txt        one line per GSM8K training sample rendered with the chat template
                          (apply_chat_template): token count and 64-bit hash of the ids for A and
                          for B, and the hash of the rendered UTF-8 text
tests/data/data_tokenizer.c compares data/tokenizer.c against all of these.

Hash (both here and in the C test): h = 0xcbf29ce484222325; for each
    value v(token id as uint32, or text byte) : h ^= v;
h = h * 0x100000001b3 mod 2 ^
    64(FNV - 1a over values)
        .

    Run from the repository root(needs../ shared / data / gsm8k / train.jsonl)
    : RAYON_NUM_THREADS = 1 / work / pyref / bin / python tools /
                          make_tokenizer_fixtures.py Versions are pinned(PINNED); other versions are refused unless --any-version is given.
"""
import argparse
import json
import os
import random
import sys

PINNED = {"tokenizers": "0.23.3", "transformers": "5.24.0"}

#MiniMax - Text - 01 special tokens(spec 9) : bos, eos, unk and the other strings seen.
SPECIAL = ["<end_of_document>", "<beginning_of_sentence>", "<end_of_sentence>",
           "<begin_of_document>", "<function_call>"]

#The chat template of MiniMax - Text - 01 tokenizer_config.json, verbatim(spec 9).
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ '<beginning_of_sentence>"
    "system ai_setting=assistant\\n' + message['content'][0]['text'] + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'user' %}{{ '<beginning_of_sentence>user name=user\\n' + "
    "message['content'][0]['text'] + '<end_of_sentence>\\n'}}{% elif message['role'] == "
    "'assistant' %}{{ '<beginning_of_sentence>ai name=assistant\\n' }}{% for content in "
    "message['content'] | selectattr('type', 'equalto', 'text') %}{% generation %}"
    "{{ content['text'] }}{% endgeneration %}{% endfor %}{{ '<end_of_sentence>\\n' }}"
    "{% elif message['role'] == 'function' %}{{ '<beginning_of_sentence>system "
    "function_response=functions\\n' + '{\"name\": \"' + message['name'] + '\", \"response\": ' "
    "+ message['content'][0]['text'] + '}' + '<end_of_sentence>\\n'}}{% endif %}{% endfor %}"
    "{% if tools %}{% for function in tools %}{{ '<beginning_of_sentence>system "
    "function_setting=functions\\n' + function | tojson + '<end_of_sentence>\\n'}}{% endfor %}"
    "{% endif %}{% if add_generation_prompt %}{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    "{% endif %}")

#GPT - 4(cl100k)style split regex, as modern byte - level tokenizers use with
#ByteLevel(use_regex = false).
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

ADVERSARIAL = [
    "", " ", "  ", "a", "Hello world", " Hello  world ", "Hello world!  ", "trailing spaces   ",
    "\t\ttabs\tand\t spaces \t", "line1\nline2\r\nline3\rline4\n\n\n", "\r\n\r\n  \r\n",
    "   leading", "\n", " \n ", "a\u00a0b\u3000c\u2028d\u2029e\u0085f\u200bg\u180eh",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4 \u0e44\u0e17\u0e22",
    "\U0001f600\U0001f601 \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d"
    "\U0001f466 \U0001f1e9\U0001f1ea \u2764\ufe0f",
    "e\u0301 n\u0303 a\u0300\u0301\u0302\u0303 \u1e9b\u0323 \u0915\u094d\u0937",
    "12345678901234567890123456789012345678901234567890",
    "3.14159 2,718 1e-10 -42 +7 0x1F 1/2 \u00bd \u0663\u0664\u0665 \u2460\u2461 \uff11\uff12",
    "<end_of_sentence>", "<end_of_sentence", "<end_of_sentence>>", "<<end_of_sentence>",
    "<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n",
    "x<end_of_sentence><end_of_sentence>y", "<end_of_document><begin_of_document>",
    "<function_call>{\"name\": \"f\"}", "< end_of_sentence >", "<END_OF_SENTENCE>",
    "<beginning_of_sentence", "end_of_sentence>", "<function_call",
    "Mixed \u0420\u0443\u0441\u0441\u043a\u0438\u0439 English \u0627\u0644\u0639\u0631\u0628\u064a"
    "\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac 123",
    "I'm you're he's we've they'll I'd it's DON'T I'M", "'s 's' ''s",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72",
    "$1,234.56 + 7% = ?? !!! ... --- *** ### @@@ ~~~",
    "code: def f(x):\n    return x**2  # square\n\tpass",
    "https://example.com/path?q=1&r=2#frag user@mail.org",
    "\u00e9\u00e8\u00ea\u00eb \u00c5\u00e5 \u00df \u0153 \u00fe \u00f0 \u0133 \ufb01",
    "\u2028\u2029\u0085\u000b\u000c", "a\u0001b\u001fc\u007fd",
    "\U0001d400\U0001d401 \U0001d7d8\U0001d7d9",
    "word" * 60, " " * 100 + "x", "9" * 300, "\u00e9" * 80, "\U0001f600" * 40,
    "ab\u0301c_d\u203fe \u2160\u2161 \u00b2\u00b3",
]


def fnv(values):
    h = 0xCBF29CE484222325
    for v in values:
        h ^= v & 0xFFFFFFFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def random_strings(n, seed):
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789", " ", "  ", "\t", "\n", "\r\n", ".,;:!?'\"()[]{}<>/\\|@#$%^&*-+=_~`",
        "\u00a0\u3000\u2028\u0085\u2009\u200b",
        "\u4f60\u597d\u4e16\u754c\u6570\u5b66\u95ee\u9898", "\u3042\u3044\u30a2\u30a4",
        "\u00e9\u00fc\u00f1\u00e7\u00df\u00f8", "\u0301\u0308\u0323\u093f",
        "\U0001f600\U0001f44d\U0001f3fd\u200d\u2764\ufe0f\U0001f468",
        "\u0660\u0661\u0662\u0966\u0967\uff10\uff11\u00bd\u2460",
        "\u0430\u0431\u0432\u0391\u03b2\u05d0\u0627",
        "<end_of_sentence>", "<beginning_of_sentence>", "<end_of", "sentence>", "<<", ">>",
        "'s", "'ll", "'RE",
    ]
    out = []
    for _ in range(n):
        k = rng.randint(1, 24)
        parts = []
        for _ in range(k):
            pool = rng.choice(pools)
            if len(pool) > 8 and not pool.startswith("<") and rng.random() < 0.7:
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
            else:
                parts.append(pool)
        out.append("".join(parts))
    return out


def byte_offsets(text, char_offsets):
    cum = [0]
    for ch in text:
        cum.append(cum[-1] + len(ch.encode("utf-8")))
    flat = []
    for a, b in char_offsets:
        flat += [cum[a], cum[b]]
    return flat


def patched(base, patch):
    """Applies a variant patch (same rules as tests/data/data_tokenizer.c apply_patch)."""
    j = json.loads(json.dumps(base))
    for key, val in patch.items():
        if key == "legacy_merges":
            j["model"]["merges"] = [a + " " + b for a, b in j["model"]["merges"]]
        elif key == "added_tokens_append":
            j["added_tokens"] = j["added_tokens"] + val
        elif key.startswith("model."):
            j["model"][key[6:]] = val
        else:
            j[key] = val
    return j


def bl(add_prefix_space=False, trim_offsets=True, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


def split(pattern, behavior, invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern},
            "behavior": behavior, "invert": invert}


def seq(*pts):
    return {"type": "Sequence", "pretokenizers": list(pts)}


def added(content, special=False, normalized=False, lstrip=False, rstrip=False):
    return {"id": 0, "content": content, "single_word": False, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def patch_variants():
    v = [
        ("A_legacy_merges", {"legacy_merges": True}),
        ("A_ignore_merges", {"model.ignore_merges": True}),
        ("A_prefix_trim", {"pre_tokenizer": bl(True), "post_processor": bl(True, True)}),
        ("A_prefix_pp_noprefix", {"pre_tokenizer": bl(True), "post_processor": bl(False, True)}),
        ("A_trim", {"post_processor": bl(False, True)}),
        ("A_empty_normalizer_template",
         {"normalizer": {"type": "Sequence", "normalizers": []},
          "post_processor": {"type": "Sequence", "processors": [
              bl(False, True),
              {"type": "TemplateProcessing",
               "single": [{"SpecialToken": {"id": "<beginning_of_sentence>", "type_id": 0}},
                          {"Sequence": {"id": "A", "type_id": 0}}],
               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                        {"Sequence": {"id": "B", "type_id": 1}}],
               "special_tokens": {"<beginning_of_sentence>": {
                   "id": "<beginning_of_sentence>", "ids": [1],
                   "tokens": ["<beginning_of_sentence>"]}}}]}}),
        ("A_split_literal_space", {"pre_tokenizer": seq(split(" ", "MergedWithNext", literal=True),
                                                        bl(False, True, True))}),
        ("A_split_literal_empty", {"pre_tokenizer": seq(split("", "Isolated", literal=True),
                                                        bl(False, True, False))}),
        ("A_split_newline_prefix", {"pre_tokenizer": seq(split("\n", "Isolated"), bl(True)),
                                    "post_processor": bl(True, True)}),
        ("A_added_extra", {"post_processor": bl(False, True), "added_tokens_append": [
            added("<<", normalized=True), added(">>", rstrip=True),
            added("####", special=True, lstrip=True, rstrip=True), added("<end", normalized=True),
            added("the", normalized=True), added("<end_of_sentence>!", special=True),
            added(" \u4e16", normalized=False), added("\u00e9", lstrip=True, normalized=True)]}),
    ]
    for beh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for inv in (False, True):
            v.append((f"A_split_{beh}{'_invert' if inv else ''}",
                      {"pre_tokenizer": seq(split(r"\s+|\p{N}|[.,!?]", beh, inv),
                                            bl(False, True, False))}))
    v.append(("A_split_empty_matches", {"pre_tokenizer": seq(split(r"x*", "Contiguous"),
                                                             bl(False, True, False))}))
    v.append(("A_split_onig_classes", {"pre_tokenizer": seq(
        split(r"(?m)a.b|\h+|[\s]+|\w+|\u00e9|\v", "MergedWithPrevious"), bl(False, True, False))}))
    return v


def train(texts, vocab_size, pre_tokenizer, post_processor):
    from tokenizers import Tokenizer, decoders, models, trainers, pre_tokenizers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = post_processor
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gsm8k", default="../shared/data/gsm8k/train.jsonl")
    ap.add_argument("--out", default="tests/fixtures/tokenizer")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import tokenizers
    import transformers
    from tokenizers import Tokenizer, Regex, pre_tokenizers, processors
    have = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__}
    if have != PINNED and not args.any_version:
        sys.exit(f"need {PINNED}, have {have} (use --any-version to override)")

    samples = [json.loads(line) for line in open(args.gsm8k, encoding="utf-8")]
    texts = [s["question"] for s in samples] + [s["answer"] for s in samples]
    os.makedirs(args.out, exist_ok=True)

    tok_a = train(texts, 6144, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                  processors.ByteLevel(trim_offsets=False))
    tok_b = train(texts, 4096, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        processors.ByteLevel(trim_offsets=True))
    tok_a.save(os.path.join(args.out, "tokenizer.json"), pretty=False)
    tok_b.save(os.path.join(args.out, "tokenizer_split.json"), pretty=False)
    config = {
        "add_bos_token": False, "add_eos_token": False, "add_prefix_space": False,
        "bos_token": "<beginning_of_sentence>", "eos_token": "<end_of_sentence>",
        "unk_token": "<end_of_document>", "clean_up_tokenization_spaces": False,
        "model_max_length": 40960000, "tokenizer_class": "GPT2Tokenizer",
        "added_tokens_decoder": {
            str(tok_a.token_to_id(s)): {"content": s, "lstrip": False, "normalized": False,
                                        "rstrip": False, "single_word": False, "special": True}
            for s in SPECIAL},
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")

    base_a = json.load(open(os.path.join(args.out, "tokenizer.json"), encoding="utf-8"))
    base_b = json.load(open(os.path.join(args.out, "tokenizer_split.json"), encoding="utf-8"))
    strings = ADVERSARIAL + random_strings(120, seed=1234)
    n_adv = len(ADVERSARIAL)

    def cases(tok, idx):
        out = []
        for i in idx:
            e = tok.encode(strings[i], add_special_tokens=False)
            out.append([i, e.ids, byte_offsets(strings[i], e.offsets)])
        return out

    variants = [{"name": "A", "base": "tokenizer.json", "patch": {},
                 "cases": cases(tok_a, range(len(strings)))},
                {"name": "B", "base": "tokenizer_split.json", "patch": {},
                 "cases": cases(tok_b, range(len(strings)))}]
#patched variants : the adversarial strings up to 120 characters and 12 random ones
    subset = [i for i in range(n_adv) if len(strings[i]) <= 120] + list(range(n_adv, n_adv + 12))
    for name, patch in patch_variants():
        tok = Tokenizer.from_str(json.dumps(patched(base_a, patch)))
        variants.append({"name": name, "base": "tokenizer.json", "patch": patch,
                         "cases": cases(tok, subset)})

    rng = random.Random(99)
    decode = []
    for base, tok in (("tokenizer.json", tok_a), ("tokenizer_split.json", tok_b)):
        n = tok.get_vocab_size()
        for k in range(40):
            ids = [rng.randrange(n) for _ in range(rng.randint(0, 12))]
            if k % 4 == 0:  # real text, cut at random points (partial UTF-8 at the ends)
                ids = tok.encode(strings[rng.randrange(len(strings))]).ids
                a = rng.randint(0, len(ids))
                ids = ids[a:a + rng.randint(0, 20)]
            for skip in (False, True):
                decode.append({"base": base, "ids": ids, "skip_special": skip,
                               "text": tok.decode(ids, skip_special_tokens=skip)})

    probe = SPECIAL + ["Ġthe", "the", "Ċ", "Ġ", "####", "not-a-token", "<end_of_sentence"]
    meta = {base: {"vocab_size": tok.get_vocab_size(with_added_tokens=True),
                   "token_to_id": {t: tok.token_to_id(t) for t in probe}}
            for base, tok in (("tokenizer.json", tok_a), ("tokenizer_split.json", tok_b))}
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/make_tokenizer_fixtures.py", "versions": have,
                   "meta": meta, "strings": strings, "variants": variants, "decode": decode}, f,
                  ensure_ascii=True, separators=(",", ":"))
        f.write("\n")

#GSM8K digest through transformers' apply_chat_template.
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(args.out)
    mismatch_auto = 0
    lines = []
    for i, s in enumerate(samples):
        msgs = [{"role": "user", "content": [{"type": "text", "text": s["question"]}]},
                {"role": "assistant", "content": [{"type": "text", "text": s["answer"]}]}]
        text = hf.apply_chat_template(msgs, tokenize=False)
        assert text == ("<beginning_of_sentence>user name=user\n" + s["question"] +
                        "<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n" +
                        s["answer"] + "<end_of_sentence>\n"), f"sample {i}: unexpected rendering"
        ids_a = tok_a.encode(text, add_special_tokens=False).ids
        ids_b = tok_b.encode(text, add_special_tokens=False).ids
        if i < 200 and hf(text, add_special_tokens=False)["input_ids"] != ids_a:
            mismatch_auto += 1
        lines.append(f"{len(ids_a)} {fnv(ids_a):016x} {len(ids_b)} {fnv(ids_b):016x} "
                     f"{fnv(text.encode('utf-8')):016x}\n")
    with open(os.path.join(args.out, "gsm8k_digest.txt"), "w") as f:
        f.writelines(lines)
    print(f"wrote {args.out}: {len(strings)} strings, {len(variants)} variants, "
          f"{len(decode)} decode cases, {len(lines)} GSM8K digests; AutoTokenizer vs tokenizers "
          f"mismatches on the first 200 samples: {mismatch_auto}")
    if mismatch_auto:
        sys.exit("AutoTokenizer does not reproduce tokenizer.json")


if __name__ == "__main__":
    main()
