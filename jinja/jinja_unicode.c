/* jinja_unicode.c: UTF-8 and Python 3's str semantics on code points: case mappings (full,
 * SpecialCasing included), str.title(), str.capitalize(), the Final_Sigma rule of str.lower(),
 * whitespace, line ends (str.splitlines()), printability and the classes of str.islower() ...
 * isnumeric(). The tables are generated from Python itself (tools/make_jinja_unicode.py ->
 * jinja_unicode_data.c); ASCII never reaches them. */
#include <string.h>

#include "jinja/jinja_internal.h"
#include "jinja/jinja_vm.h"

/* jinja_unicode_data.c (layouts: tools/make_jinja_unicode.py) */
extern const char jinja_ucd_version[], jinja_ucd_python[];
extern const uint32_t jinja_ucd_props[];
extern const int32_t jinja_ucd_n_props;
extern const uint32_t jinja_ucd_upper[][2], jinja_ucd_upper_multi[][4];
extern const int32_t jinja_ucd_n_upper, jinja_ucd_n_upper_multi;
extern const uint32_t jinja_ucd_lower[][2], jinja_ucd_lower_multi[][4];
extern const int32_t jinja_ucd_n_lower, jinja_ucd_n_lower_multi;
extern const uint32_t jinja_ucd_title[][2], jinja_ucd_title_multi[][4];
extern const int32_t jinja_ucd_n_title, jinja_ucd_n_title_multi;

/* The flag bits of jinja_ucd_props (make_jinja_unicode.py FLAGS), runs of (start << 11 | flags). */
enum {
    P_SPACE = 1 << 0,
    P_PRINTABLE = 1 << 1,
    P_CASED = 1 << 2,
    P_CASE_IGNORABLE = 1 << 3,
    P_LOWER = 1 << 4,
    P_UPPER = 1 << 5,
    P_TITLE = 1 << 6,
    P_ALPHA = 1 << 7,
    P_DECIMAL = 1 << 8,
    P_DIGIT = 1 << 9,
    P_NUMERIC = 1 << 10,
    P_BITS = 11,
};

/* ---- UTF-8 ---- */

int jinja_utf8_next(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len == 1 || (size_t)len > n) { /* not valid UTF-8: one byte, U+FFFD, never past n */
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) v = v << 6 | (u[i] & 0x3F);
    *cp = v;
    return len;
}

void jinja_utf8_put(jinja_buf *b, uint32_t cp) {
    char o[4];
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    jinja_buf_append(b, o, n);
}

int64_t jinja_cp_count(const char *s, size_t n) {
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t jinja_cp_offset(const char *s, size_t n, int64_t k) {
    size_t i = 0;
    for (; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80 && k-- == 0) return i;
    return n;
}

/* ---- properties ---- */

static unsigned props(uint32_t cp) {
    uint32_t key = cp << P_BITS | ((1u << P_BITS) - 1); /* the last run starting at or before cp */
    int32_t lo = 0, hi = jinja_ucd_n_props - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (jinja_ucd_props[mid] <= key)
            lo = mid;
        else
            hi = mid - 1;
    }
    return jinja_ucd_props[lo] & ((1u << P_BITS) - 1);
}

static bool ascii_lower(uint32_t c) { return c >= 'a' && c <= 'z'; }
static bool ascii_upper(uint32_t c) { return c >= 'A' && c <= 'Z'; }
static bool ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

bool jinja_cp_isspace(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return props(cp) & P_SPACE;
}

bool jinja_cp_printable(uint32_t cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
    return props(cp) & P_PRINTABLE;
}

bool jinja_cp_cased(uint32_t cp) {
    if (cp < 0x80) return ascii_lower(cp) || ascii_upper(cp);
    return props(cp) & P_CASED;
}

static bool cp_case_ignorable(uint32_t cp) {
    if (cp < 0x80) return cp == '\'' || cp == '.' || cp == ':' || cp == '^' || cp == '`';
    return props(cp) & P_CASE_IGNORABLE;
}

bool jinja_cp_islower(uint32_t cp) { return cp < 0x80 ? ascii_lower(cp) : props(cp) & P_LOWER; }
bool jinja_cp_isupper(uint32_t cp) { return cp < 0x80 ? ascii_upper(cp) : props(cp) & P_UPPER; }
bool jinja_cp_istitle(uint32_t cp) { return cp < 0x80 ? false : props(cp) & P_TITLE; }

