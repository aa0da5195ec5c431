/* trainer_run.h: the training job's parts held together (train/trainer_internal.h), for main
 * (trainer.c) and the loop (trainer_run.c) alone: the functions of the other jobs take the parts
 * they need, never the whole. Not an interface. */
#pragma once
#include "train/profile_report.h"
#include "train/trainer_internal.h"

typedef struct {
    mt_recipe rc;
    trainer_device dev;
    trainer_model m;
    trainer_data data;
    trainer_batch batch;
    trainer_gen gen;
    trainer_out out;
    trainer_watchdog watch;
    trainer_step_cfg step;
    bool profile; /* the op profile of the steps (--profile, MT_PROFILE) */
} trainer;

/* The resume (from the checkpoint dir resume, when set), then the steps with their evals,
 * checkpoints and logs; signals stop it after a step, with a checkpoint. The step a stop signal
 * ended the run with, else 0. */
int trainer_run(trainer *t, const char *resume);
