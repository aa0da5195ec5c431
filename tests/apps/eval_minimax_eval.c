/* eval_minimax_eval.c: minimax-eval end to end on a random 1-layer model of
 * recipes/configs/tiny.json with the test tokenizer, over tests/fixtures/gsm8k/eval_small.jsonl
 * (the first 5 lines of GSM8K's training set): one result line per sample, in order, with the
 * fields the report promises; 1 and 2 ranks write byte-identical results (greedy, and sampling
 * with a seed); and the bad inputs (no model directory, a line without "answer", an empty
 * file) fail with one line naming the file (and line).
 * eval_minimax_eval_shots: the n-shot prompt (eval/gsm8k_eval.h, what --shots renders) against
 * transformers' renderings of the same turns (tests/fixtures/template/chat_cases.json), text and
 * token ids; then --shots end to end on 1 and 2 ranks, and its bad inputs.
 * eval_minimax_eval_template: --chat-template and --template-kwargs render the prompts (rank 0's
 * longest prompt is the file's rendering of its question); a question the template refuses on
 * rank 1 only stops the job with one line naming it; bad kwargs are one line. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>

#include "core/file_io.h"
#include "data/gsm8k.h"
#include "data/tokenizer.h"
#include "models/config.h"
#include "eval/gsm8k_eval.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"

static char ev_err[1 << 16];

/* `mpirun -n np EXE args` (EXE: $MT_EVAL_CLI_DEVICE with device, else $MT_EVAL_CLI), stderr
 * kept in ev_err; the exit status. */
static int ev_run_exe(const char *dir, int np, bool device, const char *args) {
    const char *exe = getenv(device ? "MT_EVAL_CLI_DEVICE" : "MT_EVAL_CLI"),
               *mpi = getenv("MT_MPIEXEC");
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

static int ev_run(const char *dir, int np, const char *args) {
    return ev_run_exe(dir, np, false, args);
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
    eval_make_model(dir, 1, 0, model, sizeof(model));
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
        free(s2);
        /* through the ZeRO-3 gathers, 3 ranks in step (shares of 2, 2 and 1; 2 a batch: a rank
         * walks the buckets through a whole batch): the replica's results */
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --max-new-tokens 12 --batch 2 --out '%s' %s "
                 "--weights gathered",
                 model, data, r2, modes[mi]);
        EXPECT(ev_run(dir, 3, a) == 0, "3 ranks, gathered: %s", ev_err);
        EXPECT(has(ev_err, "decoding through the ZeRO-3 gathers"), "not gathered: %s", ev_err);
        s2 = ev_read(r2);
        printf("mode '%s': --weights gathered on 3 ranks and the replica %s\n", modes[mi],
               strcmp(s1, s2) ? "DIFFER" : "identical");
        EXPECT(strcmp(s1, s2) == 0, "--weights gathered gives other results than the replica");
        free(s1);
        free(s2);
    }

    /* bad inputs: one line naming the file, non-zero exit */
    char m3fix[4200]; /* the M3 fixture's 260 rows against the test tokenizer's ids */
    snprintf(m3fix, sizeof(m3fix), "%s/tests/fixtures/models/tiny_m3", source_dir());
    snprintf(a, sizeof(a), "--model '%s' --tokenizer '%s' --data '%s'", m3fix, tokenizer_dir(),
             data);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "the model's vocab_size is 260"),
           "a tokenizer larger than the vocabulary: %s", ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(ev_err, "\n"), ev_err);
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --weights some", model, data);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "--weights auto, replica or gathered"),
           "--weights some: %s", ev_err);
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
    if (!mt_test_failures) rm_tree(dir); /* kept for a look when a check failed */
    return MT_TEST_OK;
}

/* --backend cuda (MT_EVAL_CLI_DEVICE: minimax-eval of a CUDA build on a GPU, or minimax-eval-emu
 * on the CUDA emulator): the results of the CPU backend, greedy and sampled, on 2 ranks, the
 * weights, caches and decode steps in device memory; and MiniMax-M3's fixture (MSA layers).
 * Skipped without a device. */
