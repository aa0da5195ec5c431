/* serve.c: minimax-serve end to end over loopback, driven by a C client
 * (tests/support/serve_http.h), on a random 1-layer model of recipes/configs/tiny.json with the
 * test tokenizer.
 *
 * serve_endpoints: /health and /v1/models; a greedy completion of token ids equals
 * minimax-generate's decoding of them token for token (its text, its token count); a chat
 * completion equals minimax-chat's reply to the same user turn; the stream's pieces join to the
 * same text and end with the usage and [DONE]; echo with logprobs gives the prompt's log-softmax
 * (from minimax-forward's logits, the training forward: no cache) with null first; stop strings
 * cut the text; usage counts in every response.
 * serve_errors: OpenAI error objects with their 4xx status for malformed JSON, wrong types, an
 * unknown model, a prompt past the context, max_tokens 0 without echo, n = 2, an oversize body,
 * an unknown route and method; with --api-key, requests without the bearer token get 401.
 * serve_concurrent: 32 clients, 64 requests with different prompts and lengths on a server
 * batching 8: each answer equals the one the request got alone, and the decode steps held
 * more than one row on average.
 * serve_chunked_prefill: the same checks with --prefill-tokens 3, so that every prompt is
 * prefilled a chunk at a time (serve/engine.h).
 * serve_disconnect: a client killed in the middle of a long stream frees its row (/health
 * active back to 0) long before the stream would have ended.
 * serve_sigterm: SIGTERM while a request decodes: that request is answered in full, the server
 * exits 0, and it takes no new connection.
 * serve_template: --chat-template and --template-kwargs render the chat messages (the prompt's
 * token count is that of the file's rendering, the reply minimax-chat's with the same flags); a
 * request the template refuses (raise_exception) gets a 400 naming the problem and the server
 * goes on; a bad template file or kwargs stop the start with one line naming the flag. */
/* Paths here are temporary directories far below the buffer sizes; snprintf truncation cannot
 * happen and would only shorten a command line. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "data/tokenizer.h"
#include "models/safetensors.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"
#include "tests/support/serve_http.h"

static char sv_dir[4096], sv_model[4200];
static mt_tokenizer *sv_tok;

static void sv_setup(int max_pos) {
    make_tmpdir(sv_dir, sizeof(sv_dir));
    eval_make_model(sv_dir, 1, max_pos, sv_model, sizeof(sv_model));
    char path[4400];
    snprintf(path, sizeof(path), "%s/tokenizer.json", sv_model);
    sv_tok = mt_tokenizer_load(path);
}

/* minimax-serve on the model with these flags (its --model given here). */
static void sv_serve(srv_proc *s, const char *flags) {
    char args[8400];
    snprintf(args, sizeof(args), "--model '%s' %s", sv_model, flags);
    srv_start(s, sv_dir, args);
}

static void sv_teardown(void) {
    mt_tokenizer_free(sv_tok);
    rm_tree(sv_dir);
}

/* POST path body: the parsed JSON answer (NULL when not JSON); *status its status. */
static cJSON *sv_post(int port, const char *path, const char *headers, const char *body,
                      int *status) {
    http_resp r = http_request(port, "POST", path, headers, body);
    *status = r.status;
    cJSON *o = r.body ? cJSON_Parse(r.body) : NULL;
    http_resp_free(&r);
    return o;
}

static const cJSON *sv_choice(const cJSON *o) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
}

static const char *sv_text(const cJSON *o) {
    const cJSON *c = sv_choice(o), *m = cJSON_GetObjectItem(c, "message");
    return cJSON_GetStringValue(cJSON_GetObjectItem(m ? m : c, m ? "content" : "text"));
}

