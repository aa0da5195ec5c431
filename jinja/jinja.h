/* jinja.h: a Jinja2 template engine in C for chat templates (docs/templates.md).
 *
 * Semantics: jinja2 3.1 as transformers 5.x renders chat templates: an
 * ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, the loopcontrols extension and
 * transformers' {% generation %} tracker; tojson = json.dumps(x, ensure_ascii=False, indent,
 * separators, sort_keys); globals raise_exception, strftime_now, namespace, dict, range. Values
 * behave as the Python objects jinja2 sees: printing is Python's str(), strings index and count
 * by code point, undefined values behave as jinja2's Undefined. What the engine does not
 * implement is refused, never approximated: a construct outside the subset when the template is
 * loaded ("file:line:col: ..."), a call it does not know when the template runs ("file:line:
 * ..."). Limits on output size, memory, loop iterations and call depth end a render with one line.
 *
 * Values (jinja_value) are small structs passed by value; strings, lists and dicts live in a
 * jinja_heap, an arena freed as a whole. The caller builds the variables of a render (a dict)
 * with the constructors below or parses them from JSON (jinja_json_parse keeps Python's
 * distinctions: 1 and 1.0, key order). Nothing here is thread-safe across a shared heap or
 * template; distinct heaps and templates may be used by distinct threads. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values ---- */

typedef enum {
    JINJA_UNDEFINED = 0, /* jinja2's Undefined; u.s holds the name it was looked up by */
    JINJA_NONE,
    JINJA_BOOL,
    JINJA_INT, /* Python int within int64 (beyond it: an error, never a wrap) */
    JINJA_FLOAT,
    JINJA_STR, /* UTF-8, u.s: immutable; every string the engine makes is followed by a NUL */
    JINJA_LIST,
    JINJA_DICT,
    /* only while a template runs: */
    JINJA_NAMESPACE, /* namespace(): attributes in u.dict */
    JINJA_CALLABLE,  /* a macro, a global function or a bound method (u.obj) */
    JINJA_LOOP,      /* the loop variable of a for loop (u.obj) */
} jinja_type;

typedef struct jinja_list jinja_list;
typedef struct jinja_dict jinja_dict;
typedef struct jinja_obj jinja_obj;

typedef struct {
    uint8_t type; /* jinja_type */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t len;
        } s;
        jinja_list *list;
        jinja_dict *dict;
        jinja_obj *obj;
    } u;
} jinja_value;

/* The Python sequence a JINJA_LIST stands for (how it prints and compares): a list, a tuple
 * ((1, 2) printed with parentheses; never equal to a list), the views dict.items(), .keys(),
 * .values() return (printed dict_items([...]) ...), or a range (printed range(start, stop[,
 * step]) from r[]). Only JINJA_SEQ_LIST is made by the public constructors. */
typedef enum {
    JINJA_SEQ_LIST = 0,
    JINJA_SEQ_TUPLE,
    JINJA_SEQ_ITEMS,
    JINJA_SEQ_KEYS,
    JINJA_SEQ_VALUES,
    JINJA_SEQ_RANGE,
} jinja_seq_kind;

struct jinja_list {
    int64_t n, cap;
    jinja_value *items;
    uint8_t kind; /* jinja_seq_kind */
    int64_t r[3]; /* JINJA_SEQ_RANGE: start, stop, step */
};
/* Insertion-ordered, as Python's dict; keys compare as Python's == (1 == 1.0 == True). */
struct jinja_dict {
    int64_t n, cap;
    jinja_value *keys, *vals;
};

/* ---- the heap: an arena of values ---- */

typedef struct jinja_heap jinja_heap;

/* max_bytes: the most the heap may hold (0: no limit). Allocation beyond it fails: the
 * constructors below return a JINJA_UNDEFINED value and jinja_heap_failed() turns true; inside a
 * render the render ends with "memory limit". */
jinja_heap *jinja_heap_new(size_t max_bytes);
/* Frees every value made in the heap (the heap stays usable). */
void jinja_heap_reset(jinja_heap *h);
void jinja_heap_free(jinja_heap *h);
bool jinja_heap_failed(const jinja_heap *h);
/* n bytes of the heap for the caller's own per-render data (16-byte aligned, freed with the
 * heap); NULL when the heap is full. */
void *jinja_heap_alloc(jinja_heap *h, size_t n);
size_t jinja_heap_used(const jinja_heap *h);

jinja_value jinja_undefined(const char *name);
jinja_value jinja_none(void);
jinja_value jinja_bool(bool b);
jinja_value jinja_int(int64_t i);
jinja_value jinja_float(double f);
/* A copy of s[0, len) (UTF-8: the caller checks validity). */
jinja_value jinja_str(jinja_heap *h, const char *s, size_t len);
jinja_value jinja_cstr(jinja_heap *h, const char *s);
jinja_value jinja_list_new(jinja_heap *h);
jinja_value jinja_dict_new(jinja_heap *h);
/* Appends v to list (a JINJA_LIST). false when the heap is full. */
bool jinja_list_push(jinja_heap *h, jinja_value list, jinja_value v);
/* d[key] = v (replaces the value of an existing key in place, as Python). false when full. */
bool jinja_dict_set(jinja_heap *h, jinja_value d, jinja_value key, jinja_value v);
bool jinja_dict_set_str(jinja_heap *h, jinja_value d, const char *key, jinja_value v);
/* The value of string key `key` in d, or NULL. */
jinja_value *jinja_dict_get_str(jinja_value d, const char *key);
/* Removes string key `key` from d (the order of the others kept); false when absent. */
bool jinja_dict_del_str(jinja_value d, const char *key);
/* Python truthiness: None, False, 0, 0.0, '', [], {} and undefined are false. */
bool jinja_truthy(jinja_value v);

