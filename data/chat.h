/* chat.h: a chat model's own template, found and rendered as transformers 5.x does, and which
 * bytes of a rendered conversation are trained (docs/templates.md).
 *
 * Where the template comes from (mt_chat_template_open): a file given by the recipe
 * (data.chat_template) overrides everything; else the tokenizer directory's chat_template.jinja
 * and additional_chat_templates/NAME.jinja (which together replace tokenizer_config.json's
 * chat_template), else tokenizer_config.json's chat_template (a string, or a list of
 * {name, template}). With several templates a conversation with a tools list (even empty) takes
 * "tool_use" when there is one, else "default". A released template that cannot take a message
 * content given as a string is replaced by its extension that can (the list of
 * mt_chat_template_fixes, data/chat_template.h: the same bytes for part lists).
 *
 * The variables of a render, as apply_chat_template passes them: messages, tools and documents
 * (None when absent), add_generation_prompt, the tokenizer's special tokens (bos_token,
 * eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: those tokenizer_config.json
 * sets), then data.template_kwargs (which override them), then a conversation's own extra
 * variables. Messages are normalised as transformers does (keys whose value is null dropped;
 * reasoning_content / thinking / reasoning aliased), and as vLLM does for tool calls (arguments
 * given as a JSON string parsed into the object the templates expect); a message's "loss" key is
 * the pipeline's (ms-swift's convention) and never reaches the template.
 *
 * Trained bytes (mt_chat_render_trained) of an assistant message: with {% generation %} marks,
 * the marked output in that message's turn and the end-of-turn token (eos_token) right after
 * it. Without marks: the bytes of the message's turn (the output produced while the template's
 * loop is at that message) after the part it has in common with the generation prompt (what
 * the model is given at inference: the role header, and e.g. M2's "<think>\n"; when the turn
 * has only part of it, that part up to its last line break: the role line), through the last
 * end-of-turn token of the turn. Where that cannot be derived exactly (a turn rendered in
 * pieces, no end-of-turn token, a prefix of the conversation that the template renders
 * differently) the render fails naming the message, never guesses. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "jinja/jinja.h"

typedef struct mt_chat_template mt_chat_template;

typedef struct {
    const char *dir;         /* the tokenizer directory (may be NULL when file is given) */
    const char *file;        /* data.chat_template: a template file (NULL: the directory's) */
    const char *kwargs_json; /* data.template_kwargs: a JSON object (NULL: none) */
} mt_chat_source;

/* NULL with one line in err naming the file or the key when the template is missing, not
 * valid Jinja, uses what the engine refuses, or kwargs is not a JSON object. */
mt_chat_template *mt_chat_template_open(const mt_chat_source *src, char *err, size_t errlen);
void mt_chat_template_free(mt_chat_template *t);
/* What the renders depend on (every template's text, the special tokens, the kwargs): part of
 * the token cache's key. */
uint64_t mt_chat_template_hash(const mt_chat_template *t);
/* Where the template came from, for logs ("tests/fixtures/tokenizer/tokenizer_config.json"). */
const char *mt_chat_template_origin(const mt_chat_template *t);
/* The default template's text (what an export writes as chat_template.jinja). */
const char *mt_chat_template_text(const mt_chat_template *t);
/* eos_token (the end-of-turn of the mask rule), or NULL when the tokenizer sets none. */
const char *mt_chat_template_eot(const mt_chat_template *t);

/* What an export writes so that transformers and vLLM render the trained template: the
 * directory's tokenizer_config.json (as it is, except a released template of that list there,
 * replaced by its extension), and the template files the training read: chat_template.jinja
 * (data.chat_template's text, or the directory's) and additional_chat_templates/NAME.jinja.
 * Returns how many files (their texts malloc'ed: mt_chat_files_free), or -1 with err set. */
#define MT_CHAT_EXPORT_MAX    (MT_CHAT_MAX_TEMPLATES + 1)
#define MT_CHAT_MAX_TEMPLATES 16
typedef struct {
    char name[300]; /* relative to the export directory */
    char *text;
    size_t len;
} mt_chat_file;
int mt_chat_template_export(const mt_chat_template *t, mt_chat_file files[MT_CHAT_EXPORT_MAX],
                            char *err, size_t errlen);
void mt_chat_files_free(mt_chat_file *files, int n);

/* A conversation as the template sees it. messages: a list of dicts; tools, documents: a list
 * or None; vars: further template variables (a dict, or undefined for none). loss: per message
 * -1 (default), 0 or 1, from its "loss" key (NULL: all -1). */
typedef struct {
    jinja_value messages, tools, documents, vars;
    int8_t *loss;
} mt_chat_conv;

/* A conversation from JSON text {"messages": [...], "tools": [...], "documents": [...], other
 * keys as template variables (with_vars; otherwise other keys are an error)}, normalised (see
 * above), its values in h. 0, or -1 with one line in err naming the field ("messages[2].
 * tool_calls[0].function.arguments is not a JSON object"). */
int mt_chat_conv_parse(jinja_heap *h, const char *json, size_t len, bool with_vars,
                       mt_chat_conv *out, char *err, size_t errlen);