static int sv_usage(const cJSON *o, const char *key) {
    return (int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"), key));
}

/* `env_var ARGS` with its stdout in a file; that file's text (malloc'ed). */
static char *sv_tool(const char *env_var, const char *args, const char *input) {
    const char *exe = getenv(env_var);
    MT_CHECK(exe && *exe, "%s not set; run through ctest", env_var);
    char cmd[16384], in[4300], out[4300], err[MT_ERR_LEN];
    snprintf(in, sizeof(in), "%s/tool.in", sv_dir);
    snprintf(out, sizeof(out), "%s/tool.out", sv_dir);
    write_text(in, input ? input : "");
    snprintf(cmd, sizeof(cmd), "'%s' %s <'%s' >'%s'", exe, args, in, out);
    MT_CHECK(system(cmd) == 0, "%s %s failed", exe, args);
    char *s = mt_file_read(out, NULL, err);
    MT_CHECK(s, "%s", err);
    return s;
}

#define N_NEW 12
static const int32_t PROMPT[] = {17, 400, 33, 1201, 95, 6000, 12, 7};
#define T_PROMPT ((int)(sizeof(PROMPT) / sizeof(PROMPT[0])))

/* The prompt's ids as JSON: "[17, 400, ...]". */
static void sv_ids_json(char *buf, size_t n, const int32_t *ids, int T) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int t = 0; t < T; t++) k += (size_t)snprintf(buf + k, n - k, t ? ", %d" : "%d", ids[t]);
    snprintf(buf + k, n - k, "]");
}

static int sv_check_completion(int port) {
    char ids[256], body[1024], path[4400], args[9000];
    sv_ids_json(ids, sizeof(ids), PROMPT, T_PROMPT);
    snprintf(body, sizeof(body),
             "{\"model\": \"model\", \"prompt\": %s, \"max_tokens\": %d, \"temperature\": 0}", ids,
             N_NEW);
    int st;
    cJSON *o = sv_post(port, "/v1/completions", NULL, body, &st);
    EXPECT(st == 200 && o, "completion: status %d", st);
    /* minimax-generate's greedy ids for the same prompt */
    snprintf(path, sizeof(path), "%s/ids.json", sv_dir);
    char rows[300];
    snprintf(rows, sizeof(rows), "[%s]\n", ids);
    write_text(path, rows);
    snprintf(args, sizeof(args), "--model '%s' --ids '%s' --max-new-tokens %d", sv_model, path,
             N_NEW);
    char *out = sv_tool("MT_GENERATE_CLI", args, NULL);
    cJSON *ref = cJSON_Parse(out);
    free(out);
    int32_t want[N_NEW];
    int n = 0;
    for (const cJSON *x = ref->child->child; x && n < N_NEW; x = x->next)
        want[n++] = (int32_t)x->valuedouble;
    cJSON_Delete(ref);
    const int got = sv_usage(o, "completion_tokens");
    const bool stop =
        !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(sv_choice(o), "finish_reason")), "stop");
    const int32_t eos = mt_tokenizer_token_to_id(sv_tok, "<end_of_sentence>");
    EXPECT(got >= 1 && got <= N_NEW && (stop ? want[got - 1] == eos : got == N_NEW),
           "completion: %d tokens, finish %s", got, stop ? "stop" : "length");
    char *text = mt_tokenizer_decode(sv_tok, want, got, true);
    EXPECT(!strcmp(text, sv_text(o)), "completion %s, minimax-generate %s", sv_text(o), text);
    EXPECT(sv_usage(o, "prompt_tokens") == T_PROMPT &&
               sv_usage(o, "total_tokens") == T_PROMPT + got,
           "completion usage");
    printf("completion of %d ids: %d tokens as minimax-generate's\n", T_PROMPT, got);
    /* a stop string cuts the text before it */
    if (strlen(text) > 6) {
        char stop_str[4] = {text[4], text[5], text[6], 0};
        const char *cut = strstr(text, stop_str);
        snprintf(body, sizeof(body),
                 "{\"model\": \"model\", \"prompt\": %s, \"max_tokens\": %d, \"temperature\": 0, "
                 "\"stop\": [\"%s\"]}",
                 ids, N_NEW, stop_str);
        if (!strchr(stop_str, '"') && !strchr(stop_str, '\\')) {
            cJSON *s = sv_post(port, "/v1/completions", NULL, body, &st);
            EXPECT(st == 200 && strlen(sv_text(s)) == (size_t)(cut - text) &&
                       !strncmp(sv_text(s), text, (size_t)(cut - text)),
                   "stop %s: %s from %s", stop_str, sv_text(s), text);
            cJSON_Delete(s);
        }
    }
    free(text);
    cJSON_Delete(o);
    return MT_TEST_OK;
}

