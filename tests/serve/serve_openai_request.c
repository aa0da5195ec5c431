/* serve_openai_request.c: minimax-serve's request parser (serve/openai.h, mt_api_parse) as a
 * unit, without a model or a socket, against docs/serving.md ("Endpoints"):
 *   serve_openai_request_completion  /v1/completions bodies into engine requests: token ids or
 *                                    text (tokenized as it is, no BOS: transformers' ids of the
 *                                    test tokenizer), a list of prompts, every sampling field,
 *                                    the defaults, fields it does not know ignored
 *   serve_openai_request_chat        /v1/chat/completions: messages rendered with the chat
 *                                    template and the generation prompt (transformers' ids),
 *                                    text parts joined, max_completion_tokens, the default length
 *   serve_openai_request_errors      malformed bodies refused with the status, type, param, code
 *                                    and message of each case; no request left behind
 *   serve_openai_request_error_json  the OpenAI error object */
#include "tests/support/harness.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "serve/openai.h"
#include "tests/support/data_util.h"

#define T_MAX 100 /* the test server's context */

static mt_api_env env;

/* The test tokenizer and its chat template, a context of T_MAX tokens, eos 2. */
static bool env_open(void) {
    char err[MT_ERR_LEN];
    mt_tokenizer *tok = mt_chat_tokenizer_load(tokenizer_dir(), err, sizeof(err));
    EXPECT(tok, "%s", err);
    mt_chat_template *chat =
        mt_chat_template_open(&(mt_chat_source){.dir = tokenizer_dir()}, err, sizeof(err));
    EXPECT(chat, "%s", err);
    env = (mt_api_env){.tok = tok,
                       .chat = chat,
                       .model_name = "tiny",
                       .t_max = T_MAX,
                       .vocab_size = tok ? mt_tokenizer_vocab_size(tok) : 0,
                       .eos = 2};
    return tok && chat;
}

static void env_close(void) {
    mt_chat_template_free(env.chat);
    mt_tokenizer_free((mt_tokenizer *)env.tok);
}

static int parse(mt_api_kind kind, const char *body, mt_api_call *call, mt_api_error *err) {
    *err = (mt_api_error){0};
    return mt_api_parse(&env, kind, body, strlen(body), call, err);
}

static bool ids_equal(const mt_serve_req *r, const cJSON *want) {
    if (!r || r->n_prompt != cJSON_GetArraySize(want)) return false;
    int i = 0;
    for (const cJSON *x = want->child; x; x = x->next, i++)
        if (r->prompt[i] != (int32_t)x->valuedouble) return false;
    return true;
}

/* The fixture case of tests/fixtures/template/chat_cases.json named name (transformers'
 * rendering of its messages with the test tokenizer's template and its input_ids). */
static const cJSON *chat_case(const cJSON *root, const char *name) {
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next)
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), name)) return c;
    EXPECT(false, "no case %s in the chat fixtures", name);
    return NULL;
}

/* A body's JSON string of s (quotes and escapes). */
static char *json_string(const char *s) {
    cJSON *x = cJSON_CreateString(s);
    char *out = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    return out;
}

