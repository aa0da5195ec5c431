/* eval_verify.c: the files of tests/apps/eval_verify.sh (every loader of an export checks the
 * digest its safetensors headers record):
 *   test_eval_verify make DIR [L]     a random L-layer (default 1) model of
 *                                     recipes/configs/tiny.json with the test tokenizer, saved
 *                                     by mt_weights_save (so with digests) in DIR/model
 *   test_eval_verify damage FILE T    adds 1 to the lowest byte of tensor T's first element
 *                                     (its value barely changes, stays finite; the digest is
 *                                     left as it was: a damaged file)
 *   test_eval_verify foreign FILE     renames the header's digest key (same length), as a file
 *                                     of another writer: no digest
 *   test_eval_verify bench DIR RUNS   the load-time cost of the verification: a ~1 GiB BF16
 *                                     export (tiny.json, 262144 rows, 1200 experts a layer)
 *                                     made in DIR/model if missing, then loaded RUNS times with
 *                                     and without verifying, and with the digests in a pass of
 *                                     their own, alternately (not a test: timings)
 * Run by ctest (MT_SOURCE_DIR set). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/eval_util.h"

static uint8_t *ev_read_file(const char *file, off_t *size, int *fd) {
    *fd = open(file, O_RDWR);
    MT_CHECK(*fd >= 0, "cannot open %s", file);
    *size = lseek(*fd, 0, SEEK_END);
    uint8_t *buf = mt_malloc((size_t)*size, file);
    MT_CHECK(pread(*fd, buf, (size_t)*size, 0) == *size, "%s: cannot read", file);
    return buf;
}

static int ev_damage(const char *file, const char *name) {
    mt_safetensors *st = mt_safetensors_open(file);
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    MT_CHECK(t && t->numel > 0, "%s: no tensor %s", file, name);
    const uint64_t begin = t->begin;
    mt_safetensors_close(st);
    off_t size;
    int fd;
    uint8_t *buf = ev_read_file(file, &size, &fd);
    uint64_t hlen;
    memcpy(&hlen, buf, 8);
    const off_t at = (off_t)(8 + hlen + begin);
    uint8_t b = (uint8_t)(buf[at] + 1);
    MT_CHECK(pwrite(fd, &b, 1, at) == 1, "%s: cannot write", file);
    free(buf);
    close(fd);
    return 0;
}

static int ev_foreign(const char *file) {
    off_t size;
    int fd;
    uint8_t *buf = ev_read_file(file, &size, &fd);
    uint64_t hlen;
    memcpy(&hlen, buf, 8);
    const char key[] = "\"" MT_ST_DIGEST_KEY "\"";
    const uint8_t *k = memmem(buf + 8, hlen, key, strlen(key));
    MT_CHECK(k, "%s: no %s in the header", file, MT_ST_DIGEST_KEY);
    const char other[] = "\"another_writer.checksum_x\""; /* same length: the header stays */
    _Static_assert(sizeof(other) == sizeof(key), "same length");
    MT_CHECK(pwrite(fd, other, strlen(other), (off_t)(k - buf)) == (ssize_t)strlen(other),
             "%s: cannot write", file);
    free(buf);
    close(fd);
    return 0;
}

static double ev_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ev_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Zeroed host buckets bound to m. */
static float **ev_buckets(mt_minimax *m) {
    float **w = mt_calloc((size_t)m->n_buckets, sizeof(float *), "buckets");
    for (int b = 0; b < m->n_buckets; b++) {
        w[b] = mt_calloc((size_t)m->bucket_numel[b], sizeof(float), "bucket");
        mt_minimax_bind_bucket(m, b, w[b], NULL);
    }
    return w;
}

static int ev_bench(const char *dir, int runs) {
    char model[4400], path[4500];
    snprintf(model, sizeof(model), "%s/model", dir);
    snprintf(path, sizeof(path), "%s/recipes/configs/tiny.json", source_dir());
    mt_minimax_config cfg;
    if (!file_exists(model)) {
        mt_minimax_config_load(path, &cfg);
        cfg.vocab_size = 262144;
        cfg.num_local_experts = 1200;
        mt_minimax m;
        mt_minimax_init(&m, &cfg);
        float **w = ev_buckets(&m);
        mt_weights_init_random(&m, 7);
        mt_weights_save(model, &m, MT_NAMING_HF_V4, MT_BF16, 0);
        mt_weights_host_free(&m, w);
        mt_minimax_free(&m);
    }
    mt_minimax_config_load(model, &cfg);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **w = ev_buckets(&m);
    snprintf(path, sizeof(path), "%s/model.safetensors", model);
    struct stat sb;
    MT_CHECK(stat(path, &sb) == 0, "%s: missing", path);
    mt_weights_load_checked(model, &m, true); /* the page cache warm for both */
    double *t[3];
    for (int v = 0; v < 3; v++) t[v] = mt_malloc(sizeof(double) * (size_t)runs, "t");
    for (int i = 0; i < runs; i++)
        for (int v = 0; v < 3; v++) {
            const double t0 = ev_now();
            if (v == 2) { /* for comparison: the digests in a pass of their own, then the load */
                mt_safetensors *st = mt_safetensors_open(model);
                for (int f = 0; f < mt_safetensors_n_files(st); f++) {
                    bool checked;
                    char err[1200];
                    MT_CHECK(mt_safetensors_verify(st, f, &checked, err, sizeof(err)), "%s", err);
                }
                mt_safetensors_close(st);
            }
            mt_weights_load_checked(model, &m, v == 0);
            t[v][i] = ev_now() - t0;
        }
    printf("%s: %.3f GiB, %d runs each (page cache warm)\n", path, (double)sb.st_size / (1 << 30),
           runs);
    const char *what[3] = {"verify (one pass)", "--no-verify", "verify (two passes)"};
    for (int v = 0; v < 3; v++) {
        qsort(t[v], (size_t)runs, sizeof(double), ev_cmp);
        printf("  %-20s min %.3f s  median %.3f s  max %.3f s\n", what[v], t[v][0], t[v][runs / 2],
               t[v][runs - 1]);
        free(t[v]);
    }
    mt_weights_host_free(&m, w);
    mt_minimax_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "bench")) return ev_bench(argv[2], atoi(argv[3]));
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "make")) {
        char model[4400];
        eval_make_model(argv[2], argc > 3 ? atoi(argv[3]) : 1, 0, model, sizeof(model));
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "damage")) return ev_damage(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "foreign")) return ev_foreign(argv[2]);
    fprintf(stderr,
            "usage: test_eval_verify make DIR [LAYERS] | damage FILE TENSOR | foreign FILE\n");
    return 2;
}