/* echo + logprobs against the training forward's logits (minimax-forward). */
static int sv_check_logprobs(int port) {
    char ids[256], body[1024], path[4400], args[14000], out_path[4400];
    sv_ids_json(ids, sizeof(ids), PROMPT, T_PROMPT);
    snprintf(body, sizeof(body),
             "{\"model\": \"model\", \"prompt\": %s, \"max_tokens\": 0, \"echo\": true, "
             "\"logprobs\": 2}",
             ids);
    int st;
    cJSON *o = sv_post(port, "/v1/completions", NULL, body, &st);
    EXPECT(st == 200 && o, "echo: status %d", st);
    const cJSON *lp = cJSON_GetObjectItem(sv_choice(o), "logprobs");
    const cJSON *tl = cJSON_GetObjectItem(lp, "token_logprobs"),
                *top = cJSON_GetObjectItem(lp, "top_logprobs");
    EXPECT(cJSON_GetArraySize(tl) == T_PROMPT && cJSON_IsNull(cJSON_GetArrayItem(tl, 0)) &&
               cJSON_IsNull(cJSON_GetArrayItem(top, 0)),
           "echo: %d token logprobs, the first not null", cJSON_GetArraySize(tl));
    snprintf(path, sizeof(path), "%s/ids.json", sv_dir);
    char rows[300];
    snprintf(rows, sizeof(rows), "[%s]\n", ids);
    write_text(path, rows);
    snprintf(out_path, sizeof(out_path), "%s/logits.safetensors", sv_dir);
    snprintf(args, sizeof(args), "--model '%s' --ids '%s' --out '%s'", sv_model, path, out_path);
    free(sv_tool("MT_FORWARD_CLI", args, NULL));
    mt_safetensors *f = mt_safetensors_open(out_path);
    const mt_st_tensor *t = mt_safetensors_find(f, "logits");
    const int64_t V = t->shape[2];
    float *logits = mt_malloc(sizeof(float) * (size_t)(T_PROMPT * V), "logits");
    mt_safetensors_read(f, t, 0, T_PROMPT * V, logits);
    mt_safetensors_close(f);
    double worst = 0;
    for (int i = 1; i < T_PROMPT; i++) { /* position i - 1 predicts token i */
        const float *x = logits + (size_t)(i - 1) * (size_t)V;
        double mx = x[0], s = 0;
        for (int64_t v = 1; v < V; v++) mx = fmax(mx, x[v]);
        for (int64_t v = 0; v < V; v++) s += exp((double)x[v] - mx);
        const double want = (double)x[PROMPT[i]] - mx - log(s);
        const double got = cJSON_GetArrayItem(tl, i)->valuedouble;
        worst = fmax(worst, fabs(got - want));
        const cJSON *d = cJSON_GetArrayItem(top, i);
        EXPECT(cJSON_GetArraySize(d) >= 1 && cJSON_GetArraySize(d) <= 2,
               "top_logprobs[%d]: %d entries", i, cJSON_GetArraySize(d));
        EXPECT(fabs(d->child->valuedouble - (mx - mx - log(s))) < 1e-4,
               "top_logprobs[%d]: the best is %g, the softmax's %g", i, d->child->valuedouble,
               -log(s));
    }
    EXPECT(worst < 1e-4, "echo logprobs differ from the forward's log-softmax by %g", worst);
    printf("echo: %d prompt logprobs as minimax-forward's log-softmax (max diff %.2g)\n",
           T_PROMPT - 1, worst);
    free(logits);
    cJSON_Delete(o);
    return MT_TEST_OK;
}

