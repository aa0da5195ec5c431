/* schedule.c: see schedule.h (same formulas as transformers.optimization's lambdas). */
#include "schedule.h"

#include <math.h>
#include <string.h>

static const char *const kind_names[] = {"constant", "linear", "cosine", "cosine_with_min_lr",
                                         "wsd"};

int mt_lr_kind_parse(const char *name) {
    for (int k = 0; k < (int)(sizeof(kind_names) / sizeof(kind_names[0])); k++)
        if (!strcmp(name, kind_names[k])) return k;
    /* HF's names of the same schedules */
    if (!strcmp(name, "constant_with_warmup")) return MT_LR_CONSTANT;
    if (!strcmp(name, "warmup_stable_decay")) return MT_LR_WSD;
    return -1;
}

const char *mt_lr_kind_list(void) { return "constant, linear, cosine, cosine_with_min_lr, wsd"; }

/* 0.5 * (1 + cos(pi * progress)): HF's half cosine (num_cycles = 0.5) */
static double half_cosine(double progress) { return 0.5 * (1.0 + cos(M_PI * progress)); }

double mt_lr_at(const mt_lr_schedule *s, int step) {
    const int warmup = s->warmup_steps, total = s->max_steps;
    const double lo = s->min_lr_ratio, warm = (double)(warmup > 1 ? warmup : 1);
    if (s->kind == MT_LR_WSD) {
        const int stable = total - warmup - s->decay_steps;
        if (step < warmup) return s->base_lr * fmax(0.0, (double)step / warm * (1.0 - lo) + lo);
        if (step < warmup + stable) return s->base_lr;
        if (step < total) {
            const double p = (double)(step - warmup - stable) /
                             (double)(s->decay_steps > 1 ? s->decay_steps : 1);
            return s->base_lr * fmax(0.0, half_cosine(p) * (1.0 - lo) + lo);
        }
        return s->base_lr * lo;
    }
    if (step < warmup) return s->base_lr * (double)step / warm;
    if (s->kind == MT_LR_CONSTANT) return s->base_lr;
    double span = (double)(total - warmup > 1 ? total - warmup : 1);
    double progress = (double)(step - warmup) / span;
    if (s->kind == MT_LR_LINEAR) return s->base_lr * fmax(0.0, (double)(total - step) / span);
    if (s->kind == MT_LR_COSINE) return s->base_lr * fmax(0.0, half_cosine(progress));
    return s->base_lr * fmax(0.0, half_cosine(progress) * (1.0 - lo) + lo);
}

int mt_lr_warmup_steps(int warmup_steps, double warmup_ratio, int max_steps) {
    return warmup_ratio > 0 ? (int)ceil((double)max_steps * warmup_ratio) : warmup_steps;
}

int mt_lr_epoch_steps(double num_train_epochs, long long steps_per_epoch) {
    return (int)ceil(num_train_epochs * (double)steps_per_epoch);
}
