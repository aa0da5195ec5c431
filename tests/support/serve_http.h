/* serve_http.h: a small HTTP/1.1 client and a minimax-serve launcher for the serve_* tests
 * (loopback only; every wait bounded). */
#pragma once
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"

typedef struct {
    pid_t pid;
    int port;
    char err_path[4200]; /* its stderr */
} srv_proc;

/* Starts `minimax-serve ARGS --port 0` (MT_SERVE_CLI) and waits (60 s at most) for its
 * "listening on http://127.0.0.1:PORT" line. */
static inline void srv_start(srv_proc *s, const char *dir, const char *args) {
    const char *exe = getenv("MT_SERVE_CLI");
    MT_CHECK(exe && *exe, "MT_SERVE_CLI not set; run through ctest");
    snprintf(s->err_path, sizeof(s->err_path), "%s/serve.err", dir);
    int fds[2];
    MT_CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    char cmd[20000];
    snprintf(cmd, sizeof(cmd), "exec '%s' %s --port 0 2>>'%s'", exe, args, s->err_path);
    s->pid = fork();
    MT_CHECK(s->pid >= 0, "fork: %s", strerror(errno));
    if (s->pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[1024];
    size_t n = 0;
    s->port = 0;
    const time_t t0 = time(NULL);
    while (!s->port && time(NULL) - t0 < 60) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0) continue;
        const ssize_t k = read(fds[0], line + n, sizeof(line) - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        line[n] = '\0';
        const char *at = strstr(line, "listening on http://127.0.0.1:");
        if (at && strchr(at, '\n')) s->port = atoi(at + strlen("listening on http://127.0.0.1:"));
    }
    close(fds[0]); /* later lines: none are printed */
    MT_CHECK(s->port > 0, "minimax-serve %s did not start: %s (see %s)", args, line, s->err_path);
}

/* Sends sig and waits (timeout_s at most, then SIGKILL); the exit status, -1 when killed. */
static inline int srv_stop(srv_proc *s, int sig, int timeout_s) {
    kill(s->pid, sig);
    int st = 0;
    for (int i = 0; i < 10 * timeout_s; i++) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        usleep(100000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    return -1;
}

/* minimax-serve --model MODEL FLAGS that must not start (20 s at most: a server that does start
 * is stopped and counts as a failure): its exit status, its stderr (dir/refused.err) in err. */
static inline int srv_refused(const char *dir, const char *model, const char *flags, char *err,
                              size_t n) {
    const char *exe = getenv("MT_SERVE_CLI");
    MT_CHECK(exe && *exe, "MT_SERVE_CLI not set; run through ctest");
    char cmd[16384], path[4300];
    snprintf(path, sizeof(path), "%s/refused.err", dir);
    snprintf(cmd, sizeof(cmd), "timeout 20 '%s' --model '%s' --port 0 %s >/dev/null 2>'%s'", exe,
             model, flags, path);
    const int st = system(cmd);
    err[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        err[fread(err, 1, n - 1, f)] = '\0';
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

typedef struct {
    int status;
    char *body; /* malloc'ed, de-chunked */
    size_t len;
} http_resp;

static inline void http_resp_free(http_resp *r) {
    free(r->body);
    r->body = NULL;
}

/* A connected socket to 127.0.0.1:port with a receive timeout, or -1; from the local address
 * src (NULL: any). Linux answers on all of 127.0.0.0/8, so src "127.0.0.2" is another client
 * address on the same machine. */
static inline int http_connect_from(const char *src, int port, int timeout_s) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = timeout_s};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (src) {
        struct sockaddr_in l = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, src, &l.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&l, sizeof(l)) != 0) {
            close(fd);
            return -1;
        }
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline int http_connect(int port, int timeout_s) {
    return http_connect_from(NULL, port, timeout_s);
}

/* Writes the request (body may be NULL; headers: extra "Name: value\r\n" lines or NULL). */
static inline void http_send(int fd, const char *method, const char *path, const char *headers,
                             const char *body) {
    const size_t n = body ? strlen(body) : 0;
    char head[2048];
    const int k = snprintf(head, sizeof(head),
                           "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                           "Content-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n",
                           method, path, n, headers ? headers : "");
    const char *parts[2] = {head, body ? body : ""};
    const size_t lens[2] = {(size_t)k, n};
    for (int i = 0; i < 2; i++)
        for (size_t off = 0; off < lens[i];) {
            const ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (w <= 0) return; /* the server may answer (413) before reading it all */
            off += (size_t)w;
        }
}

/* The body of a chunked transfer, decoded in place; its length. */
static inline size_t http_dechunk(char *b, size_t n) {
    size_t in = 0, out = 0;
    while (in < n) {
        char *end;
        const unsigned long size = strtoul(b + in, &end, 16);
        char *crlf = strstr(end, "\r\n");
        if (!crlf || size == 0) break;
        in = (size_t)(crlf + 2 - b);
        if (in + size > n) break;
        memmove(b + out, b + in, size);
        out += size;
        in += size + 2;
    }
    b[out] = '\0';
    return out;
}

/* One request on its own connection from src (NULL: any local address): status and body
 * (status 0 when nothing came back). */
static inline http_resp http_request_from(const char *src, int port, const char *method,
                                          const char *path, const char *headers, const char *body) {
    http_resp r = {0};
    const int fd = http_connect_from(src, port, 120);
    if (fd < 0) return r;
    http_send(fd, method, path, headers, body);
    size_t cap = 1 << 16, n = 0;
    char *buf = mt_malloc(cap, "http response");
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            MT_CHECK(buf, "out of memory for a response");
        }
        const ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep || sscanf(buf, "HTTP/1.%*d %d", &r.status) != 1) {
        free(buf);
        r.status = 0;
        return r;
    }
    *sep = '\0';
    const bool chunked = strcasestr(buf, "Transfer-Encoding: chunked") != NULL;
    const size_t off = (size_t)(sep + 4 - buf);
    r.len = n - off;
    memmove(buf, buf + off, r.len + 1);
    if (chunked) r.len = http_dechunk(buf, r.len);
    r.body = buf;
    return r;
}

static inline http_resp http_request(int port, const char *method, const char *path,
                                     const char *headers, const char *body) {
    return http_request_from(NULL, port, method, path, headers, body);
}
