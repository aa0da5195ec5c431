/* toml.h: a small TOML reader for recipes.
 * Covers what recipes use: [tables] and [dotted.tables], bare/quoted/dotted keys, basic and
 * literal strings (single line), integers (decimal, with _), floats (incl. exponent, inf, nan),
 * booleans and arrays of those (one level, may span lines). Not covered (rejected with an
 * error): inline tables, arrays of tables, multi-line strings, dates.
 * The document is flattened to full dotted keys ("train.learning_rate"), in file order. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MT_TOML_STRING,
    MT_TOML_INT,
    MT_TOML_FLOAT,
    MT_TOML_BOOL,
    MT_TOML_ARRAY
} mt_toml_type;

typedef struct mt_toml_value {
    mt_toml_type type;
    char *s;                     /* MT_TOML_STRING */
    int64_t i;                   /* MT_TOML_INT */
    double f;                    /* MT_TOML_FLOAT */
    bool b;                      /* MT_TOML_BOOL */
    struct mt_toml_value *items; /* MT_TOML_ARRAY */
    int n_items;
} mt_toml_value;

typedef struct {
    char *key; /* full dotted key */
    mt_toml_value value;
    const char *origin; /* file path or "--set" */
    int line, col;      /* where the value starts (1-based) */
} mt_toml_entry;

typedef struct {
    mt_toml_entry *entries;
    int n, cap;
} mt_toml_doc;

/* Parses text; on error returns false with "path:line:col: message" in err. */
bool mt_toml_parse(mt_toml_doc *doc, const char *text, const char *path, char *err, size_t errlen);
/* Reads and parses a file; on error returns false with the message in err. */
bool mt_toml_load(mt_toml_doc *doc, const char *path, char *err, size_t errlen);
/* Applies "table.key=value" (value in TOML syntax; a bare word that is not a TOML value is taken
 * as a string). Replaces an existing key or adds it. */
bool mt_toml_set(mt_toml_doc *doc, const char *assignment, char *err, size_t errlen);
const mt_toml_entry *mt_toml_find(const mt_toml_doc *doc, const char *key);
void mt_toml_free(mt_toml_doc *doc);
const char *mt_toml_type_name(mt_toml_type t);
/* Appends the TOML text of a value to buf (for printing the resolved recipe). */
void mt_toml_value_format(const mt_toml_value *v, char *buf, size_t len);
