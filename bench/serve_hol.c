/* serve_hol.c: head-of-line blocking in minimax-serve (docs/serving.md, "Head-of-line
 * blocking"). A benchmark, not a test.
 *
 *   build/bench-serve-hol [--serve build/minimax-serve] [--prompts 64] [--ids 2000]
 *                         [--layers 4] [--max-batch 8] [--repeat 5] [--prefill-tokens N]
 *
 * Makes a random model of recipes/configs/tiny.json (LAYERS layers, 4096 positions, the test
 * tokenizer; run from the repository root), starts the server on a free loopback port, then
 * prints the latency of a 4-token request (4 prompt ids, greedy) alone (the median of REPEAT),
 * the same request sent while one request of PROMPTS prompts of IDS ids each (16 tokens each) is
 * running (REPEAT big requests, up to 5 short ones during each, 0.3 s after it starts and then
 * 0.61 s apart, those sent while it runs; the median), their ratio, and the
 * decode-step time alone (the 4-token request's time per token), the big request's time (the
 * median of REPEAT) and the share of the machine's CPU time that other processes took meanwhile
 * (/proc/stat less this process and the server: on a shared machine, read the numbers with it).
 * --prefill-tokens: the server's prefill budget (its default without the flag).
 * Goal (issue 35): with the big request running, at most 3x the latency alone + one decode
 * step; a prefill of one IDS-long prompt is what a short request may still wait for. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/chat_template.h"
#include "core/file_io.h"
#include "models/config.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "tests/support/serve_http.h"

static double hol_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* recipes/configs/tiny.json with `layers` layers, random weights, the test tokenizer. */
static void hol_make_model(const char *model, int layers) {
    mt_minimax_config cfg;
    mt_minimax_config_load("recipes/configs/tiny.json", &cfg);
    mt_minimax_config_keep_layers(&cfg, layers);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **w = mt_calloc((size_t)m.n_buckets, sizeof(float *), "weights");
    for (int b = 0; b < m.n_buckets; b++) {
        w[b] = mt_calloc((size_t)m.bucket_numel[b], sizeof(float), "bucket");
        mt_minimax_bind_bucket(&m, b, w[b], NULL);
    }
    mt_weights_init_random(&m, 7);
    mt_weights_save(model, &m, MT_NAMING_HF_V4, MT_F32, 0);
    for (int b = 0; b < m.n_buckets; b++) free(w[b]);
    free(w);
    mt_minimax_free(&m);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[512], dst[4400], err[MT_ERR_LEN];
        snprintf(src, sizeof(src), "tests/fixtures/tokenizer/%s", files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", model, files[i]);
        size_t len = 0;
        char *bytes = mt_file_read(src, &len, err);
        MT_CHECK(bytes, "%s (run from the repository root)", err);
        FILE *f = fopen(dst, "wb");
        MT_CHECK(f && fwrite(bytes, 1, len, f) == len && fclose(f) == 0, "cannot write %s", dst);
        free(bytes);
    }
}

static const char *HOL_SHORT = "{\"model\": \"model\", \"prompt\": [17, 400, 33, 1201], "
                               "\"max_tokens\": 4, \"temperature\": 0}";

static double hol_short(int port) {
    const double t0 = hol_now();
    http_resp r = http_request(port, "POST", "/v1/completions", NULL, HOL_SHORT);
    const double el = hol_now() - t0;
    MT_CHECK(r.status == 200, "the short request: status %d", r.status);
    http_resp_free(&r);
    return el;
}

typedef struct {
    int port;
    const char *body;
    double seconds;
    int done; /* set (atomically) when its answer is in */
} hol_big;

static void *hol_big_main(void *arg) {
    hol_big *b = arg;
    const double t0 = hol_now();
    http_resp r = http_request(b->port, "POST", "/v1/completions", NULL, b->body);
    b->seconds = hol_now() - t0;
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
    MT_CHECK(r.status == 200, "the big request: status %d", r.status);
    http_resp_free(&r);
    return NULL;
}

/* The machine's busy CPU seconds so far (/proc/stat: all but idle and iowait). */
static double hol_busy(void) {
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[10] = {0};
    const int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                             &v[3], &v[4], &v[5], &v[6], &v[7])
                    : 0;
    if (f) fclose(f);
    if (n < 8) return 0;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of this process and of the server (pid). */
