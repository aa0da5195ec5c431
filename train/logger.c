/* logger.c: see logger.h. */
#include "logger.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "train/output_dir.h"

#define CSV_HEADER         "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s"
#define EVAL_CSV_HEADER    "step,eval_loss,tokens,seconds"
#define EVAL_GEN_COLUMNS   ",accuracy,correct,samples,gen_seconds" /* with eval.generate_data */
#define EVAL_HEAD_COLUMNS  ",accuracy,count"                       /* a head objective's */
#define EVAL_MARGIN_COLUMN ",margin"                               /* reward pairs' */

/* eval.csv's header */
static const char *eval_header(bool gen, int head) {
    if (gen) return EVAL_CSV_HEADER EVAL_GEN_COLUMNS;
    if (head == 2) return EVAL_CSV_HEADER EVAL_HEAD_COLUMNS EVAL_MARGIN_COLUMN;
    return head == 1 ? EVAL_CSV_HEADER EVAL_HEAD_COLUMNS : EVAL_CSV_HEADER;
}

/* Every row reaches the file at once; a row that cannot (a full disk) ends the run with the
 * reason rather than leaving the loss curve silently short. */
static void logger_flush(const mt_logger *lg, FILE *f, const char *name) {
    MT_CHECK(fflush(f) == 0 && !ferror(f), "%s/%s: write failed: %s", lg->dir, name,
             strerror(errno));
}

double mt_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Keeps the rows with step <= keep_step of an existing log, under this run's header (a CSV's
 * first line; NULL: none): a resume may add or drop the generation columns (free keys). */
static void logger_truncate(const char *path, int keep_step, const char *header) {
    FILE *in = fopen(path, "r");
    if (!in) return;
    char tmp[1200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    MT_CHECK(out, "cannot write %s", tmp);
    char line[4096];
    bool first = header != NULL;
    if (header) fprintf(out, "%s\n", header);
    while (fgets(line, sizeof(line), in)) {
        if (!first && mt_log_line_step(line) <= keep_step) fputs(line, out);
        first = false;
    }
    fclose(in);
    const bool ok = fclose(out) == 0 && rename(tmp, path) == 0;
    const int e = errno;
    if (!ok) unlink(tmp); /* no temporary file left behind */
    MT_CHECK(ok, "cannot rewrite %s: %s", path, strerror(e));
}

/* Opens <dir>/name for appending after the rows of steps <= resume_step, or anew with header
 * (NULL: none, metrics.jsonl). */
static FILE *logger_csv_open(const mt_logger *lg, const char *name, const char *header,
                             int resume_step) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", lg->dir, name);
    if (resume_step > 0) logger_truncate(path, resume_step, header);
    bool append = resume_step > 0 && access(path, F_OK) == 0;
    FILE *f = fopen(path, append ? "a" : "w");
    MT_CHECK(f, "cannot write %s: %s", path, strerror(errno));
    if (!append && header) {
        fprintf(f, "%s\n", header);
        logger_flush(lg, f, name);
    }
    return f;
}

void mt_logger_open(mt_logger *lg, const char *dir, const char *const *aux_names, int n_aux,
                    bool eval, bool gen, int head, int resume_step) {
    memset(lg, 0, sizeof(*lg));
    snprintf(lg->dir, sizeof(lg->dir), "%s", dir);
    MT_CHECK(n_aux >= 0 && n_aux <= MT_LOG_AUX, "logger: %d auxiliary loss columns, at most %d",
             n_aux, MT_LOG_AUX);
    lg->n_aux = n_aux;
    lg->tty = isatty(STDERR_FILENO);
    lg->t_start = mt_time_now();
    char header[512];
    snprintf(header, sizeof(header), "%s", CSV_HEADER);
    for (int k = 0; k < n_aux; k++) {
        MT_CHECK(strlen(aux_names[k]) < sizeof(lg->aux_names[k]),
                 "logger: auxiliary loss name %s is too long", aux_names[k]);
        snprintf(lg->aux_names[k], sizeof(lg->aux_names[k]), "%s", aux_names[k]);
        snprintf(header + strlen(header), sizeof(header) - strlen(header), ",%s", aux_names[k]);
    }
    lg->csv = logger_csv_open(lg, "loss.csv", header, resume_step);
    lg->eval_loss = eval;
    lg->gen = gen;
    lg->head = gen ? 0 : head;
    if (eval || gen)
        lg->eval_csv = logger_csv_open(lg, "eval.csv", eval_header(gen, head), resume_step);
    lg->jsonl = logger_csv_open(lg, "metrics.jsonl", NULL, resume_step);
}