/* chat: as minimax-chat's reply; the stream joins to the same text. */
static int sv_check_chat(int port) {
    const char *q = "What is 7 times 6?";
    char body[1024], args[9000];
    snprintf(body, sizeof(body),
             "{\"model\": \"model\", \"messages\": [{\"role\": \"user\", \"content\": \"%s\"}], "
             "\"max_tokens\": %d, \"temperature\": 0}",
             q, N_NEW);
    int st;
    cJSON *o = sv_post(port, "/v1/chat/completions", NULL, body, &st);
    EXPECT(st == 200 && o, "chat: status %d", st);
    snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens %d", sv_model, N_NEW);
    char input[256];
    snprintf(input, sizeof(input), "%s\n", q);
    char *out = sv_tool("MT_CHAT_CLI", args, input);
    cJSON *turn = cJSON_Parse(out);
    free(out);
    const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(turn, "text"));
    EXPECT(want && !strcmp(sv_text(o), want), "chat %s, minimax-chat %s", sv_text(o), want);
    EXPECT(sv_usage(o, "prompt_tokens") ==
               cJSON_GetArraySize(cJSON_GetObjectItem(turn, "prompt_ids")),
           "chat usage: %d prompt tokens", sv_usage(o, "prompt_tokens"));
    /* the stream */
    snprintf(body, sizeof(body),
             "{\"model\": \"model\", \"messages\": [{\"role\": \"user\", \"content\": \"%s\"}], "
             "\"max_tokens\": %d, \"temperature\": 0, \"stream\": true}",
             q, N_NEW);
    http_resp r = http_request(port, "POST", "/v1/chat/completions", NULL, body);
    EXPECT(r.status == 200 && r.body, "stream: status %d", r.status);
    mt_strbuf joined = {0};
    int events = 0, with_usage = 0;
    bool done = false;
    for (char *e = r.body; e && *e;) {
        char *end = strstr(e, "\n\n");
        if (end) *end = '\0';
        EXPECT(!strncmp(e, "data: ", 6) && !done, "stream: event %d: %.60s", events, e);
        if (!strcmp(e + 6, "[DONE]"))
            done = true;
        else {
            cJSON *c = cJSON_Parse(e + 6);
            const cJSON *d = cJSON_GetObjectItem(sv_choice(c), "delta");
            const char *piece = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"));
            if (piece) mt_strbuf_append(&joined, piece, strlen(piece));
            with_usage += cJSON_GetObjectItem(c, "usage") != NULL;
            cJSON_Delete(c);
        }
        events++;
        e = end ? end + 2 : NULL;
    }
    EXPECT(done && with_usage == 1, "stream: [DONE] %d, %d chunks with usage", done, with_usage);
    EXPECT(!strcmp(joined.p ? joined.p : "", want), "stream joins to %s, not %s", joined.p, want);
    printf("chat: as minimax-chat's reply; the stream: %d events joining to it\n", events);
    mt_strbuf_free(&joined);
    http_resp_free(&r);
    cJSON_Delete(turn);
    cJSON_Delete(o);
    return MT_TEST_OK;
}

/* The completion, logprobs and chat checks on a running server, then its SIGTERM. */
static int sv_check_and_stop(srv_proc *s) {
    sv_check_completion(s->port);
    sv_check_logprobs(s->port);
    sv_check_chat(s->port);
    EXPECT(srv_stop(s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    sv_teardown();
    return MT_TEST_OK;
}

static int test_serve_endpoints(void) {
    sv_setup(0);
    srv_proc s;
    sv_serve(&s, "--max-batch 4");
    http_resp h = http_request(s.port, "GET", "/health", NULL, NULL);
    EXPECT(h.status == 200 && has(h.body, "\"status\":\"ok\"") && has(h.body, "\"active\":0"),
           "/health: %d %s", h.status, h.body);
    http_resp_free(&h);
    h = http_request(s.port, "GET", "/v1/models", NULL, NULL);
    EXPECT(h.status == 200 && has(h.body, "\"id\":\"model\""), "/v1/models: %s", h.body);
    http_resp_free(&h);
    return sv_check_and_stop(&s);
}

/* --prefill-tokens 3: every prompt longer than 3 tokens is prefilled a chunk at a time in the
 * spare row (a prefill, then extensions of the filled row) and moved into a free row; the
 * completion, the echo logprobs and the chat reply are still the CPU tools' (one forward of the
 * whole prompt). */
static int test_serve_chunked_prefill(void) {
    sv_setup(0);
    srv_proc s;
    sv_serve(&s, "--max-batch 4 --prefill-tokens 3");
    return sv_check_and_stop(&s);
}

/* --backend cuda (MT_SERVE_CLI_DEVICE: this build's minimax-serve on a GPU, or minimax-serve-emu
 * on the CUDA emulator): the endpoints' checks above against the CPU tools (greedy completion =
 * minimax-generate, echo logprobs = minimax-forward's logits, chat = minimax-chat). Skipped
 * without a device (probed with an address no interface has, TEST-NET-1: refused after the
 * backend is chosen, when it binds, so the refusal says which). */
static int test_serve_device(void) {
    const char *exe = getenv("MT_SERVE_CLI_DEVICE");
    MT_CHECK(exe && *exe, "MT_SERVE_CLI_DEVICE not set; run through ctest");
    sv_setup(0);
    char probe[9000];
    snprintf(probe, sizeof(probe),
             "'%s' --model '%s' --backend cuda --host 192.0.2.1 2>&1 | grep -q 'no "
             "usable CUDA'",
             exe, sv_model);
    if (system(probe) == 0) {
        printf("--backend cuda: no usable CUDA device: skipped\n");
        sv_teardown();
        return MT_TEST_SKIP;
    }
    setenv("MT_SERVE_CLI", exe, 1); /* srv_start's binary */
    srv_proc s;
    sv_serve(&s, "--max-batch 4 --backend cuda");
    return sv_check_and_stop(&s);
}

/* One error case: status and the error object's shape. */
static void sv_expect_error(int port, const char *path, const char *headers, const char *body,
                            int status, const char *code) {
    int st;
    cJSON *o = sv_post(port, path, headers, body, &st);
    const cJSON *e = cJSON_GetObjectItem(o, "error");
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(e, "message"));
    const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(e, "code"));
    EXPECT(st == status && msg && *msg && cJSON_GetObjectItem(e, "type") &&
               (!code || (c && !strcmp(c, code))),
           "%s %.80s: status %d (want %d), code %s, message %s", path, body, st, status, c, msg);
    if (st == status) printf("  %d %s\n", st, msg);
    cJSON_Delete(o);
}

