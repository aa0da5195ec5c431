/* data_logger.c: rank 0's training log (train/logger.h) as docs/training.md ("Outputs") describes
 * it, file by file against the expected text:
 *   data_logger_loss_csv     loss.csv's header (with aux_loss, index_kl) and rows (6 decimals
 *                            for the losses and norms, the lr in %g form, tokens/s with one
 *                            decimal, seconds with three), and the progress line on stderr
 *   data_logger_metrics      metrics.jsonl's train lines: "step" first, the keys in the
 *                            documented order, every digit of the doubles, null for NaN/Inf
 *   data_logger_eval         eval.csv with and without the generation columns (the cells of
 *                            what was not measured empty) and the eval lines of metrics.jsonl
 *   data_logger_resume       a resume keeps the rows of steps <= its step under this run's
 *                            header and appends; no temporary file left
 *   data_logger_eval_only    --eval-only's logs: eval.csv and metrics.jsonl, no loss.csv or
 *                            curve
 *   data_logger_close        loss.png drawn by gnuplot at the end (or a warning without it)
 *   data_logger_write_failure  a log on a full device ends the run naming the file and why */
#include "tests/support/harness.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/file_io.h"
#include "tests/support/capture.h"
#include "tests/support/data_util.h"
#include "train/logger.h"
#include "train/output_dir.h"

/* <dir>/name's text ("" when it cannot be read: the comparison then fails naming it). */
static char *slurp(const char *dir, const char *name) {
    char path[4200], err[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t len;
    char *text = mt_file_read(path, &len, err);
    return text ? text : strdup("");
}

static void expect_file(const char *dir, const char *name, const char *want) {
    char *got = slurp(dir, name);
    EXPECT(!strcmp(got, want), "%s:\n--- got\n%s--- want\n%s---", name, got, want);
    free(got);
}

static bool exists(const char *dir, const char *name) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return file_exists(path);
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The model's auxiliary terms as the decoder names them (models/minimax.h): a column each. */
static const char *const AUX_NAMES[] = {"aux_loss", "index_kl"};

/* A step's row whose every value prints exactly as chosen (no rounding tie in any column). */
static mt_log_row row_of(int step) {
    return (mt_log_row){.step = step,
                        .loss = 2.5,
                        .lr = 1e-3,
                        .grad_norm = 0.25,
                        .aux = {0.0125, 0.5},
                        .tokens = 1234,
                        .tokens_per_s = 5678.3,
                        .elapsed_s = 12.3456,
                        .step_s = 0.75,
                        .arena_peak_bytes = 3 << 20,
                        .state_bytes = 5 << 19};
}

static int test_loss_csv(void) {
    char dir[4096];
    make_tmpdir(dir, sizeof(dir));
    mt_logger lg;
    capture_begin(STDERR_FILENO); /* from the open on: it asks whether stderr is a terminal */
    mt_logger_open(&lg, dir, NULL, 0, false, false, 0, 0);
    expect_file(dir, "loss.csv", "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n");
    expect_file(dir, "metrics.jsonl", "");
    EXPECT(!exists(dir, "eval.csv"), "eval.csv without an evaluation");
    mt_log_row r = row_of(3);
    mt_logger_row(&lg, &r, 10);
    char *progress = capture_end();
    expect_file(dir, "loss.csv",
                "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n"
                "3,2.500000,0.001,0.250000,1234,5678.3,12.346\n");
    /* not a terminal: one line per step; ETA = 12.3456 s / 3 steps x 7 steps left = 29 s */
    EXPECT(!strcmp(progress, "step 3/10  loss 2.5000  lr 0.001  tok/s 5678  ETA 0m29s\n"),
           "progress line: \"%s\"", progress);
    free(progress);
    r = (mt_log_row){.step = 1, .loss = 1, .lr = 2e-5, .elapsed_s = 2000};
    capture_begin(STDERR_FILENO);
    mt_logger_row(&lg, &r, 3); /* 2 steps left of 2000 s each: 1 h 6 min 40 s */
    progress = capture_end();
    EXPECT(strstr(progress, "lr 2e-05  tok/s 0  ETA 1h06m\n"), "hours in the ETA: \"%s\"",
           progress);
    free(progress);
    fclose(lg.csv), fclose(lg.jsonl);

    /* the router's aux loss and the MSA indexer's KL: a column each, in that order */
    char dir2[4096];
    make_tmpdir(dir2, sizeof(dir2));
    capture_begin(STDERR_FILENO);
    mt_logger_open(&lg, dir2, AUX_NAMES, 2, false, false, 0, 0);
    r = row_of(12);
    mt_logger_row(&lg, &r, 12);
    free(capture_end());
    expect_file(dir2, "loss.csv",
                "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s,aux_loss,index_kl\n"
                "12,2.500000,0.001,0.250000,1234,5678.3,12.346,0.012500,0.500000\n");
    fclose(lg.csv), fclose(lg.jsonl);
    rm_tree(dir);
    rm_tree(dir2);
    return MT_TEST_OK;
}

/* The keys of a JSON object, in order, joined by ','. */
static void key_order(const cJSON *o, char *out, size_t n) {
    out[0] = 0;
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? "," : "", c->string);
}

