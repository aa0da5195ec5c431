/* trainer.h: the training job behind `minimax-train RECIPE`: recipe -> model shards ->
 * tokenized data -> ZeRO-3 steps -> loss log, checkpoints and HF exports. */
#pragma once

/* The whole program: parses "RECIPE [--set table.key=value]... [--resume DIR]", runs it on
 * every MPI rank, returns the exit code. */
int mt_train_main(int argc, char **argv);
