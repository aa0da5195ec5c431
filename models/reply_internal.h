/* reply_internal.h: what the reply formats share (models/reply.h): a format's markup, the
 * typing of parameter values by a tool's schema (models/reply_value.c) and the JSON text of
 * the arguments. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "models/reply.h"

struct cJSON;

typedef struct {
    mt_reply_call *v;
    int n, cap;
} mt_reply_calls;

/* Appends a call (name copied, args taken). */
void mt_reply_calls_push(mt_reply_calls *c, const char *name, size_t name_len, char *args);
/* Frees calls [from, n) and sets n = from. */
void mt_reply_calls_trim(mt_reply_calls *c, int from);

struct mt_reply_format {
    const char *name;
    const char *think_open, *think_close; /* NULL: no reasoning */
    const char *tool_open, *tool_close;   /* NULL: no tool calls */
    /* The calls of one block (the bytes between tool_open and tool_close) appended to out;
     * false (out unchanged) when the block is not well-formed. */
    bool (*block)(const char *body, size_t n, const struct cJSON *tools, mt_reply_calls *out);
};

extern const mt_reply_format mt_reply_minimax_m2;
extern const mt_reply_format mt_reply_minimax_m3;

/* The parameters' schemas (function.parameters.properties) of tool `name` in tools, or NULL. */
const struct cJSON *mt_reply_tool_props(const struct cJSON *tools, const char *name, size_t n);
/* A schema's types as vLLM's minimax_m2 parser reads them (bits MT_REPLY_T_*). */
enum {
    MT_REPLY_T_STRING = 1,
    MT_REPLY_T_INTEGER = 2,
    MT_REPLY_T_NUMBER = 4,
    MT_REPLY_T_BOOLEAN = 8,
    MT_REPLY_T_OBJECT = 16,
    MT_REPLY_T_ARRAY = 32,
    MT_REPLY_T_NULL = 64,
    MT_REPLY_T_OTHER = 128,
};
unsigned mt_reply_schema_types(const struct cJSON *schema);
/* The value of text v (n bytes) typed by schema (NULL: a string); null_words: "null", "none",
 * "nil" in any case are null (M2). */
struct cJSON *mt_reply_value(const char *v, size_t n, const struct cJSON *schema, bool null_words);
/* v as Python's json.dumps(v, ensure_ascii=False) writes it; malloc'ed. */
char *mt_reply_json(const struct cJSON *v);
