/* openai.h: the OpenAI request and response shapes minimax-serve speaks (docs/serving.md):
 * POST /v1/chat/completions and /v1/completions bodies into engine requests, their results
 * into response objects and stream chunks, and the error object. No HTTP here (serve/server.c).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "data/chat.h"
#include "serve/engine.h"

struct cJSON;
struct mt_reply_format;

#define MT_API_MAX_PROMPTS 64 /* prompts in one /v1/completions request */

/* What the endpoints need of the server. */
typedef struct {
    mt_serve_engine *engine;
    const mt_tokenizer *tok;
    mt_chat_template *chat; /* renders chat messages (data/chat_cli.h); one render at a time */
    const char *model_name;
    int t_max;      /* context: prompt + completion tokens */
    int vocab_size; /* the model's */
    int32_t eos;    /* <end_of_sentence> (chat and completions stop there) */
    /* splits chat replies into reasoning, content and tool calls (models/reply.h;
     * --reasoning-parser); NULL or "none": the reply is content, special tokens left out */
    const struct mt_reply_format *reply;
    bool sanitize; /* control tokens spelled in requests encoded as text (data/chat.h) */
} mt_api_env;

typedef struct {
    int status;          /* HTTP status: 400, 401, 404, 405, 413 */
    const char *type;    /* "invalid_request_error", ... */
    const char *code;    /* NULL or "model_not_found", "context_length_exceeded", ... */
    const char *param;   /* NULL or the offending field */
    char param_own[128]; /* param's text when it is a key of the body */
    char message[512];
} mt_api_error;

typedef enum { MT_API_CHAT, MT_API_COMPLETION } mt_api_kind;

/* One parsed request: one engine request per prompt (chat: one). */
typedef struct {
    mt_api_kind kind;
    bool stream;
    int n;
    mt_serve_req *reqs[MT_API_MAX_PROMPTS];
    char *prompt_text[MT_API_MAX_PROMPTS]; /* echo: the prompt as text */
    long id;                               /* the response's id number */
    long created;
    /* chat only: */
    char *chat_prompt;   /* the rendered prompt (whether the reply starts inside reasoning) */
    struct cJSON *tools; /* the request's "tools" (owned), NULL when absent; they type the
                            parsed tool calls' parameter values */
    bool tool_calls_off; /* tool_choice "none": tool-call markup stays content */
    /* streams: stream_options.include_usage (a last chunk with the usage and no choices); the
     * next chunk's logprobs, of reqs[0]'s output tokens [lp_from, lp_to) (set by the server
     * before mt_api_chunk); completions: the legacy text_offset so far, and whether the echoed
     * prompt went out (it goes with the first chunk) */
    bool include_usage;
    int lp_from, lp_to;
    long lp_offset;
    bool echo_sent;
} mt_api_call;

/* POST /tokenize (vLLM's): {"model"?, "prompt" | "messages", "add_generation_prompt",
 * "continue_final_message", "chat_template_kwargs", "tools", "add_special_tokens",
 * "return_token_strs"} -> {"count", "max_model_len", "tokens", "token_strs"?}: a malloc'ed
 * JSON text, or NULL with err filled. */
char *mt_api_tokenize(const mt_api_env *env, const char *body, size_t len, mt_api_error *err);

/* Parses body into call (requests made, not submitted). Returns 0, or -1 with err filled. */
int mt_api_parse(const mt_api_env *env, mt_api_kind kind, const char *body, size_t len,
                 mt_api_call *call, mt_api_error *err);
void mt_api_call_free(mt_api_call *call);

/* The whole response of a finished call (every request MT_REQ_DONE): a malloc'ed JSON text. */
char *mt_api_response(const mt_api_env *env, const mt_api_call *call);
/* One server-sent event of a stream: `data: {chunk}\n\n`, malloc'ed. delta: new text (may be
 * empty); first: the chat's role chunk; finish: NULL, or "stop"/"length" with the usage. */
char *mt_api_chunk(const mt_api_env *env, mt_api_call *call, const char *delta, bool first,
                   const char *finish);
/* With stream_options.include_usage: the last chunk, no choices and the usage. */
char *mt_api_usage_chunk(const mt_api_env *env, const mt_api_call *call);
/* `{"error": {...}}`, malloc'ed. */
char *mt_api_error_json(const mt_api_error *err);
/* Fills err (printf-style message). Returns -1. */
int mt_api_fail(mt_api_error *err, int status, const char *code, const char *param, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
/* The completion's text (special tokens left out, cut before a stop string); malloc'ed. */
char *mt_api_completion_text(const mt_api_env *env, const mt_serve_req *r);

/* ---- chat replies split by the reply format (serve/openai_reply.c) ---- */

/* Whether the call's replies are split: a chat call and a format other than "none". */
bool mt_api_reply_active(const mt_api_env *env, const mt_api_call *call);
/* The first n completion tokens of r as text: with the reply split, decoded with the special
 * (markup) tokens kept and a final eos left out; else as mt_api_completion_text decodes them
 * (not cut at stop strings). malloc'ed. */
char *mt_api_text(const mt_api_env *env, const mt_api_call *call, const mt_serve_req *r, int n);
/* With the reply split: fills message m of finished request r (reasoning_content, content,
 * tool_calls) and returns its finish_reason ("tool_calls" when it has calls); else NULL and m
 * is left alone. */
const char *mt_api_reply_message(const mt_api_env *env, const mt_api_call *call,
                                 const mt_serve_req *r, struct cJSON *m);
/* A chat stream chunk whose choice carries `delta` (taken) and finish (NULL: none; with the
 * usage), as a server-sent event; malloc'ed. */
char *mt_api_chunk_delta(const mt_api_env *env, mt_api_call *call, struct cJSON *delta,
                         const char *finish);

/* A split reply streamed: the events of the text that is final (vLLM's shape:
 * delta.reasoning_content, delta.content, delta.tool_calls [{index, id, type, function {name,
 * arguments}}] once a call is complete). */
typedef struct mt_api_reply_stream mt_api_reply_stream;
mt_api_reply_stream *mt_api_reply_stream_new(const mt_api_env *env, const mt_api_call *call);
/* text: the reply so far (len bytes: what earlier calls saw, and more); done: complete. The
 * events (possibly ""), malloc'ed. */
char *mt_api_reply_events(const mt_api_env *env, mt_api_call *call, mt_api_reply_stream *s,
                          const char *text, size_t len, bool done);
/* The finish_reason of r's stream: "tool_calls" when it streamed calls, else "stop" / "length"
 * (s NULL: not split). */
const char *mt_api_reply_finish(const mt_api_reply_stream *s, const mt_serve_req *r);
void mt_api_reply_stream_free(mt_api_reply_stream *s);
