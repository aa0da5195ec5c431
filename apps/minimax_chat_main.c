/* minimax-chat: a multi-turn chat with a model directory of any family in the terminal
 * (docs/evaluation.md, "Chatting with a model").
 *
 *   minimax-chat --model DIR [--tokenizer TOK] [--chat-template FILE] [--template-kwargs JSON]
 *                [--system TEXT] [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]
 *                [--seed S] [--stop STR]... [--reasoning-parser NAME] [--hide-reasoning]
 *                [--json] [--backend cpu|cuda]
 *
 * Each line on stdin is a user turn (a line ending in '\' continues on the next); `/reset`
 * forgets the turns (the system prompt stays), `/exit` or the end of input ends. Every turn
 * renders the whole conversation with the model's chat template (TOK's, or --chat-template FILE,
 * with the variables of --template-kwargs) plus the generation prompt, exactly as minimax-eval
 * and training render it (data/chat_cli.h, data/chat.h), and decodes with the same code
 * (models/generate.h); the reply streams to stdout as its tokens are decoded and joins the
 * conversation as an assistant turn. With a reply format (--reasoning-parser, by default the
 * model's family's: models/reply.h) the reply is split as it streams: its reasoning shown faint
 * (or not at all with --hide-reasoning), its content, its tool calls on lines of their own; the
 * assistant turn keeps the content and the reasoning as reasoning_content, and the template
 * renders or drops that as it wants. A reply ends at the end-of-turn token (mt_chat_cli_eos),
 * at a --stop string or after --max-new-tokens. --json prints one object per turn instead of the
 * stream: the prompt's ids, the reply's ids and its text. The conversation is rendered and
 * prefilled anew each turn: the reply's tokens are not its re-tokenized text, so a cache kept from
 * the last turn would not be what the template renders. --backend cuda decodes on the GPU (the
 * weights, caches and activations in device memory). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/chat.h"
#include "core/cli_flags.h"
#include "core/file_io.h"
#include "data/tokenizer.h"
#include "core/version.h"
#include "data/chat_cli.h"
#include "models/config.h"
#include "models/generate.h"
#include "models/family.h"
#include "models/minimax.h"
#include "models/reply.h"
#include "models/weights.h"

#define CHAT_MAX_STOPS 16

static void usage(int status) {
    fprintf(status ? stderr : stdout,
            "usage: minimax-chat --model DIR [--tokenizer TOK] [--chat-template FILE]\n"
            "         [--template-kwargs JSON] [--system TEXT] [--max-new-tokens N]\n"
            "         [--temperature T] [--top-k K] [--top-p P] [--seed S] [--stop STR]... "
            "[--json]\n"
            "         [--reasoning-parser NAME] [--hide-reasoning]\n"
            "         [--backend cpu|cuda] [--no-verify]\n"
            "       minimax-chat --help | --version\n"
            "  a chat in the terminal: each line on stdin is a user turn (end a line with '\\' "
            "to go on\n"
            "  on the next), /reset forgets the turns, /exit (or end of input) ends\n"
            "  --tokenizer TOK: the directory of tokenizer.json and the chat template (default "
            "DIR)\n" MT_CHAT_CLI_HELP "  --system TEXT: a system turn first (kept by /reset)\n"
            "  --max-new-tokens N: the longest reply (default 512)\n"
            "  --temperature T (default 0: greedy), --top-k K, --top-p P, --seed S: sampling\n"
            "  --stop STR: also end a reply when its text contains STR (up to %d)\n"
            "  --reasoning-parser NAME: how a reply's reasoning is told from its content\n"
            "    (%s; default: the model's family's): the reasoning is shown faint and\n"
            "    kept in the conversation for the template; tool calls on lines of their own\n"
            "  --hide-reasoning: do not show the reasoning\n"
            "  --json: one line per turn, {\"prompt_ids\", \"ids\", \"text\"} (with a reply "
            "format also\n"
            "    \"reasoning_content\", \"content\", \"tool_calls\"), instead of the stream\n"
            "  --backend cuda: decode on the GPU (default cpu)\n"
            "  --no-verify: skip the check of the weights against the digests their files\n"
            "    record (docs/checkpoints.md)\n",
            CHAT_MAX_STOPS, mt_reply_format_names());
    exit(status);
}

/* The conversation: roles and owned texts (message 0 the system turn when there is one). */
typedef struct {
    mt_chat_msg *msgs;
    int n, cap, keep; /* keep: the messages /reset leaves (the system turn) */
} chat_history;