void mt_logger_open_eval(mt_logger *lg, const char *dir, bool gen, int head) {
    memset(lg, 0, sizeof(*lg));
    snprintf(lg->dir, sizeof(lg->dir), "%s", dir);
    lg->t_start = mt_time_now();
    lg->gen = gen;
    lg->head = gen ? 0 : head;
    lg->eval_csv = logger_csv_open(lg, "eval.csv", eval_header(gen, head), 0);
    lg->jsonl = logger_csv_open(lg, "metrics.jsonl", NULL, 0);
}

void mt_logger_tensorboard(mt_logger *lg, int resume_step) {
    mt_tboard_open(&lg->tb, lg->dir, resume_step);
}

/* The scalar "<type>/<key>" of the line being written, when report_to has "tensorboard". */
static void tboard_value(mt_logger *lg, const char *key, double x) {
    char tag[96];
    snprintf(tag, sizeof(tag), "%s/%s", lg->row_type, key);
    mt_tboard_scalar(&lg->tb, lg->row_step, lg->row_time, tag, x);
}

/* ", "key": value" of metrics.jsonl: every digit of the double (loss.csv rounds them), null
 * for NaN or Inf, which JSON has no number for; and its event. */
static void jsonl_num(mt_logger *lg, const char *key, double x) {
    if (isfinite(x))
        fprintf(lg->jsonl, ", \"%s\": %.17g", key, x);
    else
        fprintf(lg->jsonl, ", \"%s\": null", key);
    tboard_value(lg, key, x);
}

/* An integer of metrics.jsonl, and its event. */
static void jsonl_int(mt_logger *lg, const char *key, long long x) {
    fprintf(lg->jsonl, ", \"%s\": %lld", key, x);
    tboard_value(lg, key, (double)x);
}

/* The start of a metrics.jsonl line: the step first (mt_log_line_step reads it on resume),
 * the kind of row, and the wall-clock time (Unix seconds) for dashboards (the events' time). */
static void jsonl_begin(mt_logger *lg, int step, const char *type) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    lg->row_type = type, lg->row_step = step;
    lg->row_time = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    fprintf(lg->jsonl, "{\"step\": %d, \"type\": \"%s\"", step, type);
    fprintf(lg->jsonl, ", \"time\": %.17g", lg->row_time);
}

static void jsonl_end(mt_logger *lg) {
    fprintf(lg->jsonl, "}\n");
    logger_flush(lg, lg->jsonl, "metrics.jsonl");
    mt_tboard_flush(&lg->tb);
}

void mt_logger_eval_row(mt_logger *lg, const mt_eval_row *r) {
    FILE *f = lg->eval_csv;
    fprintf(f, "%d", r->step);
    if (r->has_loss)
        fprintf(f, ",%.6f,%lld,%.3f", r->loss, (long long)r->tokens, r->seconds);
    else
        fprintf(f, ",,,");
    const double acc = r->samples > 0 ? (double)r->correct / (double)r->samples : 0;
    if (lg->gen && r->has_gen)
        fprintf(f, ",%.6f,%lld,%lld,%.3f", acc, (long long)r->correct, (long long)r->samples,
                r->gen_seconds);
    else if (lg->gen)
        fprintf(f, ",,,,");
    const double n = r->head_count > 0 ? r->head_count : 1;
    if (lg->head && r->has_loss)
        fprintf(f, ",%.6f,%.0f", r->head_correct / n, r->head_count);
    else if (lg->head)
        fprintf(f, ",,");
    if (lg->head == 2) {
        if (r->has_loss)
            fprintf(f, ",%.6f", r->head_margin / n);
        else
            fprintf(f, ",");
    }
    fprintf(f, "\n");
    logger_flush(lg, f, "eval.csv");
    jsonl_begin(lg, r->step, "eval");
    if (r->has_loss) {
        jsonl_num(lg, "eval_loss", r->loss);
        jsonl_int(lg, "tokens", (long long)r->tokens);
        jsonl_num(lg, "seconds", r->seconds);
    }
    if (lg->head && r->has_loss) {
        jsonl_num(lg, "accuracy", r->head_correct / n);
        jsonl_int(lg, "count", (long long)r->head_count);
        if (lg->head == 2) jsonl_num(lg, "margin", r->head_margin / n);
    }
    if (r->has_gen) {
        jsonl_num(lg, "accuracy", acc);
        jsonl_int(lg, "correct", (long long)r->correct);
        jsonl_int(lg, "samples", (long long)r->samples);
        jsonl_num(lg, "gen_seconds", r->gen_seconds);
    }
    jsonl_end(lg);
}

