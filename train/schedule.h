/* schedule.h: learning-rate schedules as in HF transformers' get_scheduler. step is the 0-based
 * index of the optimizer step; the factor multiplies the peak learning rate.
 *   constant            linear warmup from 0 over warmup_steps, then 1 (HF's
 *                       constant_with_warmup; the same as HF's constant without warmup)
 *   linear              warmup, then linear decay to 0 at max_steps
 *   cosine              warmup, then half-cosine decay to 0 at max_steps
 *   cosine_with_min_lr  warmup, then half-cosine decay to min_lr_ratio at max_steps
 *   wsd                 warmup-stable-decay: warmup from min_lr_ratio to 1, 1 until
 *                       max_steps - decay_steps, then half-cosine decay to min_lr_ratio
 *                       (HF's get_wsd_schedule with its default warmup "linear", decay "cosine") */
#pragma once

typedef enum {
    MT_LR_CONSTANT,
    MT_LR_LINEAR,
    MT_LR_COSINE,
    MT_LR_COSINE_MIN_LR,
    MT_LR_WSD
} mt_lr_kind;

typedef struct {
    mt_lr_kind kind;
    double base_lr;
    int warmup_steps, max_steps;
    double min_lr_ratio; /* cosine_with_min_lr, wsd */
    int decay_steps;     /* wsd */
} mt_lr_schedule;

/* Parses a scheduler name (also HF's constant_with_warmup and warmup_stable_decay); returns -1
 * for anything else. */
int mt_lr_kind_parse(const char *name);
/* "constant, linear, cosine, cosine_with_min_lr, wsd" (for error messages). */
const char *mt_lr_kind_list(void);
double mt_lr_at(const mt_lr_schedule *s, int step);

/* Warmup steps: warmup_steps, or with warmup_ratio > 0 ceil(max_steps * warmup_ratio) (HF's
 * TrainingArguments.get_warmup_steps). */
int mt_lr_warmup_steps(int warmup_steps, double warmup_ratio, int max_steps);
/* Optimizer steps of num_train_epochs epochs: ceil(epochs * steps_per_epoch) (HF's Trainer). */
int mt_lr_epoch_steps(double num_train_epochs, long long steps_per_epoch);
