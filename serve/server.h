/* server.h: minimax-serve's HTTP side on libmicrohttpd (docs/serving.md): routes, the bearer
 * key, body limits, server-sent event streams, and the drain on SIGTERM. */
#pragma once
#include <stddef.h>

#include "serve/openai.h"

typedef struct {
    const char *host;    /* a numeric IPv4 address (default 127.0.0.1: loopback only) */
    int port;            /* 0: any free port (printed) */
    const char *api_key; /* NULL: no key */
    size_t max_body;     /* bytes; a larger body is answered 413 */
} mt_server_opts;

/* Serves env until SIGTERM or SIGINT, then stops accepting connections, lets the requests in
 * flight finish and returns 0. Prints `minimax-serve: listening on http://HOST:PORT` (stdout)
 * once it accepts connections. Returns 1 after one error line when it cannot listen. */
int mt_server_run(const mt_api_env *env, const mt_server_opts *o);
