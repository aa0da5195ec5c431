/* minimax-generate: greedy decoding with a MiniMax checkpoint of any family (models/family.h;
 * models/generate.h).
 *
 *   minimax-generate --model DIR --ids IDS.json --max-new-tokens N [--arena-mb M]
 *                    [--backend cpu|cuda]
 *   minimax-generate --model DIR --prompt TEXT [--tokenizer TOK] [--chat-template FILE]
 *                    [--template-kwargs JSON] --max-new-tokens N [--json]
 *
 * IDS.json: a list of equal-length lists of prompt token ids. Prints the generated ids as a
 * JSON list of lists, one row per line. TEXT: one user turn rendered with the generation prompt
 * by the model's chat template (TOK's, or FILE; with the variables of JSON: data/chat_cli.h,
 * as training renders it), tokenized with TOK's tokenizer.json (default: DIR's); prints the
 * generated text decoded, special tokens left out, or with --json the prompt ids, the generated ids
 * and the text. With an eos_token_id in the config a row stops at eos (and is padded with eos while
 * the others go on), like transformers' generate. --backend cuda decodes on the GPU (the weights,
 * the caches and the activations in device memory; the decode kernels of docs/cuda.md), the tokens
 * chosen on the host from the last positions' logits. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/chat.h"
#include "core/cli_flags.h"
#include "data/tokenizer.h"
#include "data/chat_cli.h"
#include "models/config.h"
#include "models/generate.h"
#include "apps/ids_json.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "core/version.h"

/* --help: on stdout, exit 0; a bad command line: on stderr, exit 2 */
static void usage(int status) {
    fprintf(status ? stderr : stdout,
            "usage: minimax-generate --model DIR --ids IDS.json --max-new-tokens N "
            "[--arena-mb M] [--backend cpu|cuda] [--no-verify]\n"
            "       minimax-generate --model DIR --prompt TEXT [--tokenizer TOK] "
            "[--chat-template FILE]\n"
            "         [--template-kwargs JSON] --max-new-tokens N [--json] [--arena-mb M]\n"
            "       minimax-generate --help | --version\n"
            "  greedy decoding: IDS.json is a list of equal-length lists of prompt token ids;\n"
            "  prints the generated ids as a JSON list of lists, one row per line\n"
            "  --prompt TEXT: a user turn with the generation prompt in the model's chat template\n"
            "    (TOK's chat_template.jinja or tokenizer_config.json), tokenized with\n"
            "    TOK/tokenizer.json (TOK: DIR by default); prints the generated text, special\n"
            "    tokens left out\n" MT_CHAT_CLI_HELP
            "  --json: with --prompt, {\"prompt_ids\": [...], \"ids\": [...], \"text\": ...}\n"
            "  --backend cuda: decode on the GPU (default cpu)\n"
            "  --no-verify: skip the check of the weights against the digests their files\n"
            "    record (docs/checkpoints.md)\n");
    exit(status);
}

/* --prompt: TEXT as a user turn with the generation prompt, rendered by t and tokenized as
 * training tokenizes: (1, T) ids, malloc'ed. */
static int32_t *gen_prompt_ids(mt_chat_template *t, const mt_tokenizer *tok, const char *text,
                               int *T) {
    char err[MT_ERR_LEN + 4800];
    const mt_chat_msg msg = {.role = MT_CHAT_USER, .text = text, .len = strlen(text)};
    int32_t *ids = mt_chat_cli_prompt(t, tok, &msg, 1, T, err, sizeof(err));
    MT_CHECK(ids, "--prompt: %s", err);
    MT_CHECK(*T > 0 && *T < 1000000, "--prompt: %d tokens", *T);
    return ids;
}