static int test_completion(void) {
    if (!env_open()) return MT_TEST_OK;
    mt_api_call call;
    mt_api_error err;
    /* token ids with every field */
    int rc = parse(MT_API_COMPLETION,
                   "{\"model\": \"tiny\", \"prompt\": [5, 6, 7], \"max_tokens\": 5, "
                   "\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 7, \"seed\": 42, "
                   "\"stop\": [\"ab\", \"c\"], \"logprobs\": 2, \"echo\": true, \"n\": 1, "
                   "\"stream\": false}",
                   &call, &err);
    EXPECT(rc == 0 && call.n == 1 && call.kind == MT_API_COMPLETION && !call.stream, "ids: %s",
           err.message);
    if (rc == 0) {
        const mt_serve_req *r = call.reqs[0];
        EXPECT(r->n_prompt == 3 && r->prompt[0] == 5 && r->prompt[1] == 6 && r->prompt[2] == 7,
               "the ids as given");
        EXPECT(r->max_tokens == 5 && r->opts.temperature == 0.5f && r->opts.top_p == 0.9f &&
                   r->opts.top_k == 7 && r->opts.seed == 42 && r->opts.eos == 2,
               "sampling: max %d, t %g, top_p %g, top_k %d, seed %llu, eos %d", r->max_tokens,
               r->opts.temperature, r->opts.top_p, r->opts.top_k, (unsigned long long)r->opts.seed,
               r->opts.eos);
        EXPECT(r->logprobs == 2 && r->echo && r->group == call.id, "logprobs, echo, group");
        EXPECT(r->n_stops == 2 && !strcmp(r->stops[0], "ab") && !strcmp(r->stops[1], "c"),
               "stop strings");
        char *text = mt_tokenizer_decode(env.tok, (const int32_t[]){5, 6, 7}, 3, false);
        EXPECT(call.prompt_text[0] && !strcmp(call.prompt_text[0], text),
               "echo: the prompt as text");
        free(text);
    }
    mt_api_call_free(&call);

    /* text, tokenized as it is with no BOS added: the rendered text of a fixture conversation
     * gives transformers' ids for it; the defaults (16 tokens, temperature 1, no top-k/p, no
     * logprobs, no stop); identity fields, nulls, and fields at their no-op value (0
     * penalties, an empty suffix) are accepted */
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    const cJSON *c = chat_case(root, "generation_prompt_no_system");
    char *prompt = json_string(cJSON_GetStringValue(cJSON_GetObjectItem(c, "rendered")));
    char body[8192];
    snprintf(body, sizeof(body),
             "{\"model\": \"tiny\", \"prompt\": %s, \"user\": \"me\", \"frequency_penalty\": 0, "
             "\"temperature\": null, \"stop\": null, \"suffix\": \"\"}",
             prompt);
    rc = parse(MT_API_COMPLETION, body, &call, &err);
    EXPECT(rc == 0 && call.n == 1, "text: %s", err.message);
    if (rc == 0) {
        const mt_serve_req *r = call.reqs[0];
        EXPECT(ids_equal(r, cJSON_GetObjectItem(c, "input_ids")),
               "the text's ids differ from transformers' (%d ids)", r->n_prompt);
        EXPECT(r->max_tokens == 16 && r->opts.temperature == 1 && r->opts.top_p == 1 &&
                   r->opts.top_k == 0 && r->logprobs == -1 && !r->echo && r->n_stops == 0 &&
                   !call.prompt_text[0],
               "defaults: max %d, t %g, top_p %g, top_k %d, logprobs %d", r->max_tokens,
               r->opts.temperature, r->opts.top_p, r->opts.top_k, r->logprobs);
    }
    /* without a seed each request draws its own */
    mt_api_call again;
    EXPECT(parse(MT_API_COMPLETION, body, &again, &err) == 0 && again.id != call.id &&
               again.reqs[0]->opts.seed != call.reqs[0]->opts.seed,
           "two requests without a seed share one");
    mt_api_call_free(&again);
    mt_api_call_free(&call);
    free(prompt);

    /* a list of prompts: one request each, of the same call; stream with one prompt */
    rc = parse(MT_API_COMPLETION,
               "{\"model\": \"tiny\", \"prompt\": [\"a\", [1, 2], \"bc\"], \"max_tokens\": 3}",
               &call, &err);
    EXPECT(rc == 0 && call.n == 3 && call.reqs[1]->n_prompt == 2 && call.reqs[1]->prompt[1] == 2 &&
               call.reqs[0]->group == call.id && call.reqs[2]->group == call.id &&
               call.reqs[2]->max_tokens == 3,
           "three prompts: %s", err.message);
    mt_api_call_free(&call);
    EXPECT(parse(MT_API_COMPLETION, "{\"model\": \"tiny\", \"prompt\": [3], \"stream\": true}",
                 &call, &err) == 0 &&
               call.stream,
           "stream: %s", err.message);
    mt_api_call_free(&call);
    /* echo alone: 0 new tokens, the prompt's logprobs only */
    EXPECT(parse(MT_API_COMPLETION,
                 "{\"model\": \"tiny\", \"prompt\": [3, 4], \"max_tokens\": 0, \"echo\": true, "
                 "\"logprobs\": 0}",
                 &call, &err) == 0 &&
               call.reqs[0]->max_tokens == 0 && call.reqs[0]->logprobs == 0,
           "echo with max_tokens 0: %s", err.message);
    mt_api_call_free(&call);
    /* a prompt of T_MAX - 1 ids and one new token: the whole context */
    char ids[1024] = "";
    for (int i = 0; i < T_MAX - 1; i++)
        snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s3", i ? "," : "");
    snprintf(body, sizeof(body), "{\"model\": \"tiny\", \"prompt\": [%s], \"max_tokens\": 1}", ids);
    EXPECT(parse(MT_API_COMPLETION, body, &call, &err) == 0 && call.reqs[0]->n_prompt == T_MAX - 1,
           "the whole context: %s", err.message);
    mt_api_call_free(&call);
    cJSON_Delete(root);
    env_close();
    return MT_TEST_OK;
}

