#!/usr/bin/env python3
"""make_jinja_value_fixtures.py: writes tests/fixtures/jinja/values.json, what Python (and
jinja2's Undefined and Namespace) say about values, for tests/jinja/jinja_values.c to hold the Jinja
engine's values (jinja/jinja_heap.c, jinja_json.c, jinja_print.c, jinja_unicode.c) to:

  floats        repr() of doubles given by their bits: edge cases, every power of two (where
                the shortest digits are not the correctly rounded ones), powers of ten and their
                neighbours, short decimals, random bit patterns
  json_parse    texts for json.loads: the repr() of the result, or an error (also where the
                engine refuses what Python takes: duplicate keys, lone surrogates, integers
                beyond int64, nesting deeper than 512)
  json_dump     json.dumps(value, **opts) or the message of the exception it raises
  print         str(), repr(), bool() and type().__name__ of values
  compare       a == b and a < b (null: Python raises)
  strings       str.upper(), lower(), title(), capitalize() and len() of strings chosen for
                SpecialCasing, the Final_Sigma context and word boundaries, plus random ones
  unicode       per block of 4096 code points, the 64-bit FNV-1a of record(c) for every code
                point c (see record() below): the C test recomputes it from the engine

Values are written as JSON texts, which the test parses with jinja_json_parse (so 1 and 1.0
stay apart), with tags for what JSON has no syntax for:
  {"__pairs__": [[k, v], ...]}   a dict with keys of any type
  {"__undefined__": "name"}      jinja2.Undefined(name=...) (null: no name)
  {"__namespace__": {...}}       jinja2.utils.Namespace(**attrs)
  {"__cycle__": "list" | "dict"} a list containing itself / a dict {"self": itself}

Run from the repository root with Python 3.11 (Unicode 14.0.0) and jinja2 3.1.x:
  python3 tools/make_jinja_value_fixtures.py
The output is deterministic (fixed seed).
"""
import json
import math
import os
import random
import struct
import sys
import unicodedata

import jinja2
from jinja2.utils import Namespace

OUT = "tests/fixtures/jinja/values.json"
BLOCK = 4096
SIGMA = "\u03a3"


# ---- values ----

def build(t):
    """The Python object a tagged value stands for."""
    if isinstance(t, list):
        return [build(x) for x in t]
    if isinstance(t, dict):
        if "__pairs__" in t:
            return {build(k): build(v) for k, v in t["__pairs__"]}
        if "__undefined__" in t:
            name = t["__undefined__"]
            return jinja2.Undefined(name=name) if name is not None else jinja2.Undefined()
        if "__namespace__" in t:
            return Namespace(**{k: build(v) for k, v in t["__namespace__"].items()})
        if "__cycle__" in t:
            if t["__cycle__"] == "list":
                a = []
                a.append(a)
                return a
            d = {}
            d["self"] = d
            return d
        return {k: build(v) for k, v in t.items()}
    return t


def text(t):
    return json.dumps(t, ensure_ascii=True)


def pairs(*kv):
    return {"__pairs__": [list(p) for p in kv]}


def undef(name="x"):
    return {"__undefined__": name}


STRINGS = [
    "", "a", "it's", 'say "hi"', "it's \"both\"", "back\\slash", "tab\there\nnew\rret",
    "".join(chr(c) for c in range(1, 128)), "\x00nul", "\x7f\x80\x9f\xa0\xad\xff",
    "caf\u00e9", "e\u0301", "\u0378\u200b\u2028\u2029\u3000\ue000\ufeff\uffff",
    "\U0001f600 emoji", "\U000f0000\U0010ffff", "\u4e2d\u6587", "\u0627\u0644\u0639",
    "\ud55c\uad6d\uc5b4", "\u00df\u0130", "</s>\n<|im_end|>", "\\u0041", "'", '"', "'\"",
]