static double num(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static int test_metrics(void) {
    char dir[4096];
    make_tmpdir(dir, sizeof(dir));
    mt_logger lg;
    capture_begin(STDERR_FILENO);
    mt_logger_open(&lg, dir, AUX_NAMES, 1, false, false, 0, 0);
    mt_log_row r = row_of(3);
    r.loss = 2.123456789012345; /* more digits than loss.csv keeps */
    r.grad_norm = NAN;
    r.aux[0] = INFINITY;
    const double t0 = wall_now();
    mt_logger_row(&lg, &r, 10);
    r = row_of(4);
    mt_logger_row(&lg, &r, 10);
    free(capture_end());
    const double t1 = wall_now();
    fclose(lg.csv), fclose(lg.jsonl);

    char *text = slurp(dir, "metrics.jsonl");
    EXPECT(!strncmp(text, "{\"step\": 3, \"type\": \"train\", \"time\": ", 37),
           "the line must start with the step: %.60s", text);
    char *second = strchr(text, '\n');
    EXPECT(second && !strncmp(second + 1, "{\"step\": 4, ", 12) && strchr(second + 1, '\n') &&
               strchr(second + 1, '\n')[1] == 0,
           "two lines, one a step: %s", text);
    if (second) *second = 0;
    cJSON *a = cJSON_Parse(text), *b = second ? cJSON_Parse(second + 1) : NULL;
    EXPECT(a && b, "not JSON: %s", text);
    char keys[1024];
    key_order(a, keys, sizeof(keys));
    EXPECT(!strcmp(keys, "step,type,time,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s,aux_loss,"
                         "step_s,arena_peak_mib,state_mib,host_peak_rss_mib"),
           "keys: %s", keys);
    EXPECT(num(a, "loss") == 2.123456789012345 && num(a, "lr") == 1e-3 &&
               num(a, "tokens_per_s") == 5678.3 && num(a, "elapsed_s") == 12.3456 &&
               num(a, "step_s") == 0.75,
           "every digit of the doubles: loss %.17g", num(a, "loss"));
    EXPECT(cJSON_IsNull(cJSON_GetObjectItem(a, "grad_norm")) &&
               cJSON_IsNull(cJSON_GetObjectItem(a, "aux_loss")),
           "NaN and Inf must be null");
    EXPECT(num(a, "tokens") == 1234 && num(a, "arena_peak_mib") == 3 && num(a, "state_mib") == 2.5,
           "tokens %g, arena %g MiB, state %g MiB", num(a, "tokens"), num(a, "arena_peak_mib"),
           num(a, "state_mib"));
    EXPECT(num(a, "host_peak_rss_mib") > 0, "host_peak_rss_mib %g", num(a, "host_peak_rss_mib"));
    EXPECT(num(a, "time") >= t0 - 1e-3 && num(a, "time") <= t1 + 1e-3,
           "time %.3f: Unix seconds between %.3f and %.3f", num(a, "time"), t0, t1);
    EXPECT(num(b, "step") == 4 && num(b, "aux_loss") == 0.0125 && num(b, "grad_norm") == 0.25,
           "the second line");
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(text);
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_eval(void) {
    /* the eval loss alone */
    char dir[4096];
    make_tmpdir(dir, sizeof(dir));
    mt_logger lg;
    mt_logger_open(&lg, dir, NULL, 0, true, false, 0, 0);
    mt_logger_eval_row(
        &lg, &(mt_eval_row){
                 .step = 5, .has_loss = true, .loss = 1.2345678, .tokens = 4096, .seconds = 0.5});
    expect_file(dir, "eval.csv", "step,eval_loss,tokens,seconds\n5,1.234568,4096,0.500\n");
    char *text = slurp(dir, "metrics.jsonl");
    cJSON *o = cJSON_Parse(text);
    char keys[512];
    key_order(o, keys, sizeof(keys));
    EXPECT(!strcmp(keys, "step,type,time,eval_loss,tokens,seconds") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "type")), "eval") &&
               num(o, "eval_loss") == 1.2345678 && num(o, "tokens") == 4096,
           "eval line: %s", text);
    cJSON_Delete(o);
    free(text);
    fclose(lg.csv), fclose(lg.eval_csv), fclose(lg.jsonl);

    /* with accuracy by generation: the columns of what a row did not measure are empty */
    char dir2[4096];
    make_tmpdir(dir2, sizeof(dir2));
    mt_logger_open(&lg, dir2, NULL, 0, true, true, 0, 0);
    mt_logger_eval_row(
        &lg, &(mt_eval_row){
                 .step = 5, .has_loss = true, .loss = 1.2345678, .tokens = 4096, .seconds = 0.5});
    mt_logger_eval_row(
        &lg, &(mt_eval_row){
                 .step = 20, .has_gen = true, .correct = 3, .samples = 8, .gen_seconds = 1.25});
    mt_logger_eval_row(&lg, &(mt_eval_row){.step = 40,
                                           .has_loss = true,
                                           .loss = 1,
                                           .tokens = 10,
                                           .seconds = 2,
                                           .has_gen = true,
                                           .correct = 4,
                                           .samples = 8,
                                           .gen_seconds = 3.5});
    expect_file(dir2, "eval.csv",
                "step,eval_loss,tokens,seconds,accuracy,correct,samples,gen_seconds\n"
                "5,1.234568,4096,0.500,,,,\n"
                "20,,,,0.375000,3,8,1.250\n"
                "40,1.000000,10,2.000,0.500000,4,8,3.500\n");
    text = slurp(dir2, "metrics.jsonl");
    const char *want[3] = {"step,type,time,eval_loss,tokens,seconds",
                           "step,type,time,accuracy,correct,samples,gen_seconds",
                           "step,type,time,eval_loss,tokens,seconds,accuracy,correct,samples,"
                           "gen_seconds"};
    char *line = text;
    for (int i = 0; i < 3; i++) {
        char *nl = line ? strchr(line, '\n') : NULL;
        if (nl) *nl = 0;
        o = line ? cJSON_Parse(line) : NULL;
        key_order(o, keys, sizeof(keys));
        EXPECT(!strcmp(keys, want[i]), "eval line %d keys: %s", i + 1, keys);
        if (i == 1)
            EXPECT(num(o, "accuracy") == 0.375 && num(o, "correct") == 3 &&
                       num(o, "samples") == 8 && num(o, "gen_seconds") == 1.25,
                   "generation values: %s", line);
        cJSON_Delete(o);
        line = nl ? nl + 1 : NULL;
    }
    EXPECT(line && !*line, "three lines");
    free(text);
    fclose(lg.csv), fclose(lg.eval_csv), fclose(lg.jsonl);
    rm_tree(dir);
    rm_tree(dir2);
    return MT_TEST_OK;
}