static int test_serve_errors(void) {
    sv_setup(64);
    srv_proc s;
    char big[8000], long_prompt[2048];
    sv_serve(&s, "--max-body 4096");
    const int p = s.port;
    const char *C = "/v1/completions";
    sv_expect_error(p, C, NULL, "{\"model\": \"model\", \"prompt\": ", 400, NULL);
    sv_expect_error(p, C, NULL, "[1, 2]", 400, NULL);
    sv_expect_error(p, C, NULL, "{\"model\": \"model\", \"prompt\": \"a\", \"max_tokens\": \"8\"}",
                    400, NULL);
    sv_expect_error(p, C, NULL, "{\"model\": \"model\", \"prompt\": 7}", 400, NULL);
    sv_expect_error(p, C, NULL, "{\"model\": \"other\", \"prompt\": \"a\"}", 404,
                    "model_not_found");
    snprintf(long_prompt, sizeof(long_prompt), "{\"model\": \"model\", \"prompt\": \"");
    for (int i = 0; i < 60; i++) strcat(long_prompt, "forty two ");
    strcat(long_prompt, "\"}");
    sv_expect_error(p, C, NULL, long_prompt, 400, "context_length_exceeded");
    sv_expect_error(p, C, NULL, "{\"model\": \"model\", \"prompt\": \"a\", \"max_tokens\": 0}", 400,
                    NULL);
    sv_expect_error(p, C, NULL, "{\"model\": \"model\", \"prompt\": \"a\", \"max_tokens\": -3}",
                    400, NULL);
    sv_expect_error(p, C, NULL, "{\"model\": \"model\", \"prompt\": \"a\", \"n\": 2}", 400, NULL);
    sv_expect_error(p, "/v1/chat/completions", NULL,
                    "{\"model\": \"model\", \"messages\": [{\"role\": \"robot\", \"content\": "
                    "\"x\"}]}",
                    400, NULL);
    snprintf(big, sizeof(big), "{\"model\": \"model\", \"prompt\": \"%06000d\"}", 1);
    sv_expect_error(p, C, NULL, big, 413, "request_too_large");
    sv_expect_error(p, "/v2/whatever", NULL, "{}", 404, NULL);
    http_resp h = http_request(p, "GET", C, NULL, NULL);
    EXPECT(h.status == 405, "GET %s: %d", C, h.status);
    http_resp_free(&h);
    h = http_request(p, "GET", "/health", NULL, NULL); /* still serving */
    EXPECT(h.status == 200, "/health after the errors: %d", h.status);
    http_resp_free(&h);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");

    /* --api-key */
    sv_serve(&s, "--api-key sekrit");
    const char *ok = "{\"model\": \"model\", \"prompt\": \"a\", \"max_tokens\": 2}";
    sv_expect_error(s.port, C, NULL, ok, 401, "invalid_api_key");
    sv_expect_error(s.port, C, "Authorization: Bearer wrong\r\n", ok, 401, "invalid_api_key");
    int st;
    cJSON *o = sv_post(s.port, C, "Authorization: Bearer sekrit\r\n", ok, &st);
    EXPECT(st == 200 && sv_usage(o, "completion_tokens") == 2, "with the key: %d", st);
    cJSON_Delete(o);
    h = http_request(s.port, "GET", "/health", NULL, NULL);
    EXPECT(h.status == 200, "/health needs no key: %d", h.status);
    http_resp_free(&h);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    sv_teardown();
    return MT_TEST_OK;
}

