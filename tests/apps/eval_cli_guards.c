/* eval_cli_guards.c: the command-line tools other than the trainer and the server refuse what
 * they cannot do right, each in one line, before any work (docs/evaluation.md, "Refusals").
 *
 * data_cli_flags: the shared strict parser (core/cli_flags.h) and its output-path checks, as a
 * unit. The others drive the binaries named by $MT_EVAL_CLI, $MT_GENERATE_CLI, $MT_CHAT_CLI,
 * $MT_FORWARD_CLI, $MT_INFO_CLI and $MT_DATA_CLI (ctest sets them to this build's; point them
 * at another build to see its behaviour):
 * eval_cli_flags: junk numbers, NaN and infinite temperatures and top-p, an empty --stop and
 * one --stop too many are one line naming the flag in every tool;
 * eval_cli_outputs: an output that is one of the inputs (by another name too: a hard link, a
 * symlink) or a file of the model directory is refused and the input left intact; an output
 * location that cannot be written is refused before the work (no progress line);
 * eval_cli_context: a prompt longer than the model's context is refused naming the context (eval:
 * the question's line; generate; chat: the turn, and a --system turn that fills it at the start),
 * a reply longer than what the context leaves stops there (said once);
 * eval_gsm8k_gold: gold answers the scorer cannot read ("two", "1e5", "1/2") are refused as
 * file:line;
 * eval_forward_labels: --labels with every label -100 is refused (not a loss of 0.0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cli_flags.h"
#include "core/file_io.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"

static char g_out[1 << 20], g_err[1 << 16];

/* `$var args <in >dir/out 2>dir/err` (minimax-eval under $MT_MPIEXEC -n 1 when set): the exit
 * status, stdout in g_out and stderr in g_err. */
static int tool(const char *var, const char *dir, const char *args, const char *in) {
    const char *exe = getenv(var), *mpi = getenv("MT_MPIEXEC");
    MT_CHECK(exe && *exe, "%s not set; run through ctest", var);
    const bool use_mpi = !strcmp(var, "MT_EVAL_CLI") && mpi && *mpi;
    char cmd[1 << 15], err[MT_ERR_LEN], po[4200], pe[4200];
    snprintf(po, sizeof(po), "%s/tool.out", dir);
    snprintf(pe, sizeof(pe), "%s/tool.err", dir);
    snprintf(cmd, sizeof(cmd), "%s%s%s '%s' %s <'%s' >'%s' 2>'%s'", use_mpi ? "'" : "",
             use_mpi ? mpi : "", use_mpi ? "' -n 1 --oversubscribe --bind-to none" : "", exe, args,
             in ? in : "/dev/null", po, pe);
    const int st = system(cmd);
    char *o = mt_file_read(po, NULL, err), *e = mt_file_read(pe, NULL, err);
    snprintf(g_out, sizeof(g_out), "%s", o ? o : "");
    snprintf(g_err, sizeof(g_err), "%s", e ? e : "");
    free(o);
    free(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Lines of s that contain part. */
static int lines_with(const char *s, const char *part) {
    int n = 0;
    for (const char *l = s; *l;) {
        const char *e = strchr(l, '\n');
        const size_t len = e ? (size_t)(e - l) : strlen(l);
        char buf[4096];
        snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1), l);
        n += strstr(buf, part) != NULL;
        l += len + (e ? 1 : 0);
    }
    return n;
}

/* A refusal: a non-zero exit, one line from the tool (prefix) naming want. */
static bool refused(int rc, const char *prefix, const char *want) {
    return rc != 0 && lines_with(g_err, prefix) == 1 && lines_with(g_err, want) >= 1 &&
           lines_with(g_err, prefix) == lines_with(g_err, want);
}

