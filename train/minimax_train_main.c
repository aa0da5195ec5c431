/* minimax_train_main.c: `mpirun -np N minimax-train RECIPE.toml [--set k=v]... [--resume DIR]` */
#include "train/trainer.h"

int main(int argc, char **argv) { return mt_train_main(argc, argv); }
