/* dataset.h: SFT datasets in the formats users have (docs/data.md), read into conversations.
 *
 * A file is jsonl (one JSON object per line; blank lines skipped) or one JSON array of objects
 * (the first non-blank byte is '['). Each record becomes one conversation, a list of system /
 * user / assistant messages (data/chat_template.h), through the reader of its format:
 *   gsm8k     {"question", "answer"}                       -> user, assistant
 *   messages  {"messages": [{"role", "content"}]}          content: a string or a list of
 *             {"type": "text", "text"} parts; roles system, user, assistant
 *   sharegpt  {"conversations": [{"from", "value"}], "system"?}  human/user -> user,
 *             gpt/assistant -> assistant, system -> system
 *   alpaca    {"instruction", "input"?, "output", "system"?, "history"?: [[q, a]...]}
 *             user = instruction + "\n" + input (input when not empty), as LLaMA-Factory
 * `auto` picks the format by the keys of the first record and says which (the keys above that
 * are required: question+answer, messages, conversations, instruction+output). Every record
 * of the file is then read with that format; one that does not fit is an error
 * "path:line: ..." naming the keys the record has. A conversation needs one assistant message.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/chat_template.h"

struct cJSON;

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
    int64_t *first;    /* (n + 1) conversation i is msgs[first[i], first[i + 1]) */
    mt_chat_msg *msgs; /* texts malloc'ed, owned by the set */
    int64_t n_msgs;    /* messages of all conversations */
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

/* The checks every record gets before its format reads it: valid UTF-8, no NUL character, one
 * JSON object with nothing after it, no key twice. line[0, len) is the record's text; with
 * *used != NULL the record may be followed by more text (a JSON array's next element): *used
 * receives the bytes parsed. Returns the object, or NULL with "path:line: reason" in err. */
struct cJSON *mt_json_record_parse(const char *path, int64_t line_no, const char *line, size_t len,
                                   size_t *used, char *err);

/* Field `name` of obj as text: present, a string, not blank. Returns it, or NULL with
 * "path:line: reason" in err. */
const char *mt_json_text_field(const struct cJSON *obj, const char *name, const char *path,
                               int64_t line_no, char *err);
