/* env.h: the numbers the trainer reads from its environment (launcher variables, test hooks),
 * parsed as the command line's are (core/cli_flags.h): a value that is set but is not a number
 * in range ends the rank with one line naming the variable, instead of becoming 0 (atoi) and
 * quietly meaning "unset". */
#pragma once
#include <stdbool.h>

/* NAME's integer in [lo, hi]; unset (or empty) gives `unset`. */
long long mt_env_int(const char *name, long long lo, long long hi, long long unset);
/* NAME's n numbers in [lo, hi] separated by sep (e.g. "RANK:STEP", "FLOOR FACTOR") into out;
 * false when unset. */
bool mt_env_numbers(const char *name, char sep, int n, double lo, double hi, double *out);
/* Processes sharing this node's memory: the launcher's local size (Open MPI, MPICH/Intel MPI,
 * Slurm), else all (every rank: one node). */
int mt_env_local_ranks(int all);