static int test_chat(void) {
    if (!env_open()) return MT_TEST_OK;
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    const cJSON *c = chat_case(root, "generation_prompt");
    const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
    const char *sys =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "text"));
    const char *user =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "text"));
    char *s = json_string(sys), *u = json_string(user), body[8192];
    mt_api_call call;
    mt_api_error err;
    snprintf(body, sizeof(body),
             "{\"model\": \"tiny\", \"messages\": [{\"role\": \"system\", \"content\": %s}, "
             "{\"role\": \"user\", \"content\": %s}], \"temperature\": 0, \"seed\": 1}",
             s, u);
    int rc = parse(MT_API_CHAT, body, &call, &err);
    const cJSON *want = cJSON_GetObjectItem(c, "input_ids");
    EXPECT(rc == 0 && call.n == 1 && call.kind == MT_API_CHAT, "chat: %s", err.message);
    if (rc == 0) {
        const mt_serve_req *r = call.reqs[0];
        EXPECT(ids_equal(r, want), "the rendered prompt's ids differ from transformers' (%d ids)",
               r->n_prompt);
        EXPECT(r->max_tokens == T_MAX - r->n_prompt && r->opts.temperature == 0 &&
                   r->logprobs == -1 && !r->echo,
               "the default length is the rest of the context: %d", r->max_tokens);
    }
    mt_api_call_free(&call);
    /* the user's text as a list of one text part; max_completion_tokens wins over max_tokens */
    snprintf(body, sizeof(body),
             "{\"model\": \"tiny\", \"messages\": [{\"role\": \"system\", \"content\": %s}, "
             "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": %s}]}], "
             "\"max_tokens\": 3, \"max_completion_tokens\": 7, \"stop\": \"x\", "
             "\"logprobs\": false}",
             s, u);
    rc = parse(MT_API_CHAT, body, &call, &err);
    EXPECT(rc == 0 && ids_equal(call.reqs[0], want), "text parts: %s", err.message);
    EXPECT(rc == 0 && call.reqs[0]->max_tokens == 7 && call.reqs[0]->n_stops == 1,
           "max_completion_tokens, stop");
    mt_api_call_free(&call);
    /* several text parts are joined by "\n", as vLLM joins them for string templates */
    mt_api_call joined;
    rc =
        parse(MT_API_CHAT,
              "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": "
              "[{\"type\": \"text\", \"text\": \"ab\"}, {\"type\": \"text\", \"text\": \"cd\"}]}]}",
              &call, &err);
    const int rc2 = parse(MT_API_CHAT,
                          "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", "
                          "\"content\": \"ab\\ncd\"}]}",
                          &joined, &err);
    EXPECT(rc == 0 && rc2 == 0 && call.reqs[0]->n_prompt == joined.reqs[0]->n_prompt &&
               !memcmp(call.reqs[0]->prompt, joined.reqs[0]->prompt,
                       sizeof(int32_t) * (size_t)joined.reqs[0]->n_prompt),
           "two text parts render as their texts joined by a line break");
    mt_api_call_free(&joined);
    mt_api_call_free(&call);
    /* past the context: the prompt (83 tokens) with 18 more, and the prompt alone */
    const int n = cJSON_GetArraySize(want);
    snprintf(body, sizeof(body),
             "{\"model\": \"tiny\", \"messages\": [{\"role\": \"system\", \"content\": %s}, "
             "{\"role\": \"user\", \"content\": %s}], \"max_completion_tokens\": %d}",
             s, u, T_MAX - n + 1);
    char msg[512];
    snprintf(msg, sizeof(msg),
             "%d prompt tokens + %d completion tokens exceed this server's context of %d", n,
             T_MAX - n + 1, T_MAX);
    rc = parse(MT_API_CHAT, body, &call, &err);
    EXPECT(rc == -1 && err.status == 400 && err.code &&
               !strcmp(err.code, "context_length_exceeded") && err.param &&
               !strcmp(err.param, "max_completion_tokens") && !strcmp(err.message, msg),
           "past the context:\n got  %s\n want %s", err.message, msg);
    env.t_max = n;
    snprintf(msg, sizeof(msg),
             "the prompt is %d tokens; this server's context is %d (1 to %d prompt tokens)", n, n,
             n - 1);
    rc = parse(MT_API_CHAT, body, &call, &err);
    EXPECT(rc == -1 && err.code && !strcmp(err.code, "context_length_exceeded") && err.param &&
               !strcmp(err.param, "messages") && !strcmp(err.message, msg),
           "a prompt of the whole context:\n got  %s\n want %s", err.message, msg);
    free(s), free(u);
    cJSON_Delete(root);
    env_close();
    return MT_TEST_OK;
}

