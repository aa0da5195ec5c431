/* cdp.h: a headless Chromium driven over the DevTools protocol (CDP) on a pipe, for tests of
 * web pages (serve_webui): `chromium --headless --remote-debugging-pipe` reads commands on its
 * fd 3 and writes answers and events on its fd 4, one JSON object each, ended by a NUL byte.
 * One page (a target attached in flat mode); every wait is bounded. */
#pragma once
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/file_io.h"

typedef struct {
    pid_t pid;
    int to, from; /* our ends of its fd 3 and fd 4 */
    char *buf;    /* bytes read and not yet taken */
    size_t len, cap;
    int next_id;
    char session[128]; /* the page's session id */
} cdp_browser;

/* The browser to run: $MT_BROWSER, else the first of chromium, chromium-browser, google-chrome
 * on PATH; NULL when there is none. */
static inline const char *cdp_find_browser(void) {
    const char *env = getenv("MT_BROWSER");
    if (env && *env) return env;
    static char found[4096];
    const char *names[] = {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"};
    const char *path = getenv("PATH");
    for (int i = 0; i < 4; i++)
        for (const char *p = path ? path : "/usr/bin"; p && *p;) {
            const char *end = strchr(p, ':');
            const int n = end ? (int)(end - p) : (int)strlen(p);
            snprintf(found, sizeof(found), "%.*s/%s", n, p, names[i]);
            if (n > 0 && access(found, X_OK) == 0) return found;
            p = end ? end + 1 : NULL;
        }
    return NULL;
}

/* The next message (parsed) within the deadline, or NULL. */
static inline cJSON *cdp_read(cdp_browser *b, time_t deadline) {
    for (;;) {
        char *nul = b->len ? memchr(b->buf, '\0', b->len) : NULL;
        if (nul) {
            cJSON *m = cJSON_Parse(b->buf);
            const size_t used = (size_t)(nul + 1 - b->buf);
            memmove(b->buf, nul + 1, b->len - used);
            b->len -= used;
            return m;
        }
        const time_t now = time(NULL);
        if (now >= deadline) return NULL;
        struct pollfd p = {.fd = b->from, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - now) * 1000) <= 0) return NULL;
        if (b->len + 65536 > b->cap) {
            b->cap = 2 * b->cap + 65536;
            b->buf = realloc(b->buf, b->cap);
            MT_CHECK(b->buf, "out of memory for the browser's messages");
        }
        const ssize_t k = read(b->from, b->buf + b->len, b->cap - b->len);
        if (k <= 0) return NULL; /* the browser went away */
        b->len += (size_t)k;
    }
}

/* Sends method(params) (params: a JSON object or NULL; taken) to the page's session, or to the
 * browser when on_page is false, and waits (timeout_s at most) for its answer: its "result"
 * (the caller deletes the returned message; *result points into it), NULL on an error answer
 * or no answer (printed). Events that come meanwhile are dropped. */
