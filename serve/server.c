/* server.c: the HTTP side of minimax-serve (serve/server.h). One thread per connection
 * (libmicrohttpd's MHD_USE_THREAD_PER_CONNECTION): a handler may block on its requests while the
 * engine thread batches everyone's. The threads are capped (--max-connections, and per client
 * address) and each connection has deadlines (serve/conn_guard.h), so slow clients cannot hold
 * them all. */
#include "serve/server.h"

#include "serve/conn_guard.h"
#include "serve/webui.h"

#include "core/file_io.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const mt_api_env *env;
    const mt_server_opts *opts;
    mt_guard *guard;
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int in_flight; /* generation calls not yet answered in full */
    bool draining;
} server;

static void server_enter(server *sv) {
    pthread_mutex_lock(&sv->mu);
    sv->in_flight++;
    pthread_mutex_unlock(&sv->mu);
}

static void server_leave(server *sv) {
    pthread_mutex_lock(&sv->mu);
    if (--sv->in_flight == 0) pthread_cond_broadcast(&sv->idle);
    pthread_mutex_unlock(&sv->mu);
}

/* ---- responses ---- */

static enum MHD_Result server_send(struct MHD_Connection *conn, int status, char *json) {
    struct MHD_Response *res =
        MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(res, "Content-Type", "application/json");
    const enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, res);
    MHD_destroy_response(res);
    return rc;
}

static enum MHD_Result server_error(struct MHD_Connection *conn, const mt_api_error *err) {
    return server_send(conn, err->status, mt_api_error_json(err));
}

/* The inactivity timeout off while this connection's answer is computed (a long prefill is not
 * the client's silence), or back on once it is: libmicrohttpd restarts the count then. */
static void server_compute(server *sv, struct MHD_Connection *conn, bool computing) {
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              computing ? 0u : (unsigned)sv->opts->idle_timeout_s);
}

/* ---- streams: server-sent events, one per decoded piece of text ---- */

typedef struct {
    server *sv;
    struct MHD_Connection *conn;
    mt_api_call call;
    int seen;       /* tokens already turned into events */
    size_t printed; /* bytes of the completion's text already sent */
    bool first_sent, done;
    mt_api_reply_stream *reply; /* the reply split (serve/openai_reply.c), or NULL */
    char *pending;              /* the event being written */
    size_t pend_len, pend_off;
} stream;

static void stream_queue(stream *st, char *event) {
    const size_t n = strlen(event);
    st->pending = realloc(st->pending, st->pend_len + n + 1);
    MT_CHECK(st->pending, "serve: out of memory for a stream event");
    memcpy(st->pending + st->pend_len, event, n + 1);
    st->pend_len += n;
    free(event);
}