/* The same from the conversation's value (tool-call arguments given as JSON text are parsed in
 * place). */
int mt_chat_conv_from_value(jinja_heap *h, jinja_value v, bool with_vars, mt_chat_conv *out,
                            char *err, size_t errlen);
/* The normalisation alone, of a conversation built in h (messages replaced by new dicts). */
int mt_chat_conv_normalize(jinja_heap *h, mt_chat_conv *c, char *err, size_t errlen);
/* A conversation of role / text messages (the CLIs' and the server's), in h. */
void mt_chat_conv_from_msgs(jinja_heap *h, const mt_chat_msg *msgs, int n, mt_chat_conv *out);
/* Number of messages, and message i's role ("" when it has none). */
int mt_chat_conv_len(const mt_chat_conv *c);
const char *mt_chat_conv_role(const mt_chat_conv *c, int i);

/* The tokenizer of a chat model's directory (minimax-eval, -chat, -serve, -generate): dir's
 * tokenizer.json. NULL with one line in err naming the file when it is missing or bad. */
mt_tokenizer *mt_chat_tokenizer_load(const char *dir, char *err, size_t n);
/* Whether every id of tok (from dir) is inside a model's vocabulary of vocab_size rows; if not,
 * one line in err naming both sizes (a tokenizer of another model). */
bool mt_chat_tokenizer_fits(const mt_tokenizer *tok, const char *dir, int64_t vocab_size, char *err,
                            size_t n);

/* Whether tok (dir's tokenizer.json) encodes the template's control tokens each as one id: the
 * bos_token and eos_token of tokenizer_config.json, and its added tokens that the templates'
 * text contains (role and markup tokens). If not, one line in err naming the token: a
 * tokenizer without them would train and decode them as runs of byte tokens. */
bool mt_chat_template_tokens_fit(const mt_chat_template *t, const mt_tokenizer *tok,
                                 const char *dir, char *err, size_t n);

/* A conversation of role / text messages rendered with the generation prompt (what the CLIs
 * and the server give the model). 0, or -1 with one line in err. */
int mt_chat_render_msgs(mt_chat_template *t, const mt_chat_msg *msgs, int n, mt_chat_rendered *out,
                        char *err, size_t errlen);

/* The prompt of an evaluation sample (eval/messages_eval.h): the conversation of JSON text
 * json[0, len) (a record as data/dataset.h reads it) cut before message upto, with the messages
 * of each shot (conversations of the same form; every message but their leading system ones)
 * inserted after its own leading system messages, rendered with the generation prompt. 0, or -1
 * with one line in err (the JSON, or the template's refusal). */
int mt_chat_render_prompt_json(mt_chat_template *t, const char *json, size_t len, int upto,
                               const char *const *shots, int n_shots, mt_chat_rendered *out,
                               char *err, size_t errlen);
/* Renders messages [0, n) (n < 0: all) into out (spans none). 0, or -1 with one line in err
 * ("template:line: ..."). */
int mt_chat_render_conv(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n,
                        bool add_generation_prompt, mt_chat_rendered *out, char *err,
                        size_t errlen);
/* The same without the generation prompt, with out's spans the trained bytes of the messages
 * train[i] marks (assistant messages only). -1 with err naming the message when the rule of
 * the header cannot be applied exactly. */
int mt_chat_render_trained(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n,
                           const bool *train, mt_chat_rendered *out, char *err, size_t errlen);

/* ---- prompts (the server, the CLIs) ---- */

/* What apply_chat_template is asked besides the conversation. sanitize: transformers 5.24's
 * sanitize_control_tokens (data/chat_sanitize.c): a control token spelled in the input's
 * strings (messages, tools, documents, template variables) is encoded as ordinary text. */
typedef struct {
    bool add_generation_prompt;
    bool continue_final_message; /* end right after the final message's content */
    bool sanitize;
} mt_chat_prompt_opts;

/* Renders c (its values may be replaced) as o asks into text (NUL-terminated, without the
 * sanitizer's markers), and appends its ids to ids (when not NULL). 0, or -1 with one line in
 * err (the template's refusal, transformers' continue_final_message errors). */
int mt_chat_prompt(mt_chat_template *t, const mt_tokenizer *tok, jinja_heap *h, mt_chat_conv *c,
                   const mt_chat_prompt_opts *o, mt_chat_rendered *text, mt_token_buf *ids,
                   char *err, size_t errlen);

/* The sanitizer's steps: marks the control tokens of c's strings (its messages, tools,
 * documents, and the template's and c's variables, which c->vars then holds); encodes a render
 * of a marked conversation (marked tokens as text, lone markers dropped); removes the markers
 * from a text in place (returns its new length). */
int mt_chat_conv_mark(const mt_chat_template *t, const mt_tokenizer *tok, jinja_heap *h,
                      mt_chat_conv *c, char *err, size_t errlen);
int64_t mt_chat_encode_marked(const mt_tokenizer *tok, const char *text, size_t len,
                              mt_token_buf *out, char *err, size_t errlen);
size_t mt_chat_unmark(char *text, size_t len);
