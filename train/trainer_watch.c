/* trainer_watch.c: the watchdog's limit (dist.timeout): explicit, or by default following the
 * slowest step and the slowest checkpoint so far (docs/training.md, "Failure"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/env.h"
#include "train/trainer_internal.h"

/* dist.timeout < 0, the default: a collective may wait 20 times the slowest step so far, at
 * least 300 s; checkpoints have their own measure (20 times the slowest save). Before the first
 * step or save is timed (loading, the first step, the first save), 1800 s. An explicit
 * dist.timeout keeps its meaning. MT_TEST_WATCHDOG = "FLOOR FACTOR" sets other constants for
 * the tests (a stopped rank then ends a job of tiny steps in seconds, sanitizers or not). */
void trainer_watch_init(trainer_watchdog *w, double timeout) {
    w->timeout = timeout;
    w->floor = 300.0, w->factor = 20.0;
    double floor_factor[2];
    if (mt_env_numbers("MT_TEST_WATCHDOG", ' ', 2, 1e-3, 1e9, floor_factor))
        w->floor = floor_factor[0], w->factor = floor_factor[1];
}

static double trainer_watch_limit(const trainer_watchdog *w, double slowest) {
    return slowest > 0 ? fmax(w->floor, w->factor * slowest) : TRAINER_WATCH_UNTIMED_S;
}

double trainer_watch_silence(const trainer_watchdog *w) {
    return w->timeout >= 0 ? w->timeout : w->floor;
}

void trainer_watch_start(const trainer_watchdog *w, const trainer_device *d) {
    if (w->timeout >= 0)
        mt_comm_mpi_watch(d->host, w->timeout);
    else
        trainer_watch_arm(w, d, false);
}

void trainer_watch_arm(const trainer_watchdog *w, const trainer_device *d, bool save) {
    if (w->timeout >= 0) return; /* explicit: set once at the start */
    const double slowest = save ? w->slowest_save : w->slowest_step;
    const char *what = save ? "checkpoint" : "step";
    char label[192];
    if (slowest > 0)
        snprintf(label, sizeof(label),
                 "dist.timeout automatic: %g x the slowest %s so far, %.2f s, at least %g s",
                 w->factor, what, slowest, w->floor);
    else
        snprintf(label, sizeof(label), "dist.timeout automatic: %g s until a %s is timed",
                 TRAINER_WATCH_UNTIMED_S, what);
    const double limit = trainer_watch_limit(w, slowest);
    mt_comm_mpi_watch_label(d->host, limit, label);
    mt_comm_nccl_watch(d->comm, limit, label); /* the device collectives' watchdog, if any */
}

void trainer_watch_timed(trainer_watchdog *w, const trainer_device *d, bool save, double dt) {
    double *slowest = save ? &w->slowest_save : &w->slowest_step;
    const bool first = *slowest == 0;
    if (dt > *slowest) *slowest = dt;
    if (w->timeout >= 0) return;
    if (first)
        LOG0(d->comm,
             "watchdog (dist.timeout automatic): a collective may wait %.0f s in the %ss (%g x "
             "the slowest so far, at least %g s)\n",
             trainer_watch_limit(w, *slowest), save ? "checkpoint" : "step", w->factor, w->floor);
    trainer_watch_arm(w, d, false);
}