static void chat_history_add(chat_history *h, mt_chat_role role, const char *text, size_t len) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 8;
        h->msgs = realloc(h->msgs, sizeof(mt_chat_msg) * (size_t)h->cap);
        MT_CHECK(h->msgs, "out of memory for %d chat turns", h->cap);
    }
    char *copy = mt_malloc(len + 1, "chat turn");
    memcpy(copy, text, len);
    copy[len] = '\0';
    h->msgs[h->n++] = (mt_chat_msg){.role = role, .text = copy, .len = len};
}

static void chat_history_truncate(chat_history *h, int n) {
    while (h->n > n) {
        free((char *)h->msgs[--h->n].text);
        free((char *)h->msgs[h->n].reasoning);
    }
}

/* What a reply needs while it decodes: the tokenizer for the stream and the stop strings, and
 * the reply format that tells its reasoning from its content (models/reply.h). */
typedef struct {
    const mt_tokenizer *tok;
    const char *const *stops;
    int n_stops;
    bool stream;
    size_t printed;             /* bytes of the reply's text already on stdout (no reply format) */
    const mt_reply_format *fmt; /* active: the reply is split as it streams */
    mt_reply_stream *split;     /* this reply's (NULL: no reply format) */
    int32_t eos;
    bool hide_reasoning, dim; /* dim: the reasoning in faint type (stdout is a terminal) */
    bool in_reasoning_shown;  /* the reasoning's faint type is on */
} chat_reply;

/* The end of the part of text that later tokens cannot change: a trailing U+FFFD is a
 * character whose bytes are still arriving (the decoder is lossy: from_utf8_lossy). */
static size_t chat_stable_len(const char *text, size_t n) {
    while (n >= 3 && !memcmp(text + n - 3, "\xEF\xBF\xBD", 3)) n -= 3;
    return n;
}

/* One piece of a split reply on stdout: the reasoning faint (or hidden), then the content, a
 * tool call on a line of its own. */
static void chat_show(chat_reply *r, const mt_reply_delta *d) {
    if (d->reasoning_len && !r->hide_reasoning) {
        if (r->dim && !r->in_reasoning_shown) fputs("\033[2m", stdout);
        r->in_reasoning_shown = true;
        fwrite(d->reasoning, 1, d->reasoning_len, stdout);
    }
    const bool more = d->content_len || d->n_calls;
    if (more && r->in_reasoning_shown) { /* the reasoning is over: a line between */
        fputs(r->dim ? "\033[0m\n\n" : "\n\n", stdout);
        r->in_reasoning_shown = false;
    }
    fwrite(d->content, 1, d->content_len, stdout);
    for (int i = 0; i < d->n_calls; i++)
        printf("\n[tool call %s(%s)]\n", d->calls[i].name, d->calls[i].arguments);
    fflush(stdout);
}

/* mt_gen_opts.stop: streams the new text of the reply and searches the stop strings. */
static bool chat_on_token(void *user, int b, const int32_t *toks, int n) {
    (void)b;
    chat_reply *r = user;
    char *text = mt_tokenizer_decode(r->tok, toks, n, true);
    const size_t len = strlen(text), stable = chat_stable_len(text, len);
    if (r->stream && r->split) {
        char *marked = mt_reply_decode(r->fmt, r->tok, toks, n, r->eos);
        mt_reply_delta d;
        mt_reply_stream_feed(r->split, marked, chat_stable_len(marked, strlen(marked)), false, &d);
        chat_show(r, &d);
        free(marked);
    } else if (r->stream && stable > r->printed) {
        fwrite(text + r->printed, 1, stable - r->printed, stdout);
        fflush(stdout);
        r->printed = stable;
    }
    bool hit = false;
    for (int i = 0; i < r->n_stops && !hit; i++) hit = strstr(text, r->stops[i]) != NULL;
    free(text);
    return hit;
}