static int test_eval_minimax_eval_device(void) {
    char dir[4096], model[4200], a[16384], data[4200], r1[4200], r2[4200];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 2, 0, model, sizeof(model));
    snprintf(data, sizeof(data), "%s/tests/fixtures/gsm8k/eval_small.jsonl", source_dir());
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --limit 1 --max-new-tokens 1 --backend cuda",
             model, data);
    if (ev_run_exe(dir, 1, true, a) != 0 && has(ev_err, "no usable CUDA")) {
        const char *why = strstr(ev_err, "--backend") ? strstr(ev_err, "--backend") : ev_err;
        printf("%.*s: skipped\n", (int)strcspn(why, "\n"), why);
        rm_tree(dir);
        return MT_TEST_SKIP;
    }
    const char *modes[2] = {"", "--temperature 1 --top-k 20 --top-p 0.9 --seed 5"};
    for (int mi = 0; mi < 2; mi++) {
        snprintf(r1, sizeof(r1), "%s/cpu.jsonl", dir);
        snprintf(r2, sizeof(r2), "%s/dev.jsonl", dir);
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --max-new-tokens 16 --batch 2 --out '%s' %s", model,
                 data, r1, modes[mi]);
        EXPECT(ev_run(dir, 1, a) == 0, "the CPU: %s", ev_err);
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --max-new-tokens 16 --batch 3 --out '%s' %s "
                 "--backend cuda",
                 model, data, r2, modes[mi]);
        EXPECT(ev_run_exe(dir, 2, true, a) == 0, "--backend cuda: %s", ev_err);
        char *s1 = ev_read(r1), *s2 = ev_read(r2);
        int lines = 0;
        for (const char *p = s1; (p = strchr(p, '\n')); p++) lines++;
        printf("mode '%s': %d result lines; the CPU (1 rank) and --backend cuda (2 ranks) %s\n",
               modes[mi], lines, strcmp(s1, s2) ? "DIFFER" : "identical");
        EXPECT(lines == 5 && !strcmp(s1, s2), "--backend cuda differs from the CPU");
        free(s2);
        /* the device ranks decoding in step through NCCL gathers */
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --max-new-tokens 16 --batch 2 --out '%s' %s "
                 "--backend cuda --weights gathered",
                 model, data, r2, modes[mi]);
        EXPECT(ev_run_exe(dir, 2, true, a) == 0, "--backend cuda --weights gathered: %s", ev_err);
        s2 = ev_read(r2);
        printf("mode '%s': --backend cuda --weights gathered (2 ranks) and the CPU %s\n", modes[mi],
               strcmp(s1, s2) ? "DIFFER" : "identical");
        EXPECT(!strcmp(s1, s2), "--backend cuda --weights gathered differs from the CPU");
        free(s1);
        free(s2);
    }
    /* MiniMax-M3 (MSA layers: the device's block selection and sparse attention steps) */
    char m3dir[4200], m3[4300];
    snprintf(m3dir, sizeof(m3dir), "%s/m3", dir);
    MT_CHECK(mkdir(m3dir, 0755) == 0, "cannot make %s", m3dir);
    eval_make_model_of("tiny-m3.json", m3dir, 2, 0, m3, sizeof(m3));
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --max-new-tokens 16 --batch 2 --out '%s'", m3,
             data, r1);
    EXPECT(ev_run(dir, 1, a) == 0, "M3 on the CPU: %s", ev_err);
    snprintf(a, sizeof(a),
             "--model '%s' --data '%s' --max-new-tokens 16 --batch 3 --out '%s' --backend cuda", m3,
             data, r2);
    EXPECT(ev_run_exe(dir, 2, true, a) == 0, "M3 --backend cuda: %s", ev_err);
    char *s1 = ev_read(r1), *s2 = ev_read(r2);
    printf("M3: the CPU (1 rank) and --backend cuda (2 ranks) %s\n",
           strcmp(s1, s2) ? "DIFFER" : "identical");
    EXPECT(!strcmp(s1, s2), "M3: --backend cuda differs from the CPU");
    free(s1);
    free(s2);
    if (!mt_test_failures) rm_tree(dir); /* kept for a look when a check failed */
    return MT_TEST_OK;
}

/* The case's message texts and transformers' rendering and ids. */
static const cJSON *ev_case(const cJSON *cases, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *nm = cJSON_GetObjectItem(c, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) return c;
    }
    MT_CHECK(false, "chat_cases.json: no case %s", name);
    return NULL;
}

static const char *ev_text(const cJSON *c, int msg) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "messages"), msg), "text")
        ->valuestring;
}

