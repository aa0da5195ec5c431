/* webui.h: minimax-serve's chat page (GET / and /index.html, docs/serving.md), the bytes of
 * serve/webui/index.html built into the binary (serve/webui/embed.cmake writes them into a
 * generated source at build time), and the Content-Security-Policy it is served with: its one
 * inline script and style allowed by their SHA-256, everything else only from this server.
 * `minimax-serve --no-webui` leaves it out (then / is 404). */
#pragma once
#include <stddef.h>

extern const unsigned char mt_webui_page[];
extern const size_t mt_webui_page_len;
extern const char mt_webui_csp[];