/* The train line of metrics.jsonl: loss.csv's columns, then timing and memory (MiB). */
static void logger_jsonl_row(mt_logger *lg, const mt_log_row *r) {
    jsonl_begin(lg, r->step, "train");
    jsonl_num(lg, "loss", r->loss);
    jsonl_num(lg, "lr", r->lr);
    jsonl_num(lg, "grad_norm", r->grad_norm);
    jsonl_int(lg, "tokens", (long long)r->tokens);
    jsonl_num(lg, "tokens_per_s", r->tokens_per_s);
    jsonl_num(lg, "elapsed_s", r->elapsed_s);
    for (int k = 0; k < lg->n_aux; k++) jsonl_num(lg, lg->aux_names[k], r->aux[k]);
    jsonl_num(lg, "step_s", r->step_s);
    const double mib = 1.0 / (1 << 20);
    jsonl_num(lg, "arena_peak_mib", (double)r->arena_peak_bytes * mib);
    jsonl_num(lg, "state_mib", (double)r->state_bytes * mib);
    struct rusage ru; /* ru_maxrss: KiB on Linux */
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        jsonl_num(lg, "host_peak_rss_mib", (double)ru.ru_maxrss / 1024);
    jsonl_end(lg);
}

static void format_duration(double s, char *buf, size_t len) {
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%dh%02dm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, len, "%dm%02ds", t / 60, t % 60);
}

void mt_logger_row(mt_logger *lg, const mt_log_row *r, int max_steps) {
    fprintf(lg->csv, "%d,%.6f,%.6g,%.6f,%lld,%.1f,%.3f", r->step, r->loss, r->lr, r->grad_norm,
            (long long)r->tokens, r->tokens_per_s, r->elapsed_s);
    for (int k = 0; k < lg->n_aux; k++) fprintf(lg->csv, ",%.6f", r->aux[k]);
    fprintf(lg->csv, "\n");
    logger_flush(lg, lg->csv, "loss.csv");
    logger_jsonl_row(lg, r);
    char eta[32];
    double per_step = r->elapsed_s / (r->step > 0 ? r->step : 1);
    format_duration(per_step * (max_steps - r->step), eta, sizeof(eta));
    char line[256];
    int n = snprintf(line, sizeof(line), "step %d/%d  loss %.4f  lr %.3g  tok/s %.0f  ETA %s",
                     r->step, max_steps, r->loss, r->lr, r->tokens_per_s, eta);
    if (lg->tty) {
        /* overwrite the previous line; pad if it was longer */
        fprintf(stderr, "\r%s%*s", line, lg->last_len > n ? lg->last_len - n : 0, "");
        if (r->step == max_steps) fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s\n", line);
    }
    lg->last_len = n;
    fflush(stderr);
}

void mt_logger_close(mt_logger *lg) {
    if (!lg->jsonl) return;
    const bool eval = lg->eval_csv != NULL && lg->eval_loss, train = lg->csv != NULL;
    if (train) fclose(lg->csv);
    lg->csv = NULL;
    if (lg->eval_csv) fclose(lg->eval_csv);
    lg->eval_csv = NULL;
    fclose(lg->jsonl);
    lg->jsonl = NULL;
    mt_tboard_close(&lg->tb);
    if (lg->tty && lg->last_len) fputc('\n', stderr);
    if (!train) return; /* an eval alone: no curve */
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && gnuplot -e \""
             "set terminal png size 900,540; set output 'loss.png.tmp'; set datafile separator "
             "','; set key autotitle columnhead; set xlabel 'step'; set ylabel 'loss'; "
             "set grid; plot 'loss.csv' using 1:2 with lines lw 2 title 'training loss'%s\" "
             "2>/dev/null && mv loss.png.tmp loss.png || { rm -f loss.png.tmp; false; }",
             lg->dir,
             eval ? ", 'eval.csv' using 1:2 with linespoints lw 2 pt 7 title 'eval loss'" : "");
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not draw %s/loss.png (is gnuplot installed?)\n", lg->dir);
}