/* ---- concurrency ---- */

#define N_CLIENTS 32
#define N_REQ     64

typedef struct {
    int port, first;
    char *got[N_REQ];
} sv_client;

static void sv_req_body(int i, char *buf, size_t n) {
    int32_t ids[40];
    const int T = 3 + (i * 7) % 30; /* ragged prompts */
    for (int t = 0; t < T; t++) ids[t] = (int32_t)((i * 131 + t * 17) % 6000 + 10);
    char list[400];
    sv_ids_json(list, sizeof(list), ids, T);
    snprintf(buf, n,
             "{\"model\": \"model\", \"prompt\": %s, \"max_tokens\": %d, \"temperature\": 0}", list,
             4 + i % 9);
}

static char *sv_req_text(int port, int i) {
    char body[1024];
    sv_req_body(i, body, sizeof(body));
    int st;
    cJSON *o = sv_post(port, "/v1/completions", NULL, body, &st);
    char *t = st == 200 && sv_text(o) ? strdup(sv_text(o)) : strdup("<error>");
    cJSON_Delete(o);
    return t;
}

static void *sv_client_main(void *arg) {
    sv_client *c = arg;
    for (int i = c->first; i < N_REQ; i += N_CLIENTS) c->got[i] = sv_req_text(c->port, i);
    return NULL;
}

static int test_serve_concurrent(void) {
    sv_setup(0);
    srv_proc s;
    sv_serve(&s, "--max-batch 8");
    char *alone[N_REQ];
    for (int i = 0; i < N_REQ; i++) alone[i] = sv_req_text(s.port, i);
    sv_client cl[N_CLIENTS];
    pthread_t th[N_CLIENTS];
    static char *got[N_REQ];
    for (int k = 0; k < N_CLIENTS; k++) {
        cl[k] = (sv_client){.port = s.port, .first = k};
        pthread_create(&th[k], NULL, sv_client_main, &cl[k]);
    }
    for (int k = 0; k < N_CLIENTS; k++) {
        pthread_join(th[k], NULL);
        for (int i = k; i < N_REQ; i += N_CLIENTS) got[i] = cl[k].got[i];
    }
    int same = 0;
    for (int i = 0; i < N_REQ; i++) {
        EXPECT(strcmp(alone[i], "<error>") && !strcmp(alone[i], got[i]),
               "request %d: alone %s, among others %s", i, alone[i], got[i]);
        same += !strcmp(alone[i], got[i]);
        free(alone[i]);
        free(got[i]);
    }
    http_resp h = http_request(s.port, "GET", "/health", NULL, NULL);
    cJSON *o = cJSON_Parse(h.body ? h.body : "");
    const double steps = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "decode_steps")),
                 rows = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "decode_rows"));
    const int active = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "active"));
    /* the first N_REQ ran one at a time (1 row per step); the concurrent ones must share */
    EXPECT(active == 0 && rows > steps * 1.2, "%g decode steps held %g rows; %d active", steps,
           rows, active);
    printf("%d clients, %d requests: %d/%d answers as alone; %g rows over %g decode steps\n",
           N_CLIENTS, N_REQ, same, N_REQ, rows, steps);
    cJSON_Delete(o);
    http_resp_free(&h);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    sv_teardown();
    return MT_TEST_OK;
}