def dump_values():
    nested = {"role": "user", "content": "Hi \u00e9\U0001f600", "n": [1, 2.5, None, True],
              "d": {"z": 1, "a": {"k": []}, "m": {}}}
    return [
        None, True, False, 0, -1, 9223372036854775807, -9223372036854775808, 0.0, -0.0, 1.0,
        1.5, 0.1, 1e16, 1e-5, 123456789.123, 1e300, float("inf"), float("-inf"), float("nan"),
        "", "plain", "\u00e9\u4e2d\U0001f600", "".join(chr(c) for c in range(0, 0x80)),
        "\u2028\u2029\ufeff\x85", [], {}, [[]], [{}], {"a": []}, {"a": {}}, [1, [2, [3, []]]],
        nested, {"b": 1, "a": 2, "c": {"y": 1, "x": 2}}, {"\u00e9": 1, "e": 2, "E": 3},
        pairs([1, "i"], [2.5, "f"], [True, "t"], [None, "n"], ["s", "s"]),
        pairs([3, "c"], [1, "a"], [2.0, "b"], [False, "z"]),
        pairs([float("nan"), 1], [1.0, 2], [0.5, 3], [float("inf"), 4], [-1, 5]),
        pairs(["b", 1], [1, 2]), pairs([None, 1], [2, 3]), pairs([None, 1]),
        pairs([1.5, 1], [True, 2], [None, 3]), pairs([undef(), 1], [2, 3]),
        pairs([undef(), 1]), pairs([undef(None), 1], [1, 2]), pairs([undef("it's"), 1], [0, 2]),
        [1, undef()], {"ns": {"__namespace__": {"a": 1}}},
        {"__cycle__": "list"}, {"__cycle__": "dict"},
        {str(k): k for k in range(20)}, {chr(0x41 + (7 * k) % 26) + str(k): k for k in range(30)},
    ]


DUMP_OPTS = [
    {},
    {"ensure_ascii": False},
    {"indent": 2},
    {"indent": 0},
    {"indent": 4, "sort_keys": True},
    {"ensure_ascii": False, "indent": 2, "sort_keys": True},
    {"separators": [",", ":"]},
    {"separators": [",", ": "], "indent": 1, "ensure_ascii": False},
    {"sort_keys": True},
]


def json_dump_cases():
    out = []
    for v in dump_values():
        for o in DUMP_OPTS:
            kw = dict(o)
            if "separators" in kw:
                kw["separators"] = tuple(kw["separators"])
            case = {"value": text(v), "opts": o}
            try:
                case["out"] = json.dumps(build(v), **kw)
            except Exception as e:  # TypeError, ValueError, jinja2's UndefinedError
                case["error"] = str(e)
            out.append(case)
    return out


def print_cases():
    vals = [None, True, False, 0, -7, 9223372036854775807, 0.0, -0.0, 1e-5, 1e16, 2.5,
            float("nan"), float("inf"), [], {}, [1, "a", None, True, 1.0],
            {"k": "v", "n": [1, {"x": None}]}, pairs([1, "a"], [None, [1]], [False, 0.5]),
            undef(), undef(None), [undef("y")], {"__namespace__": {"a": 1, "b": "s"}},
            {"__namespace__": {}}, [{"__namespace__": {"l": [1]}}], {"__cycle__": "list"},
            {"__cycle__": "dict"}, [[], [[]], {}], {"q": "it's", "d": 'say "x"'},
            pairs([1, "a"], [1.0, "b"], [True, "c"], [0, "d"], [False, "e"], [0.0, "f"])]
    vals += STRINGS + [[s] for s in STRINGS]
    out = []
    for v in vals:
        obj = build(v)
        s, r = str(obj), repr(obj)
        out.append({"value": text(v), "str": None if "\x00" in s else s, "repr": r,
                    "truthy": bool(obj), "type": type(obj).__name__})
    return out


def compare_cases():
    vals = [None, True, False, 0, 1, -1, 2, 1.0, 0.5, -0.0, float("nan"), float("inf"),
            2 ** 53, 2 ** 53 + 1, 2.0 ** 53, 9223372036854775807, 9.223372036854776e18,
            -9223372036854775808, -9.223372036854776e18, "", "a", "b", "ab", "\u00e9", "z",
            "\U0001f600", "\uffff", [], [1], [1, 2], [1, "a"], [1, 2.0], [True], ["a"], {},
            {"a": 1}, {"a": 1.0}, {"a": 1, "b": 2}, {"b": 2, "a": 1}, undef(), undef("y")]
    out = []
    for a in vals:
        for b in vals:
            x, y = build(a), build(b)
            try:
                lt = x < y
            except Exception:
                lt = None
            out.append({"a": text(a), "b": text(b), "eq": x == y, "lt": lt})
    return out


