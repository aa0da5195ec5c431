/* trainer_step.c: one optimizer step: the step's micro-batches forward and backward through the
 * ZeRO-3 shards (gather bucket by bucket, re-gather, reduce-scatter the gradients), the global
 * grad norm, clipping, AdamW on the owned shard, or a skip (or stop) on a non-finite loss or
 * gradient, with the diagnosis of where it came from (train/nonfinite.h). */
#include <math.h>

#include "train/nonfinite.h"
#include "train/schedule.h"
#include "train/trainer_internal.h"

/* Real tokens (prompt and answer, no padding) of this rank's rows in the sampler's current
 * step. */
static int64_t trainer_step_tokens(const mt_sampler *s) {
    int64_t n = 0;
    for (int64_t k = 0; k < s->row_first[s->n_rows]; k++) {
        int64_t i = s->row_items[k];
        n += s->data->offsets[i + 1] - s->data->offsets[i];
    }
    return n;
}

/* The step's micro-batch m again, for the non-finite diagnosis (train/nonfinite.h). */
typedef struct {
    trainer_batch *b;
    const mt_sampler *s;
    int64_t targets;
    trainer_micro mt;
} diag_batches;
static mt_minimax_batch trainer_step_diag_batch(void *user, int64_t m) {
    diag_batches *d = user;
    return trainer_batch_upload(d->b, d->s, m, d->targets, &d->mt);
}

/* The router jitter's seed of micro-batch k of a step on this rank (models/minimax.h,
 * mt_minimax_batch.jitter): a function of (train.seed, step, rank, k) only, so a resumed run
 * draws what the uninterrupted one drew and nothing needs saving. */
static uint64_t step_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t step_jitter_seed(uint64_t seed, int step, int rank, int64_t k) {
    return step_mix(step_mix(step_mix(step_mix(seed) ^ (uint64_t)step) ^ (uint64_t)rank) ^
                    (uint64_t)k);
}

step_result trainer_step_run(trainer_model *m, mt_comm *comm, mt_sampler *s, trainer_batch *b,
                             const trainer_step_cfg *sc, int step) {
    step_result res = {0};
    int64_t n_micro = mt_sampler_next(s);
    /* the loss's denominator: labelled tokens, or a head objective's terms (trainer_head.c) */
    res.targets = b->objective != MT_OBJECTIVE_SFT ? trainer_head_step_terms(s) : s->global_targets;

    mt_zero_zero_grad(&m->zero);
    /* loss, tokens, each auxiliary term, then a head's metrics (correct, margin, count) */
    /* the ranks of a context-parallel group share their samples: one of them counts them, and
     * a per-forward term's parts add up over the group (one forward of a whole row) */
    const int C = b->cp_size > 1 ? b->cp_size : 1;
    double sums[2 + MT_AUX_MAX + 3] = {0, b->cp_rank == 0 ? (double)trainer_step_tokens(s) : 0};
    const int n_sums = 2 + m->n_aux + 3;
    double *head = sums + 2 + m->n_aux;
    for (int64_t k = 0; k < n_micro; k++) {
        trainer_micro mt;
        mt_minimax_batch batch = trainer_batch_upload(b, s, k, res.targets, &mt);
        /* a term over the global batch's real tokens (aux_denom): the parts add up */
        batch.aux_denom = (float)(s->global_tokens > 0 ? s->global_tokens : 1);
        batch.jitter = true; /* training: the config's router_jitter_noise, if any */
        batch.jitter_seed = step_jitter_seed(sc->jitter_seed, step, comm->rank, k);
        mt_micro_extra extra = {0};
        sums[0] += mt_sharded_micro_step(&m->sharded, &batch, &extra);
        MT_CHECK(extra.n == m->n_aux, "step %d: the forward gave %d auxiliary terms, not %d", step,
                 extra.n, m->n_aux);
        /* a per-forward term: HF adds coef * term per forward; averaged over this rank's
         * micro-batches and the ranks, so it is weighted like one forward of the global batch */
        for (int a = 0; a < m->n_aux; a++)
            sums[2 + a] += m->aux_terms[a].per_forward
                               ? extra.value[a] / (double)(n_micro * (comm->size / C))
                               : extra.value[a];
        head[0] += extra.head.correct;
        head[1] += extra.head.margin;
        head[2] += extra.head.count;
    }
    comm->allreduce_f64(comm, sums, n_sums);
    res.loss = sums[0];
    res.tokens = (int64_t)sums[1];
    /* logged per what the term sums (its layers): divided by their number */
    for (int a = 0; a < m->n_aux; a++) res.aux[a] = sums[2 + a] / m->aux_terms[a].denominator;
    res.head = (mt_head_stats){.correct = head[0], .margin = head[1], .count = head[2]};
    res.lr = mt_lr_at(&sc->lr, step - 1);
    mt_adamw opt = {.lr = res.lr,
                    .beta1 = sc->beta1,
                    .beta2 = sc->beta2,
                    .eps = sc->eps,
                    .weight_decay = sc->weight_decay,
                    .step = step};
    bool updated = isfinite(res.loss) &&
                   mt_sharded_optimizer_step(&m->sharded, &opt, sc->max_grad_norm, &res.grad_norm);
    if (!updated) {
        char where[1024];
        diag_batches d = {.b = b, .s = s, .targets = res.targets};
        mt_sharded_find_nonfinite(&m->sharded, n_micro, trainer_step_diag_batch, &d, where,
                                  sizeof(where));
        if (!sc->skip_nonfinite)
            MT_DIE("step %d: the %s is not finite (loss %g, grad norm %g); %s; stopping "
                   "(train.skip_nonfinite_steps = true skips such steps)",
                   step, isfinite(res.loss) ? "gradient" : "loss", res.loss, res.grad_norm, where);
        LOG0(comm, "step %d: non-finite loss or gradient, step skipped; %s\n", step, where);
        res.skipped = true;
    }
    return res;
}
