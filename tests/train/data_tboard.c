/* data_tboard.c: the TensorBoard event files of output.report_to = ["tensorboard"]
 * (train/tboard.c, train/logger.c), read back by the tests' own reader (tests/support/tfevents.c,
 * no Python; tools/tensorboard_check.py reads the same files with tensorboard's EventAccumulator):
 *   data_tboard_crc       CRC-32C against RFC 3720's check values, the writer's and the reader's
 *   data_tboard_logger    the logger's events equal metrics.jsonl (every number, as float32,
 *                         NaN for null, wall_time = "time"); a resume at step 3 cuts the file
 *                         to steps <= 3, starts a second one (its file name sorting after,
 *                         a SessionLog START at 4): no step twice; a new run (or --eval-only)
 *                         removes the old files
 *   data_tboard_damaged   a flipped byte fails the CRC (reader and resume name file and byte);
 *                         a torn last record (a killed run) is dropped by the resume's cut
 *   data_tboard_match     the run of tests/train/run_resume.sh's tboard mode: 2 ranks, eval loss
 *                         and eval.generate accuracy every 2 steps, resumed with --rewind from
 *                         step 2: output.dir's and rewound-*'s events equal their metrics.jsonl */
#include "tests/support/harness.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"
#include "tests/support/capture.h"
#include "tests/support/data_util.h"
#include "tests/support/tfevents.h"
#include "train/logger.h"
#include "train/tboard.h"

static int test_crc(void) {
    uint8_t zeros[32] = {0}, ones[32], up[32];
    memset(ones, 0xff, sizeof(ones));
    for (int i = 0; i < 32; i++) up[i] = (uint8_t)i;
    const struct {
        const void *p;
        size_t n;
        uint32_t want;
    } v[] = {{"123456789", 9, 0xe3069283u},
             {zeros, 32, 0x8a9136aau},
             {ones, 32, 0x62a8ab43u},
             {up, 32, 0x46dd794eu}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        EXPECT(mt_tboard_crc32c(v[i].p, v[i].n) == v[i].want,
               "writer's CRC-32C %zu: %08x, want %08x", i, mt_tboard_crc32c(v[i].p, v[i].n),
               v[i].want);
        EXPECT(mt_tfe_crc32c(v[i].p, v[i].n) == v[i].want, "reader's CRC-32C %zu: %08x, want %08x",
               i, mt_tfe_crc32c(v[i].p, v[i].n), v[i].want);
        EXPECT(mt_tboard_crc_mask(v[i].want) == mt_tfe_masked(v[i].p, v[i].n), "mask %zu", i);
    }
    return MT_TEST_OK;
}

static const char *const AUX[] = {"aux_loss", "index_kl"};

static void rows(mt_logger *lg, int from, int to) {
    for (int s = from; s <= to; s++) {
        mt_log_row r = {.step = s,
                        .loss = 2.0 / s + 1e-9, /* no float32 exactly */
                        .lr = 1e-3 * s / 7,
                        .grad_norm = s == 5 ? NAN : 0.3 * s,
                        .aux = {0.01 * s, 1.0 / 3},
                        .tokens = 1000 + s,
                        .tokens_per_s = 123.456 * s,
                        .elapsed_s = 0.5 * s,
                        .step_s = 0.5,
                        .arena_peak_bytes = 3 << 20,
                        .state_bytes = 5 << 19};
        mt_logger_row(lg, &r, 10);
        if (s % 2 == 0) {
            mt_eval_row e = {.step = s,
                             .has_loss = true,
                             .loss = 3.0 / s,
                             .tokens = 77,
                             .seconds = 0.25,
                             .has_gen = s == 4,
                             .correct = 1,
                             .samples = 3,
                             .gen_seconds = 1.5};
            mt_logger_eval_row(lg, &e);
        }
    }
}