def json_parse_cases():
    texts = [
        "0", "-0", "1", "-1", "1.0", "-0.0", "1e5", "1E5", "1e+5", "1.5e-3", "10", "0.5",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "-9223372036854775809", "123456789012345678901234567890", "1e400", "-1e400", "1e-400",
        "NaN", "Infinity", "-Infinity", "nan", "inf", "-NaN", "+1", "01", ".5", "1.", "1.e5",
        "-", "1e", "1e+", "0x10", "true", "false", "null", "True", "None", "tru", "nul",
        '""', '"a"', '"\\u00e9"', '"\\ud83d\\ude00"', '"\\ud83d"', '"\\ude00"', '"\\ud83dx"',
        '"\\ud83d\\u0041"', '"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\x41"', '"\\u004"', '"\\u00G1"',
        '"\\U0041"', '"tab\there"', '"nl\nx"', '"\x7f"', '"\u00e9\U0001f600"', '"\\u0000"',
        '"unterminated', '"\\', "[]", "{}", "[1, 2.0, \"3\", null]", " \t\n\r[ 1 ,2 ] \n",
        "[1,]", "[,1]", "[1 2]", "[", "]", "{\"a\": 1, \"b\": [true, {\"c\": null}]}",
        "{\"a\":1,\"a\":2}", "{\"a\":1,}", "{a:1}", "{\"a\" 1}", "{\"a\":}", "{'a':1}",
        "{\"b\": 1, \"a\": 2}", "{\"\": 0}", "", " ", "1 2", "[] x", "{} {}", "\ufeff1",
        "[" * 512 + "]" * 512, "[" * 513 + "]" * 513, "{\"a\":" * 512 + "1" + "}" * 512,
        "{\"a\":" * 513 + "1" + "}" * 513, "[1e16, 1e-5, 0.1, 100.0, 2.5e-300]",
        "[-0, -0.0, 0e0, 0E-0]", "\"\\u2028\\u2029\"", "[\"\\u0000\", 1]",
    ]
    cases = [{"text": t} for t in texts]
    # bytes that are not UTF-8 (the test passes them as they are)
    for h in ["22ff22", "22c0af22", "22eda08022", "22f490808022", "22e28222", "5b22c3", "22c322"]:
        cases.append({"hex": h})
    for c in cases:
        try:
            t = bytes.fromhex(c["hex"]).decode("utf-8") if "hex" in c else c["text"]
            v = json.loads(t, object_pairs_hook=strict_pairs)
            check_engine_limits(v, t)
            c["repr"] = repr(v)
        except (ValueError, UnicodeDecodeError, RecursionError):
            c["error"] = True
    return cases


def strict_pairs(kv):
    keys = [k for k, _ in kv]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(kv)


def check_engine_limits(v, t, depth=0):
    """What the engine refuses that json.loads takes (jinja/jinja.h)."""
    if isinstance(v, int) and not isinstance(v, bool) and not -2 ** 63 <= v < 2 ** 63:
        raise ValueError("integer beyond int64")
    if isinstance(v, str) and any(0xD800 <= ord(ch) <= 0xDFFF for ch in v):
        raise ValueError("lone surrogate")
    if isinstance(v, (list, dict)):
        if depth >= 512:
            raise ValueError("too deep")
        for x in (v.values() if isinstance(v, dict) else v):
            check_engine_limits(x, t, depth + 1)
        for k in (v if isinstance(v, dict) else []):
            check_engine_limits(k, t, depth + 1)


# ---- floats ----

def bits(f):
    return "%016x" % struct.unpack("<Q", struct.pack("<d", f))[0]


def float_cases(rng):
    fs = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324, -5e-324,
          2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308, 0.1, 0.2,
          0.3, 1 / 3, 2 / 3, 1.0, 1.5, 100.0, 1e15, 1e16, 1e17, 9999999999999998.0,
          123456789012345678.0, 1e-4, 1e-5, 0.00011, 9.9999e-5, 1e22, 1e23, 1.5e-300, 1.5e300,
          2.0 ** 53, 2.0 ** 53 + 2, 2.0 ** 63, 2.0 ** 64, 0.5, 0.25, 123.0, 1e-7, 4.35, 2.675]
    fs += [2.0 ** e for e in range(-1074, 1024)]
    fs += [-(2.0 ** e) for e in range(-1074, 1024, 7)]
    for e in range(-325, 309):
        x = float("1e%d" % e)
        fs += [x, math.nextafter(x, 0), math.nextafter(x, math.inf)]
    for _ in range(1000):
        fs.append(round(rng.uniform(-1000, 1000), rng.randrange(0, 7)))
    for _ in range(300):
        fs.append(float(rng.getrandbits(rng.randrange(1, 64))))
    for _ in range(3000):
        fs.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
    seen, out = set(), []
    for f in fs:
        b = bits(f)
        if b not in seen:
            seen.add(b)
            out.append([b, repr(f)])
    return out


# ---- Unicode ----

def cased(ch):
    return (ch + "A").title()[-1] == "a"