/* --prompt's output: the decoded text, or with --json the prompt ids, the ids and the text. */
static void gen_print_text(const mt_tokenizer *tok, const int32_t *prompt, int T,
                           const int32_t *out, int steps, bool json) {
    char *text = mt_tokenizer_decode(tok, out, steps, true);
    if (!json) {
        printf("%s\n", text);
        free(text);
        return;
    }
    cJSON *o = cJSON_CreateObject(), *p = cJSON_AddArrayToObject(o, "prompt_ids"),
          *g = cJSON_AddArrayToObject(o, "ids");
    for (int t = 0; t < T; t++) cJSON_AddItemToArray(p, cJSON_CreateNumber(prompt[t]));
    for (int s = 0; s < steps; s++) cJSON_AddItemToArray(g, cJSON_CreateNumber(out[s]));
    cJSON_AddStringToObject(o, "text", text);
    char *printed = cJSON_PrintUnformatted(o);
    MT_CHECK(printed, "cannot format the output");
    printf("%s\n", printed);
    free(printed);
    cJSON_Delete(o);
    free(text);
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *ids_path = NULL, *prompt = NULL, *tok_dir = NULL,
               *chat_file = NULL, *kwargs = NULL;
    long long n_new = -1, arena_mb = 0;
    char msg[512];
    bool json = false, verify = true;
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_dir = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids_path = argv[++i];
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc)
            prompt = argv[++i];
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            tok_dir = argv[++i];
        else if (!strcmp(argv[i], "--chat-template") && i + 1 < argc)
            chat_file = argv[++i];
        else if (!strcmp(argv[i], "--template-kwargs") && i + 1 < argc)
            kwargs = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--no-verify"))
            verify = false;
        else if (!strcmp(argv[i], "--max-new-tokens") && i + 1 < argc) {
            MT_CHECK(mt_flag_int(argv[i], argv[i + 1], 0, 1000000, &n_new, msg, sizeof(msg)),
                     "minimax-generate: %s", msg);
            i++;
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--arena-mb") && i + 1 < argc) {
            MT_CHECK(mt_flag_int(argv[i], argv[i + 1], 1, 1 << 24, &arena_mb, msg, sizeof(msg)),
                     "minimax-generate: %s", msg);
            i++;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            usage(0);
        else if (!strcmp(argv[i], "--version")) {
            mt_version_print(stdout, "minimax-generate");
            return 0;
        } else
            usage(2);
    }
    /* one of --ids and --prompt; --tokenizer, the template's flags and --json go with --prompt */
    if (!model_dir || !ids_path == !prompt ||
        (ids_path && (tok_dir || json || chat_file || kwargs)) || n_new < 0 ||
        (strcmp(backend, "cpu") && strcmp(backend, "cuda")))
        usage(2);

    mt_minimax_config cfg;
    mt_minimax_config_load(model_dir, &cfg);
    int B = 1, T; /* checked against the vocabulary before any weight is read */
    int32_t *ids = NULL;
    mt_tokenizer *tok = NULL;
    mt_chat_template *chat = NULL;
    if (prompt) {
        if (!tok_dir) tok_dir = model_dir;
        char path[4200], err[MT_ERR_LEN + 8400];
        snprintf(path, sizeof(path), "%s/tokenizer.json", tok_dir);
        MT_CHECK(access(path, R_OK) == 0,
                 "--prompt: cannot read %s (give --tokenizer DIR: a directory with tokenizer.json "
                 "and tokenizer_config.json)",
                 path);
        tok = mt_tokenizer_try_load(path, err, sizeof(err));
        MT_CHECK(tok, "--prompt: %s", err);
        chat = mt_chat_cli_open(tok_dir, chat_file, kwargs, err, sizeof(err));
        MT_CHECK(chat, "--prompt: %s", err);
        MT_CHECK(mt_chat_template_tokens_fit(chat, tok, tok_dir, err, sizeof(err)), "--prompt: %s",
                 err);
        ids = gen_prompt_ids(chat, tok, prompt, &T);
        mt_ids_check_range(ids, B, T, cfg.vocab_size, 0, "prompt token id", path);
    } else {
        ids = mt_ids_json_load(ids_path, &B, &T);
        mt_ids_check_range(ids, B, T, cfg.vocab_size, 0, "token id", ids_path);
    }
    /* a prompt must leave the context room for a token; a longer reply is cut, said once */
    const int ctx_len = cfg.max_position_embeddings;
    if (ctx_len > 0 && T >= ctx_len)
        MT_DIE("minimax-generate: %s: the prompt is %d tokens, the model's context "
               "(max_position_embeddings) is %d: no room for a reply",
               prompt ? "--prompt" : ids_path, T, ctx_len);
    if (ctx_len > 0 && T + n_new > ctx_len) {
        fprintf(stderr,
                "minimax-generate: --max-new-tokens %lld: the prompt's %d tokens leave %d of the "
                "model's context (max_position_embeddings %d); the reply stops there\n",
                n_new, T, ctx_len - T, ctx_len);
        n_new = ctx_len - T;
    }
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    char why[512];
    const mt_backend *be = mt_gen_backend_named(backend, &m, why, sizeof(why));
    MT_CHECK(be, "%s", why);
    float **data = mt_weights_load_backend_checked(model_dir, &m, be, verify);
    int32_t *out = mt_malloc((size_t)B * (size_t)(n_new > 0 ? n_new : 1) * sizeof(int32_t), "out");

    mt_ctx c;
    size_t arena =
        arena_mb > 0 ? (size_t)arena_mb << 20 : mt_minimax_generate_arena_bytes(&cfg, B, T);
    mt_ctx_init(&c, be, arena, 64 * (cfg.num_hidden_layers + 4));
    int steps = 0;
    mt_minimax_generate(&m, &c, ids, B, T, (int)n_new, cfg.eos_token_id, out, &steps);

    if (tok) {
        gen_print_text(tok, ids, T, out, steps, json);
        mt_tokenizer_free(tok);
        mt_chat_template_free(chat);
    } else {
        printf("[\n");
        for (int b = 0; b < B; b++) {
            printf("  [");
            for (int s = 0; s < steps; s++) printf(s ? ", %d" : "%d", out[(size_t)b * n_new + s]);
            printf(b + 1 < B ? "],\n" : "]\n");
        }
        printf("]\n");
    }

    mt_ctx_free(&c);
    mt_weights_backend_free(&m, be, data);
    free(ids);
    free(out);
    mt_minimax_free(&m);
    return 0;
}
