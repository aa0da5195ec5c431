/* harness.h: the project's small test kit.
 *
 * A test binary lists its cases and hands them to mt_test_main; ctest runs `binary case` once
 * per case (the .cmake files of tests/<room>/). A case returns MT_TEST_OK or MT_TEST_SKIP;
 * failed checks are counted and turn the exit code to 1. Exit 77 is "skipped" for ctest.
 *
 * Tolerance rule (fp32): values compared against an independent reference use
 * |a - ref| <= atol + rtol * |ref| with rtol about 1e-5 (fp32 storage, double accumulation).
 * Finite differences: see mt_gradcheck below; the tolerance is derived per element from fp32
 * rounding and the measured truncation error, never chosen per op. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "autograd/ops.h"

#define MT_TEST_OK   0
#define MT_TEST_SKIP 77

typedef int (*mt_test_fn)(void);
typedef struct {
    const char *name;
    mt_test_fn fn;
} mt_test_case;

int mt_test_main(int argc, char **argv, const mt_test_case *cases, int n_cases);
#define MT_TEST_MAIN(cases)                                                                        \
    int main(int argc, char **argv) {                                                              \
        return mt_test_main(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])));           \
    }

/* Record a failure (printed with file:line) and go on. */
extern int mt_test_failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            mt_test_failures++;                                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* Deterministic random numbers (splitmix64). */
typedef struct {
    uint64_t s;
} mt_rng;
void mt_rng_seed(mt_rng *r, uint64_t seed);
uint64_t mt_rng_u64(mt_rng *r);
float mt_rng_uniform(mt_rng *r); /* [0, 1) */
float mt_rng_normal(mt_rng *r);
void mt_fill_uniform(float *x, int64_t n, float lo, float hi, mt_rng *r);
void mt_fill_normal(float *x, int64_t n, float std, mt_rng *r);

/* Elementwise |a - ref| <= atol + rtol * |ref|; prints max abs/rel diff and the first misses.
 * Returns true when all pass (a failure is also counted). */
bool mt_check_close(const char *label, const float *a, const float *ref, int64_t n, double atol,
                    double rtol);
/* ||a - ref||_2 / ||ref||_2 <= tol. */
bool mt_check_rel_l2(const char *label, const float *a, const float *ref, int64_t n, double tol);

/* Runs fn(arg) in a child process; true when the child exits non-zero and its stderr contains
 * `want` (an error must name the offending tensor, file or line). */
bool mt_expect_death(void (*fn)(void *), void *arg, const char *want);

/* A context on the CPU backend with room for tests (256 MiB arena, 16k nodes). */
void mt_test_ctx_init(mt_ctx *c);

/* A tensor the test owns (malloc'ed, freed by mt_test_free_all at exit of mt_test_main):
 * with_grad adds a zeroed gradient buffer, so it is a leaf that requires a gradient. */
mt_tensor *mt_test_tensor(mt_dtype dt, int ndim, const int64_t *shape, bool with_grad,
                          const char *name);

/* Finite-difference gradient check.
 * build(c, in, user) computes an output from the inputs (through ops.h). The check uses the
 * scalar L = sum(out * r) with fixed random r: the analytic gradient comes from mt_backward
 * seeded with r; the numeric one from central differences of L (accumulated in double) with
 * steps h and 2h. For each checked element of each input that has a gradient:
 *   |analytic - fd_h| <= 8 eps32 ||out * r||_2 / h      (fp32 rounding of the outputs)
 *                      + |fd_h - fd_2h|                 (3x the Richardson truncation estimate)
 *                      + 1e-5 |fd_h|
 * At most max_elems elements per input are checked (all when the input is small), always
 * including the first and the last. Returns true when all pass. */
typedef mt_tensor *(*mt_gradcheck_build)(mt_ctx *c, mt_tensor **in, void *user);
typedef struct {
    double h;      /* step; default 1e-2 for O(1) inputs */
    int max_elems; /* default 48 */
} mt_gradcheck_opts;
bool mt_gradcheck(const char *label, mt_gradcheck_build build, mt_tensor **in, int n_in, void *user,
                  const mt_gradcheck_opts *opts);
/* mt_gradcheck once per subset s of the inputs: only those with masks[s * n_in + i] set require
 * a gradient (kernels skip the products nobody needs; each path must still be right). */
void mt_gradcheck_subsets(const char *const *labels, int n_sets, const int *masks,
                          mt_gradcheck_build build, mt_tensor **in, int n_in, void *user);
