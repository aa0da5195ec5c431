/* trainer_step.c: one optimizer step (the step's micro-batches forward and backward through
 * the ZeRO-3 shards, the global grad norm, clipping, AdamW), one evaluation (the held-out
 * samples forward only), and the learning-rate schedule the steps follow. */
#include <math.h>

#include "train/nonfinite.h"
#include "train/schedule.h"
#include "train/trainer_internal.h"

/* Real tokens (prompt and answer, no padding) of this rank's rows in the current step. */
static int64_t trainer_step_tokens(const trainer *t) {
    const mt_sampler *s = &t->sampler;
    int64_t n = 0;
    for (int64_t k = 0; k < s->row_first[s->n_rows]; k++) {
        int64_t i = s->row_items[k];
        n += t->data.offsets[i + 1] - t->data.offsets[i];
    }
    return n;
}

/* The tensors of one micro-batch on the backend (t->dev_batch). */
typedef struct {
    mt_tensor ids, labels, pos, seg;
} micro_tensors;

/* Fills micro-batch m of sampler s's current step and uploads it; the batch divides its loss
 * by denom. data.trim_padding: rows cut after the longest one's last token (rounded up to 8). */
static mt_minimax_batch trainer_micro_upload(trainer *t, const mt_sampler *s, int64_t m,
                                             int64_t denom, micro_tensors *mt) {
    const mt_recipe *rc = &t->rc;
    const int64_t B = rc->train_per_device_train_batch_size, T = rc->data_max_length;
    int64_t Tm = T;
    if (rc->data_trim_padding) {
        Tm = (mt_sampler_micro_len(s, m) + 7) / 8 * 8;
        if (Tm < 8) Tm = 8; /* an all-padding micro-batch still runs (collectives) */
        if (Tm > T) Tm = T;
    }
    int32_t *d = t->dev_batch;
    int32_t *host[4] = {t->batch_ids, t->batch_labels, t->batch_pos, t->batch_seg};
    mt_sampler_fill(s, m, Tm, host[0], host[1], host[2], host[3]);
    for (int64_t b = 0; b < B; b++) t->batch_real[b] = mt_sampler_row_len(s, m, b);
    const size_t n = (size_t)(B * Tm);
    for (int a = 0; a < 4; a++) t->be->to_device(d + a * n, host[a], n * sizeof(int32_t));
    mt_tensor_wrap(&mt->ids, MT_I32, 2, (int64_t[]){B, Tm}, d, NULL, "ids");
    mt_tensor_wrap(&mt->labels, MT_I32, 2, (int64_t[]){B, Tm}, d + n, NULL, "labels");
    mt_tensor_wrap(&mt->pos, MT_I32, 2, (int64_t[]){B, Tm}, d + 2 * n, NULL, "positions");
    mt_tensor_wrap(&mt->seg, MT_I32, 2, (int64_t[]){B, Tm}, d + 3 * n, NULL, "segments");
    return (mt_minimax_batch){.ids = &mt->ids,
                              .labels = &mt->labels,
                              .pos = &mt->pos,
                              .seg = &mt->seg,
                              .valid_len = t->batch_real,
                              .loss_denom = (float)(denom > 0 ? denom : 1),
                              .fused_loss = true};
}

/* The step's micro-batch m again, for the non-finite diagnosis (train/nonfinite.h). */
typedef struct {
    trainer *t;
    int64_t targets;
    micro_tensors mt;
} diag_batches;
static mt_minimax_batch trainer_diag_batch(void *user, int64_t m) {
    diag_batches *d = user;
    return trainer_micro_upload(d->t, &d->t->sampler, m, d->targets, &d->mt);
}

