/* schedule.c: see schedule.h (same formulas as transformers.optimization's lambdas). */
#include "schedule.h"

#include <math.h>
#include <string.h>

int mt_lr_kind_parse(const char *name) {
    if (!strcmp(name, "constant")) return MT_LR_CONSTANT;
    if (!strcmp(name, "linear")) return MT_LR_LINEAR;
    if (!strcmp(name, "cosine")) return MT_LR_COSINE;
    return -1;
}

double mt_lr_at(mt_lr_kind kind, double base_lr, int step, int warmup_steps, int max_steps) {
    if (step < warmup_steps)
        return base_lr * (double)step / (double)(warmup_steps > 1 ? warmup_steps : 1);
    if (kind == MT_LR_CONSTANT) return base_lr;
    double span = (double)(max_steps - warmup_steps > 1 ? max_steps - warmup_steps : 1);
    double progress = (double)(step - warmup_steps) / span;
    if (kind == MT_LR_LINEAR) return base_lr * fmax(0.0, 1.0 - progress);
    return base_lr * fmax(0.0, 0.5 * (1.0 + cos(M_PI * progress)));
}
