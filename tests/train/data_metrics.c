/* data_metrics.c: <output.dir>/metrics.jsonl of the run tests/train/run_resume.sh's metrics mode
 * left in $MT_TEST_TMPDIR/metrics (4 steps with an eval every 2, resumed from its step-2
 * checkpoint in the same directory): one JSON object a line, a train line per loss.csv row and an
 * eval line per eval.csv row, in step order, whose values printed as the CSV prints them are its
 * cells, with the timing and memory keys. */
#include "tests/support/harness.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"

enum { MAX_ROWS = 64 };

/* The data rows of <dir>/name (the header skipped, newlines cut), at most MAX_ROWS. */
static int read_rows(const char *dir, const char *name, char rows[][1024]) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    MT_CHECK(f, "cannot read %s", path);
    int n = 0;
    for (bool header = true; fgets(line, sizeof(line), f); header = false) {
        line[strcspn(line, "\n")] = 0;
        if (!header && n < MAX_ROWS) memcpy(rows[n++], line, sizeof(line));
    }
    fclose(f);
    return n;
}

static double num(const cJSON *o, const char *key, int lineno) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    EXPECT(cJSON_IsNumber(v), "metrics.jsonl:%d: no number \"%s\"", lineno, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static int test_metrics_match(void) {
    const char *t = getenv("MT_TEST_TMPDIR");
    char dir[2048], path[2100], err[512];
    snprintf(dir, sizeof(dir), "%s/metrics", t ? t : "/tmp");
    char loss[MAX_ROWS][1024], eval[MAX_ROWS][1024];
    const int n_loss = read_rows(dir, "loss.csv", loss), n_eval = read_rows(dir, "eval.csv", eval);
    EXPECT(n_loss == 4 && n_eval == 2, "loss.csv %d rows, eval.csv %d (want 4 and 2)", n_loss,
           n_eval);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    char *text = mt_file_read(path, NULL, err);
    MT_CHECK(text, "%s", err);
    int n_train = 0, n_ev = 0, lineno = 0, last_step = -1;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        const char *end = NULL;
        cJSON *o = cJSON_ParseWithOpts(line, &end, true);
        EXPECT(cJSON_IsObject(o), "metrics.jsonl:%d: not one JSON object: %s", lineno, line);
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            continue;
        }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
        const int step = (int)num(o, "step", lineno);
        EXPECT(step >= last_step, "metrics.jsonl:%d: step %d after step %d", lineno, step,
               last_step);
        last_step = step;
        EXPECT(num(o, "time", lineno) > 1.6e9, "metrics.jsonl:%d: time is not Unix seconds",
               lineno);
        char csv[512];
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "train")) {
            snprintf(csv, sizeof(csv), "%d,%.6f,%.6g,%.6f,%lld,%.1f,%.3f", step,
                     num(o, "loss", lineno), num(o, "lr", lineno), num(o, "grad_norm", lineno),
                     (long long)num(o, "tokens", lineno), num(o, "tokens_per_s", lineno),
                     num(o, "elapsed_s", lineno));
            EXPECT(n_train < n_loss && !strcmp(csv, loss[n_train]),
                   "metrics.jsonl:%d: train line %d reads as CSV \"%s\", loss.csv has \"%s\"",
                   lineno, n_train + 1, csv, n_train < n_loss ? loss[n_train] : "(no row)");
            EXPECT(num(o, "step_s", lineno) > 0 && num(o, "arena_peak_mib", lineno) > 0 &&
                       num(o, "state_mib", lineno) > 0 && num(o, "host_peak_rss_mib", lineno) > 0,
                   "metrics.jsonl:%d: timing and memory must be > 0", lineno);
            n_train++;
        } else if (cJSON_IsString(type) && !strcmp(type->valuestring, "eval")) {
            snprintf(csv, sizeof(csv), "%d,%.6f,%lld,%.3f", step, num(o, "eval_loss", lineno),
                     (long long)num(o, "tokens", lineno), num(o, "seconds", lineno));
            EXPECT(n_ev < n_eval && !strcmp(csv, eval[n_ev]),
                   "metrics.jsonl:%d: eval line %d reads as CSV \"%s\", eval.csv has \"%s\"",
                   lineno, n_ev + 1, csv, n_ev < n_eval ? eval[n_ev] : "(no row)");
            n_ev++;
        } else {
            EXPECT(false, "metrics.jsonl:%d: \"type\" is neither \"train\" nor \"eval\"", lineno);
        }
        cJSON_Delete(o);
    }
    free(text);
    EXPECT(n_train == n_loss && n_ev == n_eval,
           "metrics.jsonl: %d train and %d eval lines for %d loss.csv and %d eval.csv rows",
           n_train, n_ev, n_loss, n_eval);
    printf("metrics.jsonl: %d lines, %d train and %d eval, as loss.csv and eval.csv\n", lineno,
           n_train, n_ev);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_logger_metrics_match", test_metrics_match},
};

MT_TEST_MAIN(cases)
