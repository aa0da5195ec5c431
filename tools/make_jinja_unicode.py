#!/usr/bin/env python3
"""make_jinja_unicode.py: writes jinja/jinja_unicode_data.c, the tables behind the Jinja
engine's Python str semantics (jinja/jinja_unicode.c): what Python's str.upper(), str.lower()
and str.title() give for every single code point (SpecialCasing included: 'ß'.upper() == 'SS'),
str.isspace(), str.isprintable(), CPython's Cased and Case_Ignorable properties, which
str.title() and the Final_Sigma rule of str.lower() use, and the character classes of
str.islower(), isupper(), istitle(), isalpha(), isdecimal(), isdigit(), isnumeric().

Everything is read from the running Python's str methods (standard library only), so the
tables are that Python's behaviour by construction:
  upper/lower/title   chr(c).upper() / .lower() / .title() (a lone U+03A3 lowers to U+03C3:
                      the final-sigma context is applied by the C code, as CPython does)
  space ... numeric   chr(c).isspace() ... (istitle: category Lt, see flags())
  cased               (chr(c) + 'A').title() ends in 'a': do_title lowercases after a cased
                      character (CPython's _PyUnicode_IsCased: the Cased derived property,
                      which includes Other_Lowercase such as U+00AA, not just Lu/Ll/Lt)
  case_ignorable      from the Final_Sigma context of str.lower(): for a cased c,
                      ('AΣ' + c).lower() keeps the final sigma only when c is ignorable; for
                      an uncased c, ('A' + c + 'Σ').lower() gives a final sigma only when
                      the scan back skips c
Where ctypes reaches CPython's _PyUnicode_IsCased, _PyUnicode_IsCaseIgnorable, ... the flags
are cross-checked against them.

Tables (see jinja/jinja_unicode.c for the lookups):
  jinja_ucd_props                  runs of the 11 flags (FLAGS), packed (start << 11 | flags)
  jinja_ucd_{upper,lower,title}    single code point mappings as runs of a constant delta
                                   over code points with stride 1 or 2, two words per run:
                                   (start << 9 | (count - 1) << 1 | (stride - 1)), delta
  jinja_ucd_*_multi                the mappings to 2 or 3 code points: cp, m0, m1, m2 (0: none)

Run from the repository root with Python 3.11 (Unicode 14.0.0; others refused):
  python3 tools/make_jinja_unicode.py
The output is deterministic and is clang-formatted here (clang-format must be on PATH).
"""
import ctypes
import os
import subprocess
import sys
import unicodedata

PINNED_PY = (3, 11)
PINNED_UCD = "14.0.0"
OUT = "jinja/jinja_unicode_data.c"
N_CP = 0x110000

# The flag bits of jinja_ucd_props (jinja/jinja_unicode.c's P_* in this order).
FLAGS = ["space", "printable", "cased", "case_ignorable", "lower", "upper", "title", "alpha",
         "decimal", "digit", "numeric"]
FLAG_BITS = 11


def cased(ch):
    return (ch + "A").title()[-1] == "a"


def case_ignorable(ch):
    if cased(ch):
        return ("A\u03a3" + ch).lower()[1] == "\u03c2"
    return ("A" + ch + "\u03a3").lower()[-1] == "\u03c2"


def flags(cp):
    ch = chr(cp)
    # On one character str.islower() etc. are exactly CPython's Py_UNICODE_IS* (istitle() is
    # not: it is also true for uppercase, so Lt comes from the category, as makeunicodedata.py)
    have = [ch.isspace(), ch.isprintable(), cased(ch), case_ignorable(ch), ch.islower(),
            ch.isupper(), unicodedata.category(ch) == "Lt", ch.isalpha(), ch.isdecimal(),
            ch.isdigit(), ch.isnumeric()]
    return sum(1 << i for i, h in enumerate(have) if h)


def cross_check(props):
    """Compares the derived flags with CPython's own functions, where ctypes reaches them."""
    names = {"cased": "_PyUnicode_IsCased", "case_ignorable": "_PyUnicode_IsCaseIgnorable",
             "lower": "_PyUnicode_IsLowercase", "upper": "_PyUnicode_IsUppercase",
             "title": "_PyUnicode_IsTitlecase", "alpha": "_PyUnicode_IsAlpha",
             "decimal": "_PyUnicode_IsDecimalDigit", "digit": "_PyUnicode_IsDigit",
             "numeric": "_PyUnicode_IsNumeric"}
    try:
        fns = {k: getattr(ctypes.pythonapi, v) for k, v in names.items()}
    except AttributeError:
        print("ctypes: CPython's _PyUnicode_Is* not found, flags not cross-checked")
        return
    for fn in fns.values():
        fn.argtypes = [ctypes.c_uint32]
    for cp in range(N_CP):
        for k, fn in fns.items():
            assert bool(props[cp] >> FLAGS.index(k) & 1) == bool(fn(cp)), (k, hex(cp))
    print("flags equal CPython's %s on every code point" % ", ".join(sorted(names.values())))