/* /health's active count, polled until it is 0 (timeout_s at most); the seconds waited. */
static double sv_wait_idle(int port, int timeout_s) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        http_resp h = http_request(port, "GET", "/health", NULL, NULL);
        const bool idle = h.body && has(h.body, "\"active\":0,\"queued\":0");
        http_resp_free(&h);
        clock_gettime(CLOCK_MONOTONIC, &t);
        const double el = (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
        if (idle || el > timeout_s) return idle ? el : -1;
        usleep(50000);
    }
}

/* Polls /health (10 s at most) until one request decodes. */
static void sv_wait_active(int port) {
    for (int i = 0; i < 500; i++) {
        http_resp h = http_request(port, "GET", "/health", NULL, NULL);
        const bool running = h.body && has(h.body, "\"active\":1");
        http_resp_free(&h);
        if (running) return;
        usleep(20000);
    }
}

static int test_serve_disconnect(void) {
    sv_setup(0);
    srv_proc s;
    sv_serve(&s, "");
    /* a child streams 3000 tokens; it is killed after its first events */
    const pid_t child = fork();
    if (child == 0) {
        const int fd = http_connect(s.port, 60);
        http_send(fd, "POST", "/v1/completions", NULL,
                  "{\"model\": \"model\", \"prompt\": \"Once upon a time\", \"max_tokens\": 3000, "
                  "\"stream\": true, \"temperature\": 0}");
        char buf[4096];
        for (size_t n = 0; n < 2000;) {
            const ssize_t k = recv(fd, buf, sizeof(buf), 0);
            if (k <= 0) break;
            n += (size_t)k;
        }
        pause(); /* until killed */
        _exit(0);
    }
    sv_wait_active(s.port);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    const double el = sv_wait_idle(s.port, 30);
    EXPECT(el >= 0, "the killed client's row is still active after 30 s");
    printf("a client killed mid-stream (of 3000 tokens): its row free %.2f s later\n", el);
    http_resp h = http_request(s.port, "GET", "/health", NULL, NULL);
    cJSON *o = cJSON_Parse(h.body ? h.body : "");
    const double rows = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "decode_rows"));
    EXPECT(rows < 2999, "the stream ran %g decode steps: it was not cut short", rows);
    cJSON_Delete(o);
    http_resp_free(&h);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    sv_teardown();
    return MT_TEST_OK;
}

typedef struct {
    int port, status, tokens;
} sv_long;

static void *sv_long_main(void *arg) {
    sv_long *l = arg;
    int st;
    cJSON *o = sv_post(l->port, "/v1/completions", NULL,
                       "{\"model\": \"model\", \"prompt\": \"Tell me\", \"max_tokens\": 400, "
                       "\"temperature\": 0}",
                       &st);
    l->status = st;
    l->tokens = o ? sv_usage(o, "completion_tokens") : 0;
    cJSON_Delete(o);
    return NULL;
}

static int test_serve_sigterm(void) {
    sv_setup(0);
    srv_proc s;
    sv_serve(&s, "");
    sv_long l = {.port = s.port};
    pthread_t th;
    pthread_create(&th, NULL, sv_long_main, &l);
    sv_wait_active(s.port);
    kill(s.pid, SIGTERM);
    usleep(200000);
    /* a request after SIGTERM is not served: the connection is never accepted, and closes
     * unanswered when the server exits after the drain */
    http_resp late = http_request(s.port, "GET", "/health", NULL, NULL);
    EXPECT(late.status == 0, "a request after SIGTERM was answered %d", late.status);
    http_resp_free(&late);
    pthread_join(th, NULL);
    EXPECT(l.status == 200 && l.tokens > 0, "the request in flight: status %d, %d tokens", l.status,
           l.tokens);
    const int rc = srv_stop(&s, 0, 30);
    EXPECT(rc == 0, "exit %d after the drain", rc);
    printf("SIGTERM mid-request: the request answered (%d tokens), exit %d\n", l.tokens, rc);
    sv_teardown();
    return MT_TEST_OK;
}