typedef struct {
    mt_api_kind kind;
    const char *body;
    int status;
    const char *param, *code, *message;
} error_case;

#define C   MT_API_COMPLETION
#define H   MT_API_CHAT
#define BAD 400, NULL, NULL
/* "{\"model\": \"tiny\", " + rest */
#define M "{\"model\": \"tiny\", "

static const error_case error_cases[] = {
    {C, "not json", BAD, "the body is not a JSON object"},
    {C, "{\"model\": \"tiny\",", BAD, "the body is not a JSON object"},
    {C, "[1, 2]", BAD, "the body is not a JSON object"},
    {C, M "\"model\": \"tiny\", \"prompt\": [1]}", BAD, "the body repeats the key 'model'"},
    {H, M "\"messages\": [{\"role\": \"user\", \"role\": \"user\", \"content\": \"x\"}]}", BAD,
     "the body repeats the key 'messages[0].role'"},
    {C, "{\"prompt\": [1]}", 400, "model", NULL, "'model' must be a string (GET /v1/models)"},
    {C, "{\"model\": 5, \"prompt\": [1]}", 400, "model", NULL,
     "'model' must be a string (GET /v1/models)"},
    {C, "{\"model\": \"other\", \"prompt\": [1]}", 404, "model", "model_not_found",
     "the model 'other' does not exist; this server has 'tiny'"},
    {C, M "\"prompt\": [1], \"temperature\": \"hot\"}", 400, "temperature", NULL,
     "'temperature' must be a number in [0, 2]"},
    {C, M "\"prompt\": [1], \"temperature\": 2.5}", 400, "temperature", NULL,
     "'temperature' must be a number in [0, 2]"},
    {C, M "\"prompt\": [1], \"top_p\": 0}", 400, "top_p", NULL,
     "'top_p' must be a number in [1e-09, 1]"},
    {C, M "\"prompt\": [1], \"max_tokens\": 1.5}", 400, "max_tokens", NULL,
     "'max_tokens' must be an integer, not 1.5"},
    {C, M "\"prompt\": [1], \"max_tokens\": \"5\"}", 400, "max_tokens", NULL,
     "'max_tokens' must be an integer in [0, 1000000000]"},
    {C, M "\"prompt\": [1], \"max_tokens\": -1}", 400, "max_tokens", NULL,
     "'max_tokens' must be an integer in [0, 1000000000]"},
    {C, M "\"prompt\": [1], \"max_tokens\": 0}", 400, "max_tokens", NULL,
     "'max_tokens' must be at least 1 (0 only with echo)"},
    {C, M "\"prompt\": [1], \"n\": 2}", 400, "n", NULL,
     "'n' > 1 is not supported (one choice per prompt)"},
    {C, M "\"prompt\": [1], \"top_k\": -1}", 400, "top_k", NULL,
     "'top_k' must be an integer in [0, 1073741824]"},
    {C, M "\"prompt\": [1], \"stream\": \"yes\"}", 400, "stream", NULL,
     "'stream' must be a boolean"},
    {C, M "\"prompt\": [1], \"echo\": 1}", 400, "echo", NULL, "'echo' must be a boolean"},
    {C, M "\"prompt\": [1], \"logprobs\": 6}", 400, "logprobs", NULL,
     "'logprobs' must be an integer in [0, 5]"},
    {C, M "\"prompt\": [1], \"stop\": \"\"}", 400, "stop", NULL,
     "'stop' must not be an empty string"},
    {C, M "\"prompt\": [1], \"stop\": [\"x\", \"\"]}", 400, "stop", NULL,
     "stop[1] must not be an empty string"},
    {C, M "\"prompt\": [1], \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 400, "stop", NULL,
     "'stop' must be a string or a list of up to 4"},
    {C, M "\"prompt\": [1], \"stop\": {}}", 400, "stop", NULL,
     "'stop' must be a string or a list of up to 4"},
    {C, M "\"prompt\": [1], \"stop\": [1]}", 400, "stop", NULL, "'stop' must hold strings"},
    {C, M "\"max_tokens\": 1}", 400, "prompt", NULL,
     "'prompt' must be a string, a list of token ids, or a list of up to 64 of those"},
    {C, M "\"prompt\": []}", 400, "prompt", NULL,
     "'prompt' must be a string, a list of token ids, or a list of up to 64 of those"},
    {C, M "\"prompt\": 7}", 400, "prompt", NULL,
     "'prompt' must be a string, a list of token ids, or a list of up to 64 of those"},
    {C, M "\"prompt\": [[]]}", 400, "prompt", NULL,
     "prompt[0] must be a string or a non-empty list of ids"},
    {C, M "\"prompt\": [\"a\", 5]}", 400, "prompt", NULL,
     "prompt[1] must be a string or a non-empty list of ids"},
    {C, M "\"prompt\": [1, -1]}", 400, "prompt", NULL, "prompt token 1 is not an id in [0, %d)"},
    {C, M "\"prompt\": [1.5]}", 400, "prompt", NULL, "prompt token 0 is not an id in [0, %d)"},
    {C, M "\"prompt\": [%d]}", 400, "prompt", NULL, "prompt token 0 is not an id in [0, %d)"},
    {C, M "\"prompt\": [\"a\", \"b\"], \"stream\": true}", 400, "stream", NULL,
     "'stream' takes one prompt"},
    {C, M "\"prompt\": \"\"}", 400, "prompt", "context_length_exceeded",
     "the prompt is 0 tokens; this server's context is 100 (1 to 99 prompt tokens)"},
    {H, M "\"messages\": []}", 400, "messages", NULL, "'messages' must be a non-empty list"},
    {H, M "\"messages\": \"hi\"}", 400, "messages", NULL, "'messages' must be a non-empty list"},
    {H, M "\"prompt\": [1]}", 400, "prompt", "unsupported_field",
     "unsupported field 'prompt' (this server refuses what it does not implement)"},
    {H, M "\"messages\": [{\"role\": \"function\", \"content\": \"x\"}]}", 400, "messages", NULL,
     "messages[0].role \"function\" is not one of \"system\", \"developer\", \"user\", "
     "\"assistant\", \"tool\""},
    {H, M "\"messages\": [{\"content\": \"x\"}]}", 400, "messages", NULL,
     "messages[0] must be an object with a \"role\" string"},
    {H,
     M "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"user\", "
       "\"content\": 5}]}",
     400, "messages", NULL, "messages[1].content must be a string, null or a list of text parts"},
    {H, M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", 400,
     "messages", NULL,
     "messages[0].content[0]: only {\"type\": \"text\", \"text\": ...} parts are supported "
     "(type image_url)"},
    {H, M "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 9}", 400,
     "top_logprobs", NULL, "'top_logprobs' must be an integer in [0, 5]"},
    {H, M "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 3}", 400,
     "logprobs", NULL, "'logprobs' must be a boolean"},
    {H, M "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": 0}",
     400, "max_completion_tokens", NULL,
     "'max_completion_tokens' must be at least 1 (0 only with echo)"},
};

