/* gpu_compare.h: the comparison kit of the GPU parity tests (tests/gpu/gpu_ops.c): inputs made
 * once on the host, an op built on the CPU backend and on the device backend from them, and
 * the fp32 and bf16 rules of gpu_ops.c's header applied to outputs, saved buffers and
 * gradients. dev_be is the backend under test (the CPU itself in op_gpu_harness). */
#pragma once
#include "tests/support/harness.h"

#define GPU_TOL   1e-5
#define GPU_ARENA ((size_t)16 << 20)

extern const mt_backend *dev_be;
extern void *poison; /* GPU_ARENA bytes of 0xff: NaN as f32, the device arena's first fill */

/* ---- inputs ---- */

typedef struct {
    bool present; /* false: a NULL input (optional seg) */
    mt_dtype dt;
    int ndim;
    int64_t shape[MT_MAX_DIMS];
    bool grad;
    const char *name;
    void *host; /* numel elements of dt, owned */
} gpu_input;

int64_t gpu_numel(const gpu_input *g);
gpu_input gpu_f32(mt_rng *r, int ndim, const int64_t *shape, float amp, bool grad,
                  const char *name);
gpu_input gpu_i32(int ndim, const int64_t *shape, const int32_t *vals, const char *name);
gpu_input gpu_none(void);
void gpu_inputs_free(gpu_input *ins, int n);

/* ---- comparison ---- */

typedef mt_tensor *(*gpu_build)(mt_ctx *c, mt_tensor **in, void *user, mt_tensor **extra);

typedef struct {
    bool exact_untouched; /* gradient elements the CPU leaves alone must stay bit-identical */
    bool bitwise;         /* every float bit-identical to the CPU's (the same summation order) */
} gpu_opts;
static const gpu_opts plain = {0}, exact = {.exact_untouched = true},
                      bitwise = {.exact_untouched = true, .bitwise = true};

/* Runs build on the CPU backend and on the device backend with the same inputs and compares
 * outputs, saved buffers and input gradients (fp32 rule). */
void gpu_compare(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                 gpu_opts opts);
/* The same in bf16 GEMM mode under the bf16 rule (untouched gradient elements exact). */
void gpu_compare_bf16(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user);
/* The bf16 rule with the untouched check only when opts asks for it: for ops whose every
 * gradient element is written, where the CPU's "untouched" is an exact cancellation (attention:
 * ds = p (dp - delta) = 0 on a row that sees one position) that fp32 sums in another order
 * leave at a rounding-level value. */
void gpu_compare_bf16_opts(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                           gpu_opts opts);

/* MT_GPU_COMPARE_ONLY=<extended regex>: only the comparisons whose label matches run, the
 * others print a line and return (one small shape of a case, for slow runs: compute-sanitizer in
 * launch/gpu-check.sh). gpu_filter_done, after a case: the counts, and a failure when the filter
 * left nothing to run (a pass that checked nothing). */
void gpu_filter_done(void);

/* Two device runs in bf16 mode, before_a() and before_b() called before each, whose outputs,
 * saved buffers and gradients must be bit-identical. */
void gpu_compare_same_bf16(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                           void (*before_a)(void), void (*before_b)(void));

/* Determinism mode (case gpu_determinism): when set, gpu_compare and gpu_compare_bf16* run no
 * CPU reference; they run the device several times on the same inputs (on the emulator under
 * different block and thread schedules) and require bit-identical results. */
extern bool gpu_self_compare;

/* Generation's decode entries (tests/gpu/gpu_decode.c), case decode of tests/gpu/gpu_ops.c. */
int gpu_case_decode(void);
/* Context parallelism's attention (tests/gpu/gpu_cp.c), case cp_attention. */
int gpu_case_cp_attention(void);
/* The fused lm_head + cross-entropy (tests/gpu/gpu_lce.c), case linear_cross_entropy. */
int gpu_case_linear_cross_entropy(void);
/* The MSA ops' case (tests/gpu/gpu_msa.c), case msa of tests/gpu/gpu_ops.c. */
int gpu_case_msa(void);
/* The MoE cases (tests/gpu/gpu_moe.c) and its death test. */
int gpu_case_moe_route(void);
int gpu_case_moe_route_sigmoid(void);
int gpu_case_moe_experts(void);
int gpu_case_moe_experts_oai(void);
int gpu_case_moe_aux(void);
int gpu_case_moe_experts_bf16(void);
int gpu_case_moe_split(void);
int gpu_case_moe_split_bf16(void);
int gpu_moe_bad_id(void);
/* Death tests of the device's MSA argument checks (tests/gpu/gpu_msa.c). */
int gpu_msa_bad_pos(void);
int gpu_msa_bad_idx(void);

/* Selects the device backend (and the poison fill); MT_TEST_SKIP when there is none. */
int gpu_setup(void);