static bool same_bytes(const char *a, const char *b) {
    char err[MT_ERR_LEN];
    size_t na = 0, nb = 0;
    char *x = mt_file_read(a, &na, err), *y = mt_file_read(b, &nb, err);
    const bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void copy_file(const char *src, const char *dst) {
    char err[MT_ERR_LEN];
    size_t n = 0;
    char *b = mt_file_read(src, &n, err);
    MT_CHECK(b, "%s", err);
    write_bytes(dst, b, n);
    free(b);
}

static int test_data_cli_flags(void) {
    char err[256];
    long long x = 0;
    int i32 = 0;
    uint64_t u = 0;
    double d = 0;
    EXPECT(mt_flag_int("--limit", "12", 1, 100, &x, err, sizeof(err)) && x == 12, "12");
    EXPECT(mt_flag_int("--limit", "-3", -5, 5, &x, err, sizeof(err)) && x == -3, "-3");
    const char *bad_int[] = {
        "abc", "1x", "", " 5", "\n5", "5 ", "0x10", "1e3", "101", "0", "99999999999999999999"};
    for (size_t k = 0; k < sizeof(bad_int) / sizeof(bad_int[0]); k++) {
        EXPECT(!mt_flag_int("--limit", bad_int[k], 1, 100, &x, err, sizeof(err)),
               "--limit \"%s\" accepted", bad_int[k]);
        EXPECT(has(err, "--limit wants an integer in [1, 100]"), "message: %s", err);
    }
    EXPECT(!mt_flag_int32("--batch", "2147483648", 1, 32, &i32, err, sizeof(err)), "int32");
    EXPECT(mt_flag_u64("--seed", "18446744073709551615", &u, err, sizeof(err)) && u == UINT64_MAX,
           "the largest seed");
    const char *bad_u64[] = {"abc", "-1", "+1", " 1", "18446744073709551616", "", "1x"};
    for (size_t k = 0; k < sizeof(bad_u64) / sizeof(bad_u64[0]); k++)
        EXPECT(!mt_flag_u64("--seed", bad_u64[k], &u, err, sizeof(err)) && has(err, "--seed"),
               "--seed \"%s\" accepted", bad_u64[k]);
    EXPECT(mt_flag_double("--top-p", "0.9", 0, true, 1, false, &d, err, sizeof(err)) && d == 0.9,
           "0.9");
    EXPECT(mt_flag_double("--top-p", "1", 0, true, 1, false, &d, err, sizeof(err)), "1 in (0, 1]");
    const char *bad_p[] = {"0", "nan", "NaN", "inf", "-inf", "1.5", "", " 0.5", "0.5x", "1e400"};
    for (size_t k = 0; k < sizeof(bad_p) / sizeof(bad_p[0]); k++) {
        EXPECT(!mt_flag_double("--top-p", bad_p[k], 0, true, 1, false, &d, err, sizeof(err)),
               "--top-p \"%s\" accepted", bad_p[k]);
        EXPECT(has(err, "--top-p wants a number in (0, 1]"), "message: %s", err);
    }
    EXPECT(!mt_flag_text("--stop", "", err, sizeof(err)) && has(err, "--stop"), "empty text");
    EXPECT(mt_flag_text("--stop", "x", err, sizeof(err)), "text");
    const char *list[2];
    int count = 0;
    EXPECT(mt_flag_list_add("--stop", "a", list, &count, 2, err, sizeof(err)) &&
               mt_flag_list_add("--stop", "b", list, &count, 2, err, sizeof(err)) && count == 2 &&
               !strcmp(list[1], "b"),
           "list: two values kept");
    EXPECT(!mt_flag_list_add("--stop", "c", list, &count, 2, err, sizeof(err)) && count == 2 &&
               has(err, "--stop") && has(err, "at most 2"),
           "list: one past the most refused");
    EXPECT(!mt_flag_list_add("--stop", "", list, &count, 3, err, sizeof(err)) && count == 2,
           "list: empty refused");
    /* a long value is shown cut, the line stays one line */
    char big[300];
    memset(big, '7', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    EXPECT(!mt_flag_int("--n", big, 1, 9, &x, err, sizeof(err)) && strlen(err) < 120, "%s", err);

    /* output paths */
    char dir[4096], a[4200], b[4200], c[4200], sub[4200], missing[4300];
    make_tmpdir(dir, sizeof(dir));
    snprintf(a, sizeof(a), "%s/a.jsonl", dir);
    snprintf(b, sizeof(b), "%s/b.jsonl", dir);
    snprintf(c, sizeof(c), "%s/./a.jsonl", dir);
    write_text(a, "x\n");
    MT_CHECK(link(a, b) == 0, "link");
    EXPECT(mt_path_same(a, b) && mt_path_same(a, c) && mt_path_same(a, a), "the same file");
    snprintf(sub, sizeof(sub), "%s/new.jsonl", dir);
    snprintf(missing, sizeof(missing), "%s/./new.jsonl", dir);
    EXPECT(mt_path_same(sub, missing) && !mt_path_same(sub, a), "a new file by its parent");
    EXPECT(!mt_out_not_input("--out", b, "--data", a, err, sizeof(err)) && has(err, "--out") &&
               has(err, "--data"),
           "a hard link: %s", err);
    EXPECT(mt_out_not_input("--out", sub, "--data", a, err, sizeof(err)), "another file");
    EXPECT(mt_out_not_input("--out", sub, "--shots-file", NULL, err, sizeof(err)), "no input");
    EXPECT(!mt_out_not_in_dir("--out", sub, "--model", dir, err, sizeof(err)) &&
               has(err, "inside --model"),
           "inside the model directory: %s", err);
    char elsewhere[4096], lnk[4200];
    make_tmpdir(elsewhere, sizeof(elsewhere));
    snprintf(lnk, sizeof(lnk), "%s/w.safetensors", elsewhere);
    MT_CHECK(symlink(a, lnk) == 0, "symlink");
    EXPECT(!mt_out_not_in_dir("--out", lnk, "--model", dir, err, sizeof(err)) &&
               has(err, "the same file"),
           "a link to a file of the model: %s", err);
    snprintf(lnk, sizeof(lnk), "%s/o.safetensors", elsewhere);
    EXPECT(mt_out_not_in_dir("--out", lnk, "--model", dir, err, sizeof(err)), "elsewhere");
    EXPECT(mt_out_writable("--out", sub, err, sizeof(err)) && !file_exists(sub) &&
               count_entries(dir, ".tmp.") == 0,
           "writable, nothing left: %s", err);
    snprintf(missing, sizeof(missing), "%s/no/such/dir/r.jsonl", dir);
    EXPECT(!mt_out_writable("--out", missing, err, sizeof(err)) && has(err, "--out") &&
               has(err, "No such file"),
           "a missing directory: %s", err);
    EXPECT(!mt_out_writable("--out", dir, err, sizeof(err)) && has(err, "is a directory"),
           "a directory: %s", err);
    rm_tree(dir);
    rm_tree(elsewhere);
    return MT_TEST_OK;
}

/* Each bad value of each tool: one line naming the flag, a non-zero exit. */
static int test_eval_cli_flags(void) {
    char dir[4096], model[4200], data[4200], ids[4400], fx[4200], a[1 << 16], tok_args[16384];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    snprintf(data, sizeof(data), "%s/tests/fixtures/gsm8k/eval_small.jsonl", source_dir());
    snprintf(fx, sizeof(fx), "%s/tests/fixtures/models", source_dir());
    snprintf(ids, sizeof(ids), "%s/ids_a.json", fx);
    char stops[2048] = "", stops17[4096] = "";
    for (int k = 0; k < 9; k++) strcat(stops, " --stop s");
    for (int k = 0; k < 17; k++) strcat(stops17, " --stop s");
    static const struct {
        const char *flag, *value;
    } ev[] = {{"--limit", "abc"},          {"--batch", "1x"},        {"--seed", "abc"},
              {"--max-new-tokens", "abc"}, {"--temperature", "nan"}, {"--temperature", "inf"},
              {"--top-p", "nan"},          {"--top-p", "inf"},       {"--top-k", "-1"},
              {"--shots", "2x"},           {"--stop", "''"}};
    for (size_t k = 0; k < sizeof(ev) / sizeof(ev[0]); k++) {
        snprintf(a, sizeof(a), "--model '%s' --data '%s' --limit 1 --max-new-tokens 1 %s %s", model,
                 data, ev[k].flag, ev[k].value);
        const int rc = tool("MT_EVAL_CLI", dir, a, NULL);
        EXPECT(refused(rc, "minimax-eval:", ev[k].flag), "minimax-eval %s %s: exit %d, %s",
               ev[k].flag, ev[k].value, rc, g_err);
    }
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --limit 1 --max-new-tokens 1 %s", model, data,
             stops);
    EXPECT(refused(tool("MT_EVAL_CLI", dir, a, NULL), "minimax-eval:", "--stop"),
           "minimax-eval with 9 --stop: %s", g_err);
    printf("minimax-eval: %s", g_err);

    static const struct {
        const char *flag, *value;
    } ch[] = {{"--max-new-tokens", "abc"}, {"--temperature", "nan"}, {"--top-p", "nan"},
              {"--top-k", "1x"},           {"--seed", "abc"},        {"--stop", "''"}};
    for (size_t k = 0; k < sizeof(ch) / sizeof(ch[0]); k++) {
        snprintf(a, sizeof(a), "--model '%s' %s %s", model, ch[k].flag, ch[k].value);
        const int rc = tool("MT_CHAT_CLI", dir, a, NULL);
        EXPECT(refused(rc, "minimax-chat:", ch[k].flag), "minimax-chat %s %s: exit %d, %s",
               ch[k].flag, ch[k].value, rc, g_err);
    }
    snprintf(a, sizeof(a), "--model '%s' %s", model, stops17);
    EXPECT(refused(tool("MT_CHAT_CLI", dir, a, NULL), "minimax-chat:", "--stop"),
           "minimax-chat with 17 --stop: %s", g_err);
    printf("minimax-chat: %s", g_err);

    snprintf(a, sizeof(a), "--model '%s/tiny_mqa' --ids '%s' --max-new-tokens abc", fx, ids);
    EXPECT(refused(tool("MT_GENERATE_CLI", dir, a, NULL), "minimax-generate", "--max-new-tokens"),
           "minimax-generate --max-new-tokens abc: %s", g_err);
    snprintf(a, sizeof(a), "--model '%s/tiny_mqa' --ids '%s' --max-new-tokens 1 --arena-mb 1x", fx,
             ids);
    EXPECT(refused(tool("MT_GENERATE_CLI", dir, a, NULL), "minimax-generate", "--arena-mb"),
           "minimax-generate --arena-mb 1x: %s", g_err);
    printf("minimax-generate: %s", g_err);
    snprintf(a, sizeof(a), "--model '%s/tiny_mqa' --ids '%s' --out '%s/o.safetensors' --arena-mb x",
             fx, ids, dir);
    EXPECT(refused(tool("MT_FORWARD_CLI", dir, a, NULL), "minimax-forward", "--arena-mb"),
           "minimax-forward --arena-mb x: %s", g_err);

    static const char *info[] = {"--ranks 1x", "--fit-gib nan", "--seq abc", "--expert-parallel 2x",
                                 "--num-hidden-layers ''"};
    for (size_t k = 0; k < sizeof(info) / sizeof(info[0]); k++) {
        char flag[64];
        snprintf(flag, sizeof(flag), "%.*s", (int)strcspn(info[k], " "), info[k]);
        snprintf(a, sizeof(a), "--config '%s/recipes/configs/tiny.json' %s", source_dir(), info[k]);
        const int rc = tool("MT_INFO_CLI", dir, a, NULL);
        EXPECT(refused(rc, "minimax-info", flag), "minimax-info %s: exit %d, %s", info[k], rc,
               g_err);
    }
    printf("minimax-info: %s", g_err);

    snprintf(tok_args, sizeof(tok_args), "--data '%s' --tokenizer '%s' --out '%s/c.h5'", data,
             tokenizer_dir(), dir);
    static const struct {
        const char *cmd, *flag, *value;
    } dt[] = {{"synth", "--n", "abc"},
              {"synth", "--seed", "1x"},
              {"synth", "--seed", "-1"},
              {"tokenize", "--max-length", "1x"},
              {"show", "--index", " 1"}};
    for (size_t k = 0; k < sizeof(dt) / sizeof(dt[0]); k++) {
        snprintf(a, sizeof(a), "%s %s %s '%s'", dt[k].cmd,
                 strcmp(dt[k].cmd, "synth") ? tok_args : "--out /dev/null", dt[k].flag,
                 dt[k].value);
        const int rc = tool("MT_DATA_CLI", dir, a, NULL);
        EXPECT(refused(rc, "minimax-data", dt[k].flag), "minimax-data %s %s '%s': exit %d, %s",
               dt[k].cmd, dt[k].flag, dt[k].value, rc, g_err);
    }
    printf("minimax-data: %s", g_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* Outputs over inputs, and outputs that cannot be written, refused before the work. */
static int test_eval_cli_outputs(void) {
    char dir[4096], model[4200], data[4200], keep[4200], link2[4200], a[1 << 16], out[4300];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    char src[4200];
    snprintf(src, sizeof(src), "%s/tests/fixtures/gsm8k/eval_small.jsonl", source_dir());
    snprintf(data, sizeof(data), "%s/test.jsonl", dir);
    snprintf(keep, sizeof(keep), "%s/test.keep", dir);
    snprintf(link2, sizeof(link2), "%s/other-name.jsonl", dir);
    copy_file(src, data);
    copy_file(src, keep);
    MT_CHECK(link(data, link2) == 0, "link");

    /* minimax-eval --out = --data (by another name), = --shots-file */
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --limit 2 --max-new-tokens 2 --out '%s'",
             model, data, link2);
    int rc = tool("MT_EVAL_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-eval:", "--out") && has(g_err, "--data") && !has(g_err, "ETA") &&
               same_bytes(data, keep),
           "--out over --data (a hard link): exit %d, %s", rc, g_err);
    printf("minimax-eval: %s", g_err);
    copy_file(keep, data); /* (a build that wrote over it: the next checks start afresh) */
    snprintf(a, sizeof(a),
             "--model '%s' --data '%s' --limit 2 --max-new-tokens 2 --shots 1 --shots-file '%s' "
             "--out '%s'",
             model, src, data, data);
    rc = tool("MT_EVAL_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-eval:", "--shots-file") && !has(g_err, "ETA") &&
               same_bytes(data, keep),
           "--out over --shots-file: exit %d, %s", rc, g_err);
    copy_file(keep, data);
    /* a place that cannot take the results: before the evaluation, not after */
    snprintf(out, sizeof(out), "%s/no-such-dir/results.jsonl", dir);
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --limit 2 --max-new-tokens 2 --out '%s'",
             model, data, out);
    rc = tool("MT_EVAL_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-eval:", "--out") && !has(g_err, "ETA") && !has(g_out, "accuracy"),
           "--out in a missing directory: exit %d, %s", rc, g_err);
    printf("minimax-eval: %s", g_err);

    /* minimax-data tokenize --out = --data (a symlink) */
    char sl[4200];
    snprintf(sl, sizeof(sl), "%s/cache.h5", dir);
    MT_CHECK(symlink(data, sl) == 0, "symlink");
    snprintf(a, sizeof(a), "tokenize --data '%s' --tokenizer '%s' --out '%s'", data,
             tokenizer_dir(), sl);
    rc = tool("MT_DATA_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-data", "--out") && has(g_err, "--data") && same_bytes(data, keep),
           "tokenize --out over --data: exit %d, %s", rc, g_err);
    printf("minimax-data: %s", g_err);
    snprintf(a, sizeof(a), "tokenize --data '%s' --tokenizer '%s' --out '%s/none/c.h5'", data,
             tokenizer_dir(), dir);
    rc = tool("MT_DATA_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-data", "--out") && !has(g_out, "records"),
           "tokenize --out in a missing directory: exit %d, %s", rc, g_err);

    /* minimax-forward --out over the model's weights, or in a missing directory */
    char fxm[4200], wkeep[4300], ids[4200];
    snprintf(fxm, sizeof(fxm), "%s/tests/fixtures/models/tiny_mqa", source_dir());
    snprintf(ids, sizeof(ids), "%s/tests/fixtures/models/ids_a.json", source_dir());
    snprintf(a, sizeof(a), "cp -r '%s' '%s/mqa'", fxm, dir);
    MT_CHECK(system(a) == 0, "cp");
    snprintf(wkeep, sizeof(wkeep), "%s/mqa/model.safetensors", dir);
    snprintf(a, sizeof(a), "--model '%s/mqa' --ids '%s' --out '%s'", dir, ids, wkeep);
    rc = tool("MT_FORWARD_CLI", dir, a, NULL);
    char fx_weights[4300];
    snprintf(fx_weights, sizeof(fx_weights), "%s/model.safetensors", fxm);
    EXPECT(refused(rc, "minimax-forward", "--out") && same_bytes(wkeep, fx_weights),
           "forward --out over the weights: exit %d, %s", rc, g_err);
    printf("minimax-forward: %s", g_err);
    snprintf(a, sizeof(a), "--model '%s/mqa' --ids '%s' --out '%s/none/o.safetensors'", dir, ids,
             dir);
    rc = tool("MT_FORWARD_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-forward", "--out") && !has(g_out, "loss"),
           "forward --out in a missing directory: exit %d, %s", rc, g_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* A text of n words. */