typedef struct {
    mt_minimax *model;
    const mt_tokenizer *tok;
    mt_chat_template *chat; /* renders the conversation */
    const mt_backend *be;   /* the context's, whose memory holds the weights */
    mt_ctx ctx;
    int ctx_tokens; /* the longest prompt ctx's arena holds (0: not initialised) */
    int n_new, n_turns;
    bool json;
    bool said_cut; /* a reply cut at the context has been announced (once a session) */
    mt_gen_opts opts;
    chat_reply reply;
} chat_session;

/* The prompt of the conversation so far: rendered with the generation prompt and tokenized.
 * Returns the ids (malloc'ed), *T their count; NULL after an error line on stderr (a template
 * that refuses the conversation drops the turn, the chat goes on). */
static int32_t *chat_prompt(const chat_session *s, const chat_history *h, int *T) {
    char err[MT_ERR_LEN + 4800];
    int32_t *ids = mt_chat_cli_prompt(s->chat, s->tok, h->msgs, h->n, T, err, sizeof(err));
    if (!ids) fprintf(stderr, "minimax-chat: %s\n", err);
    return ids;
}

static void chat_print_json(const int32_t *prompt, int T, const int32_t *out, int n,
                            const char *text, const mt_reply *split) {
    cJSON *o = cJSON_CreateObject(), *p = cJSON_AddArrayToObject(o, "prompt_ids"),
          *g = cJSON_AddArrayToObject(o, "ids");
    for (int t = 0; t < T; t++) cJSON_AddItemToArray(p, cJSON_CreateNumber(prompt[t]));
    for (int t = 0; t < n; t++) cJSON_AddItemToArray(g, cJSON_CreateNumber(out[t]));
    cJSON_AddStringToObject(o, "text", text);
    if (split) { /* the reply format's split of it (models/reply.h) */
        if (split->reasoning)
            cJSON_AddStringToObject(o, "reasoning_content", split->reasoning);
        else
            cJSON_AddNullToObject(o, "reasoning_content");
        cJSON_AddStringToObject(o, "content", split->content ? split->content : "");
        cJSON *calls = cJSON_AddArrayToObject(o, "tool_calls");
        for (int i = 0; i < split->n_calls; i++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", split->calls[i].name);
            cJSON_AddStringToObject(c, "arguments", split->calls[i].arguments);
            cJSON_AddItemToArray(calls, c);
        }
    }
    char *printed = cJSON_PrintUnformatted(o);
    MT_CHECK(printed, "cannot format the turn");
    printf("%s\n", printed);
    fflush(stdout);
    free(printed);
    cJSON_Delete(o);
}

/* With a reply format: the rendered prompt of the conversation (what tells whether the reply
 * starts inside its reasoning), malloc'ed, and the stream that splits the reply as it comes;
 * NULL without one. */
static char *chat_split_begin(chat_session *s, const chat_history *h) {
    if (!mt_reply_format_active(s->reply.fmt)) return NULL;
    mt_chat_rendered r = {0};
    char err[MT_ERR_LEN + 4800];
    /* (the same conversation rendered for the prompt's ids a moment ago) */
    MT_CHECK(mt_chat_render_msgs(s->chat, h->msgs, h->n, &r, err, sizeof(err)) == 0, "%s", err);
    char *text = strdup(r.text);
    mt_chat_rendered_free(&r);
    if (s->reply.stream) s->reply.split = mt_reply_stream_new(s->reply.fmt, text, NULL, false);
    return text;
}

/* One turn: the user's text joins the conversation, the reply is decoded (streamed) and joins
 * it too. A conversation past the model's context is refused (one line; the turn is dropped). */
