/* minimax-serve: an OpenAI-compatible endpoint for a model directory of any family
 * (docs/serving.md).
 *
 *   minimax-serve --model DIR [--tokenizer TOK] [--chat-template FILE]
 *                 [--template-kwargs JSON] [--host 127.0.0.1] [--port 8000]
 *                 [--max-batch N] [--max-context T] [--api-key K] [--max-body BYTES]
 *                 [--served-model-name NAME] [--backend cpu|cuda] [--header-timeout S]
 *                 [--body-timeout S] [--idle-timeout S] [--max-connections N]
 *                 [--max-connections-per-address N] [--prefill-tokens N]
 *                 [--reasoning-parser NAME] [--no-sanitize-control-tokens] [--no-webui]
 *
 * Chat messages are rendered by the model's chat template (TOK's, or FILE, with the variables
 * of JSON: data/chat_cli.h), as training renders them.
 * A control token spelled in a request's text (messages, tools, chat_template_kwargs) is
 * encoded as ordinary text, as transformers' apply_chat_template(sanitize_control_tokens=True)
 * does (data/chat.h); --no-sanitize-control-tokens encodes it as the token. Chat replies are
 * split into reasoning_content, content and tool_calls by the reply format NAME
 * (models/reply.h; default: the model family's; "none": the reply is content), one name for
 * both of vLLM's --reasoning-parser and --tool-call-parser.
 * POST /v1/chat/completions, POST /v1/completions, POST /tokenize, GET /v1/models, GET /health,
 * and a chat page at GET / (serve/webui/index.html, built in; --no-webui: none); requests are
 * batched continuously (serve/engine.h). SIGTERM or SIGINT: no new connections, the requests in
 * flight are answered, exit 0. Generation runs on the CPU backend (models/generate.h), the model
 * in host memory, or with --backend cuda on the GPU, the model, caches and activations in device
 * memory: a model that does not fit what the backend has free is refused with the sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "core/cli_flags.h"
#include "data/tokenizer.h"
#include "core/version.h"
#include "data/chat_cli.h"
#include "models/config.h"
#include "models/family.h"
#include "models/minimax.h"
#include "models/reply.h"
#include "models/weights.h"
#include "serve/engine.h"
#include "serve/server.h"

static void usage(int status) {
    fprintf(status ? stderr : stdout,
            "usage: minimax-serve --model DIR [--tokenizer TOK] [--chat-template FILE]\n"
            "         [--template-kwargs JSON] [--host 127.0.0.1] [--port 8000]\n"
            "         [--max-batch N] [--max-context T] [--api-key K] [--max-body BYTES]\n"
            "         [--served-model-name NAME] [--backend cpu|cuda] [--header-timeout S]\n"
            "         [--body-timeout S] [--idle-timeout S] [--max-connections N]\n"
            "         [--max-connections-per-address N] [--prefill-tokens N] [--no-verify]\n"
            "         [--reasoning-parser %s] [--no-sanitize-control-tokens]\n"
            "         [--no-webui]\n"
            "       minimax-serve --help | --version\n"
            "  OpenAI-compatible: POST /v1/chat/completions, POST /v1/completions,\n"
            "  POST /tokenize, GET /v1/models, GET /health; continuous batching of up to N "
            "requests (default 8)\n"
            "  GET /: a chat page in the browser (streams through /v1/chat/completions; asks for\n"
            "    the --api-key when one is set); --no-webui: no page, / is 404\n"
            "  --tokenizer TOK: the directory of tokenizer.json and the chat template (default "
            "DIR)\n" MT_CHAT_CLI_HELP
            "  --host: an IPv4 address (default 127.0.0.1, loopback only); --port 0: any free one\n"
            "  --max-context T: prompt + completion tokens per request (default: the model's\n"
            "    max_position_embeddings, at most 8192)\n"
            "  --api-key K: every request but /health needs 'Authorization: Bearer K'\n"
            "    (default: $MINIMAX_SERVE_API_KEY, else none)\n"
            "  --max-body BYTES: larger request bodies get 413 (default 1048576)\n"
            "  --served-model-name NAME: the model's id in requests (default: DIR's last part)\n"
            "  --backend cuda: decode on the GPU (default cpu)\n"
            "  --no-verify: skip the check of the weights against the digests their files\n"
            "    record (docs/checkpoints.md)\n"
            "  --header-timeout S: a request's headers must be in S s after the connection opened\n"
            "    or its previous answer was sent, else it is closed (default 10)\n"
            "  --body-timeout S: its body must be in S s after its headers (default 60)\n"
            "  --idle-timeout S: a connection on which nothing moves for S s is closed, except\n"
            "    while its answer is computed (default 30)\n"
            "  --max-connections N: open connections at most (default 512), of which\n"
            "    --max-connections-per-address N from one client address (default 64);\n"
            "    more are closed at once\n"
            "  --prefill-tokens N: prompt tokens prefilled between two decode steps at most;\n"
            "    longer prompts are prefilled a chunk at a time (default 128)\n"
            "  --reasoning-parser NAME: how chat replies are split into reasoning_content,\n"
            "    content and tool_calls (vLLM's --reasoning-parser and --tool-call-parser in\n"
            "    one; default: the model family's; none: all content, special tokens dropped)\n"
            "  --no-sanitize-control-tokens: a control token spelled in a request's text (]~b],\n"
            "    <think>, ...) is encoded as the token (default: as ordinary text, as\n"
            "    transformers' apply_chat_template(sanitize_control_tokens=True))\n"
            "  SIGTERM / SIGINT: stop accepting, answer what is in flight, exit 0\n",
            mt_reply_format_names());
    exit(status);
}

static void serve_fail(const char *msg) {
    fprintf(stderr, "minimax-serve: %s\n", msg);
    exit(1);
}

/* The value of a number flag, or exit 1 with one line naming it. */
static int serve_int_flag(const char *flag, const char *v, int lo, int hi) {
    char err[256];
    int x = 0;
    if (!mt_flag_int32(flag, v, lo, hi, &x, err, sizeof(err))) serve_fail(err);
    return x;
}