static char *words(int n) {
    char *s = mt_malloc((size_t)n * 6 + 1, "words");
    s[0] = '\0';
    for (int i = 0; i < n; i++) strcat(s, i ? " word" : "word");
    return s;
}

/* Prompts longer than the model's context (max_position_embeddings 256 here). */
static int test_eval_cli_context(void) {
    char dir[4096], model[4200], data[4200], a[65536];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 256, model, sizeof(model));
    char *long_text = words(600);
    /* minimax-eval: line 2's question does not fit */
    snprintf(data, sizeof(data), "%s/long.jsonl", dir);
    mt_strbuf f = {0};
    const char *l1 = "{\"question\": \"What is 2 + 3?\", \"answer\": \"2 + 3 = 5\\n#### 5\"}\n";
    mt_strbuf_append(&f, l1, strlen(l1));
    mt_strbuf_append(&f, "{\"question\": \"", 14);
    mt_strbuf_append(&f, long_text, strlen(long_text));
    const char *tail = "\", \"answer\": \"#### 1\"}\n";
    mt_strbuf_append(&f, tail, strlen(tail));
    write_bytes(data, f.p, f.len);
    mt_strbuf_free(&f);
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --max-new-tokens 2", model, data);
    int rc = tool("MT_EVAL_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-eval:", "context") && has(g_err, "line 2") &&
               has(g_err, "max_position_embeddings") && !has(g_err, "GiB") &&
               !has(g_out, "accuracy"),
           "eval, a question past the context: exit %d, %s", rc, g_err);
    printf("minimax-eval: %s", g_err);
    /* a completion past the context stops there, said once */
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --limit 1 --max-new-tokens 100000", model,
             data);
    rc = tool("MT_EVAL_CLI", dir, a, NULL);
    EXPECT(rc == 0 && lines_with(g_err, "max_position_embeddings 256") == 1,
           "eval, --max-new-tokens past the context: exit %d, %s", rc, g_err);

    /* minimax-generate --prompt */
    snprintf(a, sizeof(a), "--model '%s' --prompt '%s' --max-new-tokens 2", model, long_text);
    rc = tool("MT_GENERATE_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-generate", "context") && has(g_err, "max_position_embeddings"),
           "generate, a prompt past the context: exit %d, %s", rc, g_err);
    printf("minimax-generate: %s", g_err);
    snprintf(a, sizeof(a), "--model '%s' --prompt 'Hi there' --max-new-tokens 1000 --json", model);
    rc = tool("MT_GENERATE_CLI", dir, a, NULL);
    cJSON *j = cJSON_Parse(g_out);
    const int n_prompt = j ? cJSON_GetArraySize(cJSON_GetObjectItem(j, "prompt_ids")) : -1,
              n_ids = j ? cJSON_GetArraySize(cJSON_GetObjectItem(j, "ids")) : -1;
    cJSON_Delete(j);
    EXPECT(rc == 0 && n_prompt > 0 && n_prompt + n_ids <= 256 &&
               lines_with(g_err, "max_position_embeddings 256") == 1,
           "generate, --max-new-tokens past the context: exit %d, %d + %d tokens, %s", rc, n_prompt,
           n_ids, g_err);
    printf("minimax-generate: %d + %d tokens: %s", n_prompt, n_ids, g_err);

    /* minimax-chat: a --system turn that fills the context; a first turn that does */
    char in[4200];
    snprintf(in, sizeof(in), "%s/turns.txt", dir);
    write_text(in, "hello\n");
    snprintf(a, sizeof(a), "--model '%s' --system '%s' --max-new-tokens 2", model, long_text);
    rc = tool("MT_CHAT_CLI", dir, a, in);
    EXPECT(refused(rc, "minimax-chat:", "--system") && has(g_err, "context") &&
               !has(g_err, "/reset"),
           "chat, a --system past the context: exit %d, %s", rc, g_err);
    printf("minimax-chat: %s", g_err);
    char *turn = mt_malloc(strlen(long_text) + 2, "turn");
    sprintf(turn, "%s\n", long_text);
    write_text(in, turn);
    free(turn);
    snprintf(a, sizeof(a), "--model '%s' --max-new-tokens 2", model);
    rc = tool("MT_CHAT_CLI", dir, a, in);
    EXPECT(rc == 0 && lines_with(g_err, "context") == 1 && !has(g_err, "/reset"),
           "chat, a first turn past the context: exit %d, %s", rc, g_err);
    printf("minimax-chat: %s", g_err);
    free(long_text);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* Gold answers the scorer cannot read: refused as file:line before any decoding. */