static double hol_ours(pid_t pid) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    double s = (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
               (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    const size_t k = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[k] = '\0';
    const char *p = strrchr(buf, ')'); /* then: state ppid ... utime (14th field) stime */
    unsigned long long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
        s += (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return s;
}

/* Short requests sent during each big one: 0.3 s after it, then HOL_GAP s apart (not a
 * multiple of a prefill or a step, so they land at different points of the engine's work). */
#define HOL_PER_BIG 5
#define HOL_GAP     0.61

static int hol_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *serve = "build/minimax-serve";
    int prompts = 64, ids = 2000, layers = 4, max_batch = 8, repeat = 5, prefill = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--serve"))
            serve = argv[i + 1];
        else if (!strcmp(argv[i], "--prompts"))
            prompts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ids"))
            ids = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers"))
            layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-batch"))
            max_batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefill-tokens"))
            prefill = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeat"))
            repeat = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench-serve-hol: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (prompts < 1 || prompts > 64 || ids < 1 || ids > 4000 || repeat < 1 || repeat > 50) {
        fprintf(stderr, "bench-serve-hol: --prompts 1..64, --ids 1..4000, --repeat 1..50\n");
        return 2;
    }
    char dir[] = "/tmp/bench-serve-hol-XXXXXX", model[4200], args[9000];
    MT_CHECK(mkdtemp(dir), "mkdtemp failed");
    snprintf(model, sizeof(model), "%s/model", dir);
    hol_make_model(model, layers);
    setenv("MT_SERVE_CLI", serve, 1);
    int k = snprintf(args, sizeof(args), "--model '%s' --max-batch %d", model, max_batch);
    if (prefill > 0) snprintf(args + k, sizeof(args) - (size_t)k, " --prefill-tokens %d", prefill);
    srv_proc s;
    srv_start(&s, dir, args);

    /* the big body: PROMPTS lists of IDS ids */
    mt_strbuf body = {0};
    const char *head =
        "{\"model\": \"model\", \"max_tokens\": 16, \"temperature\": 0, \"prompt\": [";
    mt_strbuf_append(&body, head, strlen(head));
    for (int p = 0; p < prompts; p++) {
        mt_strbuf_append(&body, p ? ", [" : "[", p ? 3 : 1);
        for (int t = 0; t < ids; t++) {
            char x[16];
            const int k = snprintf(x, sizeof(x), t ? ", %d" : "%d", 10 + (p * 131 + t * 17) % 6000);
            mt_strbuf_append(&body, x, (size_t)k);
        }
        mt_strbuf_append(&body, "]", 1);
    }
    mt_strbuf_append(&body, "]}", 2);

    hol_short(s.port); /* warm */
    double *alone = mt_calloc((size_t)repeat, sizeof(double), "alone"),
           *busy = mt_calloc((size_t)repeat * HOL_PER_BIG, sizeof(double), "busy"),
           *bigs = mt_calloc((size_t)repeat, sizeof(double), "big");
    const double wall0 = hol_now(), busy0 = hol_busy(), ours0 = hol_ours(s.pid);
    for (int i = 0; i < repeat; i++) alone[i] = hol_short(s.port);
    int n_busy = 0;
    for (int i = 0; i < repeat; i++) {
        hol_big b = {.port = s.port, .body = body.p};
        pthread_t th;
        pthread_create(&th, NULL, hol_big_main, &b);
        const double t0 = hol_now();
        for (int j = 0; j < HOL_PER_BIG; j++) { /* phases spread over the big request's work */
            const double at = t0 + 0.3 + HOL_GAP * j - hol_now();
            if (at > 0) usleep((useconds_t)(1e6 * at));
            if (__atomic_load_n(&b.done, __ATOMIC_SEQ_CST)) break;
            busy[n_busy++] = hol_short(s.port); /* sent while the big one runs */
        }
        pthread_join(th, NULL);
        bigs[i] = b.seconds;
    }
    const double wall = hol_now() - wall0, ours = hol_ours(s.pid) - ours0,
                 other = hol_busy() - busy0 - ours, ncpu = (double)sysconf(_SC_NPROCESSORS_ONLN);
    qsort(alone, (size_t)repeat, sizeof(double), hol_cmp);
    MT_CHECK(n_busy > 0, "the big request ended before any short one was sent");
    qsort(busy, (size_t)n_busy, sizeof(double), hol_cmp);
    qsort(bigs, (size_t)repeat, sizeof(double), hol_cmp);
    const double a = alone[repeat / 2], w = busy[n_busy / 2], step = a / 4;
    char budget[64] = "the server's default";
    if (prefill > 0) snprintf(budget, sizeof(budget), "%d", prefill);
    printf("model: tiny.json, %d layers; --max-batch %d; --prefill-tokens %s; big request: %d "
           "prompts x %d ids, 16 tokens each (%zu bytes)\n",
           layers, max_batch, budget, prompts, ids, body.len);
    printf("big request:                      %8.4f s (median of %d; worst %.4f s)\n",
           bigs[repeat / 2], repeat, bigs[repeat - 1]);
    printf("4-token request alone:            %8.4f s (median of %d; %.4f s a token)\n", a, repeat,
           step);
    printf("4-token request beside the big one: %6.4f s (median of %d, up to %d a big request "
           "%.2f s apart; worst %.4f s)\n",
           w, n_busy, HOL_PER_BIG, HOL_GAP, busy[n_busy - 1]);
    printf("ratio: %.1fx (goal <= 3x + one decode step: %.4f s)\n", w / a, 3 * a + step);
    printf("other processes took %.0f %% of the machine's %.0f CPUs meanwhile (%.1f of %.1f CPU s; "
           "this bench and the server %.1f)\n",
           100 * (other > 0 ? other : 0) / (ncpu * wall), ncpu, other > 0 ? other : 0, ncpu * wall,
           ours);
    srv_stop(&s, SIGTERM, 60);
    mt_strbuf_free(&body);
    free(alone);
    free(busy);
    free(bigs);
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
