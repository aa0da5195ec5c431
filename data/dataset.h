/* dataset.h: SFT datasets in the formats users have (docs/data.md), read into conversations as
 * a chat template takes them (data/chat.h).
 *
 * A file is jsonl (one JSON object per line; blank lines skipped) or one JSON array of objects
 * (the first non-blank byte is '['). Each record becomes one conversation {"messages": [...],
 * "tools": [...], "documents": [...]} through the reader of its format:
 *   gsm8k     {"question", "answer"}                       -> user, assistant
 *   messages  {"messages": [...], "tools"?, "documents"?}  OpenAI's chat format: roles system,
 *             developer, root, user, assistant, tool (and function); content a string or a list
 *             of {"type": "text", "text"} parts; assistant reasoning_content (or reasoning,
 *             thinking) and tool_calls ({"id", "type", "function": {"name", "arguments"}},
 *             arguments an object or a JSON string); tool messages with tool_call_id / name; a
 *             message's "loss": true | false (ms-swift's convention) overrides whether an
 *             assistant message is trained
 *   sharegpt  {"conversations": [{"from", "value"}], "system"?, "tools"?}  human/user -> user,
 *             gpt/assistant -> assistant, system -> system, function_call -> an assistant tool
 *             call (value: {"name", "arguments"} or a list of them, as JSON), observation -> tool
 *             (ms-swift's and LLaMA-Factory's mapping); tools a list or its JSON text
 *   alpaca    {"instruction", "input"?, "output", "system"?, "history"?: [[q, a]...]}
 *             user = instruction + "\n" + input (input when not empty), as LLaMA-Factory
 * `auto` picks the format by the keys of the first record and says which (the keys above that
 * are required: question+answer, messages, conversations, instruction+output). Every record of
 * the file is then read with that format; one that does not fit is an error "path:line:
 * reason" naming the field. A conversation needs one assistant message. Numbers keep Python's
 * distinction (1 is not 1.0) and objects their key order, as json.loads reads them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/chat_template.h"

typedef enum {
    MT_FORMAT_AUTO,
    MT_FORMAT_GSM8K,
    MT_FORMAT_MESSAGES,
    MT_FORMAT_SHAREGPT,
    MT_FORMAT_ALPACA,
    MT_FORMAT_COUNT
} mt_data_format;

/* "auto", "gsm8k", ...: the format, or -1 for a name that is none of them. */
int mt_data_format_parse(const char *name);
const char *mt_data_format_name(mt_data_format f);
/* "auto, gsm8k, messages, sharegpt, alpaca" (for error messages). */
const char *mt_data_format_list(void);

typedef struct {
    int64_t n;         /* conversations */
    char **json;       /* (n) each conversation as compact JSON, malloc'ed, owned by the set */
    size_t *json_len;  /* (n) */
    int64_t *line;     /* (n) 1-based line where each record starts */
    int64_t n_lines;   /* records seen */
    int64_t n_skipped; /* bad records skipped (skip_bad) */
    char first_skip[MT_ERR_LEN];
    mt_data_format format; /* the format read (auto resolved) */
} mt_conv_set;

/* Reads a file in format fmt (MT_FORMAT_AUTO: detected from its first record). A bad record
 * is an error "path:line: reason" unless skip_bad, where it is counted. Returns 0, or -1 with
 * err set (out then empty). */
int mt_conv_read(const char *path, mt_data_format fmt, bool skip_bad, mt_conv_set *out, char *err);
/* The same over text[0, len) (path names it in errors). */
int mt_conv_parse(const char *path, const char *text, size_t len, mt_data_format fmt, bool skip_bad,
                  mt_conv_set *out, char *err);
void mt_conv_set_free(mt_conv_set *s);