static void chat_turn(chat_session *s, chat_history *h, const char *text, size_t len) {
    chat_history_add(h, MT_CHAT_USER, text, len);
    int T = 0;
    int32_t *prompt = chat_prompt(s, h, &T);
    const int ctx_len = (int)s->model->cfg.max_position_embeddings;
    if (prompt && T >= ctx_len) {
        if (h->n - 1 == h->keep) /* nothing earlier to forget: /reset would not help */
            fprintf(stderr,
                    "minimax-chat: this turn%s is %d tokens, the model's context "
                    "(max_position_embeddings) %d: shorten it\n",
                    h->keep ? " with the --system turn" : "", T, ctx_len);
        else
            fprintf(stderr,
                    "minimax-chat: the conversation is %d tokens, the model's context "
                    "(max_position_embeddings) %d: /reset to start over\n",
                    T, ctx_len);
        free(prompt);
        prompt = NULL;
    }
    if (!prompt) {
        chat_history_truncate(h, h->n - 1);
        return;
    }
    if (T > s->ctx_tokens) { /* the arena holds one prefill of the prompt: grow it by halves */
        if (s->ctx_tokens) mt_ctx_free(&s->ctx);
        s->ctx_tokens = T + T / 2 < ctx_len ? T + T / 2 : ctx_len;
        mt_ctx_init(&s->ctx, s->be,
                    mt_minimax_generate_arena_bytes(&s->model->cfg, 1, s->ctx_tokens),
                    64 * (s->model->cfg.num_hidden_layers + 4));
    }
    const int n_new = s->n_new < ctx_len - T ? s->n_new : ctx_len - T;
    if (n_new < s->n_new && !s->said_cut) {
        fprintf(stderr,
                "minimax-chat: --max-new-tokens %d: the conversation's %d tokens leave %d of the "
                "model's context (max_position_embeddings %d); a reply stops there\n",
                s->n_new, T, n_new, ctx_len);
        s->said_cut = true;
    }
    int32_t *out = mt_malloc(sizeof(int32_t) * (size_t)n_new, "reply");
    const int64_t row = s->n_turns++; /* each turn its own draws */
    mt_gen_opts o = s->opts;
    o.row_ids = &row;
    s->reply.printed = 0;
    char *prompt_text = chat_split_begin(s, h);
    int n_out = 0;
    const int32_t *prompts[1] = {prompt};
    mt_minimax_generate_batch(s->model, &s->ctx, prompts, &T, 1, n_new, &o, out, &n_out);
    char *reply = mt_tokenizer_decode(s->tok, out, n_out, true);
    mt_reply split = {0};
    if (prompt_text) { /* the whole reply split as the stream split it */
        char *marked = mt_reply_decode(s->reply.fmt, s->tok, out, n_out, s->reply.eos);
        mt_reply_parse(s->reply.fmt, prompt_text, marked, strlen(marked), NULL, false, &split);
        if (s->reply.split) {
            mt_reply_delta d;
            mt_reply_stream_feed(s->reply.split, marked, strlen(marked), true, &d);
            chat_show(&s->reply, &d);
            if (s->reply.in_reasoning_shown && s->reply.dim) fputs("\033[0m", stdout);
            s->reply.in_reasoning_shown = false;
            mt_reply_stream_free(s->reply.split);
            s->reply.split = NULL;
        }
        free(marked);
        free(prompt_text);
    }
    if (s->json)
        chat_print_json(prompt, T, out, n_out, reply, prompt_text ? &split : NULL);
    else {
        if (!prompt_text) fputs(reply + s->reply.printed, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (prompt_text) { /* the history keeps what the template takes back: content, reasoning */
        const char *c = split.content ? split.content : "";
        chat_history_add(h, MT_CHAT_ASSISTANT, c, strlen(c));
        if (split.reasoning) {
            h->msgs[h->n - 1].reasoning = strdup(split.reasoning);
            h->msgs[h->n - 1].reasoning_len = strlen(split.reasoning);
        }
    } else
        chat_history_add(h, MT_CHAT_ASSISTANT, reply, strlen(reply));
    mt_reply_free(&split);
    free(reply);
    free(out);
    free(prompt);
}

/* Reads stdin turn by turn until /exit or its end. */
static void chat_loop(chat_session *s, chat_history *h) {
    const bool tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t cap = 0;
    mt_strbuf turn = {0};
    for (;;) {
        if (tty) fputs(turn.len ? "... " : "> ", stderr);
        const ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            /* a continued turn whose last line never came: said, not dropped in silence */
            if (turn.len > 0) {
                fprintf(stderr, "minimax-chat: stdin ended after a line ending in '\\' (a turn "
                                "continued on a next line that never came): that turn is not "
                                "sent\n");
                free(line);
                mt_strbuf_free(&turn);
                exit(1);
            }
            break;
        }
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len && line[len - 1] == '\\') { /* continued: the newline is part of the turn */
            mt_strbuf_append(&turn, line, len - 1);
            mt_strbuf_append(&turn, "\n", 1);
            continue;
        }
        mt_strbuf_append(&turn, line, len);
        const char *t = turn.p ? turn.p : "";
        if (!strcmp(t, "/exit")) break;
        if (!strcmp(t, "/reset")) {
            chat_history_truncate(h, h->keep);
            fprintf(stderr, "minimax-chat: conversation reset\n");
        } else if (t[0] == '/')
            fprintf(stderr, "minimax-chat: unknown command %s (/reset, /exit)\n", t);
        else if (turn.len > 0)
            chat_turn(s, h, t, turn.len);
        turn.len = 0;
        if (turn.p) turn.p[0] = '\0';
    }
    free(line);
    mt_strbuf_free(&turn);
}

