/* reply.h: a chat model's reply split into reasoning, content and tool calls, per family
 * (docs/serving.md), as vLLM's parsers of the same names do.
 *
 * A reply format is family data (models/reply_m2.c, models/reply_m3.c): its think tags, its
 * tool-call block and how a block spells calls. The formats are named as vLLM names its parsers
 * ("none", "minimax_m2", "minimax_m3"); a family's default is mt_family.reply_format.
 *
 * Reasoning. Whether the reply starts inside reasoning comes from the rendered prompt: a prompt
 * that ends in the open think tag (optionally followed by a line break: M2's "<think>\n", M3's
 * "<mm:think>" with thinking_mode "enabled") starts the reply in reasoning; one that ends in the
 * close tag (M3's "</mm:think>", thinking_mode "disabled") starts it in content; otherwise (M3
 * adaptive or undefined) the reply itself may open with either tag. Reasoning runs to the close
 * tag; a reply that never closes it is all reasoning (mt_reply.in_reasoning). The close tag is
 * searched as vLLM's minimax_m2 reasoning parser does (the first one).
 *
 * Tool calls are read in the content only, from complete blocks (M2: <minimax:tool_call> ...
 * </minimax:tool_call>; M3: ]<]minimax[>[<tool_call> ... ]<]minimax[>[</tool_call>). Parameter
 * values are typed by the tool's JSON schema (tools[i].function.parameters.properties) as vLLM's
 * minimax_m2 tool parser types them: the schema's types (type, type lists, enum values, anyOf /
 * oneOf / allOf; none: string) tried in the order integer, number (an integral value as an
 * integer), boolean (true/1/yes/on, false/0/no/off), object/array (JSON), string; else JSON,
 * else the text; M2's value text stripped of white space and "null" / "none" / "nil" (any case)
 * read as null. M3's nested elements (]<]minimax[>[<key> ... ]<]minimax[>[</key>, list items as
 * <item>) are rebuilt into objects and arrays guided by the schema (properties, items; without
 * one: an element whose children are all <item> is an array), its scalars typed the same way
 * from their raw text (no null words: the template omits nulls). A block that does not parse
 * (an unclosed block, text between invokes, an unclosed parameter) is returned as content,
 * never dropped.
 *
 * Where this differs from vLLM, on purpose: content is the text outside the tool-call blocks
 * (vLLM keeps only what precedes the first block), and reasoning and content are stripped of
 * line breaks at both ends, as the templates do when they split a message's content at the
 * think tags (vLLM returns "\n\n" before M2's content). Arguments are the JSON text of an object
 * written as Python's json.dumps(ensure_ascii=False) writes it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

struct cJSON;
struct mt_family;

typedef struct mt_reply_format mt_reply_format;

/* The format of that name, or NULL. */
const mt_reply_format *mt_reply_format_find(const char *name);
/* The family's default (mt_family.reply_format). */
const mt_reply_format *mt_reply_format_of(const struct mt_family *fam);
const char *mt_reply_format_name(const mt_reply_format *f);
/* Whether the format splits anything ("none" does not). */
bool mt_reply_format_active(const mt_reply_format *f);
/* Every name joined by "|" ("none|minimax_m2|minimax_m3"), for --help and errors. */
const char *mt_reply_format_names(void);
/* The format a tool's --reasoning-parser names (NULL: the family's), or NULL with one line in
 * err naming the flag and the names. */
const mt_reply_format *mt_reply_format_pick(const char *name, const struct mt_family *fam,
                                            char *err, size_t errlen);
/* A reply's ids (n, as decoding produced them) as the text its format splits, malloc'ed: the
 * special tokens kept (the think tags and tool-call markers are special tokens in the family's
 * tokenizer), a last token equal to eos left out; with "none", special tokens left out. */
char *mt_reply_decode(const mt_reply_format *f, const mt_tokenizer *tok, const int32_t *ids, int n,
                      int32_t eos);

typedef struct {
    char *name;
    char *arguments; /* JSON object text */
} mt_reply_call;

/* A whole reply. Strings are NUL-terminated and malloc'ed; NULL when there is none. */
typedef struct {
    char *reasoning;
    char *content;
    mt_reply_call *calls;
    int n_calls;
    bool in_reasoning; /* the reply ended inside its reasoning (never closed it) */
} mt_reply;

/* The reply text (len bytes) of a prompt (the rendered prompt text, NUL-terminated) split by
 * format f. tools: the request's tools array (NULL: none; parameter values stay strings);
 * calls_off: tool-call markup stays content (tool_choice "none"). */
void mt_reply_parse(const mt_reply_format *f, const char *prompt, const char *text, size_t len,
                    const struct cJSON *tools, bool calls_off, mt_reply *out);
void mt_reply_free(mt_reply *r);

/* Streaming: fed the reply text as it grows, it returns what is final of it. The deltas of a
 * stream, joined, are exactly mt_reply_parse's result for the whole text, whatever the pieces;
 * bytes that may begin a tag, line breaks that may end the reasoning or content, and an open
 * tool-call block are held back until what they are is known. */
typedef struct mt_reply_stream mt_reply_stream;

typedef struct {
    const char *reasoning; /* new reasoning text (reasoning_len bytes; may be 0) */
    size_t reasoning_len;
    const char *content; /* new content text */
    size_t content_len;
    const mt_reply_call *calls; /* tool calls completed by this feed */
    int n_calls;
    int first_call;    /* calls[0]'s index among the reply's calls */
    bool in_reasoning; /* with done: the reply ended inside its reasoning */
} mt_reply_delta;

mt_reply_stream *mt_reply_stream_new(const mt_reply_format *f, const char *prompt,
                                     const struct cJSON *tools, bool calls_off);
/* text: the whole reply so far (len bytes; what an earlier feed saw is unchanged); done: the
 * reply is complete. d's pointers stay valid until the next feed or the free. */
void mt_reply_stream_feed(mt_reply_stream *s, const char *text, size_t len, bool done,
                          mt_reply_delta *d);
void mt_reply_stream_free(mt_reply_stream *s);