/* Steps 1..4 with an eval after 2 and 4, as a run that stopped would leave them. */
static void first_run(const char *dir) {
    mt_logger lg;
    capture_begin(STDERR_FILENO);
    mt_logger_open(&lg, dir, NULL, 0, true, false, 0, 0);
    for (int s = 1; s <= 4; s++) {
        mt_log_row r = row_of(s);
        mt_logger_row(&lg, &r, 4);
        if (s % 2 == 0)
            mt_logger_eval_row(&lg, &(mt_eval_row){.step = s, .has_loss = true, .loss = s});
    }
    free(capture_end());
    fclose(lg.csv), fclose(lg.eval_csv), fclose(lg.jsonl);
}

/* The lines of text whose step (mt_log_line_step) is <= step, in order. */
static char *rows_upto(const char *text, long step) {
    char *out = mt_malloc(strlen(text) + 1, "rows"), *o = out;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        const long s = mt_log_line_step(p);
        if (s >= 0 && s <= step) memcpy(o, p, n), o += n;
        p += n;
    }
    *o = 0;
    return out;
}

static int test_resume(void) {
    char dir[4096];
    make_tmpdir(dir, sizeof(dir));
    first_run(dir);
    char *loss = slurp(dir, "loss.csv"), *metrics = slurp(dir, "metrics.jsonl");
    /* resumed from step 2, now with accuracy by generation (a key a resume may change) */
    mt_logger lg;
    capture_begin(STDERR_FILENO);
    mt_logger_open(&lg, dir, NULL, 0, true, true, 0, 2);
    const char *header = "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n";
    char *kept = rows_upto(loss + strlen(header), 2), want[8192];
    snprintf(want, sizeof(want), "%s%s", header, kept);
    expect_file(dir, "loss.csv", want);
    expect_file(dir, "eval.csv",
                "step,eval_loss,tokens,seconds,accuracy,correct,samples,gen_seconds\n"
                "2,2.000000,0,0.000\n");
    char *kept_metrics = rows_upto(metrics, 2);
    expect_file(dir, "metrics.jsonl", kept_metrics);
    EXPECT(strstr(kept_metrics, "\"type\": \"eval\"") && !strstr(kept_metrics, "\"step\": 3"),
           "metrics.jsonl keeps step 2's eval line, drops steps 3 and 4: %s", kept_metrics);
    EXPECT(count_entries(dir, ".tmp") == 0, "a temporary file left in %s", dir);
    /* then the resumed run's rows follow */
    mt_log_row r = row_of(3);
    mt_logger_row(&lg, &r, 4);
    free(capture_end());
    mt_logger_eval_row(&lg, &(mt_eval_row){.step = 3, .has_gen = true, .correct = 1, .samples = 2});
    snprintf(want, sizeof(want), "%s%s3,2.500000,0.001,0.250000,1234,5678.3,12.346\n", header,
             kept);
    expect_file(dir, "loss.csv", want);
    expect_file(dir, "eval.csv",
                "step,eval_loss,tokens,seconds,accuracy,correct,samples,gen_seconds\n"
                "2,2.000000,0,0.000\n3,,,,0.500000,1,2,0.000\n");
    char *after = slurp(dir, "metrics.jsonl");
    EXPECT(!strncmp(after, kept_metrics, strlen(kept_metrics)) &&
               mt_log_line_step(after + strlen(kept_metrics)) == 3,
           "metrics.jsonl: the kept lines, then step 3's: %s", after);
    fclose(lg.csv), fclose(lg.eval_csv), fclose(lg.jsonl);
    free(after);

    /* a resume whose eval.csv did not exist before (evaluation added): a new one, its header */
    char dir2[4096];
    make_tmpdir(dir2, sizeof(dir2));
    mt_logger_open(&lg, dir2, NULL, 0, false, false, 0, 0);
    fclose(lg.csv), fclose(lg.jsonl);
    mt_logger_open(&lg, dir2, NULL, 0, true, false, 0, 2);
    expect_file(dir2, "eval.csv", "step,eval_loss,tokens,seconds\n");
    fclose(lg.csv), fclose(lg.eval_csv), fclose(lg.jsonl);
    free(loss), free(metrics), free(kept), free(kept_metrics);
    rm_tree(dir);
    rm_tree(dir2);
    return MT_TEST_OK;
}