/* Python's str.strip() / lstrip() / rstrip() without arguments on s[0, n): the bounds [*a, *b)
 * of what is left after Unicode whitespace (str.isspace()) is taken off the chosen ends. */
void jinja_str_strip(const char *s, size_t n, bool left, bool right, size_t *a, size_t *b);

/* ---- JSON ---- */

/* Parses one JSON value (RFC 8259) from text[0, len), surrounding whitespace allowed, as
 * Python's json.loads: integers without '.', 'e' or 'E' are JINJA_INT (beyond int64: an error),
 * others JINJA_FLOAT; NaN, Infinity and -Infinity are accepted as Python does; objects keep their
 * key order; a key twice is an error (the project's readers refuse what json.loads would take
 * silently, the last one). Strings must be valid UTF-8; \u escapes of lone surrogates are an
 * error. Depth at most 512. Returns 0, or -1 with "offset N: reason" in err. */
int jinja_json_parse(jinja_heap *h, const char *text, size_t len, jinja_value *out, char *err,
                     size_t errlen);

/* The same for a JSON value at the start of text[0, len) with more text after it (the
 * records of a JSON array): *used gets the bytes the value took (where parsing stopped, on an
 * error). */
int jinja_json_parse_prefix(jinja_heap *h, const char *text, size_t len, jinja_value *out,
                            size_t *used, char *err, size_t errlen);

/* A growable byte buffer, NUL-terminated: malloc'ed, or with heap set, carved from that heap
 * (the evaluator's temporaries: an error that jumps out of a render leaves nothing to free;
 * jinja_buf_free only forgets them). */
typedef struct {
    char *p;
    size_t len, cap;
    jinja_heap *heap;
} jinja_buf;
void jinja_buf_append(jinja_buf *b, const char *s, size_t n);
void jinja_buf_free(jinja_buf *b);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) appended to out. indent < 0: None
 * (one line); item_sep / key_sep NULL: Python's defaults (", " and ": ", or "," after each item
 * when indent is given). Returns 0, or -1 with the reason (a value JSON cannot hold: undefined,
 * a macro, a dict key that is not a string, number, bool or None) in err. */
typedef struct {
    bool ensure_ascii;
    int indent;
    const char *item_sep, *key_sep;
    bool sort_keys;
} jinja_json_opts;
int jinja_json_dump(jinja_value v, const jinja_json_opts *o, jinja_buf *out, char *err,
                    size_t errlen);

/* Python's str(v) appended to out (None, True, 1.0, 1e-05, ['a', 1], {'k': 'v'}). */
void jinja_value_print(jinja_value v, jinja_buf *out);

/* ---- templates ---- */

typedef struct jinja_template jinja_template;

/* Parses a template. name: how errors name it (a file path). NULL with one line in err,
 * "name:line:col: reason", when the text is not valid UTF-8, is not Jinja, or uses a construct
 * the engine does not implement (the line names it). */
jinja_template *jinja_template_load(const char *name, const char *src, size_t len, char *err,
                                    size_t errlen);
void jinja_template_free(jinja_template *t);
/* Whether the template has {% generation %} blocks. */
bool jinja_template_has_generation(const jinja_template *t);

typedef struct {
    size_t max_output; /* bytes of output (0: 64 MiB) */
    size_t max_memory; /* bytes the render's values may take in the heap (0: 256 MiB) */
    int64_t max_steps; /* loop iterations plus calls (0: 10,000,000) */
    int max_depth;     /* nested macro calls (0: 256) */
    /* Provenance: values (dicts or lists, by identity: the messages of a conversation) whose
     * for-loop iterations tag the output they produce. While the innermost loop whose current
     * item is track[k] runs, output bytes carry tag k (jinja_output.tagged). */
    const jinja_value *track;
    int n_track;
    /* strftime_now's time, seconds since the epoch in local time; < 0: the system clock */
    double now;
} jinja_render_opts;

typedef struct {
    int64_t start, end; /* byte offsets into the output, [start, end) */
    int tag;            /* tagged runs: the index into track */
} jinja_span;

typedef struct {
    jinja_buf text;
    jinja_span *gen; /* the {% generation %} blocks' output, in order */
    int n_gen, cap_gen;
    jinja_span *tagged; /* maximal runs of output bytes with one tag (untagged bytes: none) */
    int n_tagged, cap_tagged;
} jinja_output;
void jinja_output_free(jinja_output *o);

/* Renders t with the variables vars (a JINJA_DICT, names to values; add_generation_prompt,
 * messages, tools, ... as the caller passes them) into out (its previous content replaced).
 * Values the render makes are allocated in h, which the caller resets when done with them.
 * Returns 0, or -1 with one line in err: "name:line: reason" (raise_exception's message, an
 * undefined value used where jinja2 raises, a limit, ...). */
int jinja_render(const jinja_template *t, jinja_heap *h, jinja_value vars,
                 const jinja_render_opts *opts, jinja_output *out, char *err, size_t errlen);