static const char *serve_text_flag(const char *flag, const char *v) {
    char err[256];
    if (!mt_flag_text(flag, v, err, sizeof(err))) serve_fail(err);
    return v;
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *tok_dir = NULL, *name = NULL, *backend = "cpu",
               *chat_file = NULL, *kwargs = NULL, *reply_name = NULL;
    mt_server_opts o = {.host = "127.0.0.1",
                        .port = 8000,
                        .max_body = 1 << 20,
                        .header_timeout_s = 10,
                        .body_timeout_s = 60,
                        .idle_timeout_s = 30,
                        .max_connections = 512,
                        .max_per_address = 64};
    o.api_key = getenv("MINIMAX_SERVE_API_KEY");
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    int max_batch = 8, max_context = 0, prefill_tokens = MT_SERVE_PREFILL_TOKENS;
    bool verify = true, sanitize = true;
    for (int i = 1; i < argc; i++) {
        const bool more = i + 1 < argc;
        const char *f = argv[i];
        if (!strcmp(f, "--model") && more)
            model_dir = serve_text_flag(f, argv[++i]);
        else if (!strcmp(f, "--tokenizer") && more)
            tok_dir = serve_text_flag(f, argv[++i]);
        else if (!strcmp(f, "--chat-template") && more)
            chat_file = argv[++i];
        else if (!strcmp(f, "--template-kwargs") && more)
            kwargs = argv[++i];
        else if (!strcmp(f, "--host") && more)
            o.host = serve_text_flag(f, argv[++i]);
        else if (!strcmp(f, "--port") && more)
            o.port = serve_int_flag(f, argv[++i], 0, 65535);
        else if (!strcmp(f, "--max-batch") && more)
            max_batch = serve_int_flag(f, argv[++i], 1, MT_GEN_BATCH_MAX);
        else if (!strcmp(f, "--prefill-tokens") && more)
            prefill_tokens = serve_int_flag(f, argv[++i], 1, 1 << 30);
        else if (!strcmp(f, "--max-context") && more)
            max_context = serve_int_flag(f, argv[++i], 2, 1 << 30);
        else if (!strcmp(f, "--api-key") && more)
            o.api_key = serve_text_flag(f, argv[++i]);
        else if (!strcmp(f, "--max-body") && more)
            o.max_body = (size_t)serve_int_flag(f, argv[++i], 1, 1 << 30);
        else if (!strcmp(f, "--header-timeout") && more)
            o.header_timeout_s = serve_int_flag(f, argv[++i], 1, 3600);
        else if (!strcmp(f, "--body-timeout") && more)
            o.body_timeout_s = serve_int_flag(f, argv[++i], 1, 3600);
        else if (!strcmp(f, "--idle-timeout") && more)
            o.idle_timeout_s = serve_int_flag(f, argv[++i], 1, 3600);
        else if (!strcmp(f, "--max-connections") && more)
            o.max_connections = serve_int_flag(f, argv[++i], 1, 4096);
        else if (!strcmp(f, "--max-connections-per-address") && more)
            o.max_per_address = serve_int_flag(f, argv[++i], 1, 4096);
        else if (!strcmp(f, "--reasoning-parser") && more)
            reply_name = serve_text_flag(f, argv[++i]);
        else if (!strcmp(f, "--backend") && more)
            backend = argv[++i];
        else if (!strcmp(f, "--served-model-name") && more)
            name = serve_text_flag(f, argv[++i]);
        else if (!strcmp(f, "--no-verify"))
            verify = false;
        else if (!strcmp(f, "--no-sanitize-control-tokens"))
            sanitize = false;
        else if (!strcmp(f, "--no-webui"))
            o.no_webui = true;
        else if (!strcmp(f, "--help") || !strcmp(f, "-h"))
            usage(0);
        else if (!strcmp(f, "--version")) {
            mt_version_print(stdout, "minimax-serve");
            return 0;
        } else
            usage(2);
    }
    if (!model_dir) usage(2);
    if (o.max_per_address > o.max_connections) o.max_per_address = o.max_connections;
    if (!tok_dir) tok_dir = model_dir;
    char err[MT_ERR_LEN + 8400];
    if (!mt_minimax_config_readable(model_dir, err, sizeof(err))) serve_fail(err);
    mt_tokenizer *tok = mt_chat_tokenizer_load(tok_dir, err, sizeof(err));
    if (!tok) serve_fail(err);
    mt_chat_template *chat = mt_chat_cli_open(tok_dir, chat_file, kwargs, err, sizeof(err));
    if (!chat) serve_fail(err);
    if (!name) { /* the directory's last part */
        const char *end = model_dir + strlen(model_dir);
        while (end > model_dir && end[-1] == '/') end--;
        const char *start = end;
        while (start > model_dir && start[-1] != '/') start--;
        static char base[256];
        snprintf(base, sizeof(base), "%.*s", (int)(end - start), start);
        name = *base ? base : "model";
    }

    mt_minimax_config cfg;
    mt_minimax_config_load(model_dir, &cfg);
    const mt_reply_format *reply =
        reply_name ? mt_reply_format_find(reply_name) : mt_reply_format_of(mt_config_family(&cfg));
    if (!reply) {
        snprintf(err, sizeof(err), "--reasoning-parser %s: unknown; one of %s", reply_name,
                 mt_reply_format_names());
        serve_fail(err);
    }
    if (!mt_chat_tokenizer_fits(tok, tok_dir, cfg.vocab_size, err, sizeof(err))) serve_fail(err);
    if (!mt_chat_template_tokens_fit(chat, tok, tok_dir, err, sizeof(err))) serve_fail(err);
    if (max_context > cfg.max_position_embeddings) {
        snprintf(err, sizeof(err),
                 "--max-context %d is above the model's max_position_embeddings %d "
                 "(%s/config.json)",
                 max_context, cfg.max_position_embeddings, model_dir);
        serve_fail(err);
    }
    const int t_max = max_context > 0                      ? max_context
                      : cfg.max_position_embeddings < 8192 ? cfg.max_position_embeddings
                                                           : 8192;
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    const mt_backend *be = mt_gen_backend_named(backend, &m, err, sizeof(err));
    if (!be) serve_fail(err);
    /* the backend holds the weights, the caches and one prefill: refused when it cannot */
    double weights = 0;
    for (int b = 0; b < m.n_buckets; b++) weights += 4.0 * (double)m.bucket_numel[b];
    const double cache = (double)mt_minimax_cache_bytes(&cfg, (int)max_batch + 1, t_max);
    const double need = weights + cache + (double)mt_minimax_generate_arena_bytes(&cfg, 1, t_max);
    const double avail = be->mem_available ? (double)be->mem_available() : 0;
    if (avail > 0 && need > avail) {
        snprintf(err, sizeof(err),
                 "%s: the model needs %.2f GiB of %s memory (weights %.2f GiB, caches for %d "
                 "rows of %d tokens %.2f GiB: --max-batch and one where long prompts fill), "
                 "%.2f GiB is available: lower --max-batch or --max-context (minimax-info "
                 "--model %s sizes its training)",
                 model_dir, need / (1 << 30), be->name, weights / (1 << 30), max_batch + 1, t_max,
                 cache / (1 << 30), avail / (1 << 30), model_dir);
        serve_fail(err);
    }
    float **data = mt_weights_load_backend_checked(model_dir, &m, be, verify);
    const int32_t eos = mt_chat_cli_eos(chat, tok, cfg.eos_token_id);

    mt_serve_engine engine;
    mt_serve_engine_start(&engine, &m, tok, be, (int)max_batch, t_max, prefill_tokens);
    const mt_api_env env = {.engine = &engine,
                            .tok = tok,
                            .chat = chat,
                            .model_name = name,
                            .t_max = t_max,
                            .vocab_size = cfg.vocab_size,
                            .eos = eos,
                            .reply = reply,
                            .sanitize = sanitize};
    const int rc = mt_server_run(&env, &o);
    mt_serve_engine_stop(&engine);
    mt_weights_backend_free(&m, be, data);
    mt_minimax_free(&m);
    mt_tokenizer_free(tok);
    mt_chat_template_free(chat);
    return rc;
}