static void chat_fail(const char *msg) {
    fprintf(stderr, "minimax-chat: %s\n", msg);
    exit(1);
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *tok_dir = NULL, *system_text = NULL, *backend = "cpu",
               *chat_file = NULL, *kwargs = NULL, *reasoning_parser = NULL;
    const char *stops[CHAT_MAX_STOPS];
    int n_stops = 0;
    long long n_new = 512, top_k = 0;
    double temperature = 0, top_p = 1;
    uint64_t seed = 0;
    bool json = false, verify = true, hide_reasoning = false;
    char msg[512];
    for (int i = 1; i < argc; i++) {
        const bool more = i + 1 < argc;
        const char *f = argv[i], *v = more ? argv[i + 1] : NULL;
        bool ok = true; /* a number or text refused by core/cli_flags.h: its line in msg */
        if (!strcmp(f, "--model") && more)
            model_dir = argv[++i];
        else if (!strcmp(f, "--tokenizer") && more)
            tok_dir = argv[++i];
        else if (!strcmp(f, "--chat-template") && more)
            chat_file = argv[++i];
        else if (!strcmp(f, "--template-kwargs") && more)
            kwargs = argv[++i];
        else if (!strcmp(f, "--reasoning-parser") && more)
            reasoning_parser = argv[++i];
        else if (!strcmp(f, "--hide-reasoning"))
            hide_reasoning = true;
        else if (!strcmp(f, "--system") && more)
            system_text = argv[++i];
        else if (!strcmp(f, "--max-new-tokens") && more)
            ok = mt_flag_int(argv[i++], v, 1, 1000000, &n_new, msg, sizeof(msg));
        else if (!strcmp(f, "--temperature") && more)
            ok = mt_flag_double(argv[i++], v, 0, false, HUGE_VAL, true, &temperature, msg,
                                sizeof(msg));
        else if (!strcmp(f, "--top-k") && more)
            ok = mt_flag_int(argv[i++], v, 0, INT_MAX, &top_k, msg, sizeof(msg));
        else if (!strcmp(f, "--top-p") && more)
            ok = mt_flag_double(argv[i++], v, 0, true, 1, false, &top_p, msg, sizeof(msg));
        else if (!strcmp(f, "--seed") && more)
            ok = mt_flag_u64(argv[i++], v, &seed, msg, sizeof(msg));
        else if (!strcmp(f, "--stop") && more)
            ok = mt_flag_list_add(argv[i++], v, stops, &n_stops, CHAT_MAX_STOPS, msg, sizeof(msg));
        else if (!strcmp(f, "--backend") && more)
            backend = argv[++i];
        else if (!strcmp(f, "--json"))
            json = true;
        else if (!strcmp(f, "--no-verify"))
            verify = false;
        else if (!strcmp(f, "--help") || !strcmp(f, "-h"))
            usage(0);
        else if (!strcmp(f, "--version")) {
            mt_version_print(stdout, "minimax-chat");
            return 0;
        } else
            usage(2);
        if (!ok) chat_fail(msg);
    }
    if (!model_dir) usage(2);
    if (!tok_dir) tok_dir = model_dir;
    char err[MT_ERR_LEN + 8400];
    if (!mt_minimax_config_readable(model_dir, err, sizeof(err))) chat_fail(err);
    mt_tokenizer *tok = mt_chat_tokenizer_load(tok_dir, err, sizeof(err));
    if (!tok) chat_fail(err);
    mt_chat_template *chat = mt_chat_cli_open(tok_dir, chat_file, kwargs, err, sizeof(err));
    if (!chat) chat_fail(err);

    mt_minimax_config cfg;
    mt_minimax_config_load(model_dir, &cfg);
    if (!mt_chat_tokenizer_fits(tok, tok_dir, cfg.vocab_size, err, sizeof(err))) chat_fail(err);
    if (!mt_chat_template_tokens_fit(chat, tok, tok_dir, err, sizeof(err))) chat_fail(err);
    const mt_reply_format *fmt =
        mt_reply_format_pick(reasoning_parser, mt_config_family(&cfg), err, sizeof(err));
    if (!fmt) chat_fail(err);
    if (system_text) { /* a system turn that alone fills the context leaves no chat */
        const mt_chat_msg sys = {
            .role = MT_CHAT_SYSTEM, .text = system_text, .len = strlen(system_text)};
        int T = 0;
        int32_t *ids = mt_chat_cli_prompt(chat, tok, &sys, 1, &T, err, sizeof(err));
        free(ids); /* a template that refuses a system turn alone is checked at the first turn */
        if (ids && cfg.max_position_embeddings > 0 && T >= cfg.max_position_embeddings) {
            snprintf(err, sizeof(err),
                     "--system: the system turn is %d tokens in the template, the model's context "
                     "(max_position_embeddings) %d: no room for a conversation",
                     T, cfg.max_position_embeddings);
            chat_fail(err);
        }
    }
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    const mt_backend *be = mt_gen_backend_named(backend, &m, err, sizeof(err));
    if (!be) chat_fail(err);
    float **data = mt_weights_load_backend_checked(model_dir, &m, be, verify);
    const int32_t eos = mt_chat_cli_eos(chat, tok, cfg.eos_token_id);

    chat_session s = {
        .model = &m, .tok = tok, .chat = chat, .be = be, .n_new = (int)n_new, .json = json};
    s.reply = (chat_reply){.tok = tok,
                           .stops = stops,
                           .n_stops = n_stops,
                           .stream = !json,
                           .fmt = fmt,
                           .eos = eos,
                           .hide_reasoning = hide_reasoning,
                           .dim = isatty(STDOUT_FILENO)};
    s.opts = (mt_gen_opts){.temperature = (float)temperature,
                           .top_k = (int)top_k,
                           .top_p = (float)top_p,
                           .seed = seed,
                           .eos = eos,
                           .stop = chat_on_token,
                           .stop_user = &s.reply};
    chat_history h = {0};
    if (system_text) chat_history_add(&h, MT_CHAT_SYSTEM, system_text, strlen(system_text));
    h.keep = h.n;
    chat_loop(&s, &h);

    chat_history_truncate(&h, 0);
    free(h.msgs);
    if (s.ctx_tokens) mt_ctx_free(&s.ctx);
    mt_weights_backend_free(&m, be, data);
    mt_minimax_free(&m);
    mt_tokenizer_free(tok);
    mt_chat_template_free(chat);
    return 0;
}