/* The next events of the stream: waits for new tokens, sends the text that is final. */
static void stream_produce(stream *st) {
    const mt_api_env *env = st->sv->env;
    mt_serve_req *r = st->call.reqs[0];
    if (!st->first_sent && st->call.kind == MT_API_CHAT) {
        stream_queue(st, mt_api_chunk(env, &st->call, "", true, NULL));
        st->reply = mt_api_reply_stream_new(env, &st->call);
    }
    st->first_sent = true;
    while (st->pend_len == 0) {
        mt_serve_wait(env->engine, r, st->seen);
        const int n = r->n_out;
        const bool done = r->state == MT_REQ_DONE;
        pthread_mutex_unlock(&env->engine->mu);
        st->seen = n; /* out[0..n) is never written again */
        char *text = mt_api_text(env, &st->call, r, n);
        size_t len = strlen(text);
        if (done)
            len = mt_serve_cut_stop(text, r->stops, r->n_stops) ? strlen(text) : len;
        else
            len = mt_serve_stable_len(text, len, r->stops, r->n_stops);
        /* logprobs: every new token's go with the next chunk, one without text if need be
         * (held back by a stop string or a tag); echo: the prompt goes with the first chunk */
        st->call.lp_to = n;
        const bool lp_new = r->logprobs >= 0 && n > st->call.lp_from;
        const bool echo = r->echo && !st->call.echo_sent;
        if (st->reply && (len > st->printed || done)) {
            stream_queue(st, mt_api_reply_events(env, &st->call, st->reply, text, len, done));
            st->printed = len;
        } else if (!st->reply && (len > st->printed || lp_new || echo)) {
            text[len] = '\0';
            stream_queue(st,
                         mt_api_chunk(env, &st->call,
                                      text + (len > st->printed ? st->printed : len), false, NULL));
            if (len > st->printed) st->printed = len;
        }
        free(text);
        if (done) {
            /* (tokens a reply format held back: their logprobs go with the finish chunk) */
            stream_queue(
                st, mt_api_chunk(env, &st->call, "", false, mt_api_reply_finish(st->reply, r)));
            if (st->call.include_usage) stream_queue(st, mt_api_usage_chunk(env, &st->call));
            stream_queue(st, strdup("data: [DONE]\n\n"));
            st->done = true;
        }
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    if (st->pend_off == st->pend_len) {
        st->pend_off = st->pend_len = 0;
        if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
        server_compute(st->sv, st->conn, true);
        stream_produce(st);
        server_compute(st->sv, st->conn, false);
    }
    const size_t n = st->pend_len - st->pend_off < max ? st->pend_len - st->pend_off : max;
    memcpy(buf, st->pending + st->pend_off, n);
    st->pend_off += n;
    return (ssize_t)n;
}

/* The response is gone (sent, or the client went away): cancel what still runs. */
static void stream_free(void *cls) {
    stream *st = cls;
    mt_serve_engine *e = st->sv->env->engine;
    for (int i = 0; i < st->call.n; i++) {
        mt_serve_cancel(e, st->call.reqs[i]);
        mt_serve_wait(e, st->call.reqs[i], 1 << 30);
        pthread_mutex_unlock(&e->mu);
    }
    mt_api_call_free(&st->call);
    mt_api_reply_stream_free(st->reply);
    free(st->pending);
    server_leave(st->sv);
    free(st);
}

/* ---- the generation endpoints ---- */

/* A request's body as it arrives; counted: a generation call answered without a stream,
 * in flight until libmicrohttpd has sent its response (server_completed). */
typedef struct {
    mt_strbuf body;
    bool too_large, counted;
} upload;

static enum MHD_Result server_generate(server *sv, struct MHD_Connection *conn, mt_api_kind kind,
                                       upload *up) {
    const char *body = up->body.p ? up->body.p : "";
    const size_t len = up->body.len;
    mt_api_call call;
    mt_api_error err;
    if (mt_api_parse(sv->env, kind, body, len, &call, &err)) return server_error(conn, &err);
    server_enter(sv);
    for (int i = 0; i < call.n; i++) mt_serve_submit(sv->env->engine, call.reqs[i]);
    if (call.stream) {
        stream *st = mt_calloc(1, sizeof(*st), "stream");
        st->sv = sv;
        st->conn = conn;
        st->call = call;
        struct MHD_Response *res =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
        MHD_add_response_header(res, "Content-Type", "text/event-stream");
        MHD_add_response_header(res, "Cache-Control", "no-cache");
        const enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, res);
        MHD_destroy_response(res);
        return rc;
    }
    server_compute(sv, conn, true);
    for (int i = 0; i < call.n; i++) {
        mt_serve_wait(sv->env->engine, call.reqs[i], 1 << 30);
        pthread_mutex_unlock(&sv->env->engine->mu);
    }
    server_compute(sv, conn, false);
    char *json = mt_api_response(sv->env, &call);
    mt_api_call_free(&call);
    up->counted = true;
    return server_send(conn, MHD_HTTP_OK, json);
}

static enum MHD_Result server_tokenize(server *sv, struct MHD_Connection *conn, upload *up) {
    mt_api_error err;
    char *json = mt_api_tokenize(sv->env, up->body.p ? up->body.p : "", up->body.len, &err);
    return json ? server_send(conn, MHD_HTTP_OK, json) : server_error(conn, &err);
}

