// bench/chat.c: the data pipeline's samples of a data set on one thread: every record rendered
// with a chat template (jinja/), its trained bytes found (data/chat.h: two more renders per
// trained assistant message without {% generation %} marks), tokenized and labelled
// (data/sample.h). The peer, bench/chat_hf.py, renders and tokenizes only
// (apply_chat_template(tokenize=True)): the C side does more of the work. bench/chat_vs_hf.sh
// runs both and prints the ratio.
//
// usage: bench-chat --tokenizer DIR --chat-template FILE --data FILE [--passes P (3)]
// The records are read and parsed before the clock starts; the best of P passes is reported.
// Prints "RESULT chat: <records> records in <s> s, <records/s> records/s" (tokens on stderr).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "data/dataset.h"
#include "data/sample.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *dir = "tests/fixtures/tokenizer_m2", *file = "../shared/templates/MiniMax-M2.jinja",
               *data = "../shared/data/gsm8k/train.jsonl";
    int passes = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokenizer"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--chat-template"))
            file = argv[i + 1];
        else if (!strcmp(argv[i], "--data"))
            data = argv[i + 1];
        else if (!strcmp(argv[i], "--passes"))
            passes = atoi(argv[i + 1]);
        else
            MT_DIE("bench-chat: unknown option %s", argv[i]);
    }
    char err[MT_ERR_LEN], path[4200];
    const mt_chat_source src = {.dir = dir, .file = file};
    mt_chat_template *t = mt_chat_template_open(&src, err, sizeof(err));
    MT_CHECK(t, "bench-chat: %s", err);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    mt_conv_set set;
    MT_CHECK(mt_conv_read(data, MT_FORMAT_AUTO, false, &set, err) == 0, "bench-chat: %s", err);
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    o.max_length = 1 << 20;
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, t, &o);
    double best = 1e30;
    int64_t tokens = 0, targets = 0;
    for (int p = 0; p < (passes < 1 ? 1 : passes); p++) {
        tokens = targets = 0;
        const double t0 = now();
        for (int64_t i = 0; i < set.n; i++) {
            const int k = mt_sample_conv_open(&b, set.json[i], set.json_len[i], err);
            MT_CHECK(k >= 0, "bench-chat: %s:%lld: %s", data, (long long)set.line[i], err);
            for (int s = 0; s < k; s++) {
                MT_CHECK(mt_sample_build_piece(&b, s, err) == MT_SAMPLE_OK,
                         "bench-chat: %s:%lld: %s", data, (long long)set.line[i], err);
                tokens += b.n;
                targets += b.n_targets;
            }
        }
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    fprintf(stderr, "bench-chat: %lld tokens, %lld trained, template %s\n", (long long)tokens,
            (long long)targets, mt_chat_template_origin(t));
    printf("RESULT chat: %lld records in %.3f s, %.1f records/s\n", (long long)set.n, best,
           (double)set.n / best);
    mt_sample_builder_free(&b);
    mt_conv_set_free(&set);
    mt_tokenizer_free(tok);
    mt_chat_template_free(t);
    return 0;
}