def record(c):
    """What the C test writes for code point c: UTF-8 (surrogates as they are) of each piece,
    each followed by 0xFF (never a UTF-8 byte). The classes are one code point, chr(flags).
    istitle() of one character is also true for uppercase: Py_UNICODE_ISTITLE is category Lt."""
    ch = chr(c)
    classes = [ch.isspace(), ch.isprintable(), cased(ch), ch.islower(), ch.isupper(),
               unicodedata.category(ch) == "Lt", ch.isalpha(), ch.isdecimal(), ch.isdigit(),
               ch.isnumeric()]
    flags = sum(1 << i for i, f in enumerate(classes) if f)
    pieces = [ch.upper(), ch.lower(), ch.title(), chr(flags), repr(ch), ("A" + SIGMA + ch).lower(),
              ("A" + ch + SIGMA).lower(), (ch + SIGMA).capitalize(), (ch + "A").title()]
    return b"".join(p.encode("utf-8", "surrogatepass") + b"\xff" for p in pieces)


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def unicode_digests():
    out = []
    for lo in range(0, 0x110000, BLOCK):
        data = b"".join(record(c) for c in range(lo, lo + BLOCK))
        out.append("%016x" % fnv1a64(data))
    return out


POOL = ("A", "a", "Z", "z", " ", "'", ".", ":", "^", "`", "1", "_", "-", SIGMA, "\u03c3",
        "\u03c2", "\u0391", "\u03b1", "\u0301", "\u00ad", "\u02b0", "\u0345", "\u00df", "\u0130",
        "\u01c5", "\u01c4", "\u01c6", "\ufb01", "\u1f88", "\u1fb3", "\u0149", "\u0390", "\u00aa",
        "\u24b6", "\u2160", "\u00e9", "\u4e2d", "\U0001f600", "\U00010400", "\U0001e900", "\t",
        "\u3000", "\u0131", "\u1e9e", "\u1c80")


def string_cases(rng):
    fixed = ["hello world", "HELLO World", "\u03a3\u0391\u03a3 \u03a3\u0391\u03a3.",
             "\u1f48\u0394\u03a5\u03a3\u03a3\u0395\u038e\u03a3", "a\u03a3", "\u03a3", "A\u03a3'",
             "A\u03a3'b", "A'\u03a3", "A\u0301\u03a3\u0301", "\u00df stra\u00dfe",
             "\ufb01sh \ufb02y", "\u0130stanbul", "\u01c5emal \u01c6 \u01c4A",
             "they're bill's friends", "hello\u0301world", "1st 2nd 3RD", "\u1ffc \u1fb3",
             "\u0149", "\u0390", "\u02b0a\u03a3", "\u0345\u03a3", "", " ", "x"]
    out = list(fixed)
    for _ in range(400):
        out.append("".join(rng.choice(POOL) for _ in range(rng.randrange(1, 12))))
    return [{"s": s, "upper": s.upper(), "lower": s.lower(), "title": s.title(),
             "capitalize": s.capitalize(), "len": len(s)} for s in out]


# ---- output ----

def write(doc):
    """One case a line: reviewable diffs, a file cJSON reads."""
    lines = ["{"]
    keys = list(doc)
    for i, k in enumerate(keys):
        v = doc[k]
        end = "," if i + 1 < len(keys) else ""
        if isinstance(v, list):
            lines.append(" %s: [" % json.dumps(k))
            lines += ["  %s%s" % (json.dumps(x, ensure_ascii=True), "," if j + 1 < len(v) else "")
                      for j, x in enumerate(v)]
            lines.append(" ]" + end)
        else:
            lines.append(" %s: %s%s" % (json.dumps(k), json.dumps(v), end))
    lines.append("}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if sys.version_info[:2] != (3, 11) or unicodedata.unidata_version != "14.0.0":
        sys.exit("need Python 3.11 (Unicode 14.0.0), the version of jinja/jinja_unicode_data.c")
    rng = random.Random(20250101)
    doc = {
        "about": "GENERATED by tools/make_jinja_value_fixtures.py, do not edit",
        "python": sys.version.split()[0],
        "unicode": unicodedata.unidata_version,
        "jinja2": jinja2.__version__,
        "unicode_block": BLOCK,
        "floats": float_cases(rng),
        "json_parse": json_parse_cases(),
        "json_dump": json_dump_cases(),
        "print": print_cases(),
        "compare": compare_cases(),
        "strings": string_cases(rng),
        "unicode_digests": unicode_digests(),
    }
    write(doc)
    print("%s: %s" % (OUT, ", ".join("%d %s" % (len(v), k) for k, v in doc.items()
                                      if isinstance(v, list))))


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    main()