/* minimax-serve ARGS that must not start: its exit status, stderr in err. */
static int sv_refused(const char *args, char *err, size_t n) {
    const char *exe = getenv("MT_SERVE_CLI");
    MT_CHECK(exe && *exe, "MT_SERVE_CLI not set; run through ctest");
    char cmd[16384], path[4300], msg[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/refused.err", sv_dir);
    snprintf(cmd, sizeof(cmd), "'%s' --model '%s' %s --port 0 >/dev/null 2>'%s'", exe, sv_model,
             args, path);
    const int st = system(cmd);
    char *s = mt_file_read(path, NULL, msg);
    snprintf(err, n, "%s", s ? s : "");
    free(s);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int test_serve_template(void) {
    sv_setup(0);
    char tmpl[4300], flags[9000], body[1024], args[18000];
    snprintf(tmpl, sizeof(tmpl), "%s/mark.jinja", sv_dir);
    write_text(tmpl, "{% if messages[-1].content == 'boom' %}{{ raise_exception('no boom here') "
                     "}}{% endif %}{% for m in messages %}<<{{ m.role }}:{{ m.content }}>>{% "
                     "endfor %}{% if add_generation_prompt %}[{{ greeting }}|{{ eos_token }}]{% "
                     "endif %}");
    snprintf(flags, sizeof(flags),
             "--chat-template '%s' --template-kwargs '{\"greeting\": \"hola\"}'", tmpl);
    srv_proc s;
    sv_serve(&s, flags);
    const char *chat = "{\"model\": \"model\", \"messages\": [{\"role\": \"user\", "
                       "\"content\": \"%s\"}], \"max_tokens\": %d, \"temperature\": 0}";
    snprintf(body, sizeof(body), chat, "boom", N_NEW);
    sv_expect_error(s.port, "/v1/chat/completions", NULL, body, 400, NULL);
    int st;
    cJSON *o = sv_post(s.port, "/v1/chat/completions", NULL, body, &st);
    const char *msg =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message"));
    EXPECT(st == 400 && has(msg, "no boom here"), "a refused request: %d %s", st, msg);
    cJSON_Delete(o);
    snprintf(body, sizeof(body), chat, "hi", N_NEW);
    o = sv_post(s.port, "/v1/chat/completions", NULL, body, &st);
    mt_token_buf want = {0};
    const char *text = "<<user:hi>>[hola|<end_of_sentence>]";
    mt_tokenizer_encode(sv_tok, text, strlen(text), &want);
    EXPECT(st == 200 && sv_usage(o, "prompt_tokens") == want.n,
           "with the template: status %d, %d prompt tokens, its rendering %lld", st,
           sv_usage(o, "prompt_tokens"), (long long)want.n);
    snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens %d %s", sv_model, N_NEW,
             flags);
    char *out = sv_tool("MT_CHAT_CLI", args, "hi\n");
    cJSON *turn = cJSON_Parse(out);
    const char *reply = cJSON_GetStringValue(cJSON_GetObjectItem(turn, "text"));
    EXPECT(reply && sv_text(o) && !strcmp(sv_text(o), reply), "chat %s, minimax-chat %s",
           sv_text(o), reply);
    printf("--chat-template, --template-kwargs: %lld prompt tokens as the file renders them, the "
           "reply minimax-chat's\n",
           (long long)want.n);
    free(out);
    cJSON_Delete(turn);
    cJSON_Delete(o);
    mt_token_buf_free(&want);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    /* bad values: no start, one line naming the flag */
    char err[4096];
    const char *bad[3] = {"--chat-template /nonexistent/t.jinja", "--template-kwargs '[1]'",
                          "--template-kwargs '{\"add_generation_prompt\": false}'"};
    const char *names[3] = {"--chat-template /nonexistent/t.jinja", "--template-kwargs",
                            "--template-kwargs.add_generation_prompt"};
    for (int i = 0; i < 3; i++) {
        st = sv_refused(bad[i], err, sizeof(err));
        const char *nl = strchr(err, '\n');
        EXPECT(st == 1 && has(err, names[i]) && nl && !nl[1], "%s: exit %d, %s", bad[i], st, err);
        printf("  %s", err);
    }
    sv_teardown();
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"serve_template", test_serve_template},
    {"serve_device", test_serve_device},
    {"serve_endpoints", test_serve_endpoints},
    {"serve_errors", test_serve_errors},
    {"serve_concurrent", test_serve_concurrent},
    {"serve_disconnect", test_serve_disconnect},
    {"serve_sigterm", test_serve_sigterm},
    {"serve_chunked_prefill", test_serve_chunked_prefill},
};
MT_TEST_MAIN(cases)