static int test_eval_gsm8k_gold(void) {
    char dir[4096], model[4200], data[4200], a[1 << 16], want[4300];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    snprintf(data, sizeof(data), "%s/golds.jsonl", dir);
    static const char *bad[] = {"#### two", "#### 1e5", "#### 1/2", "so it is 4 or 5 (no marker)"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char text[1024];
        snprintf(text, sizeof(text),
                 "{\"question\": \"What is 2 + 3?\", \"answer\": \"2 + 3 = 5\\n#### 5\"}\n"
                 "{\"question\": \"What is half of one?\", \"answer\": \"It is\\n%s\"}\n",
                 bad[k]);
        write_text(data, text);
        snprintf(a, sizeof(a), "--model '%s' --data '%s' --max-new-tokens 2", model, data);
        const int rc = tool("MT_EVAL_CLI", dir, a, NULL);
        snprintf(want, sizeof(want), "%s:2:", data);
        EXPECT(refused(rc, "minimax-eval:", want) && lines_with(g_err, "gold answer") == 1 &&
                   lines_with(g_err, "cannot be scored") == 1 && !has(g_out, "accuracy"),
               "gold \"%s\": exit %d, %s", bad[k], rc, g_err);
        printf("minimax-eval: %s", g_err);
    }
    /* golds it reads are scored as before */
    write_text(data, "{\"question\": \"What is 2 + 3?\", \"answer\": \"#### $1,200.\"}\n"
                     "{\"question\": \"What is 2 - 3?\", \"answer\": \"2 - 3\\n#### -1\"}\n");
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --max-new-tokens 2", model, data);
    EXPECT(tool("MT_EVAL_CLI", dir, a, NULL) == 0 && has(g_out, "accuracy"), "usable golds: %s",
           g_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* --labels with every label -100: no token to average over. */
static int test_eval_forward_labels(void) {
    char dir[4096], labels[4200], a[1 << 16];
    make_tmpdir(dir, sizeof(dir));
    char err[MT_ERR_LEN], ids[4200];
    snprintf(ids, sizeof(ids), "%s/tests/fixtures/models/ids_a.json", source_dir());
    char *text = mt_file_read(ids, NULL, err);
    MT_CHECK(text, "%s", err);
    cJSON *rows = cJSON_Parse(text); /* its shape, every label -100 */
    free(text);
    MT_CHECK(rows, "%s", ids);
    mt_strbuf s = {0};
    mt_strbuf_append(&s, "[", 1);
    for (int b = 0; b < cJSON_GetArraySize(rows); b++) {
        mt_strbuf_append(&s, b ? ",[" : "[", b ? 2 : 1);
        const int T = cJSON_GetArraySize(cJSON_GetArrayItem(rows, b));
        for (int t = 0; t < T; t++) mt_strbuf_append(&s, t ? ",-100" : "-100", t ? 5 : 4);
        mt_strbuf_append(&s, "]", 1);
    }
    mt_strbuf_append(&s, "]\n", 2);
    snprintf(labels, sizeof(labels), "%s/labels.json", dir);
    write_bytes(labels, s.p, s.len);
    mt_strbuf_free(&s);
    cJSON_Delete(rows);
    snprintf(a, sizeof(a),
             "--model '%s/tests/fixtures/models/tiny_mqa' --ids '%s' --labels '%s' "
             "--out '%s/o.safetensors'",
             source_dir(), ids, labels, dir);
    const int rc = tool("MT_FORWARD_CLI", dir, a, NULL);
    EXPECT(refused(rc, "minimax-forward", "-100") && !has(g_out, "loss 0"),
           "every label -100: exit %d, out %s, err %s", rc, g_out, g_err);
    printf("minimax-forward: %s", g_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_cli_flags", test_data_cli_flags},     {"eval_cli_flags", test_eval_cli_flags},
    {"eval_cli_outputs", test_eval_cli_outputs}, {"eval_cli_context", test_eval_cli_context},
    {"eval_gsm8k_gold", test_eval_gsm8k_gold},   {"eval_forward_labels", test_eval_forward_labels},
};
MT_TEST_MAIN(cases)
