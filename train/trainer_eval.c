/* trainer_eval.c: the eval loss in a training run (every train.eval_steps and after the last
 * step) and `minimax-train RECIPE --eval-only` (the same evaluation of the model the recipe
 * builds, once, without training; docs/training.md, "Evaluation"). */
#include <stdio.h>

#include "train/trainer_internal.h"

void trainer_eval(trainer *t, int step) {
    const double t0 = mt_time_now();
    const double loss = trainer_run_eval(t), dt = mt_time_now() - t0;
    if (t->comm->rank == 0) mt_logger_eval_row(&t->log, step, loss, t->eval_targets, dt);
    char when[32] = "at the start"; /* step 0: train.eval_on_start */
    if (step > 0) snprintf(when, sizeof(when), "after step %d", step);
    LOG0(t, "eval %s: loss %.6f over %lld labelled eval tokens (%.1f s)\n", when, loss,
         (long long)t->eval_targets, dt);
}

void trainer_eval_only(trainer *t) {
    const mt_recipe *rc = &t->rc;
    /* the recipe was checked for an eval set; the data may still leave none (an empty file) */
    MT_CHECK(t->evaluates, "--eval-only: the eval set is empty");
    if (t->comm->rank == 0) mt_logger_open_eval(&t->log, rc->output_dir);
    const double t0 = mt_time_now();
    const double loss = trainer_run_eval(t), dt = mt_time_now() - t0;
    if (t->comm->rank == 0) {
        mt_logger_eval_row(&t->log, 0, loss, t->eval_targets, dt);
        mt_logger_close(&t->log);
    }
    LOG0(t, "eval-only: loss %.17g over %lld labelled eval tokens of %s (%.1f s); %s/eval.csv\n",
         loss, (long long)t->eval_targets,
         rc->model_path[0] ? rc->model_path : "the random initialisation of model.config", dt,
         rc->output_dir);
}