static inline cJSON *cdp_call(cdp_browser *b, bool on_page, const char *method, cJSON *params,
                              int timeout_s, const cJSON **result) {
    cJSON *m = cJSON_CreateObject();
    const int id = ++b->next_id;
    cJSON_AddNumberToObject(m, "id", id);
    cJSON_AddStringToObject(m, "method", method);
    cJSON_AddItemToObject(m, "params", params ? params : cJSON_CreateObject());
    if (on_page) cJSON_AddStringToObject(m, "sessionId", b->session);
    char *s = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    const size_t n = strlen(s) + 1; /* with its NUL */
    for (size_t off = 0; off < n;) {
        const ssize_t w = write(b->to, s + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    free(s);
    const time_t deadline = time(NULL) + timeout_s;
    for (cJSON *a; (a = cdp_read(b, deadline));) {
        const cJSON *aid = cJSON_GetObjectItem(a, "id");
        if (!cJSON_IsNumber(aid) || (int)aid->valuedouble != id) {
            cJSON_Delete(a);
            continue;
        }
        *result = cJSON_GetObjectItem(a, "result");
        if (*result) return a;
        char *e = cJSON_PrintUnformatted(cJSON_GetObjectItem(a, "error"));
        printf("browser: %s: %s\n", method, e);
        free(e);
        cJSON_Delete(a);
        return NULL;
    }
    printf("browser: %s: no answer (the browser exited, or %d s passed)\n", method, timeout_s);
    return NULL;
}

/* Starts the browser (headless, its profile in dir, its output in dir/browser.log) with one
 * blank page attached; false (printed) when that fails. */
static inline bool cdp_start(cdp_browser *b, const char *exe, const char *dir) {
    memset(b, 0, sizeof(*b));
    int to[2], from[2];
    MT_CHECK(pipe(to) == 0 && pipe(from) == 0, "pipe failed");
    char profile[4200], logp[4200];
    snprintf(profile, sizeof(profile), "--user-data-dir=%s/profile", dir);
    snprintf(logp, sizeof(logp), "%s/browser.log", dir);
    b->pid = fork();
    MT_CHECK(b->pid >= 0, "fork failed");
    if (b->pid == 0) {
        const int r = fcntl(to[0], F_DUPFD, 10), w = fcntl(from[1], F_DUPFD, 10);
        const int lf = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(r, 3);
        dup2(w, 4);
        if (lf >= 0) {
            dup2(lf, 1);
            dup2(lf, 2);
        }
        for (int fd = 5; fd < 1024; fd++) close(fd);
        execl(exe, exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-extensions", "--remote-debugging-pipe",
              "--window-size=1000,760", profile, "about:blank", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    b->to = to[1];
    b->from = from[0];
    signal(SIGPIPE, SIG_IGN);
    const cJSON *res;
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "url", "about:blank");
    cJSON *a = cdp_call(b, false, "Target.createTarget", params, 60, &res);
    if (!a) return false;
    params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "targetId",
                            cJSON_GetStringValue(cJSON_GetObjectItem(res, "targetId")));
    cJSON_AddBoolToObject(params, "flatten", true);
    cJSON_Delete(a);
    a = cdp_call(b, false, "Target.attachToTarget", params, 30, &res);
    if (!a) return false;
    snprintf(b->session, sizeof(b->session), "%s",
             cJSON_GetStringValue(cJSON_GetObjectItem(res, "sessionId")));
    cJSON_Delete(a);
    return b->session[0] != '\0';
}

/* Loads url in the page (without waiting for it). */
static inline bool cdp_navigate(cdp_browser *b, const char *url) {
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "url", url);
    const cJSON *res;
    cJSON *a = cdp_call(b, true, "Page.navigate", params, 30, &res);
    cJSON_Delete(a);
    return a != NULL;
}

/* The value of a JavaScript expression in the page, as a string (malloc'ed; numbers and
 * booleans as JSON), NULL when it throws or has no value. */
static inline char *cdp_eval(cdp_browser *b, const char *expr) {
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "expression", expr);
    cJSON_AddBoolToObject(params, "returnByValue", true);
    const cJSON *res;
    cJSON *a = cdp_call(b, true, "Runtime.evaluate", params, 30, &res);
    if (!a) return NULL;
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "result"), "value");
    char *out = NULL;
    if (cJSON_IsString(v))
        out = strdup(v->valuestring);
    else if (v && !cJSON_GetObjectItem(res, "exceptionDetails"))
        out = cJSON_PrintUnformatted(v);
    cJSON_Delete(a);
    return out;
}

/* Evaluates expr every 100 ms until it gives one of the values in want (separated by '|'):
 * that value (malloc'ed), or the last one seen (or NULL) after timeout_s. */
static inline char *cdp_wait_for(cdp_browser *b, const char *expr, const char *want,
                                 int timeout_s) {
    const time_t deadline = time(NULL) + timeout_s;
    char *v = NULL;
    for (;;) {
        free(v);
        v = cdp_eval(b, expr);
        if (v) {
            const size_t n = strlen(v);
            for (const char *p = want; p;) {
                const char *end = strchr(p, '|');
                const size_t k = end ? (size_t)(end - p) : strlen(p);
                if (k == n && !strncmp(p, v, n)) return v;
                p = end ? end + 1 : NULL;
            }
        }
        if (time(NULL) >= deadline) return v;
        usleep(100000);
    }
}

/* A PNG screenshot of the page into path; false when none came. */
static inline bool cdp_screenshot(cdp_browser *b, const char *path) {
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "format", "png");
    const cJSON *res;
    cJSON *a = cdp_call(b, true, "Page.captureScreenshot", params, 60, &res);
    if (!a) return false;
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(res, "data"));
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t n = s ? strlen(s) : 0;
    unsigned char *png = malloc(n / 4 * 3 + 3);
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *c = strchr(abc, s[i]);
        if (!c || !*c) continue;
        acc = (acc << 6) | (uint32_t)(c - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            png[k++] = (unsigned char)(acc >> bits);
        }
    }
    cJSON_Delete(a);
    FILE *f = fopen(path, "wb");
    const bool ok = f && k > 8 && fwrite(png, 1, k, f) == k;
    if (f) fclose(f);
    free(png);
    return ok;
}

/* Browser.close, then the process is waited for (SIGKILL after 10 s). */
static inline void cdp_stop(cdp_browser *b) {
    const cJSON *res;
    cJSON_Delete(cdp_call(b, false, "Browser.close", NULL, 5, &res));
    close(b->to);
    close(b->from);
    int st;
    for (int i = 0; i < 100; i++) {
        if (waitpid(b->pid, &st, WNOHANG) == b->pid) goto done;
        usleep(100000);
    }
    kill(b->pid, SIGKILL);
    waitpid(b->pid, &st, 0);
done:
    free(b->buf);
    b->buf = NULL;
}
