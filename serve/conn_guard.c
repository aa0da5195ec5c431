/* conn_guard.c: per-connection deadlines and their reaper (serve/conn_guard.h). */
#include "serve/conn_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/check.h"

struct mt_guard_conn {
    int fd;
    double deadline; /* CLOCK_MONOTONIC seconds; 0: none */
    bool cut;        /* shut down once already */
    mt_guard_conn *prev, *next;
};

struct mt_guard {
    int header_s, body_s;
    pthread_mutex_t mu;
    pthread_cond_t stop_cv;
    bool stopping;
    mt_guard_conn *head; /* every open connection */
    long n_cut;
    pthread_t thread;
};

static double guard_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every quarter second: the connections past their deadline are shut down (under the lock, so
 * that a connection cannot close, and its descriptor be reused, in between). */
static void *guard_main(void *arg) {
    mt_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stopping) {
        const double now = guard_now();
        for (mt_guard_conn *c = g->head; c; c = c->next)
            if (c->deadline > 0 && now > c->deadline && !c->cut) {
                shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
                g->n_cut++;
            }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->stop_cv, &g->mu, &until);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

mt_guard *mt_guard_start(int header_s, int body_s) {
    mt_guard *g = mt_calloc(1, sizeof(*g), "connection guard");
    g->header_s = header_s;
    g->body_s = body_s;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->stop_cv, NULL);
    MT_CHECK(pthread_create(&g->thread, NULL, guard_main, g) == 0,
             "serve: no connection guard thread: %s", strerror(errno));
    return g;
}

void mt_guard_stop(mt_guard *g) {
    pthread_mutex_lock(&g->mu);
    g->stopping = true;
    pthread_cond_signal(&g->stop_cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    while (g->head) { /* none should be left; freed all the same */
        mt_guard_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->stop_cv);
    free(g);
}

static void guard_set(mt_guard *g, mt_guard_conn *c, int seconds) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    c->deadline = seconds > 0 ? guard_now() + seconds : 0;
    pthread_mutex_unlock(&g->mu);
}

mt_guard_conn *mt_guard_open(mt_guard *g, int fd) {
    mt_guard_conn *c = mt_calloc(1, sizeof(*c), "guarded connection");
    c->fd = fd;
    pthread_mutex_lock(&g->mu);
    c->deadline = guard_now() + g->header_s;
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->mu);
    return c;
}

void mt_guard_close(mt_guard *g, mt_guard_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void mt_guard_headers_done(mt_guard *g, mt_guard_conn *c) { guard_set(g, c, g->body_s); }

void mt_guard_body_done(mt_guard *g, mt_guard_conn *c) { guard_set(g, c, 0); }

void mt_guard_answered(mt_guard *g, mt_guard_conn *c) { guard_set(g, c, g->header_s); }

long mt_guard_cut_count(mt_guard *g) {
    pthread_mutex_lock(&g->mu);
    const long n = g->n_cut;
    pthread_mutex_unlock(&g->mu);
    return n;
}
