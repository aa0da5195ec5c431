/* trainer_eval.c: the eval loss (the held-out samples forward only, through the shards; the
 * loop asks for it every train.eval_steps and after the last step, train/trainer_run.c), and
 * `minimax-train RECIPE --eval-only`: the eval loss and the accuracy by generation
 * (train/trainer_generate.c) of the model the recipe builds, once, without training
 * (docs/training.md, "Evaluation"). */
#include <stdio.h>

#include "train/trainer_internal.h"

void trainer_eval_loss(mt_eval_row *row, mt_comm *comm, mt_sharded *sh, trainer_data *data,
                       trainer_batch *b) {
    const double t0 = mt_time_now();
    mt_sampler *s = &data->eval_sampler;
    mt_sampler_set_cursor(s, (mt_sampler_cursor){0, 0});
    double sums[4] = {0}; /* the loss, then a head model's metrics: correct, margin, count */
    mt_head_stats head = {0};
    for (int64_t st = mt_sampler_steps_per_epoch(s); st > 0; st--) {
        const int64_t n_micro = mt_sampler_next(s);
        for (int64_t m = 0; m < n_micro; m++) {
            trainer_micro mt;
            mt_minimax_batch batch = trainer_batch_upload(b, s, m, data->eval_targets, &mt);
            sums[0] += mt_sharded_micro_eval(sh, &batch, &head);
        }
    }
    sums[1] = head.correct, sums[2] = head.margin, sums[3] = head.count;
    comm->allreduce_f64(comm, sums, 4);
    row->has_loss = true;
    row->loss = sums[0];
    row->head_correct = sums[1], row->head_margin = sums[2], row->head_count = sums[3];
    row->tokens = data->eval_targets;
    row->seconds = mt_time_now() - t0;
}

void trainer_eval_only(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                       trainer_data *data, trainer_batch *b, trainer_gen *g,
                       const trainer_watchdog *w, mt_logger *log) {
    /* the recipe was checked for an eval set; the data may still leave none (an empty file) */
    MT_CHECK(data->evaluates || g->generates, "--eval-only: the eval set is empty");
    if (d->comm->rank == 0) {
        mt_logger_open_eval(log, rc->output_dir, g->generates, trainer_head_columns(data));
        if (mt_recipe_reports_to(rc, "tensorboard")) mt_logger_tensorboard(log, 0);
    }
    mt_eval_row row = {.step = 0};
    if (data->evaluates) trainer_eval_loss(&row, d->comm, &m->sharded, data, b);
    if (g->generates) trainer_generate(rc, d, m, g, w, 0, &row);
    if (d->comm->rank == 0) {
        mt_logger_eval_row(log, &row);
        mt_logger_close(log);
    }
    if (data->evaluates)
        LOG0(d->comm, "eval-only: loss %.17g over %lld %s of %s (%.1f s); %s/eval.csv\n", row.loss,
             (long long)data->eval_targets,
             b->objective == MT_OBJECTIVE_SFT ? "labelled eval tokens" : "eval loss terms",
             rc->model_path[0] ? rc->model_path : "the random initialisation of model.config",
             row.seconds, rc->output_dir);
}