def prop_runs(props):
    out = []
    for cp in range(N_CP):
        if not out or out[-1][1] != props[cp]:
            out.append((cp, props[cp]))
    return out


def case_tables(method):
    """(runs, multi) for one of str.upper / str.lower / str.title on single characters."""
    single, multi = [], []
    for cp in range(N_CP):
        m = method(chr(cp))
        if len(m) == 1:
            if ord(m) != cp:
                single.append((cp, ord(m) - cp))
        else:
            assert 2 <= len(m) <= 3, hex(cp)
            multi.append((cp, [ord(c) for c in m] + [0] * (3 - len(m))))
    runs = []  # [start, count, stride, delta]
    for cp, delta in single:
        if runs:
            r = runs[-1]
            last = r[0] + (r[1] - 1) * r[2]
            if r[3] == delta and r[1] < 256:
                if r[1] == 1 and cp - last in (1, 2):
                    r[2] = cp - last
                    r[1] += 1
                    continue
                if r[1] > 1 and cp - last == r[2]:
                    r[1] += 1
                    continue
        runs.append([cp, 1, 1, delta])
    # The lookup relies on runs being disjoint spans in code point order.
    for a, b in zip(runs, runs[1:]):
        assert a[0] + (a[1] - 1) * a[2] < b[0]
    return runs, multi


def main():
    if sys.version_info[:2] != PINNED_PY or unicodedata.unidata_version != PINNED_UCD:
        sys.exit("need Python %d.%d (Unicode %s), have %s (Unicode %s)"
                 % (PINNED_PY + (PINNED_UCD, sys.version.split()[0],
                                 unicodedata.unidata_version)))
    props = [flags(cp) for cp in range(N_CP)]
    cross_check(props)
    pr = prop_runs(props)
    pyver = sys.version.split()[0]
    lines = [
        "// jinja_unicode_data.c: GENERATED by tools/make_jinja_unicode.py, do not edit.",
        "// Pure data: Python %s's str.upper(), str.lower(), str.title() of every single code"
        % pyver,
        "// point, str.isspace(), str.isprintable(), CPython's Cased / Case_Ignorable and the",
        "// classes of str.islower() ... isnumeric(), in Unicode %s. Layouts: the generator's"
        % PINNED_UCD,
        "// docstring; lookups: jinja/jinja_unicode.c.",
        "#include <stdint.h>",
        "",
        "// Declared in jinja/jinja_unicode.c, the only user.",
        "extern const char jinja_ucd_version[], jinja_ucd_python[];",
        "extern const uint32_t jinja_ucd_props[];",
        "extern const int32_t jinja_ucd_n_props;",
        "",
        'const char jinja_ucd_version[] = "%s";' % PINNED_UCD,
        'const char jinja_ucd_python[] = "%s";' % pyver,
        "",
        "const uint32_t jinja_ucd_props[] = {",
    ]
    lines += ["0x%x," % (s << FLAG_BITS | f) for s, f in pr]
    lines += ["};", "const int32_t jinja_ucd_n_props = %d;" % len(pr), ""]
    stats = []
    for name, method in (("upper", str.upper), ("lower", str.lower), ("title", str.title)):
        runs, multi = case_tables(method)
        stats.append("%s %d runs + %d multi" % (name, len(runs), len(multi)))
        lines += [
            "extern const uint32_t jinja_ucd_%s[][2], jinja_ucd_%s_multi[][4];" % (name, name),
            "extern const int32_t jinja_ucd_n_%s, jinja_ucd_n_%s_multi;" % (name, name),
            "const uint32_t jinja_ucd_%s[][2] = {" % name,
        ]
        lines += ["{0x%x, 0x%x}," % (s << 9 | (c - 1) << 1 | (st - 1), d & 0xFFFFFFFF)
                  for s, c, st, d in runs]
        lines += ["};", "const int32_t jinja_ucd_n_%s = %d;" % (name, len(runs))]
        lines += ["const uint32_t jinja_ucd_%s_multi[][4] = {" % name]
        lines += ["{0x%x, 0x%x, 0x%x, 0x%x}," % (cp, *m) for cp, m in multi]
        lines += ["};", "const int32_t jinja_ucd_n_%s_multi = %d;" % (name, len(multi)), ""]
    with open(OUT, "w") as f:
        f.write("\n".join(lines))
    subprocess.run(["clang-format", "-i", OUT], check=True)
    print("%s: %d property runs; %s" % (OUT, len(pr), "; ".join(stats)))


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    main()
