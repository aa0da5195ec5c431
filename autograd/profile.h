/* profile.h: the op-level profile of a training step (MT_PROFILE=1, minimax-train --profile;
 * docs/training.md "Op profile"). While ctx->prof is set, the tape times every kernel call it
 * dispatches (be->ops[op].fwd / .bwd) with a monotonic clock and adds, per op and direction, the
 * call, its seconds, and the FLOPs and bytes that the call's tensor shapes give
 * (mt_profile_cost: one formula per op, documented in profile.c). Other work a caller brackets
 * itself (the optimizer's vector kernels, the ZeRO gathers and reduce-scatters) goes into named
 * rows (mt_profile_add). With ctx->prof NULL (the default) the tape pays one test per kernel.
 * On a device backend each timed kernel is bracketed by be->sync(), so the seconds are the
 * kernel's own and not its launch (the stream then runs without overlap while profiling). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

/* One row of the profile: calls, seconds, FLOPs and bytes summed over the calls; upper: some
 * call's FLOPs or bytes were an upper bound (data-dependent work counted dense). */
typedef struct {
    int64_t calls;
    double sec, flops, bytes;
    bool upper;
} mt_profile_stat;

#define MT_PROFILE_MAX_EXTRA 16
/* the column of a named row: work of the forward, of the backward, or of the step around them
 * (the optimizer) */
enum { MT_PROFILE_FWD = 0, MT_PROFILE_BWD = 1, MT_PROFILE_STEP = 2 };

typedef struct mt_profile {
    mt_profile_stat op[MT_OP_COUNT][2]; /* [op][0: forward, 1: backward] */
    int n_extra;
    const char *extra_name[MT_PROFILE_MAX_EXTRA]; /* static strings */
    int extra_dir[MT_PROFILE_MAX_EXTRA];          /* MT_PROFILE_FWD, _BWD or _STEP */
    mt_profile_stat extra[MT_PROFILE_MAX_EXTRA];
    int steps;       /* steps summed (the caller counts them) */
    double step_sec; /* their wall time */
} mt_profile;

/* Seconds of a monotonic clock (CLOCK_MONOTONIC). */
double mt_profile_now(void);

/* The FLOPs and bytes of one kernel call of node n (forward or backward), from its tensors'
 * shapes (and, where the op reports it, what the call did); *upper set when they are an upper
 * bound. Bytes count each tensor the kernel must read or write once (a gradient that is
 * accumulated into: read and written), so they are the least traffic the call can have. */
void mt_profile_cost(const mt_node *n, bool backward, double *flops, double *bytes, bool *upper);

/* Runs the kernel of node n (forward or backward) timed, and adds it to c->prof. */
void mt_profile_kernel(mt_ctx *c, const mt_node *n, bool backward);

/* Adds a call of named work (name: a static string; dir: MT_PROFILE_FWD, _BWD or _STEP) to p. */
void mt_profile_add(mt_profile *p, const char *name, int dir, double sec, double flops,
                    double bytes);
