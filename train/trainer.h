/* trainer.h: the training job behind `minimax-train RECIPE`: recipe -> model shards ->
 * tokenized data -> ZeRO-3 steps -> loss log, checkpoints and HF exports. */
#pragma once

/* The exit code of a run stopped early by SIGUSR1 or SIGTERM, after every rank finished the
 * same step and saved a checkpoint to resume from (EX_TEMPFAIL: try again). */
#define MT_EXIT_STOPPED 75

/* The whole program: parses "[RECIPE] [--set table.key=value]... [--resume DIR | --overwrite]
 * [--eval-only]" (no RECIPE: the recipe of the checkpoint DIR), runs it on every MPI rank,
 * returns the exit code: 0 when every step ran (or the evaluation of --eval-only),
 * MT_EXIT_STOPPED after a stop signal, else an error. */
int mt_train_main(int argc, char **argv);
