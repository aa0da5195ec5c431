/* chat_cli.h: the chat template of the command-line tools (minimax-eval, minimax-chat,
 * minimax-generate --prompt, minimax-serve): the model's own template, found in the tokenizer
 * directory as training finds it (data/chat.h), or the file of --chat-template (what the
 * recipe's data.chat_template is to training), rendered with the variables of
 * --template-kwargs (data.template_kwargs), so that a tool gives the model the prompts it was
 * trained on. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/chat.h"
#include "data/tokenizer.h"

/* The flags' lines of the tools' --help. */
#define MT_CHAT_CLI_HELP                                                                           \
    "  --chat-template FILE: the chat template (Jinja) instead of TOK's chat_template.jinja or\n"  \
    "    tokenizer_config.json chat_template (like the recipe's data.chat_template)\n"             \
    "  --template-kwargs JSON: a JSON object of extra template variables, e.g.\n"                  \
    "    '{\"thinking_mode\": \"enabled\"}' (like data.template_kwargs)\n"

/* dir's template (file: --chat-template instead; kwargs: --template-kwargs, NULL for none).
 * NULL with one line in err naming the flag or the file. */
mt_chat_template *mt_chat_cli_open(const char *dir, const char *file, const char *kwargs, char *err,
                                   size_t n);

/* msgs rendered with the generation prompt and tokenized as training tokenizes (no BOS added):
 * the ids, malloc'ed (room for at least one), *T their count. NULL with one line in err when
 * the template cannot render them or the text does not tokenize. */
int32_t *mt_chat_cli_prompt(mt_chat_template *t, const mt_tokenizer *tok, const mt_chat_msg *msgs,
                            int n, int *T, char *err, size_t errlen);
/* The second half of that: a rendered conversation tokenized (ids malloc'ed, room for at least
 * one; *T their count), NULL with one line in err when it does not tokenize. */
int32_t *mt_chat_cli_ids(const mt_tokenizer *tok, const mt_chat_rendered *r, int *T, char *err,
                         size_t errlen);

/* The token a reply ends at: the template's end of turn (tokenizer_config.json's eos_token:
 * [e~[ for M2 and M3, <end_of_sentence> for Text-01), else <end_of_sentence>, else the model
 * config's eos_token_id (config_eos, -1: none). */
int32_t mt_chat_cli_eos(const mt_chat_template *t, const mt_tokenizer *tok, int32_t config_eos);
