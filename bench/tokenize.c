// bench/tokenize.c: time to tokenize every GSM8K training sample, rendered with the MiniMax
// chat template, with data/tokenizer.c on one thread. Counterpart of bench/tokenize_hf.py;
// bench/tokenize.sh runs both on the same core and prints the ratio.
//
// usage: bench-tokenize [tokenizer.json] [train.jsonl] [passes]
// Pass 1 starts with an empty word cache (cold); the best of the later passes is "warm".
// Each sample is one mt_tokenizer_encode call producing ids and byte offsets.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "data/tokenizer.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
// Process CPU time: on a shared machine it stays close to the unloaded wall time.
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int main(int argc, char **argv) {
    const char *tok_path = argc > 1 ? argv[1] : "tests/fixtures/tokenizer/tokenizer.json";
    const char *data_path = argc > 2 ? argv[2] : "../shared/data/gsm8k/train.jsonl";
    int passes = argc > 3 ? atoi(argv[3]) : 5;
    if (passes < 2) passes = 2;

    FILE *f = fopen(data_path, "r");
    MT_CHECK(f, "bench-tokenize: cannot open %s", data_path);
    char **texts = NULL;
    size_t *lens = NULL, n = 0, cap = 0, bytes = 0;
    char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
        MT_CHECK(cJSON_IsString(q) && cJSON_IsString(a), "%s:%zu: no question/answer", data_path,
                 n + 1);
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            texts = realloc(texts, cap * sizeof(char *));
            lens = realloc(lens, cap * sizeof(size_t));
            MT_CHECK(texts && lens, "bench-tokenize: out of memory");
        }
        // The MiniMax-Text-01 template for [user: question, assistant: answer] (spec 9).
        size_t need = strlen(q->valuestring) + strlen(a->valuestring) + 160;
        texts[n] = mt_malloc(need, "sample");
        lens[n] =
            (size_t)snprintf(texts[n], need,
                             "<beginning_of_sentence>user name=user\n%s<end_of_sentence>\n"
                             "<beginning_of_sentence>ai name=assistant\n%s<end_of_sentence>\n",
                             q->valuestring, a->valuestring);
        bytes += lens[n];
        n++;
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);

    double t0 = now();
    mt_tokenizer *tok = mt_tokenizer_load(tok_path);
    double t_load = now() - t0;
    mt_token_buf buf = {0};
    double cold = 0, warm = 1e30, cold_cpu = 0, warm_cpu = 1e30;
    int64_t tokens = 0;
    for (int p = 0; p < passes; p++) {
        tokens = 0;
        double s = now(), sc = cpu();
        for (size_t i = 0; i < n; i++) {
            mt_token_buf_clear(&buf);
            int64_t k = mt_tokenizer_encode(tok, texts[i], lens[i], &buf);
            MT_CHECK(k >= 0, "%s:%zu: invalid UTF-8", data_path, i + 1);
            tokens += k;
        }
        double t = now() - s, tc = cpu() - sc;
        if (p == 0) cold = t, cold_cpu = tc;
        if (p > 0 && t < warm) warm = t;
        if (p > 0 && tc < warm_cpu) warm_cpu = tc;
    }
    printf("C tokenizer: %zu samples, %.2f MB, %lld tokens; load %.3f s\n", n, 1e-6 * (double)bytes,
           (long long)tokens, t_load);
    printf("C tokenizer: cold pass %.3f s, warm (best of %d) %.3f s = %.2f M tokens/s, %.1f MB/s\n",
           cold, passes - 1, warm, 1e-6 * (double)tokens / warm, 1e-6 * (double)bytes / warm);
    printf("C tokenizer: CPU time cold %.3f s, warm %.3f s\n", cold_cpu, warm_cpu);
    printf("RESULT c tokens=%lld cold=%.6f warm=%.6f cold_cpu=%.6f warm_cpu=%.6f\n",
           (long long)tokens, cold, warm, cold_cpu, warm_cpu);
    mt_token_buf_free(&buf);
    mt_tokenizer_free(tok);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    return 0;
}