static int test_eval_only(void) {
    char dir[4096];
    make_tmpdir(dir, sizeof(dir));
    mt_logger lg;
    mt_logger_open_eval(&lg, dir, true, 0);
    mt_logger_eval_row(&lg, &(mt_eval_row){.step = 0,
                                           .has_loss = true,
                                           .loss = 0.5,
                                           .tokens = 7,
                                           .seconds = 0.25,
                                           .has_gen = true,
                                           .correct = 1,
                                           .samples = 4,
                                           .gen_seconds = 0.125});
    capture_begin(STDERR_FILENO);
    mt_logger_close(&lg);
    free(capture_end());
    expect_file(dir, "eval.csv",
                "step,eval_loss,tokens,seconds,accuracy,correct,samples,gen_seconds\n"
                "0,0.500000,7,0.250,0.250000,1,4,0.125\n");
    char *text = slurp(dir, "metrics.jsonl");
    EXPECT(!strncmp(text, "{\"step\": 0, \"type\": \"eval\", ", 28) && strchr(text, '\n') &&
               strchr(text, '\n')[1] == 0,
           "one eval line of step 0: %s", text);
    free(text);
    EXPECT(!exists(dir, "loss.csv") && !exists(dir, "loss.png"),
           "--eval-only writes no loss.csv and draws no curve");
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_close(void) {
    char dir[4096];
    make_tmpdir(dir, sizeof(dir));
    mt_logger lg;
    capture_begin(STDERR_FILENO);
    mt_logger_open(&lg, dir, NULL, 0, true, false, 0, 0);
    for (int s = 1; s <= 3; s++) {
        mt_log_row r = row_of(s);
        mt_logger_row(&lg, &r, 3);
    }
    mt_logger_eval_row(&lg, &(mt_eval_row){.step = 3, .has_loss = true, .loss = 2});
    mt_logger_close(&lg);
    char *err = capture_end();
    EXPECT(!lg.csv && !lg.eval_csv && !lg.jsonl, "files left open");
    EXPECT(!exists(dir, "loss.png.tmp"), "loss.png.tmp left behind");
    const bool gnuplot = system("command -v gnuplot > /dev/null 2>&1") == 0;
    char png[4200];
    snprintf(png, sizeof(png), "%s/loss.png", dir);
    if (gnuplot) {
        char *img = slurp(dir, "loss.png");
        EXPECT(!memcmp(img, "\x89PNG", 4), "loss.png is not a PNG image");
        free(img);
    } else {
        char want[4400];
        snprintf(want, sizeof(want), "warning: could not draw %s (is gnuplot installed?)", png);
        EXPECT(strstr(err, want) && !file_exists(png), "without gnuplot: \"%s\"", err);
    }
    printf("  gnuplot %s: %s\n", gnuplot ? "found" : "missing", err[0] ? err : "(no warning)\n");
    free(err);
    rm_tree(dir);
    return MT_TEST_OK;
}

static void open_loss_full(void *dir) {
    mt_logger lg;
    mt_logger_open(&lg, dir, NULL, 0, false, false, 0, 0);
}

static void row_metrics_full(void *dir) {
    mt_logger lg;
    mt_logger_open(&lg, dir, NULL, 0, false, false, 0, 0);
    mt_log_row r = row_of(1);
    mt_logger_row(&lg, &r, 1);
}

static int test_write_failure(void) {
    char dir[4096], link[4200], want[4400];
    make_tmpdir(dir, sizeof(dir));
    /* loss.csv on a full device: its header cannot be written */
    snprintf(link, sizeof(link), "%s/loss.csv", dir);
    EXPECT(symlink("/dev/full", link) == 0, "cannot link %s", link);
    snprintf(want, sizeof(want), "%s/loss.csv: write failed: No space left on device", dir);
    EXPECT(mt_expect_death(open_loss_full, dir, want), "want \"%s\"", want);
    unlink(link);
    /* metrics.jsonl: no header, so its first line fails */
    snprintf(link, sizeof(link), "%s/metrics.jsonl", dir);
    EXPECT(symlink("/dev/full", link) == 0, "cannot link %s", link);
    snprintf(want, sizeof(want), "%s/metrics.jsonl: write failed: No space left on device", dir);
    EXPECT(mt_expect_death(row_metrics_full, dir, want), "want \"%s\"", want);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_logger_loss_csv", test_loss_csv},
    {"data_logger_metrics", test_metrics},
    {"data_logger_eval", test_eval},
    {"data_logger_resume", test_resume},
    {"data_logger_eval_only", test_eval_only},
    {"data_logger_close", test_close},
    {"data_logger_write_failure", test_write_failure},
};
MT_TEST_MAIN(cases)