/* The body of case c, with the vocabulary's size in place of %d (where there is one). */
static void case_body(const error_case *c, char *out, size_t n) {
    snprintf(out, n, c->body, env.vocab_size);
}

static int test_errors(void) {
    if (!env_open()) return MT_TEST_OK;
    for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
        const error_case *c = &error_cases[i];
        char body[1024], want[600];
        case_body(c, body, sizeof(body));
        snprintf(want, sizeof(want), c->message, env.vocab_size);
        mt_api_call call;
        mt_api_error err;
        const int rc = parse(c->kind, body, &call, &err);
        const char *type = c->status == 404 ? "not_found_error" : "invalid_request_error";
        const bool same_param = c->param ? err.param && !strcmp(err.param, c->param) : !err.param;
        const bool same_code = c->code ? err.code && !strcmp(err.code, c->code) : !err.code;
        EXPECT(rc == -1 && err.status == c->status && err.type && !strcmp(err.type, type) &&
                   same_param && same_code && !strcmp(err.message, want),
               "%s\n   got  %d %s param %s code %s: %s\n   want %d %s param %s code %s: %s", body,
               err.status, err.type ? err.type : "-", err.param ? err.param : "null",
               err.code ? err.code : "null", err.message, c->status, type,
               c->param ? c->param : "null", c->code ? c->code : "null", want);
        EXPECT(call.n == 0, "%s: a refused call keeps %d requests", body, call.n);
        mt_api_call_free(&call);
    }
    /* a NUL character in a string, escaped or raw: the byte it is at */
    mt_api_call call;
    mt_api_error err;
    const char *esc = M "\"prompt\": \"a\\u0000b\"}";
    char want[600];
    snprintf(want, sizeof(want),
             "the body holds a NUL character (\\u0000) at byte %ld: no text of a request may "
             "contain one",
             (long)(strstr(esc, "\\u0000") - esc));
    EXPECT(parse(C, esc, &call, &err) == -1 && err.status == 400 && !err.param &&
               !strcmp(err.message, want),
           "escaped NUL: %s", err.message);
    const char raw[] = M "\"prompt\": \"a\0b\"}";
    snprintf(want, sizeof(want),
             "the body holds a NUL character (\\u0000) at byte %ld: no text of a request may "
             "contain one",
             (long)strlen(raw));
    EXPECT(mt_api_parse(&env, C, raw, sizeof(raw) - 1, &call, &err) == -1 &&
               !strcmp(err.message, want),
           "raw NUL: %s", err.message);
    /* a backslash escapes the next character only: "\\u0000" is a backslash and text */
    EXPECT(parse(C, M "\"prompt\": \"a\\\\u0000b\"}", &call, &err) == 0, "an escaped backslash: %s",
           err.message);
    mt_api_call_free(&call);
    /* the prompt at the context, and a prompt whose default 16 tokens go past it */
    char ids[2048] = "", body[4096];
    for (int i = 0; i < T_MAX; i++)
        snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s3", i ? "," : "");
    snprintf(body, sizeof(body), M "\"prompt\": [%s]}", ids);
    EXPECT(parse(C, body, &call, &err) == -1 && !strcmp(err.code, "context_length_exceeded") &&
               !strcmp(err.param, "prompt") &&
               !strcmp(err.message, "the prompt is 100 tokens; this server's context is 100 (1 to "
                                    "99 prompt tokens)"),
           "a prompt of the whole context: %s", err.message);
    ids[strlen(ids) - 10 * 2] = 0; /* 90 ids */
    snprintf(body, sizeof(body), M "\"prompt\": [%s]}", ids);
    EXPECT(parse(C, body, &call, &err) == -1 && !strcmp(err.param, "max_tokens") &&
               !strcmp(err.message, "90 prompt tokens + 16 completion tokens exceed this server's "
                                    "context of 100"),
           "the default 16 past the context: %s", err.message);
    env_close();
    return MT_TEST_OK;
}