bool jinja_cp_isalpha(uint32_t cp) {
    return cp < 0x80 ? ascii_lower(cp) || ascii_upper(cp) : props(cp) & P_ALPHA;
}

bool jinja_cp_isdecimal(uint32_t cp) { return cp < 0x80 ? ascii_digit(cp) : props(cp) & P_DECIMAL; }
bool jinja_cp_isdigit(uint32_t cp) { return cp < 0x80 ? ascii_digit(cp) : props(cp) & P_DIGIT; }
bool jinja_cp_isnumeric(uint32_t cp) { return cp < 0x80 ? ascii_digit(cp) : props(cp) & P_NUMERIC; }

/* ---- case mappings ---- */

typedef struct {
    const uint32_t (*runs)[2], (*multi)[4];
    const int32_t *n_runs, *n_multi;
} case_table;

static const case_table upper_t = {jinja_ucd_upper, jinja_ucd_upper_multi, &jinja_ucd_n_upper,
                                   &jinja_ucd_n_upper_multi};
static const case_table lower_t = {jinja_ucd_lower, jinja_ucd_lower_multi, &jinja_ucd_n_lower,
                                   &jinja_ucd_n_lower_multi};
static const case_table title_t = {jinja_ucd_title, jinja_ucd_title_multi, &jinja_ucd_n_title,
                                   &jinja_ucd_n_title_multi};

