/* env.c: see env.h. */
#include "train/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/cli_flags.h"

long long mt_env_int(const char *name, long long lo, long long hi, long long unset) {
    const char *v = getenv(name);
    if (!v || !*v) return unset;
    long long x;
    char err[256];
    if (!mt_flag_int(name, v, lo, hi, &x, err, sizeof(err))) MT_DIE("environment: %s", err);
    return x;
}

bool mt_env_numbers(const char *name, char sep, int n, double lo, double hi, double *out) {
    const char *v = getenv(name);
    if (!v || !*v) return false;
    char buf[256], err[512];
    snprintf(buf, sizeof(buf), "%s", v);
    char *at = buf;
    for (int i = 0; i < n; i++) {
        char *end = i + 1 < n ? strchr(at, sep) : NULL;
        if (i + 1 < n && !end)
            MT_DIE("environment: %s wants %d numbers separated by '%c', got \"%.40s\"", name, n,
                   sep, v);
        if (end) *end = 0;
        if (!mt_flag_double(name, at, lo, false, hi, false, &out[i], err, sizeof(err)))
            MT_DIE("environment: %s", err);
        at = end ? end + 1 : at;
    }
    return true;
}

int mt_env_local_ranks(int all) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
    for (int i = 0; i < 3; i++) {
        const long long v = mt_env_int(vars[i], 1, 1 << 20, 0);
        if (v > 0) return (int)v;
    }
    return all;
}