static enum MHD_Result server_health(server *sv, struct MHD_Connection *conn) {
    int active, queued;
    int64_t steps, rows;
    mt_serve_load(sv->env->engine, &active, &queued, &steps, &rows);
    const mt_serve_engine *e = sv->env->engine;
    pthread_mutex_lock(&sv->mu);
    const bool draining = sv->draining;
    pthread_mutex_unlock(&sv->mu);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", draining ? "draining" : "ok");
    cJSON_AddNumberToObject(o, "active", active);
    cJSON_AddNumberToObject(o, "queued", queued);
    cJSON_AddNumberToObject(o, "max_batch", e->max_batch);
    cJSON_AddNumberToObject(o, "decode_steps", (double)steps);
    cJSON_AddNumberToObject(o, "decode_rows", (double)rows);
    cJSON_AddNumberToObject(o, "prefill_tokens", (double)mt_serve_prefilled(sv->env->engine));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return server_send(conn, MHD_HTTP_OK, s);
}

static enum MHD_Result server_models(server *sv, struct MHD_Connection *conn) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", sv->env->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "minimax-train");
    cJSON_AddNumberToObject(m, "max_model_len", sv->env->t_max);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), m);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return server_send(conn, MHD_HTTP_OK, s);
}

/* The chat page (serve/webui.h): static bytes, no key needed (the page asks for one when the
 * API answers 401); its CSP allows its own inline script and style only, and requests to this
 * server. */
static enum MHD_Result server_page(struct MHD_Connection *conn) {
    struct MHD_Response *res = MHD_create_response_from_buffer(
        mt_webui_page_len, (void *)mt_webui_page, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(res, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(res, "Content-Security-Policy", mt_webui_csp);
    MHD_add_response_header(res, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(res, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(res, "Cache-Control", "no-cache");
    const enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, res);
    MHD_destroy_response(res);
    return rc;
}

/* ---- the request handler ---- */

static bool server_authorized(server *sv, struct MHD_Connection *conn) {
    if (!sv->opts->api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, sv->opts->api_key);
}

static enum MHD_Result server_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version, const char *data,
                                     size_t *data_size, void **con_cls) {
    (void)version;
    server *sv = cls;
    mt_api_error err;
    upload *up = *con_cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    mt_guard_conn *gc = ci ? ci->socket_context : NULL;
    if (!up) { /* the headers: a body announced too large is refused before it is read */
        up = mt_calloc(1, sizeof(*up), "upload");
        *con_cls = up;
        mt_guard_headers_done(sv->guard, gc);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (!cl || strtoull(cl, NULL, 10) <= sv->opts->max_body) return MHD_YES;
        up->too_large = true;
    } else if (*data_size > 0) {
        if (up->body.len + *data_size > sv->opts->max_body) up->too_large = true;
        if (!up->too_large) mt_strbuf_append(&up->body, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    mt_guard_body_done(sv->guard, gc); /* the request is in: answered without a deadline */
    if (up->too_large) {
        mt_api_fail(&err, 413, "request_too_large", NULL,
                    "the body is larger than this server's limit of %zu bytes (--max-body)",
                    sv->opts->max_body);
        return server_error(conn, &err);
    }
    const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health")) {
        if (get) return server_health(sv, conn);
    } else if (!sv->opts->no_webui && (!strcmp(url, "/") || !strcmp(url, "/index.html"))) {
        if (get || !strcmp(method, "HEAD")) return server_page(conn);
    } else if (!server_authorized(sv, conn)) {
        mt_api_fail(&err, 401, "invalid_api_key", NULL,
                    "a valid API key is required: Authorization: Bearer KEY");
        return server_error(conn, &err);
    } else if (!strcmp(url, "/v1/models")) {
        if (get) return server_models(sv, conn);
    } else if (!strcmp(url, "/tokenize")) {
        if (post) return server_tokenize(sv, conn, up);
    } else if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions")) {
        const mt_api_kind kind = url[4] == 'c' && url[5] == 'h' ? MT_API_CHAT : MT_API_COMPLETION;
        if (post) return server_generate(sv, conn, kind, up);
    } else {
        mt_api_fail(&err, 404, "not_found", NULL, "no route %s %s", method, url);
        return server_error(conn, &err);
    }
    mt_api_fail(&err, 405, "method_not_allowed", NULL, "%s does not take %s", url, method);
    return server_error(conn, &err);
}

static void server_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                             enum MHD_RequestTerminationCode toe) {
    (void)toe;
    server *sv = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci) mt_guard_answered(sv->guard, ci->socket_context); /* the next request's headers */
    upload *up = *con_cls;
    if (!up) return;
    if (up->counted) server_leave(sv);
    mt_strbuf_free(&up->body);
    free(up);
    *con_cls = NULL;
}

