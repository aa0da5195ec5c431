/* schedule.h: learning-rate schedules as in HF transformers' get_scheduler:
 * linear warmup from 0 over warmup_steps, then constant, linear decay to 0 at max_steps, or
 * half-cosine decay to 0 at max_steps. step is the 0-based index of the optimizer step. */
#pragma once

typedef enum { MT_LR_CONSTANT, MT_LR_LINEAR, MT_LR_COSINE } mt_lr_kind;

/* Parses "constant" | "linear" | "cosine"; returns -1 for anything else. */
int mt_lr_kind_parse(const char *name);
double mt_lr_at(mt_lr_kind kind, double base_lr, int step, int warmup_steps, int max_steps);
