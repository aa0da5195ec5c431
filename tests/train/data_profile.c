/* data_profile.c: the op profile's table file (train/profile_report.h): profile.tsv of a profile
 * with known rows read back: its header, ten tab-separated fields on every line, rows longest
 * first, per-step values (seconds / steps), shares of the step, the "(untimed)" rest and the
 * "(step)" row; written through a temporary file that does not stay; a write into a directory
 * that does not exist refused naming the file. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"
#include "tests/support/harness.h"
#include "train/output_dir.h"
#include "train/profile_report.h"

static int split_tabs(char *line, char **f, int max) {
    int n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    return n;
}

static int test_data_profile_tsv(void) {
    const char *tmpdir = getenv("MT_TEST_TMPDIR");
    if (!tmpdir) return MT_TEST_SKIP;
    char path[1024], tmp[1100];
    snprintf(path, sizeof(path), "%s/data_profile_tsv", tmpdir);
    char err[1400];
    EXPECT(mt_dir_make(path, err, sizeof(err)), "%s", err);
    snprintf(path, sizeof(path), "%s/data_profile_tsv/profile.tsv", tmpdir);
    mt_profile p;
    memset(&p, 0, sizeof(p));
    p.steps = 4;
    p.step_sec = 2.0; /* 500 ms a step */
    p.op[MT_OP_MATMUL][0] = (mt_profile_stat){8, 0.4, 4e9, 1e9, false};
    p.op[MT_OP_MATMUL][1] = (mt_profile_stat){8, 0.8, 8e9, 2e9, false};
    p.op[MT_OP_ATTENTION][0] = (mt_profile_stat){4, 0.2, 1e9, 2e8, true};
    mt_profile_add(&p, "optim_adamw", MT_PROFILE_STEP, 0.1, 1.2e8, 2.8e8);
    EXPECT(mt_profile_write_tsv(path, &p, err, sizeof(err)), "write: %s", err);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    EXPECT(access(tmp, F_OK) != 0, "%s stayed behind", tmp);
    size_t len = 0;
    char *text = mt_file_read(path, &len, err);
    EXPECT(text, "read back: %s", err);
    if (!text) return MT_TEST_OK;
    /* expected rows, longest first: op, dir, calls/step, ms/step, share */
    const char *want[][5] = {
        {"matmul", "bwd", "2", "200", "0.4"},   {"matmul", "fwd", "2", "100", "0.2"},
        {"attention", "fwd", "1", "50", "0.1"}, {"optim_adamw", "step", "0.25", "25", "0.05"},
        {"(untimed)", "-", "0", "125", "0.25"}, {"(step)", "-", "4", "500", "1"}};
    int line_no = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), line_no++) {
        char *f[12];
        const int n = split_tabs(line, f, 12);
        EXPECT(n == 10, "line %d: %d fields (want 10)", line_no + 1, n);
        if (n != 10) continue;
        if (line_no == 0) {
            EXPECT(!strcmp(f[0], "op") && !strcmp(f[3], "ms_per_step") && !strcmp(f[7], "gflops") &&
                       !strcmp(f[9], "upper_bound"),
                   "header: %s %s %s %s", f[0], f[3], f[7], f[9]);
            continue;
        }
        if (line_no > 6) {
            EXPECT(false, "line %d: more rows than written", line_no + 1);
            continue;
        }
        const char **w = want[line_no - 1];
        EXPECT(!strcmp(f[0], w[0]) && !strcmp(f[1], w[1]), "row %d: %s %s (want %s %s)", line_no,
               f[0], f[1], w[0], w[1]);
        for (int k = 2; k < 5; k++)
            EXPECT(atof(f[k]) > atof(w[k]) - 1e-9 && atof(f[k]) < atof(w[k]) + 1e-9,
                   "row %d (%s %s) field %d: %s (want %s)", line_no, w[0], w[1], k + 1, f[k], w[k]);
        if (line_no == 1) /* matmul bwd: 8e9 FLOPs in 0.8 s = 10 GFLOP/s; 2e9 B = 2.5 GB/s */
            EXPECT(atof(f[7]) == 10 && atof(f[8]) == 2.5 && atof(f[5]) == 2 && !strcmp(f[9], "0"),
                   "matmul bwd rates: %s GFLOP/s %s GB/s %s GFLOP/step", f[7], f[8], f[5]);
        if (line_no == 3) EXPECT(!strcmp(f[9], "1"), "attention's upper bound flag: %s", f[9]);
    }
    EXPECT(line_no == 7, "%d lines (want a header and 6 rows)", line_no);
    free(text);
    /* a directory that is not there: refused naming the file */
    snprintf(path, sizeof(path), "%s/data_profile_tsv/missing/profile.tsv", tmpdir);
    err[0] = 0;
    EXPECT(!mt_profile_write_tsv(path, &p, err, sizeof(err)) && strstr(err, "missing/profile.tsv"),
           "a write into a missing directory: \"%s\"", err);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"data_profile_tsv", test_data_profile_tsv}};
MT_TEST_MAIN(cases)