static int test_eval_minimax_eval_shots(void) {
    /* the template renders each message on its own (no BOS, no default system turn), so the
     * 2-shot prompt is transformers' rendering of shot 1's turns, then shot 2's, then the
     * question's user turn with the generation prompt: three fixture cases end to end */
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    const char *names[3] = {"unicode", "whitespace_edges", "generation_prompt_no_system"};
    const cJSON *c[3];
    mt_strbuf want = {0};
    int32_t want_ids[4096];
    int n_want = 0;
    for (int k = 0; k < 3; k++) {
        c[k] = ev_case(cases, names[k]);
        const char *r = cJSON_GetObjectItem(c[k], "rendered")->valuestring;
        mt_strbuf_append(&want, r, strlen(r));
        const cJSON *id;
        cJSON_ArrayForEach(id, cJSON_GetObjectItem(c[k], "input_ids")) {
            MT_CHECK(n_want < 4096, "too many ids");
            want_ids[n_want++] = (int32_t)id->valueint;
        }
    }
    mt_gsm8k_set shots = {0};
    char *q[2] = {(char *)ev_text(c[0], 0), (char *)ev_text(c[1], 0)};
    char *an[2] = {(char *)ev_text(c[0], 1), (char *)ev_text(c[1], 1)};
    shots.n = 2;
    shots.question = q;
    shots.answer = an;
    mt_chat_template *tmpl = eval_text01_template();
    mt_chat_rendered got = {0};
    char err[MT_ERR_LEN];
    EXPECT(mt_gsm8k_eval_render(tmpl, &shots, 2, ev_text(c[2], 0), &got, err, sizeof(err)) == 0,
           "2-shot prompt: %s", err);
    EXPECT(got.len == want.len && !memcmp(got.text, want.p, want.len),
           "2-shot prompt:\n%s\nwant (transformers):\n%s", got.text, want.p);
    char tpath[4400];
    snprintf(tpath, sizeof(tpath), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(tpath);
    int n_ids = 0;
    int32_t *ids =
        mt_gsm8k_eval_prompt(tmpl, tok, &shots, 2, ev_text(c[2], 0), &n_ids, err, sizeof(err));
    MT_CHECK(ids, "2-shot ids: %s", err);
    int first_diff = -1;
    for (int i = 0; i < n_ids && i < n_want && first_diff < 0; i++)
        if (ids[i] != want_ids[i]) first_diff = i;
    EXPECT(n_ids == n_want && first_diff < 0,
           "2-shot ids: %d tokens, transformers' %d, first "
           "difference at %d",
           n_ids, n_want, first_diff);
    /* zero shots: the question's turn alone */
    EXPECT(mt_gsm8k_eval_render(tmpl, NULL, 0, ev_text(c[2], 0), &got, err, sizeof(err)) == 0,
           "0-shot prompt: %s", err);
    const char *r2 = cJSON_GetObjectItem(c[2], "rendered")->valuestring;
    EXPECT(!strcmp(got.text, r2), "0-shot prompt: %s", got.text);
    printf("2-shot prompt: %zu bytes, %d tokens, as transformers renders and tokenizes the turns\n",
           want.len, n_ids);
    free(ids);
    mt_tokenizer_free(tok);
    mt_chat_template_free(tmpl);
    mt_chat_rendered_free(&got);
    mt_strbuf_free(&want);
    cJSON_Delete(root);

    /* end to end: --shots 2 on 1 and 2 ranks, the same results; the bad inputs */
    char dir[4096], model[4200], a[20000], data[4200], r1[4200], r2p[4200];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    snprintf(data, sizeof(data), "%s/tests/fixtures/gsm8k/eval_small.jsonl", source_dir());
    snprintf(r1, sizeof(r1), "%s/s1.jsonl", dir);
    snprintf(r2p, sizeof(r2p), "%s/s2.jsonl", dir);
    int longest[2] = {0, 0}; /* rank 0's longest prompt, 0-shot and 2-shot */
    for (int np = 0; np <= 2; np++) {
        snprintf(a, sizeof(a),
                 "--model '%s' --data '%s' --limit 3 --max-new-tokens 8 --shots %d --shots-file "
                 "'%s' --out '%s'",
                 model, data, np ? 2 : 0, data, np == 1 ? r1 : r2p);
        EXPECT(ev_run(dir, np ? np : 1, a) == 0, "--shots on %d ranks: %s", np, ev_err);
        const char *at = strstr(ev_err, "-shot prompts of up to ");
        EXPECT(at, "no prompt length line: %s", ev_err);
        if (at && np < 2) longest[np] = atoi(at + strlen("-shot prompts of up to "));
    }
    /* rank 0's longest 2-shot prompt: sample 0 or 2 (3 samples, 1 rank) after the 2 shots */
    EXPECT(longest[1] > longest[0] + 100,
           "2-shot prompts of up to %d tokens, 0-shot %d: the shots "
           "are not in the prompt",
           longest[1], longest[0]);
    char *s1 = ev_read(r1), *s2 = ev_read(r2p);
    int lines = 0;
    for (const char *p = s1; (p = strchr(p, '\n')); p++) lines++;
    EXPECT(lines == 3 && !strcmp(s1, s2), "--shots: %d lines; 1 and 2 ranks %s", lines,
           strcmp(s1, s2) ? "differ" : "agree");
    printf("--shots 2: %d result lines, 1 and 2 ranks identical; rank 0's prompts up to %d tokens "
           "(0-shot: %d)\n",
           lines, longest[1], longest[0]);
    free(s1);
    free(s2);
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --shots 2", model, data);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "--shots N needs --shots-file"),
           "--shots without a file: %s", ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(ev_err, "\n"), ev_err);
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --shots 9 --shots-file '%s'", model, data,
             data);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "eval_small.jsonl: --shots 9 but the file has 5"),
           "--shots beyond the file: %s", ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(ev_err, "\n"), ev_err);
    if (!mt_test_failures) rm_tree(dir); /* kept for a look when a check failed */
    return MT_TEST_OK;
}