static int events_files(const char *dir, char names[][256], int max) {
    struct dirent **nl = NULL;
    const int k = scandir(dir, &nl, NULL, alphasort);
    int count = 0;
    for (int i = 0; i < k; i++) {
        if (strstr(nl[i]->d_name, "tfevents") && count < max)
            snprintf(names[count++], 256, "%s", nl[i]->d_name);
        free(nl[i]);
    }
    free(nl);
    return count;
}

static void logger_run(const char *dir, int resume_step, int from, int to) {
    mt_logger lg;
    capture_begin(STDERR_FILENO);
    mt_logger_open(&lg, dir, AUX, 2, true, true, 0, resume_step);
    mt_logger_tensorboard(&lg, resume_step);
    rows(&lg, from, to);
    free(capture_end());
    fclose(lg.csv), fclose(lg.eval_csv), fclose(lg.jsonl); /* no gnuplot */
    mt_tboard_close(&lg.tb);
}

static int test_logger(void) {
    char dir[4096], err[1024], names[4][256];
    make_tmpdir(dir, sizeof(dir));
    int files = 0, scalars = 0;
    /* steps 1..5, then a resume from step 3 (a run stopped after its checkpoint at 3) */
    logger_run(dir, 0, 1, 5);
    EXPECT(mt_tfevents_match(dir, &files, &scalars, err, sizeof(err)), "%s", err);
    /* train: 10 numbers + 2 aux a step; eval: 3 at 2, 3 + 4 at 4 */
    EXPECT(files == 1 && scalars == 5 * 12 + 3 + 7, "%d files, %d scalars", files, scalars);
    logger_run(dir, 3, 4, 6);
    EXPECT(mt_tfevents_match(dir, &files, &scalars, err, sizeof(err)), "after the resume: %s", err);
    EXPECT(files == 2 && scalars == 6 * 12 + 3 + 7 + 3, "%d files, %d scalars", files, scalars);
    EXPECT(events_files(dir, names, 4) == 2, "two event files");
    char path[4400];
    mt_tfevent *ev = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
    int n = mt_tfevents_read(path, &ev, err, sizeof(err));
    long last = 0;
    for (int i = 0; i < n; i++) last = ev[i].step > last ? (long)ev[i].step : last;
    EXPECT(n > 0 && last == 3, "the first file after the cut: %d events, last step %ld", n, last);
    free(ev);
    snprintf(path, sizeof(path), "%s/%s", dir, names[1]);
    n = mt_tfevents_read(path, &ev, err, sizeof(err));
    EXPECT(n > 2 && ev[1].kind == MT_TFE_SESSION && ev[1].status == 1 && ev[1].step == 4,
           "the resumed file's second event is no SessionLog START at step 4");
    EXPECT(n > 2 && ev[2].kind == MT_TFE_SCALAR && ev[2].step == 4 &&
               !strcmp(ev[2].text, "train/loss"),
           "the resumed file's first scalar: %s at %lld", n > 2 ? ev[2].text : "-",
           n > 2 ? (long long)ev[2].step : -1LL);
    free(ev);
    /* a new run in the directory: the old files go (as metrics.jsonl starts anew) */
    logger_run(dir, 0, 1, 1);
    EXPECT(events_files(dir, names, 4) == 1, "a new run left old event files");
    EXPECT(mt_tfevents_match(dir, &files, &scalars, err, sizeof(err)) && scalars == 12,
           "the new run: %s, %d scalars", err, scalars);
    /* --eval-only: a new metrics.jsonl, and new events (the eval loss and the accuracy) */
    mt_logger lg;
    mt_logger_open_eval(&lg, dir, true, 0);
    mt_logger_tensorboard(&lg, 0);
    mt_eval_row e = {.has_loss = true,
                     .loss = 0.7,
                     .tokens = 9,
                     .seconds = 0.5,
                     .has_gen = true,
                     .correct = 2,
                     .samples = 3,
                     .gen_seconds = 0.1};
    mt_logger_eval_row(&lg, &e);
    fclose(lg.eval_csv), fclose(lg.jsonl);
    mt_tboard_close(&lg.tb);
    EXPECT(mt_tfevents_match(dir, &files, &scalars, err, sizeof(err)) && files == 1 && scalars == 7,
           "--eval-only: %s, %d files, %d scalars", err, files, scalars);
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_damaged(void) {
    char dir[4096], err[1024], names[2][256], path[4400];
    make_tmpdir(dir, sizeof(dir));
    logger_run(dir, 0, 1, 4);
    EXPECT(events_files(dir, names, 2) == 1, "one event file");
    snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
    size_t len;
    char *text = mt_file_read(path, &len, err);
    MT_CHECK(text, "%s", err);
    /* a torn last record: the cut at step 4 keeps every whole record and drops it */
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, len - 3, f);
    fclose(f);
    mt_tfevent *ev = NULL;
    EXPECT(mt_tfevents_read(path, &ev, err, sizeof(err)) < 0 && strstr(err, "past the end"),
           "a torn record read: %s", err);
    EXPECT(mt_tboard_cut(path, 4, NULL, err, sizeof(err)), "cut of a torn file: %s", err);
    const int n = mt_tfevents_read(path, &ev, err, sizeof(err));
    EXPECT(n > 1 && !strcmp(ev[n - 1].text, "eval/samples"), "after the cut: %d events, last %s", n,
           n > 0 ? ev[n - 1].text : "-");
    free(ev);
    /* one flipped bit in the data of the third record */
    size_t at = 0;
    for (int r = 0; r < 2; r++) at += 12 + (size_t)(uint8_t)text[at] + 4;
    text[at + 14] ^= 0x10;
    f = fopen(path, "wb");
    fwrite(text, 1, len, f);
    fclose(f);
    char want[64];
    snprintf(want, sizeof(want), "record 3 at byte %zu: the data's CRC", at);
    EXPECT(mt_tfevents_read(path, &ev, err, sizeof(err)) < 0 && strstr(err, want),
           "a flipped bit read: %s", err);
    snprintf(want, sizeof(want), "record at byte %zu has a wrong data CRC", at);
    EXPECT(!mt_tboard_cut(path, 2, NULL, err, sizeof(err)) && strstr(err, want) &&
               strstr(err, names[0]),
           "a flipped bit cut: %s", err);
    free(text);
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_match(void) {
    const char *t = getenv("MT_TEST_TMPDIR");
    char dir[2048], err[1024];
    snprintf(dir, sizeof(dir), "%s/tboard", t ? t : "/tmp");
    int files = 0, scalars = 0;
    EXPECT(mt_tfevents_match(dir, &files, &scalars, err, sizeof(err)), "%s", err);
    EXPECT(files == 2, "%s: %d event files (the run's and the resume's)", dir, files);
    printf("%s: %d event files, %d scalars = metrics.jsonl's numbers\n", dir, files, scalars);
    struct dirent **nl = NULL;
    const int k = scandir(dir, &nl, NULL, alphasort);
    int rewound = 0;
    for (int i = 0; i < k; i++) {
        if (!strncmp(nl[i]->d_name, "rewound-", 8)) {
            char sub[2400];
            snprintf(sub, sizeof(sub), "%s/%s", dir, nl[i]->d_name);
            EXPECT(mt_tfevents_match(sub, &files, &scalars, err, sizeof(err)), "%s", err);
            printf("%s: %d event files, %d scalars = metrics.jsonl's numbers\n", sub, files,
                   scalars);
            rewound++;
        }
        free(nl[i]);
    }
    free(nl);
    EXPECT(rewound == 1, "%d rewound-* directories, want 1", rewound);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_tboard_crc", test_crc},
    {"data_tboard_logger", test_logger},
    {"data_tboard_damaged", test_damaged},
    {"data_tboard_match", test_match},
};

MT_TEST_MAIN(cases)
