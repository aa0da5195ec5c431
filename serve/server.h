/* server.h: minimax-serve's HTTP side on libmicrohttpd (docs/serving.md): routes, the bearer
 * key, body limits, server-sent event streams, timeouts and connection caps against slow
 * clients, and the drain on SIGTERM. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "serve/openai.h"

typedef struct {
    const char *host;    /* a numeric IPv4 address (default 127.0.0.1: loopback only) */
    int port;            /* 0: any free port (printed) */
    const char *api_key; /* NULL: no key */
    size_t max_body;     /* bytes; a larger body is answered 413 */
    /* slow clients (docs/serving.md): seconds for a request's headers (from the connection's
     * opening or its previous answer), for its body (from its headers), and of inactivity
     * (not counted while the answer is computed); open connections at most, and per address */
    int header_timeout_s, body_timeout_s, idle_timeout_s;
    int max_connections, max_per_address;
    bool no_webui; /* true: no chat page at / (serve/webui.h), / is 404 */
} mt_server_opts;

/* Serves env until SIGTERM or SIGINT, then stops accepting connections, lets the requests in
 * flight finish and returns 0. Prints `minimax-serve: listening on http://HOST:PORT` (stdout)
 * once it accepts connections (the line ends with "chat page at /" unless no_webui). Returns 1
 * after one error line when it cannot listen. */
int mt_server_run(const mt_api_env *env, const mt_server_opts *o);