step_result trainer_run_step(trainer *t, int step) {
    const mt_recipe *rc = &t->rc;
    step_result res = {0};
    int64_t n_micro = mt_sampler_next(&t->sampler);
    res.targets = t->sampler.global_targets;

    mt_zero_zero_grad(&t->zero);
    /* loss, tokens, then each auxiliary term */
    double sums[2 + MT_AUX_MAX] = {0, (double)trainer_step_tokens(t)};
    const int n_sums = 2 + t->n_aux;
    for (int64_t m = 0; m < n_micro; m++) {
        micro_tensors mt;
        mt_minimax_batch batch = trainer_micro_upload(t, &t->sampler, m, res.targets, &mt);
        /* a term over the global batch's real tokens (aux_denom): the parts add up */
        batch.aux_denom = (float)(t->sampler.global_tokens > 0 ? t->sampler.global_tokens : 1);
        mt_micro_extra extra = {0};
        sums[0] += mt_sharded_micro_step(&t->sharded, &batch, &extra);
        MT_CHECK(extra.n == t->n_aux, "step %d: the forward gave %d auxiliary terms, not %d", step,
                 extra.n, t->n_aux);
        /* a per-forward term: HF adds coef * term per forward; averaged over this rank's
         * micro-batches and the ranks, so it is weighted like one forward of the global batch */
        for (int k = 0; k < t->n_aux; k++)
            sums[2 + k] += t->aux_terms[k].per_forward
                               ? extra.value[k] / (double)(n_micro * t->comm->size)
                               : extra.value[k];
    }
    t->comm->allreduce_f64(t->comm, sums, n_sums);
    res.loss = sums[0];
    res.tokens = (int64_t)sums[1];
    /* logged per what the term sums (its layers): divided by their number */
    for (int k = 0; k < t->n_aux; k++) res.aux[k] = sums[2 + k] / t->aux_terms[k].denominator;
    res.lr = mt_lr_at(&t->lr_schedule, step - 1);
    mt_adamw opt = {.lr = res.lr,
                    .beta1 = rc->train_adam_beta1,
                    .beta2 = rc->train_adam_beta2,
                    .eps = rc->train_adam_epsilon,
                    .weight_decay = rc->train_weight_decay,
                    .step = step};
    bool updated =
        isfinite(res.loss) &&
        mt_sharded_optimizer_step(&t->sharded, &opt, rc->train_max_grad_norm, &res.grad_norm);
    if (!updated) {
        char where[1024];
        diag_batches d = {.t = t, .targets = res.targets};
        mt_sharded_find_nonfinite(&t->sharded, n_micro, trainer_diag_batch, &d, where,
                                  sizeof(where));
        if (!rc->train_skip_nonfinite_steps)
            MT_DIE("step %d: the %s is not finite (loss %g, grad norm %g); %s; stopping "
                   "(train.skip_nonfinite_steps = true skips such steps)",
                   step, isfinite(res.loss) ? "gradient" : "loss", res.loss, res.grad_norm, where);
        LOG0(t, "step %d: non-finite loss or gradient, step skipped; %s\n", step, where);
        res.skipped = true;
    }
    return res;
}

/* ------------------------------------------------------------------------------------------ */
/* evaluation */

double trainer_run_eval(trainer *t) {
    mt_sampler *s = &t->eval_sampler;
    mt_sampler_set_cursor(s, (mt_sampler_cursor){0, 0});
    double sum = 0;
    for (int64_t st = mt_sampler_steps_per_epoch(s); st > 0; st--) {
        const int64_t n_micro = mt_sampler_next(s);
        for (int64_t m = 0; m < n_micro; m++) {
            micro_tensors mt;
            mt_minimax_batch batch = trainer_micro_upload(t, s, m, t->eval_targets, &mt);
            sum += mt_sharded_micro_eval(&t->sharded, &batch);
        }
    }
    t->comm->allreduce_f64(t->comm, &sum, 1);
    return sum;
}

void trainer_setup_schedule(trainer *t) {
    mt_recipe *rc = &t->rc;
    const long long per_epoch = (long long)mt_sampler_steps_per_epoch(&t->sampler);
    if (rc->train_num_train_epochs > 0) {
        rc->train_max_steps = mt_lr_epoch_steps(rc->train_num_train_epochs, per_epoch);
        MT_CHECK(rc->train_max_steps > 0, "train.num_train_epochs = %g gives no step",
                 rc->train_num_train_epochs);
        LOG0(t,
             "train: %g epochs of %lld steps = %d steps (train.num_train_epochs; "
             "train.max_steps not used)\n",
             rc->train_num_train_epochs, per_epoch, rc->train_max_steps);
    }
    const mt_lr_kind kind = (mt_lr_kind)mt_lr_kind_parse(rc->train_lr_scheduler_type);
    const int steps = rc->train_max_steps,
              warmup = mt_lr_warmup_steps(rc->train_warmup_steps, rc->train_warmup_ratio, steps),
              decay = kind == MT_LR_WSD ? (int)ceil(steps * rc->train_wsd_decay_ratio) : 0;
    MT_CHECK(kind != MT_LR_WSD || warmup + decay <= steps,
             "train.lr_scheduler_type wsd: %d warmup + %d decay steps (train.wsd_decay_ratio = "
             "%g) are more than the %d steps",
             warmup, decay, rc->train_wsd_decay_ratio, steps);
    t->lr_schedule = (mt_lr_schedule){.kind = kind,
                                      .base_lr = rc->train_learning_rate,
                                      .warmup_steps = warmup,
                                      .max_steps = steps,
                                      .min_lr_ratio = rc->train_min_lr_ratio,
                                      .decay_steps = decay};
    LOG0(t, "train: %s schedule over %d steps: %d warmup, %d decay (wsd), min_lr_ratio %g\n",
         rc->train_lr_scheduler_type, steps, warmup, decay, rc->train_min_lr_ratio);
}
