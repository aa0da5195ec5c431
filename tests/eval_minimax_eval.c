/* eval_minimax_eval.c: minimax-eval end to end on a random 1-layer model of
 * recipes/configs/tiny.json with the test tokenizer, over tests/fixtures/gsm8k/eval_small.jsonl
 * (the first 5 lines of GSM8K's training set): one result line per sample, in order, with the
 * fields the report promises; 1 and 2 ranks write byte-identical results (greedy, and sampling
 * with a seed); and the bad inputs (no model directory, a line without "answer", an empty
 * file) fail with one line naming the file (and line). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "data/data_io.h"
#include "models/config.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "tests/data_util.h"
#include "tests/harness.h"

static char ev_err[1 << 16];

/* `mpirun -n np minimax-eval args`, stderr kept in ev_err; the exit status. */
static int ev_run(const char *dir, int np, const char *args) {
    const char *exe = getenv("MT_EVAL_CLI"), *mpi = getenv("MT_MPIEXEC");
    MT_CHECK(exe && *exe && mpi && *mpi, "MT_EVAL_CLI / MT_MPIEXEC not set; run through ctest");
    char cmd[16384], pe[4200], err[MT_ERR_LEN];
    snprintf(pe, sizeof(pe), "%s/eval.err", dir);
    snprintf(cmd, sizeof(cmd),
             "'%s' -n %d --oversubscribe --bind-to none '%s' %s >/dev/null 2>'%s'", mpi, np, exe,
             args, pe);
    const int st = system(cmd);
    char *e = mt_file_read(pe, NULL, err);
    snprintf(ev_err, sizeof(ev_err), "%s", e ? e : "");
    free(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *ev_read(const char *path) {
    char err[MT_ERR_LEN];
    char *s = mt_file_read(path, NULL, err);
    MT_CHECK(s, "%s", err);
    return s;
}

static int test_eval_minimax_eval(void) {
    char dir[4096], model[4200], a[16384], data[4200], r1[4200], r2[4200];
    make_tmpdir(dir, sizeof(dir));
    char path[4400];
    snprintf(path, sizeof(path), "%s/recipes/configs/tiny.json", source_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    mt_minimax_config_keep_layers(&cfg, 1);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **w = calloc((size_t)m.n_buckets, sizeof(float *));
    for (int b = 0; b < m.n_buckets; b++) {
        w[b] = calloc((size_t)m.bucket_numel[b], sizeof(float));
        mt_minimax_bind_bucket(&m, b, w[b], NULL);
    }
    mt_weights_init_random(&m, 7);
    snprintf(model, sizeof(model), "%s/model", dir);
    mt_weights_save(model, &m, MT_NAMING_HF_V4, MT_F32, 0);
    for (int b = 0; b < m.n_buckets; b++) free(w[b]);
    free(w);
    mt_minimax_free(&m);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[4400], dst[4400];
        snprintf(src, sizeof(src), "%s/%s", tokenizer_dir(), files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", model, files[i]);
        char *bytes = ev_read(src);
        write_text(dst, bytes);
        free(bytes);
    }
    snprintf(data, sizeof(data), "%s/tests/fixtures/gsm8k/eval_small.jsonl", source_dir());

    const char *modes[2] = {"", "--temperature 1 --top-k 20 --top-p 0.9 --seed 5"};
    for (int mi = 0; mi < 2; mi++) {
        snprintf(r1, sizeof(r1), "%s/r1.jsonl", dir);
        snprintf(r2, sizeof(r2), "%s/r2.jsonl", dir);
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --max-new-tokens 12 --batch 2 --out '%s' %s", model,
                 data, r1, modes[mi]);
        EXPECT(ev_run(dir, 1, a) == 0, "1 rank: %s", ev_err);
        EXPECT(has(ev_err, "ETA"), "no progress line: %s", ev_err);
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --max-new-tokens 12 --batch 3 --out '%s' %s", model,
                 data, r2, modes[mi]);
        EXPECT(ev_run(dir, 2, a) == 0, "2 ranks: %s", ev_err);
        char *s1 = ev_read(r1), *s2 = ev_read(r2);
        int lines = 0, bad = 0;
        for (char *p = s1, *e; (e = strchr(p, '\n')); p = e + 1, lines++) {
            *e = '\0';
            cJSON *j = cJSON_Parse(p);
            const cJSON *idx = cJSON_GetObjectItem(j, "index");
            bad += !j || !cJSON_IsNumber(idx) || idx->valueint != lines ||
                   !cJSON_IsString(cJSON_GetObjectItem(j, "prompt")) ||
                   !cJSON_IsString(cJSON_GetObjectItem(j, "completion")) ||
                   !cJSON_IsString(cJSON_GetObjectItem(j, "extracted")) ||
                   !cJSON_IsString(cJSON_GetObjectItem(j, "gold")) ||
                   !cJSON_IsBool(cJSON_GetObjectItem(j, "correct"));
            *e = '\n';
            cJSON_Delete(j);
        }
        printf("mode '%s': %d result lines, %d malformed; 1 vs 2 ranks %s\n", modes[mi], lines, bad,
               strcmp(s1, s2) ? "DIFFER" : "identical");
        EXPECT(lines == 5 && bad == 0, "%d lines, %d malformed", lines, bad);
        EXPECT(strcmp(s1, s2) == 0, "1 and 2 ranks give different results");
        free(s1);
        free(s2);
    }

    /* bad inputs: one line naming the file, non-zero exit */
    char bad_dir[4200], noans[4200], empty[4200];
    snprintf(bad_dir, sizeof(bad_dir), "%s/no-such-model", dir);
    snprintf(a, sizeof(a), "--model '%s' --data '%s'", bad_dir, data);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "no-such-model/config.json"), "missing model: %s",
           ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(ev_err, "\n"), ev_err);
    snprintf(noans, sizeof(noans), "%s/noans.jsonl", dir);
    write_text(noans, "{\"question\": \"q1\", \"answer\": \"#### 1\"}\n{\"question\": \"q2\"}\n");
    snprintf(a, sizeof(a), "--model '%s' --data '%s'", model, noans);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "noans.jsonl:2") && has(ev_err, "answer"),
           "line without answer: %s", ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(ev_err, "\n"), ev_err);
    snprintf(empty, sizeof(empty), "%s/empty.jsonl", dir);
    write_text(empty, "");
    snprintf(a, sizeof(a), "--model '%s' --data '%s'", model, empty);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "empty.jsonl"), "empty file: %s", ev_err);
    int n_lines = 0; /* ours: mpirun adds its own banner about the exit status */
    for (const char *p = strstr(ev_err, "minimax-eval:"); p; p = strstr(p + 1, "minimax-eval:"))
        n_lines++;
    EXPECT(n_lines == 1, "empty file: %d error lines (one expected): %s", n_lines, ev_err);
    printf("bad inputs: %s", strstr(ev_err, "minimax-eval:"));
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_minimax_eval", test_eval_minimax_eval},
};
MT_TEST_MAIN(cases)
