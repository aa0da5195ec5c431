/* jinja_internal.h: what the engine's files share beyond the public API (jinja/jinja.h): the
 * heap's allocator, Python's printing and comparison of values, and the Unicode string
 * operations Python's str methods need (code points, case mapping, whitespace). */
#pragma once
#include <setjmp.h>

#include "jinja/jinja.h"

/* ---- the heap ---- */

struct jinja_heap {
    struct jinja_chunk *chunks; /* newest first */
    size_t used;                /* bytes handed out since the last reset */
    size_t max;                 /* 0: no limit */
    bool failed;                /* an allocation went over max */
    jmp_buf *on_fail;           /* set while a render runs: a failed allocation jumps here */
};

/* n bytes, 16-byte aligned, uninitialised, valid until the heap is reset. Over the limit: sets
 * failed, then longjmp(*on_fail) when set, else returns NULL. */
void *jinja_alloc(jinja_heap *h, size_t n);
/* A heap string of len bytes whose bytes the caller writes (NULL as above). */
char *jinja_str_alloc(jinja_heap *h, size_t len, jinja_value *out);

/* ---- Python semantics of values ---- */

/* Python's repr(f) of a float: the shortest string that reads back as f ("1.0", "1e-05",
 * "1e+16", "0.1", "inf", "nan", "-0.0"). Returns its length (< 32). */
int jinja_float_repr(double f, char buf[32]);
/* Python's repr(s) of a string: quotes as Python picks them ('...' unless the text has ' and
 * no "), with Python's escapes (\\, \n, \r, \t, \xNN, \uNNNN, \UNNNNNNNN for what
 * str.isprintable() refuses). */
void jinja_str_repr(const char *s, size_t len, jinja_buf *out);
/* Python's repr(v) (strings quoted; lists and dicts as Python prints them). */
void jinja_value_repr(jinja_value v, jinja_buf *out);
/* Python's a == b (1 == 1.0 == True, lists and dicts element-wise, undefined == undefined). */
bool jinja_equal(jinja_value a, jinja_value b);
/* Python's a < b for numbers (bools count as ints) and strings (code point order), lists
 * lexicographically; *ok false when Python raises TypeError (a str and an int, None, ...). */
bool jinja_less(jinja_value a, jinja_value b, bool *ok);
/* Whether v can be a dict key (Python hashable: not a list, dict or namespace). */
bool jinja_hashable(jinja_value v);
/* Index of key in d (Python equality), or -1. */
int64_t jinja_dict_find(const jinja_dict *d, jinja_value key);
/* Python type names in error messages ("str", "int", "list", "dict", "NoneType", ...). */
const char *jinja_type_name(jinja_value v);

/* ---- UTF-8 and Unicode (Python 3's str semantics) ---- */

/* The code point at s[0, n) and its length in bytes (s is valid UTF-8, n >= 1). */
int jinja_utf8_next(const char *s, size_t n, uint32_t *cp);
/* Appends cp as UTF-8. */
void jinja_utf8_put(jinja_buf *b, uint32_t cp);
/* Number of code points of valid UTF-8 s[0, n). */
int64_t jinja_cp_count(const char *s, size_t n);
/* Byte offset of code point index k (0 <= k <= count) of s[0, n). */
size_t jinja_cp_offset(const char *s, size_t n, int64_t k);
/* Python's str.isspace() for one code point (what str.split() and str.strip() without
 * arguments treat as whitespace). */
bool jinja_cp_isspace(uint32_t cp);
/* Python's full case mappings (SpecialCasing included: 'ß'.upper() == 'SS'), appended to out:
 * str.upper(), str.lower(), and the titlecase mapping str.title() and str.capitalize() use for a
 * word's first character. */
void jinja_cp_upper(uint32_t cp, jinja_buf *out);
void jinja_cp_lower(uint32_t cp, jinja_buf *out);
void jinja_cp_title(uint32_t cp, jinja_buf *out);
/* Whether cp is cased / case-ignorable as Python's str.title() decides word boundaries
 * (cased: Lu, Ll, Lt; a word goes on while characters are cased). */
bool jinja_cp_cased(uint32_t cp);
/* Python's str.upper(), str.lower(), str.title(), str.capitalize() of s[0, n), appended. */
void jinja_str_upper(const char *s, size_t n, jinja_buf *out);
void jinja_str_lower(const char *s, size_t n, jinja_buf *out);
void jinja_str_title(const char *s, size_t n, jinja_buf *out);
void jinja_str_capitalize(const char *s, size_t n, jinja_buf *out);
/* Python's character classes of one code point, as str.islower(), isupper(), istitle(),
 * isalpha(), isdecimal(), isdigit(), isnumeric(), isalnum() use them (Py_UNICODE_ISLOWER ...:
 * Ll and Other_Lowercase; Lu and Other_Uppercase; Lt; L*; Nd; Numeric_Type Decimal or Digit;
 * any Numeric_Type; alpha, decimal, digit or numeric). */
bool jinja_cp_islower(uint32_t cp);
bool jinja_cp_isupper(uint32_t cp);
bool jinja_cp_istitle(uint32_t cp);
bool jinja_cp_isalpha(uint32_t cp);
bool jinja_cp_isdecimal(uint32_t cp);
bool jinja_cp_isdigit(uint32_t cp);
bool jinja_cp_isnumeric(uint32_t cp);
/* Python's str.isprintable() for one code point (repr escapes the rest). */
bool jinja_cp_printable(uint32_t cp);