/* A connection opened or closed: its deadlines (socket_context) from the guard. */
static void server_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
    server *sv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? mt_guard_open(sv->guard, ci->connect_fd) : NULL;
    } else {
        mt_guard_close(sv->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd's messages, at most one a second: a flood of refused connections ("limit
 * reached") would otherwise write a line each. */
static void server_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static time_t last;
    static long dropped;
    pthread_mutex_lock(&mu);
    const time_t now = time(NULL);
    if (now != last) {
        fprintf(stderr, "minimax-serve: ");
        vfprintf(stderr, fmt, ap);
        if (dropped) fprintf(stderr, "minimax-serve: (%ld more such messages dropped)\n", dropped);
        last = now;
        dropped = 0;
    } else
        dropped++;
    pthread_mutex_unlock(&mu);
}

int mt_server_run(const mt_api_env *env, const mt_server_opts *o) {
    server sv = {.env = env, .opts = o};
    pthread_mutex_init(&sv.mu, NULL);
    pthread_cond_init(&sv.idle, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        fprintf(stderr, "minimax-serve: --host %s is not an IPv4 address\n", o->host);
        return 1;
    }
    /* the signals go to sigwait below, not to the threads started from here */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    sv.guard = mt_guard_start(o->header_timeout_s, o->body_timeout_s);
    /* poll(), not select(): no FD_SETSIZE ceiling on the descriptors of a busy server */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ITC | MHD_USE_ERROR_LOG,
        (uint16_t)o->port, NULL, NULL, server_handle, &sv,
        /* first: libmicrohttpd logs the options after it through its own logger otherwise */
        MHD_OPTION_EXTERNAL_LOGGER, server_log, NULL, MHD_OPTION_SOCK_ADDR, &addr,
        MHD_OPTION_NOTIFY_COMPLETED, server_completed, &sv, MHD_OPTION_NOTIFY_CONNECTION,
        server_connection, &sv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_per_address, MHD_OPTION_END);
    if (!d) {
        mt_guard_stop(sv.guard);
        fprintf(stderr, "minimax-serve: cannot listen on %s:%d: %s\n", o->host, o->port,
                strerror(errno));
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("minimax-serve: listening on http://%s:%u (model %s, context %d, max batch %d%s)\n",
           o->host, info ? info->port : (unsigned)o->port, env->model_name, env->t_max,
           env->engine->max_batch, o->no_webui ? "" : "; chat page at /");
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    /* drain: no new connections; the requests in flight finish and are answered */
    fprintf(stderr, "minimax-serve: %s: draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    const MHD_socket listen_fd = MHD_quiesce_daemon(d);
    pthread_mutex_lock(&sv.mu);
    sv.draining = true;
    while (sv.in_flight > 0) pthread_cond_wait(&sv.idle, &sv.mu);
    pthread_mutex_unlock(&sv.mu);
    MHD_stop_daemon(d);
    mt_guard_stop(sv.guard);
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
    pthread_mutex_destroy(&sv.mu);
    pthread_cond_destroy(&sv.idle);
    fprintf(stderr, "minimax-serve: stopped\n");
    return 0;
}
