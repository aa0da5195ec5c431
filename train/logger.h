/* logger.h: rank 0's training log: loss.csv (flushed every step), eval.csv (the eval losses),
 * metrics.jsonl (both, one JSON object a line, with timing and memory), a one-line progress
 * display on stderr, and a loss-curve picture (gnuplot) at the end. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "train/tboard.h"

#define MT_LOG_AUX 8 /* the most auxiliary loss columns */

typedef struct {
    FILE *csv;
    FILE *eval_csv; /* NULL: no evaluation */
    FILE *jsonl;    /* metrics.jsonl: every row of both */
    char dir[1024];
    char aux_names[MT_LOG_AUX][32]; /* the model's auxiliary loss terms: a column each */
    int n_aux;
    bool eval_loss; /* eval.csv has eval losses (loss.png draws them) */
    bool gen;       /* eval.csv's generation columns (eval.generate_data) */
    int head;       /* eval.csv's head metric columns: 0 none, 1 accuracy, 2 and margin */
    bool tty;
    double t_start;
    int last_len;
    mt_tboard tb;         /* output.report_to's "tensorboard": metrics.jsonl's numbers as events */
    const char *row_type; /* the metrics.jsonl line being written: its "type", step, time */
    int row_step;
    double row_time;
} mt_logger;

typedef struct {
    int step; /* 1-based optimizer step */
    double loss, lr, grad_norm;
    double aux[MT_LOG_AUX]; /* each auxiliary term as logged, in the columns' order */
    int64_t tokens;         /* labelled tokens in this step's global batch */
    double tokens_per_s, elapsed_s;
    /* metrics.jsonl only: the step's seconds, rank 0's activation arena peak so far and its
     * sharded state plus gather slots (device memory on a device backend) */
    double step_s;
    int64_t arena_peak_bytes, state_bytes;
} mt_log_row;

/* Opens <dir>/loss.csv and <dir>/metrics.jsonl, and <dir>/eval.csv when eval. resume_step > 0
 * keeps the rows of steps <= resume_step of existing logs (rewritten atomically) and appends
 * after them; 0 starts new files. */
/* aux_names (n_aux of them): the model's auxiliary loss terms, a column each after the others,
 * in the model's order; eval.csv with eval (the eval loss) or gen (accuracy by generation, its
 * columns). */
/* head: a head objective's metric columns in eval.csv (0: none; 1: accuracy, count; 2: and
 * margin), after the eval loss's (a head model does not generate). */
void mt_logger_open(mt_logger *lg, const char *dir, const char *const *aux_names, int n_aux,
                    bool eval, bool gen, int head, int resume_step);
/* An evaluation alone (minimax-train --eval-only): new <dir>/eval.csv and metrics.jsonl. */
void mt_logger_open_eval(mt_logger *lg, const char *dir, bool gen, int head);
/* After an open: every number of metrics.jsonl also goes to a TensorBoard event file in dir, as
 * the scalar "<type>/<key>" ("train/loss", "eval/eval_loss", "eval/accuracy") at the line's
 * step and time, flushed with the line; resume_step as mt_logger_open's (train/tboard.h). */
void mt_logger_tensorboard(mt_logger *lg, int resume_step);
void mt_logger_row(mt_logger *lg, const mt_log_row *row, int max_steps);
/* One evaluation: the eval loss and/or the accuracy by generation after a step. */
typedef struct {
    int step;
    bool has_loss;
    double loss;
    int64_t tokens; /* the held-out labelled tokens */
    double seconds;
    bool has_gen;
    int64_t correct, samples;
    double gen_seconds;
    /* a head model's metrics over the eval set, sums: correct rows (pairs), the summed margin
     * of reward pairs, their count (columns accuracy = correct / count, count, margin = the
     * mean margin) */
    double head_correct, head_margin, head_count;
} mt_eval_row;
/* One row of eval.csv: step, eval_loss, tokens, seconds, and with the generation columns
 * accuracy, correct, samples, gen_seconds (the cells of what was not measured empty), or with
 * the head columns accuracy, count (and margin); and its line of metrics.jsonl (the keys of
 * what was measured). */
void mt_logger_eval_row(mt_logger *lg, const mt_eval_row *r);
/* Closes the files and, after training, renders <dir>/loss.png with gnuplot (a warning if
 * gnuplot is missing). */
void mt_logger_close(mt_logger *lg);
double mt_time_now(void);