/* The mapping of non-ASCII cp into m[0..2]; returns how many code points. */
static int case_map(const case_table *t, uint32_t cp, uint32_t m[3]) {
    int32_t lo = 0, hi = *t->n_multi - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (t->multi[mid][0] == cp) {
            m[0] = t->multi[mid][1], m[1] = t->multi[mid][2], m[2] = t->multi[mid][3];
            return m[2] ? 3 : 2;
        }
        if (t->multi[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    m[0] = cp;
    lo = 0, hi = *t->n_runs - 1;
    if (hi < 0 || cp < t->runs[0][0] >> 9) return 1;
    while (lo < hi) { /* the last run starting at or before cp */
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (t->runs[mid][0] >> 9 <= cp)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint32_t w = t->runs[lo][0], start = w >> 9, count = (w >> 1 & 0xFF) + 1, stride = (w & 1) + 1;
    uint32_t off = cp - start;
    if (off % stride == 0 && off / stride < count) m[0] = cp + t->runs[lo][1];
    return 1;
}

static void put_mapped(const case_table *t, uint32_t cp, jinja_buf *out) {
    uint32_t m[3];
    int n = case_map(t, cp, m);
    for (int i = 0; i < n; i++) jinja_utf8_put(out, m[i]);
}

void jinja_cp_upper(uint32_t cp, jinja_buf *out) {
    if (cp < 0x80) {
        char c = (char)(cp >= 'a' && cp <= 'z' ? cp - 32 : cp);
        return jinja_buf_append(out, &c, 1);
    }
    put_mapped(&upper_t, cp, out);
}

void jinja_cp_lower(uint32_t cp, jinja_buf *out) {
    if (cp < 0x80) {
        char c = (char)(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        return jinja_buf_append(out, &c, 1);
    }
    put_mapped(&lower_t, cp, out);
}

void jinja_cp_title(uint32_t cp, jinja_buf *out) {
    if (cp < 0x80) return jinja_cp_upper(cp, out);
    put_mapped(&title_t, cp, out);
}

/* ---- strings ---- */

/* Runs of ASCII that a mapping leaves alone are appended in one piece: `run` bytes before i. */
typedef struct {
    const char *s;
    size_t run;
    jinja_buf *out;
} copy_run;

static void run_flush(copy_run *r, size_t i) {
    if (r->run) jinja_buf_append(r->out, r->s + i - r->run, r->run);
    r->run = 0;
}

void jinja_str_upper(const char *s, size_t n, jinja_buf *out) {
    copy_run r = {s, 0, out};
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && !(c >= 'a' && c <= 'z')) {
            r.run++, i++;
            continue;
        }
        run_flush(&r, i);
        uint32_t cp;
        int k = jinja_utf8_next(s + i, n - i, &cp);
        jinja_cp_upper(cp, out);
        i += (size_t)k;
    }
    run_flush(&r, n);
}

/* CPython's handle_capital_sigma: U+03A3 lowers to final U+03C2 when a cased character comes
 * before it (case-ignorable ones skipped) and none after it. prev_cased: whether the nearest
 * non-case-ignorable character before it is cased. The scan ahead stops at the first
 * character that is not case-ignorable, so all scans together read each character at most
 * twice. */
static uint32_t sigma_lower(const char *s, size_t n, size_t after, bool prev_cased) {
    if (!prev_cased) return 0x3C3;
    for (size_t j = after; j < n;) {
        uint32_t cp;
        j += (size_t)jinja_utf8_next(s + j, n - j, &cp);
        if (!cp_case_ignorable(cp)) return jinja_cp_cased(cp) ? 0x3C3 : 0x3C2;
    }
    return 0x3C2;
}

/* str.lower() of s[from, n), where prev_cased is the state of sigma_lower before `from`. */
static void lower_from(const char *s, size_t n, size_t from, bool prev_cased, jinja_buf *out) {
    copy_run r = {s, 0, out};
    for (size_t i = from; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && !(c >= 'A' && c <= 'Z')) {
            r.run++, i++;
            if (!cp_case_ignorable(c)) prev_cased = jinja_cp_cased(c);
            continue;
        }
        run_flush(&r, i);
        uint32_t cp;
        int k = jinja_utf8_next(s + i, n - i, &cp);
        if (cp == 0x3A3)
            jinja_utf8_put(out, sigma_lower(s, n, i + (size_t)k, prev_cased));
        else
            jinja_cp_lower(cp, out);
        if (!cp_case_ignorable(cp)) prev_cased = jinja_cp_cased(cp);
        i += (size_t)k;
    }
    run_flush(&r, n);
}

void jinja_str_lower(const char *s, size_t n, jinja_buf *out) { lower_from(s, n, 0, false, out); }

/* CPython's do_title: a character after a cased one is lowercased (with the Final_Sigma
 * rule), any other titlecased; only cased characters continue a word ("they'Re"). */
void jinja_str_title(const char *s, size_t n, jinja_buf *out) {
    bool prev_is_cased = false, sigma_prev = false;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = jinja_utf8_next(s + i, n - i, &cp);
        if (!prev_is_cased)
            jinja_cp_title(cp, out);
        else if (cp == 0x3A3)
            jinja_utf8_put(out, sigma_lower(s, n, i + (size_t)k, sigma_prev));
        else
            jinja_cp_lower(cp, out);
        prev_is_cased = jinja_cp_cased(cp);
        if (!cp_case_ignorable(cp)) sigma_prev = prev_is_cased;
        i += (size_t)k;
    }
}

/* CPython >= 3.8's do_capitalize: the first character titlecased, the rest lowercased. */
void jinja_str_capitalize(const char *s, size_t n, jinja_buf *out) {
    if (!n) return;
    uint32_t cp;
    int k = jinja_utf8_next(s, n, &cp);
    jinja_cp_title(cp, out);
    /* the Final_Sigma scan back from later characters sees the original first character */
    lower_from(s, n, (size_t)k, !cp_case_ignorable(cp) && jinja_cp_cased(cp), out);
}

/* Python's str.splitlines() line ends. */
static size_t line_end(const char *p, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    int k = jinja_utf8_next(p + i, n - i, &cp);
    *len = (size_t)k;
    if (cp == '\r' && i + 1 < n && p[i + 1] == '\n') *len = 2;
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d ||
           cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

jinja_value jinja_vm_splitlines(jinja_vm *vm, jinja_value s, bool keepends) {
    jinja_value parts = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    const char *p = s.u.s.p;
    size_t n = s.u.s.len, start = 0;
    for (size_t i = 0; i < n;) {
        size_t k;
        if (line_end(p, n, i, &k)) {
            jinja_vm_push(vm, parts, jinja_vm_str(vm, p + start, (keepends ? i + k : i) - start));
            i += k;
            start = i;
        } else {
            i += k;
        }
    }
    if (start < n) jinja_vm_push(vm, parts, jinja_vm_str(vm, p + start, n - start));
    return parts;
}