static int test_error_json(void) {
    mt_api_error e = {0};
    EXPECT(mt_api_fail(&e, 400, NULL, "stop", "'stop' must hold %s", "strings") == -1,
           "mt_api_fail returns -1");
    char *s = mt_api_error_json(&e);
    cJSON *o = cJSON_Parse(s), *x = cJSON_GetObjectItem(o, "error");
    char keys[256] = "";
    for (const cJSON *k = x ? x->child : NULL; k; k = k->next)
        snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), "%s%s", keys[0] ? "," : "",
                 k->string);
    EXPECT(o && cJSON_GetArraySize(o) == 1 && !strcmp(keys, "message,type,param,code"),
           "the error object: %s", s);
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "message")),
                   "'stop' must hold strings") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "type")),
                       "invalid_request_error") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "param")), "stop") &&
               cJSON_IsNull(cJSON_GetObjectItem(x, "code")),
           "the fields: %s", s);
    cJSON_Delete(o);
    free(s);
    /* 401 and 404 have their own types; param null */
    mt_api_fail(&e, 401, "invalid_api_key", NULL, "bad key");
    s = mt_api_error_json(&e);
    o = cJSON_Parse(s), x = cJSON_GetObjectItem(o, "error");
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "type")), "authentication_error") &&
               cJSON_IsNull(cJSON_GetObjectItem(x, "param")) &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "code")), "invalid_api_key"),
           "401: %s", s);
    cJSON_Delete(o);
    free(s);
    mt_api_fail(&e, 404, "model_not_found", "model", "no");
    EXPECT(!strcmp(e.type, "not_found_error"), "404: %s", e.type);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"serve_openai_request_completion", test_completion},
    {"serve_openai_request_chat", test_chat},
    {"serve_openai_request_errors", test_errors},
    {"serve_openai_request_error_json", test_error_json},
};
MT_TEST_MAIN(cases)
