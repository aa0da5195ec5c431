#!/usr/bin/env python3
"""make_unicode_digest.py: HF `tokenizers` pre-tokenizers on every code point, for
data_tokenizer_unicode.

Every code point U+0001..U+10FFFF except the surrogates is put in the context
    "a " X "b " X "1\\n"
where the pre-tokenizer regexes decide by X's class: after a space, X joins "b" when it is a
letter (\\p{L}), "1" when it is a number (\\p{N}), stands alone when it is neither, and
whitespace splits differently again. What is compared is the pre-tokenization (the pieces),
not the ids: the BPE of the test tokenizers has no merges for the bytes of rare characters, so
" X" + "b" and " Xb" give the same ids. The code points are taken in blocks of 4096; each
block's contexts are concatenated into one text (the "\\n" ends every context's pieces) and
pre-tokenized by the test tokenizers A (tokenizer.json: MiniMax's special tokens, GPT-2's
regex) and B (tokenizer_split.json: GPT-4 style Split, then ByteLevel).

  tests/fixtures/tokenizer/unicode_digest.txt   one line per block:
      <first code point, hex> <pieces A> <hash A> <pieces B> <hash B>
  hash: FNV-1a 64 over the pieces' lengths in UTF-8 bytes as uint32 values (as in
  make_tokenizer_fixtures.py), hex

Debugging (--diff DUMP): DUMP is what data_tokenizer_unicode writes when MT_UNICODE_DUMP=DUMP
is set (one line per code point: "<hex> <byte lengths of A's pieces, comma separated> <B's>",
each context alone); prints the code points whose pieces differ from HF's, with their
category (Unicode 16 when unicodedata2 is installed, else Python's own version), and the count.

Run from the repository root (pinned: tokenizers 0.23.3, others refused):
  /work/pyref/bin/python tools/make_unicode_digest.py [--diff DUMP]
"""
import argparse
import os
import sys

import tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_fixtures import fnv  # noqa: E402  (the same hash as gsm8k_digest.txt)

PINNED = "0.23.3"
FIX = "tests/fixtures/tokenizer"
BLOCK = 4096


def context(cp):
    x = chr(cp)
    return "a " + x + "b " + x + "1\n"


def code_points(block):
    return [cp for cp in range(max(block, 1), block + BLOCK) if not 0xD800 <= cp <= 0xDFFF]


def piece_lengths(tok, text):
    """UTF-8 byte lengths of the pre-tokenizer's pieces (HF gives character offsets)."""
    return [len(text[s:e].encode("utf-8")) for _, (s, e) in tok.pre_tokenizer.pre_tokenize_str(text)]


def digest(toks):
    lines = []
    for blk in range(0, 0x110000, BLOCK):
        text = "".join(context(cp) for cp in code_points(blk))
        cols = ["%x" % blk]
        for tok in toks:
            lens = piece_lengths(tok, text)
            cols += ["%d" % len(lens), "%016x" % fnv(lens)]
        lines.append(" ".join(cols))
    path = os.path.join(FIX, "unicode_digest.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d blocks" % (path, len(lines)))


def diff(toks, dump):
    try:
        import unicodedata2 as ucd
    except ImportError:
        import unicodedata as ucd
    print("categories by Unicode %s" % ucd.unidata_version)
    bad = 0
    with open(dump) as f:
        for line in f:
            hexcp, *cols = line.split()
            cp = int(hexcp, 16)
            want = [piece_lengths(tok, context(cp)) for tok in toks]
            got = [[int(v) for v in c.split(",")] for c in cols]
            if got != want:
                bad += 1
                print("U+%04X %s C %s HF %s" % (cp, ucd.category(chr(cp)), got, want))
    print("%d code points differ" % bad)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--diff", metavar="DUMP", help="compare a data_tokenizer_unicode dump")
    args = ap.parse_args()
    if tokenizers.__version__ != PINNED:
        sys.exit("need tokenizers %s, have %s" % (PINNED, tokenizers.__version__))
    toks = [tokenizers.Tokenizer.from_file(os.path.join(FIX, f))
            for f in ("tokenizer.json", "tokenizer_split.json")]
    if args.diff:
        sys.exit(1 if diff(toks, args.diff) else 0)
    digest(toks)


if __name__ == "__main__":
    main()