static int test_eval_minimax_eval_template(void) {
    char dir[4096], model[4200], a[20000], data[4200], tmpl[4300], path[4400];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    snprintf(data, sizeof(data), "%s/tests/fixtures/gsm8k/eval_small.jsonl", source_dir());
    mt_gsm8k_set set;
    char err[MT_ERR_LEN];
    MT_CHECK(mt_gsm8k_read(data, false, &set, err) == 0, "%s", err);
    snprintf(path, sizeof(path), "%s/tokenizer.json", model);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    /* the question, then the kwarg; a refusal of the question of sample 1 (rank 1's) */
    snprintf(tmpl, sizeof(tmpl), "%s/q.jinja", dir);
    write_text(tmpl, "{% if 'Weng' in messages[-1].content %}{{ raise_exception('no Weng') }}"
                     "{% endif %}{{ messages[-1].content }}|{{ greeting }}");
    snprintf(a, sizeof(a),
             "--model '%s' --data '%s' --limit 1 --max-new-tokens 1 --chat-template '%s' "
             "--template-kwargs '{\"greeting\": \"hola\"}'",
             model, data, tmpl);
    EXPECT(ev_run(dir, 1, a) == 0, "--chat-template: %s", ev_err);
    mt_strbuf want = {0};
    mt_strbuf_append(&want, set.question[0], strlen(set.question[0]));
    mt_strbuf_append(&want, "|hola", 5);
    mt_token_buf buf = {0};
    mt_tokenizer_encode(tok, want.p, want.len, &buf);
    const char *at = strstr(ev_err, "-shot prompts of up to ");
    const int got = at ? atoi(at + strlen("-shot prompts of up to ")) : -1;
    EXPECT(got == buf.n, "--chat-template: prompts of up to %d tokens, the file's rendering %lld",
           got, (long long)buf.n);
    printf("--chat-template, --template-kwargs: a prompt of %d tokens, the file's rendering\n",
           got);
    snprintf(a, sizeof(a),
             "--model '%s' --data '%s' --limit 2 --max-new-tokens 1 --chat-template '%s'", model,
             data, tmpl);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "question 1 (line 2)") && has(ev_err, "no Weng"),
           "a question refused on rank 1: %s", ev_err);
    int n_lines = 0;
    for (const char *p = strstr(ev_err, "minimax-eval:"); p; p = strstr(p + 1, "minimax-eval:"))
        n_lines++;
    EXPECT(n_lines == 1, "a refused question: %d error lines (one expected): %s", n_lines, ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(strstr(ev_err, "minimax-eval:"), "\n"),
           strstr(ev_err, "minimax-eval:"));
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --template-kwargs 'thinking'", model, data);
    EXPECT(ev_run(dir, 2, a) != 0 && has(ev_err, "minimax-eval: --template-kwargs"),
           "bad kwargs: %s", ev_err);
    printf("bad inputs: %.*s\n", (int)strcspn(ev_err, "\n"), ev_err);
    mt_token_buf_free(&buf);
    mt_strbuf_free(&want);
    mt_tokenizer_free(tok);
    mt_gsm8k_set_free(&set);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_minimax_eval", test_eval_minimax_eval},
    {"eval_minimax_eval_template", test_eval_minimax_eval_template},
    {"eval_minimax_eval_shots", test_eval_minimax_eval_shots},
    {"eval_minimax_eval_device", test_eval_minimax_eval_device},
};
MT_TEST_MAIN(cases)
