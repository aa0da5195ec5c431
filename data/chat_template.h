/* chat_template.h: the MiniMax-Text-01 chat template, rendered in C (spec section 9).
 *
 * The renderer implements exactly one Jinja template, the one MiniMax-Text-01 ships in its
 * tokenizer_config.json (and its extension to string contents below, which renders the same
 * bytes), and reproduces transformers' apply_chat_template byte for byte for system, user and
 * assistant turns (+ the generation prompt). A tokenizer_config.json whose template differs
 * from both (after the normalization below) is rejected, never approximated.
 *
 * Rendered turns (no BOS is prepended by the template):
 *   <beginning_of_sentence>system ai_setting=assistant\n{text}<end_of_sentence>\n
 *   <beginning_of_sentence>user name=user\n{text}<end_of_sentence>\n
 *   <beginning_of_sentence>ai name=assistant\n{text}<end_of_sentence>\n
 *   generation prompt: <beginning_of_sentence>ai name=assistant\n
 * The assistant text sits inside {% generation %}: its byte span is what transformers reports
 * as the assistant mask (return_assistant_tokens_mask). The template's function role and tools
 * are not implemented (GSM8K SFT needs neither). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_ERR_LEN 512 /* size of the error buffers of the data modules */

typedef enum { MT_CHAT_SYSTEM, MT_CHAT_USER, MT_CHAT_ASSISTANT } mt_chat_role;

typedef struct {
    mt_chat_role role;
    const char *text; /* content[0].text, UTF-8 */
    size_t len;
} mt_chat_msg;

typedef struct {
    char *text; /* NUL-terminated */
    size_t len, cap;
    int64_t *spans; /* 2 per assistant message: byte [start, end) of its text in `text` */
    int n_spans, span_cap;
} mt_chat_rendered;

/* The template string the renderer implements (the exact text of spec section 9). */
const char *mt_chat_template_minimax(void);

/* The same template extended to a message content given as a string (transformers fails on a
 * string with the original, which indexes content[0]['text']); part lists render the same bytes.
 * The check below accepts both; exports write this one. */
const char *mt_chat_template_minimax_ext(void);

/* Canonical form used for the comparison: text outside Jinja tags is kept byte for byte; inside
 * {{ }} / {% %} whitespace outside string literals is dropped, except one space between two
 * identifier characters; {# #} comments are dropped; one trailing newline of the template is
 * dropped (Jinja does the same). Returns a malloc'ed string. */
char *mt_chat_template_normalize(const char *tmpl);

/* Reads "chat_template" from a tokenizer_config.json (a string, or a list of {name, template}
 * entries, where "default" is used) and checks that it is the MiniMax-Text-01 template.
 * Returns 0 when it is; -1 with a message naming the file otherwise. On success *normalized
 * (when not NULL) receives the malloc'ed normalized template text. */
int mt_chat_template_check(const char *tokenizer_config_path, char **normalized, char *err);

/* The text of tokenizer_config.json src_config with its chat_template replaced by the extended
 * template (what an export writes). Returns a malloc'ed string, or NULL with err set. */
char *mt_chat_template_export_config(const char *src_config, char *err);

/* The tokenizer of a chat model's directory (minimax-eval, minimax-chat, minimax-serve): dir's
 * tokenizer.json, loaded, after its tokenizer_config.json is checked to hold this template.
 * NULL with one line in err (naming the directory or the file) when either is missing or
 * wrong. */
typedef struct mt_tokenizer mt_tokenizer;
mt_tokenizer *mt_chat_tokenizer_load(const char *dir, char *err, size_t n);
/* Whether every id of tok (from dir) is inside a model's vocabulary of vocab_size rows; if not,
 * one line in err naming both sizes (a tokenizer of another model). */
bool mt_chat_tokenizer_fits(const mt_tokenizer *tok, const char *dir, int64_t vocab_size, char *err,
                            size_t n);

/* Renders the conversation into out (its previous content is replaced). */
void mt_chat_render(const mt_chat_msg *msgs, int n_msgs, bool add_generation_prompt,
                    mt_chat_rendered *out);
void mt_chat_rendered_free(mt_chat_rendered *r);

/* Assistant mask over tokens given their byte offsets (2 per token, [start, end) into the
 * rendered text): mask[i] = 1 when token i overlaps an assistant span, the rule transformers
 * uses for its assistant_masks. */
void mt_chat_token_mask(const mt_chat_rendered *r, const int64_t *offsets, int64_t n_tokens,
                        uint8_t *mask);
