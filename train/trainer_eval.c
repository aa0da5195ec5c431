/* trainer_eval.c: the eval loss in a training run (every train.eval_steps and after the last
 * step), the accuracy by generation next to it (eval.generate_*, train/trainer_generate.c), and
 * `minimax-train RECIPE --eval-only` (the same evaluations of the model the recipe builds, once,
 * without training; docs/training.md, "Evaluation"). */
#include <stdio.h>

#include "train/trainer_internal.h"

void trainer_eval(trainer *t, int step, bool loss, bool gen) {
    mt_eval_row row = {.step = step};
    if (loss) {
        const double t0 = mt_time_now();
        row.has_loss = true;
        row.loss = trainer_run_eval(t);
        row.tokens = t->eval_targets;
        row.seconds = mt_time_now() - t0;
        char when[32] = "at the start"; /* step 0: train.eval_on_start */
        if (step > 0) snprintf(when, sizeof(when), "after step %d", step);
        LOG0(t, "eval %s: loss %.6f over %lld labelled eval tokens (%.1f s)\n", when, row.loss,
             (long long)t->eval_targets, row.seconds);
    }
    if (gen) trainer_generate(t, step, &row);
    if (t->comm->rank == 0) mt_logger_eval_row(&t->log, &row);
}

void trainer_eval_only(trainer *t) {
    const mt_recipe *rc = &t->rc;
    /* the recipe was checked for an eval set; the data may still leave none (an empty file) */
    MT_CHECK(t->evaluates || t->generates, "--eval-only: the eval set is empty");
    if (t->comm->rank == 0) mt_logger_open_eval(&t->log, rc->output_dir, t->generates);
    mt_eval_row row = {.step = 0};
    if (t->evaluates) {
        const double t0 = mt_time_now();
        row.has_loss = true;
        row.loss = trainer_run_eval(t);
        row.tokens = t->eval_targets;
        row.seconds = mt_time_now() - t0;
    }
    if (t->generates) trainer_generate(t, 0, &row);
    if (t->comm->rank == 0) {
        mt_logger_eval_row(&t->log, &row);
        mt_logger_close(&t->log);
    }
    if (t->evaluates)
        LOG0(t,
             "eval-only: loss %.17g over %lld labelled eval tokens of %s (%.1f s); %s/eval.csv\n",
             row.loss, (long long)t->eval_targets,
             rc->model_path[0] ? rc->model_path : "the random initialisation of model.config",
             row.seconds, rc->output_dir);
}
