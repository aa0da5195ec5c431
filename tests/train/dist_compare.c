/* dist_compare.c: compares the outputs of the end-to-end runs of tests/train/run_*.sh:
 * loss.csv rows and the exported fp32 parameters of two run directories. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/safetensors.h"

#define MAX_STEPS 64

static const char *tmp_dir(void) {
    const char *t = getenv("MT_TEST_TMPDIR");
    return t ? t : "/tmp";
}

/* losses[step] (and grad_norm[step] when not NULL) from <dir>/loss.csv; returns the rows. */
static int read_losses(const char *dir, double *loss, double *grad_norm) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s/loss.csv", tmp_dir(), dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        EXPECT(false, "cannot read %s", path);
        return 0;
    }
    int rows = 0;
    while (fgets(line, sizeof(line), f)) {
        int step;
        double l, lr, gn;
        if (sscanf(line, "%d,%lf,%lf,%lf", &step, &l, &lr, &gn) == 4 && step > 0 &&
            step < MAX_STEPS) {
            loss[step] = l;
            if (grad_norm) grad_norm[step] = gn;
            rows++;
        }
    }
    fclose(f);
    return rows;
}

/* loss[step] and tokens[step] from <dir>/eval.csv; returns the rows. */
static int read_evals(const char *dir, double *loss, long long *tokens) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s/eval.csv", tmp_dir(), dir);
    FILE *f = fopen(path, "r");
    EXPECT(f, "cannot read %s", path);
    int rows = 0;
    while (f && fgets(line, sizeof(line), f)) {
        int step;
        double l;
        long long n;
        if (sscanf(line, "%d,%lf,%lld", &step, &l, &n) == 3 && step >= 0 && step < MAX_STEPS) {
            loss[step] = l;
            tokens[step] = n;
            rows++;
        }
    }
    if (f) fclose(f);
    return rows;
}

/* The eval losses after `step` of two runs (and their token counts): relative rtol. */
static void compare_evals(const char *a, const char *b, int step, double rtol) {
    double ea[MAX_STEPS] = {0}, eb[MAX_STEPS] = {0};
    long long na[MAX_STEPS] = {0}, nb[MAX_STEPS] = {0};
    read_evals(a, ea, na);
    read_evals(b, eb, nb);
    const double rel = fabs(ea[step] - eb[step]) / fmax(ea[step], 1e-30);
    printf("  eval loss after step %d: %.6f (%s) vs %.6f (%s), relative %.3g (tol %g)\n", step,
           ea[step], a, eb[step], b, rel, rtol);
    EXPECT(ea[step] > 0 && rel <= rtol && na[step] == nb[step] && na[step] > 0,
           "step %d: eval loss %.9g over %lld tokens (%s) vs %.9g over %lld (%s)", step, ea[step],
           na[step], a, eb[step], nb[step], b);
}

/* Losses and gradient norms of steps first..last; need_fall: the loss must also fall by 0.05. */
static void compare_losses(const char *a, const char *b, int first, int last, double rtol,
                           bool need_fall) {
    double la[MAX_STEPS] = {0}, lb[MAX_STEPS] = {0}, ga[MAX_STEPS] = {0}, gb[MAX_STEPS] = {0};
    read_losses(a, la, ga);
    read_losses(b, lb, gb);
    double worst = 0, worst_g = 0;
    for (int s = first; s <= last; s++) {
        double rel = fabs(la[s] - lb[s]) / fmax(fabs(la[s]), 1e-30);
        double rel_g = fabs(ga[s] - gb[s]) / fmax(fabs(ga[s]), 1e-30);
        if (rel > worst) worst = rel;
        if (rel_g > worst_g) worst_g = rel_g;
        /* loss.csv's 6 decimals: a loss near 0.1 carries 5e-6 of rounding */
        EXPECT(la[s] > 0 && lb[s] > 0 && (rel <= rtol || fabs(la[s] - lb[s]) <= 1.01e-6),
               "step %d: loss %.9g (%s) vs %.9g (%s)", s, la[s], a, lb[s], b);
        EXPECT(ga[s] > 0 && gb[s] > 0 && rel_g <= fmax(rtol, 1e-6),
               "step %d: grad norm %.9g (%s) vs %.9g (%s)", s, ga[s], a, gb[s], b);
    }
    /* loss.csv prints 6 decimals: the grad norm (about 1) carries 1e-6 of rounding */
    printf("  losses %s vs %s, steps %d..%d: max relative diff %.3g (tol %g); grad norms %.3g\n", a,
           b, first, last, worst, rtol, worst_g);
    if (need_fall)
        EXPECT(la[last] < la[first] - 0.05, "%s: the loss did not fall (%g -> %g)", a, la[first],
               la[last]);
}

/* err[i] = ||a_i - ref_i|| / ||ref_i|| for the tensors of export a (names[i]; -1 when ref lacks
 * it or has another size); *global (when not NULL) the same over all of them together; returns
 * their count (at most max). */
static int param_errors(const char *a, const char *ref, double *err, char (*names)[128], int max,
                        double *global) {
    char pa[2048], pr[2048];
    snprintf(pa, sizeof(pa), "%s/%s", tmp_dir(), a);
    snprintf(pr, sizeof(pr), "%s/%s", tmp_dir(), ref);
    mt_safetensors *sa = mt_safetensors_open(pa), *sr = mt_safetensors_open(pr);
    EXPECT(mt_safetensors_count(sa) == mt_safetensors_count(sr), "%s and %s: tensor counts differ",
           a, ref);
    int n = mt_safetensors_count(sa) < max ? mt_safetensors_count(sa) : max;
    double num_all = 0, den_all = 0;
    for (int i = 0; i < n; i++) {
        const mt_st_tensor *ta = mt_safetensors_tensor(sa, i);
        const mt_st_tensor *tr = mt_safetensors_find(sr, ta->name);
        snprintf(names[i], 128, "%s", ta->name);
        err[i] = -1;
        if (!tr || tr->numel != ta->numel) continue;
        float *x = mt_malloc(sizeof(float) * ta->numel, "x"),
              *y = mt_malloc(sizeof(float) * ta->numel, "y");
        mt_safetensors_read(sa, ta, 0, ta->numel, x);
        mt_safetensors_read(sr, tr, 0, tr->numel, y);
        double num = 0, den = 0;
        for (int64_t j = 0; j < ta->numel; j++) {
            num += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
            den += (double)y[j] * y[j];
        }
        err[i] = sqrt(num / fmax(den, 1e-300));
        num_all += num;
        den_all += den;
        free(x);
        free(y);
    }
    if (global) *global = sqrt(num_all / fmax(den_all, 1e-300));
    mt_safetensors_close(sa);
    mt_safetensors_close(sr);
    return n;
}

/* ... but tensor `skip` (NULL: none) */
static void compare_params_but(const char *a, const char *b, double rtol, const char *skip) {
    static double err[256];
    static char names[256][128];
    int n = param_errors(a, b, err, names, 256, NULL);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < n; i++) {
        if (skip && !strcmp(names[i], skip)) continue;
        EXPECT(err[i] >= 0, "%s missing or resized in %s", names[i], b);
        EXPECT(err[i] <= rtol, "%s: relative L2 difference %.3g (tol %g)", names[i], err[i], rtol);
        if (err[i] > worst) worst = err[i], worst_name = names[i];
    }
    printf("  parameters %s vs %s: %d tensors, max relative L2 diff %.3g (%s)%s%s\n", a, b, n,
           worst, worst_name, skip ? "; not compared: " : "", skip ? skip : "");
}

static void compare_params(const char *a, const char *b, double rtol) {
    compare_params_but(a, b, rtol, NULL);
}

/* Two runs that end at step `last`: their losses and gradient norms over first..last, and the
 * parameters each exported there (checkpoint-<last>). */
static void compare_runs(const char *a, const char *b, int first, int last, double loss_rtol,
                         double param_rtol, bool need_fall) {
    compare_losses(a, b, first, last, loss_rtol, need_fall);
    char pa[512], pb[512];
    snprintf(pa, sizeof(pa), "%s/checkpoint-%d/model.safetensors", a, last);
    snprintf(pb, sizeof(pb), "%s/checkpoint-%d/model.safetensors", b, last);
    compare_params(pa, pb, param_rtol);
}

/* The number after `key` in rank 0's memory line of a run's log ("owned params+grads+moments ",
 * "peak use ", "step collectives: "). */
static double rank0_memory(const char *log, const char *key) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir(), log);
    FILE *f = fopen(path, "r");
    double mib = -1;
    while (f && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "memory[rank 0,") ? strstr(line, key) : NULL;
        if (p) mib = atof(p + strlen(key));
    }
    if (f) fclose(f);
    EXPECT(mib > 0, "no \"%s\" in the memory line of %s", key, path);
    return mib;
}

static int test_ranks_match(void) {
    compare_runs("ranks-np1", "ranks-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("ranks-np1", "ranks-np4", 1, 20, 1e-5, 1e-5, true);
    const char *owned = "owned params+grads+moments ";
    double m1 = rank0_memory("ranks-np1.log", owned), m4 = rank0_memory("ranks-np4.log", owned);
    printf("  owned params+grads+moments per rank: %.2f MiB on 1 rank, %.2f MiB on 4 (%.3fx)\n", m1,
           m4, m4 / m1);
    EXPECT(m4 <= 0.3 * m1, "owned memory at N=4 is %.3fx of N=1 (limit 0.3)", m4 / m1);
    return MT_TEST_OK;
}

/* MiniMax-M2 (tests/recipes/dist-m2.toml) on 1, 2 and 4 ranks: the same losses and exports;
 * the correction biases, buffers that are never trained, exported as initialised (zeros). */
static int test_m2_ranks_match(void) {
    compare_runs("m2-ranks-np1", "m2-ranks-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m2-ranks-np1", "m2-ranks-np4", 1, 20, 1e-5, 1e-5, true);
    char path[2048];
    snprintf(path, sizeof(path), "%s/m2-ranks-np4/checkpoint-20", tmp_dir());
    mt_safetensors *st = mt_safetensors_open(path);
    int biases = 0;
    for (int i = 0; i < mt_safetensors_count(st); i++) {
        const mt_st_tensor *t = mt_safetensors_tensor(st, i);
        if (!strstr(t->name, "e_score_correction_bias")) continue;
        float v[1024];
        EXPECT(t->numel <= 1024, "%s: %lld elements", t->name, (long long)t->numel);
        mt_safetensors_read(st, t, 0, t->numel < 1024 ? t->numel : 1024, v);
        bool zero = true;
        for (int64_t j = 0; j < t->numel && j < 1024; j++) zero = zero && v[j] == 0.0f;
        EXPECT(zero && !strcmp(t->dtype_name, "F32"), "%s: trained or not fp32 (%s)", t->name,
               t->dtype_name);
        biases++;
    }
    mt_safetensors_close(st);
    printf("  %d correction biases exported as initialised\n", biases);
    EXPECT(biases == 3, "%d correction biases in the export", biases);
    return MT_TEST_OK;
}

/* A tiny MiniMax-M3 (tests/recipes/dist-m3.toml) trained with one bucket per expert on 1, 2 and
 * 4 ranks: the same losses and exports up to summation order (every rank walks the routed
 * experts, then the shared expert, issuing the same collectives); the shared experts are in
 * the export in their separate form, trained. */
/* index_kl[step] from <dir>/loss.csv (its last column); returns the rows. */
static int read_index_kl(const char *dir, double *kl) {
    char path[2048], line[512];
    snprintf(path, sizeof(path), "%s/%s/loss.csv", tmp_dir(), dir);
    FILE *f = fopen(path, "r");
    EXPECT(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    int rows = 0;
    bool has = fgets(line, sizeof(line), f) && strstr(line, ",index_kl") != NULL;
    EXPECT(has, "%s: no index_kl column", path);
    while (has && fgets(line, sizeof(line), f)) {
        int step = atoi(line);
        const char *last = strrchr(line, ',');
        if (step >= 1 && step < 64 && last) kl[step] = atof(last + 1), rows++;
    }
    fclose(f);
    return rows;
}

/* A tiny MiniMax-M3 with two MSA layers (block 16, top-4 of the packed 128-token rows) on 1, 2
 * and 4 ranks: the losses, the indexer KL and every exported tensor agree; both losses fall. */
static int test_m3_ranks_match(void) {
    compare_runs("m3-ranks-np1", "m3-ranks-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np1", "m3-ranks-np4", 1, 20, 1e-5, 1e-5, true);
    double kl[3][64] = {{0}}, loss[64] = {0};
    const char *runs[3] = {"m3-ranks-np1", "m3-ranks-np2", "m3-ranks-np4"};
    double worst = 0;
    for (int r = 0; r < 3; r++) EXPECT(read_index_kl(runs[r], kl[r]) == 20, "%s: 20 rows", runs[r]);
    for (int r = 1; r < 3; r++)
        for (int s = 1; s <= 20; s++) {
            const double d = fabs(kl[r][s] - kl[0][s]) / fmax(kl[0][s], 1e-12);
            worst = fmax(worst, d);
        }
    read_losses("m3-ranks-np1", loss, NULL);
    printf("  index_kl 1 vs 2 and 4 ranks: max relative diff %.2e; step 1: %.6f, step 20: %.6f; "
           "loss %.4f -> %.4f\n",
           worst, kl[0][1], kl[0][20], loss[1], loss[20]);
    /* loss.csv prints 6 decimals of a KL about 0.1 */
    EXPECT(worst <= 1e-4, "index_kl differs across rank counts by %.2e", worst);
    EXPECT(kl[0][20] < 0.5 * kl[0][1] && loss[20] < loss[1] - 1.0,
           "the indexer KL (%.4f -> %.4f) or the loss (%.4f -> %.4f) does not fall", kl[0][1],
           kl[0][20], loss[1], loss[20]);
    char path[2048];
    snprintf(path, sizeof(path), "%s/m3-ranks-np4/checkpoint-20", tmp_dir());
    mt_safetensors *st = mt_safetensors_open(path);
    int shared = 0, index = 0;
    for (int i = 0; i < mt_safetensors_count(st); i++) {
        shared += strstr(mt_safetensors_tensor(st, i)->name, ".shared_experts.") != NULL;
        index += strstr(mt_safetensors_tensor(st, i)->name, ".self_attn.indexer.") != NULL;
    }
    mt_safetensors_close(st);
    /* a text-only M3 is exported in transformers' MiniMaxM3VLForCausalLM names: the shared
     * expert's gate_up_proj and down_proj, the indexer's four tensors under self_attn.indexer */
    printf("  %d shared-expert and %d indexer tensors exported\n", shared, index);
    EXPECT(shared == 4, "%d shared-expert tensors in the export (2 MoE layers x 2)", shared);
    EXPECT(index == 8, "%d indexer tensors in the export (2 MSA layers x 4)", index);
    return MT_TEST_OK;
}

static int test_resume_match(void) {
    compare_runs("resume-a", "resume-b", 11, 20, 1e-7, 0.0, true);
    return MT_TEST_OK;
}

/* train.global_batch_size keeps the global batch when a run resumes on another number of ranks
 * (the accumulation steps follow): 2 -> 1, 1 -> 2 and 2 -> 4 ranks from the step-2 checkpoint,
 * steps 3 and 4 against the run on the original rank count that did not stop
 * (tests/train/run_resume.sh global-batch): the same up to summation order (1 and 2 ranks agree to
 * ~1e-7), so the losses as loss.csv prints them (6 decimals) differ by at most 1e-6. */
static void compare_resumed(const char *straight, const char *resumed) {
    double la[MAX_STEPS] = {0}, lb[MAX_STEPS] = {0}, worst = 0;
    read_losses(straight, la, NULL);
    read_losses(resumed, lb, NULL);
    for (int s = 3; s <= 4; s++) {
        EXPECT(la[s] > 0 && lb[s] > 0, "step %d missing in %s or %s", s, straight, resumed);
        worst = fmax(worst, fabs(la[s] - lb[s]));
    }
    printf("  losses %s vs %s, steps 3..4: max abs diff %.3g (tol 1e-6)\n", straight, resumed,
           worst);
    EXPECT(worst <= 1e-6 + 1e-12, "%s vs %s: loss differs by %.3g", straight, resumed, worst);
    compare_runs(straight, resumed, 3, 4, 1e-6, 1e-5, false);
}

static int test_global_batch_match(void) {
    compare_resumed("gb-np2", "gb-2to1");
    compare_resumed("gb-np1", "gb-1to2");
    compare_resumed("gb-np2", "gb-2to4");
    return MT_TEST_OK;
}

/* data.trim_padding cuts each micro-batch after its longest row: the same losses and parameters
 * as the padded run, up to summation order (padded rows, 2 ranks, 10 steps). */
static int test_trim_match(void) {
    compare_runs("trim-on", "trim-off", 1, 10, 1e-5, 1e-5, true);
    return MT_TEST_OK;
}

/* data.padding_free runs a micro-batch's rows as one row, each sample its own segment: the same
 * training as the padded (or packed) rows up to summation order, for every family and under
 * context parallelism (2 ranks unless named; the M3's MSA blocks count from each sample's
 * start, its KL over the same real tokens). */
static int test_padfree_match(void) {
    compare_runs("trim-off", "trim-pf", 1, 10, 1e-5, 1e-5, true);
    compare_runs("ranks-np2", "pf-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m2-ranks-np2", "m2-pf-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np2", "m3-pf-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np1", "m3-pf-cp-c2", 1, 20, 1e-5, 1e-5, true);
    return MT_TEST_OK;
}

/* The gathers and reduce-scatters read the peers' node-shared buffers (train/comm_mpi.c) or go
 * through MPI's messages (MT_COMM_SHARED=0): 2 ranks add the same two values either way, so the
 * runs are the same bit for bit (fp32 and bf16 gathers); 4 ranks may add in another order. */
static int test_mpi_copies_match(void) {
    compare_runs("ranks-np2", "mpi-np2", 1, 20, 0.0, 0.0, true);
    compare_runs("bf16g-np2", "mpi-bf16g-np2", 1, 10, 0.0, 0.0, true);
    compare_runs("ranks-np4", "mpi-np4", 1, 20, 1e-5, 1e-5, true);
    return MT_TEST_OK;
}

/* Gathering one expert at a time (dist.gather_unit = "expert", 2 ranks) against the layer-unit
 * single-rank run: the same training up to summation order. */
static int test_expert_match(void) {
    compare_runs("ranks-np1", "expert-np2", 1, 20, 1e-5, 1e-5, true);
    return MT_TEST_OK;
}

/* train.gradient_checkpointing recomputes each layer in the backward from the same values: the
 * same training bit for bit (losses and exports), unit layer with the router aux loss, unit
 * expert, and unit expert with bf16 gathers; a run resumed with it continues one without it
 * exactly; the arena peak falls. */
static int test_recompute_match(void) {
    compare_runs("recompute-keep", "recompute-on", 1, 10, 0.0, 0.0, true);
    compare_runs("recompute-on", "recompute-node", 1, 10, 0.0, 0.0, true);
    compare_runs("expert-np2", "recompute-expert", 1, 20, 0.0, 0.0, true);
    compare_runs("expert-np2", "recompute-resume", 11, 20, 0.0, 0.0, false);
    compare_runs("recompute-bf16-keep", "recompute-bf16-on", 1, 10, 0.0, 0.0, true);
    const char *key = "peak use ";
    double keep = rank0_memory("recompute-keep.log", key),
           on = rank0_memory("recompute-on.log", key);
    double ek = rank0_memory("expert-np2.log", key),
           eon = rank0_memory("recompute-expert.log", key);
    printf("  activation arena peak (rank 0): unit layer %.2f -> %.2f MiB, unit expert %.2f -> "
           "%.2f MiB recomputed\n",
           keep, on, ek, eon);
    EXPECT(on < keep && eon < ek, "recomputing layers did not lower the arena peak");
    /* all-gathers of the first step: unit layer the same (the layer's bucket is still in its
     * slot when its recompute starts); unit expert one more per layer (the attention bucket,
     * evicted by the layer's experts before its backward; the experts' forwards wait for their
     * backwards, so each expert is gathered once) and one for the last layer's last expert,
     * which the forward left in its slot. The tiny model has 4 layers. */
    const char *col = "step collectives: ";
    double gk = rank0_memory("recompute-keep.log", col),
           gon = rank0_memory("recompute-on.log", col);
    double gek = rank0_memory("expert-np2.log", col),
           geon = rank0_memory("recompute-expert.log", col);
    printf(
        "  all-gathers of a step: unit layer %.0f -> %.0f, unit expert %.0f -> %.0f recomputed\n",
        gk, gon, gek, geon);
    EXPECT(gon == gk, "unit layer: recomputing changed the all-gathers (%.0f -> %.0f)", gk, gon);
    EXPECT(geon <= gek + 4 + 1, "unit expert: %.0f all-gathers recomputed, %.0f kept (limit +5)",
           geon, gek);
    return MT_TEST_OK;
}

/* bf16 parameter gathers (fp32 GEMMs): 1 and 2 ranks compute the same, up to summation order
 * (one rank rounds its parameters too); a resumed run continues bit for bit; against fp32
 * gathers the loss moves by the rounding of the parameters, which must show, and stay small
 * (within 1e-3 relative: bf16 has 8 bits). */
static int test_bf16_gather_match(void) {
    compare_runs("bf16g-np1", "bf16g-np2", 1, 10, 1e-5, 1e-5, true);
    /* a resume rounds from the restored fp32 masters: the same steps to the bit */
    compare_runs("bf16g-np2", "bf16g-resume", 6, 10, 0.0, 0.0, false);
    double a[MAX_STEPS] = {0}, b[MAX_STEPS] = {0};
    read_losses("bf16g-np2", a, NULL);
    read_losses("bf16g-fp32", b, NULL);
    double worst = 0;
    for (int s = 1; s <= 10; s++) worst = fmax(worst, fabs(a[s] - b[s]) / b[s]);
    printf("  bf16 vs fp32 gathers: loss max relative diff %.3g over 10 steps\n", worst);
    EXPECT(worst > 0 && worst <= 1e-3, "bf16 gathers moved the loss by %.3g relative", worst);
    return MT_TEST_OK;
}

/* The CUDA backend + NCCL path of the trainer (through the CPU emulator) against the CPU run;
 * and its resume from a staged device checkpoint against its own straight run. */
static int test_emu_cuda_match(void) {
    compare_runs("emu-cpu", "emu-cuda", 1, 3, 1e-5, 1e-5, false);
    compare_runs("emu-cuda", "emu-resume", 3, 3, 0.0, 0.0, false);
    /* the held-out samples' eval loss after the last step, forward only on the device */
    compare_evals("emu-cpu", "emu-cuda", 3, 1e-5);
    compare_evals("emu-cuda", "emu-resume", 3, 0.0);
    compare_evals("emu-cuda-bf16", "emu-cuda-bf16-cast", 3, 0.0);
    /* dist.offload_optimizer: the host's AdamW instead of the device's (the same formula, the
     * last bits may differ: op_cuda_emu_optim), with host moments through the checkpoint */
    compare_runs("emu-cuda", "emu-offload", 1, 3, 1e-5, 1e-5, false);
    compare_runs("emu-offload", "emu-offload-resume", 3, 3, 0.0, 0.0, false);
    /* with bf16 gathers the offload keeps the fp32 master weights on the host and only their
     * bf16 rounding on the device: the values of the device run (up to AdamW's last bits),
     * and a resume (host master from the checkpoint, rounded and uploaded again) to the bit */
    compare_runs("emu-cuda-bf16", "emu-offload-bf16", 1, 3, 1e-5, 1e-5, false);
    compare_runs("emu-offload-bf16", "emu-offload-bf16-resume", 3, 3, 0.0, 0.0, false);
    /* bf16 GEMM weights taken from the gather slots' bf16 values or cast again: the same bits
     * (gather unit layer: one landing buffer; expert: one per slot, layers recomputed) */
    compare_runs("emu-cuda-bf16", "emu-cuda-bf16-cast", 1, 3, 0.0, 0.0, false);
    compare_runs("emu-cuda-bf16x", "emu-cuda-bf16x-cast", 1, 3, 0.0, 0.0, false);
    /* strict emulation (reversed block and thread order): the same training to the bit, as no
     * kernel's sums depend on the order its blocks or threads run in (docs/cuda.md) */
    compare_runs("emu-cuda", "emu-strict", 1, 2, 0.0, 0.0, false);
    return MT_TEST_OK;
}

/* The bf16 rule of issue 6 on what it names, one training step's loss and gradients (here the
 * global norm): the device's bf16 run may differ from the fp32 run by at most twice what the
 * CPU's bf16 run (the rounding reference) differs by. Step 1 is that step. Later steps and the
 * parameters follow AdamW updates, which divide by sqrt(v): elements with near-zero gradients
 * move by up to lr on any rounding difference, so two bf16 runs drift apart about as far as
 * either drifts from fp32 (measured: up to 2.25x here); the gradient norm (a sum over every
 * gradient element) and the parameters (relative L2 per tensor) get a 4x guard there, which a
 * wrong bf16 GEMM (orders of magnitude) still fails. The loss of a later step is printed, not
 * judged: its bf16 deviation is a single draw of that drift a few times the print resolution
 * (measured 1e-6 to 6e-5, and 1.6e-5 vs 5.6e-5 at step 3 for the same device run built with and
 * without sanitizers, whose summation orders differ), so no one draw of the CPU's sets its
 * scale. bf16 must differ from fp32 at all. */
static int test_emu_cuda_bf16(void) {
    double lf[MAX_STEPS] = {0}, lc[MAX_STEPS] = {0}, ld[MAX_STEPS] = {0};
    double gf[MAX_STEPS] = {0}, gc[MAX_STEPS] = {0}, gd[MAX_STEPS] = {0};
    read_losses("emu-cpu", lf, gf);
    read_losses("emu-cpu-bf16", lc, gc);
    read_losses("emu-cuda-bf16", ld, gd);
    /* A scalar's bf16 error is one draw: the CPU's bf16 loss can land on the fp32 value by chance
     * (it did, to the 6 printed decimals, once lightning rounded too), which would make the rule
     * demand equality. The reference error of a quantity is therefore its largest |cpu bf16 -
     * fp32| over the 3 steps, the size of the rounding this run shows; loss.csv has 6 decimals,
     * so differences below 2e-6 are not resolved. */
    double ref = 0, ref_g = 0;
    for (int s = 1; s <= 3; s++) {
        ref = fmax(ref, fabs(lc[s] - lf[s]));
        ref_g = fmax(ref_g, fabs(gc[s] - gf[s]));
    }
    for (int s = 1; s <= 3; s++) {
        double dev = fabs(ld[s] - lf[s]), dev_g = fabs(gd[s] - gf[s]);
        printf("  step %d: |loss - fp32| cpu bf16 %.3g, device bf16 %.3g; grad norm %.3g, %.3g\n",
               s, fabs(lc[s] - lf[s]), dev, fabs(gc[s] - gf[s]), dev_g);
        const double k = s == 1 ? 2 : 4;
        EXPECT(lf[s] > 0 && ld[s] > 0 && (s > 1 || dev <= k * ref + 2e-6),
               "step %d: loss, %gx rule (ref %.3g)", s, k, ref);
        EXPECT(gf[s] > 0 && gd[s] > 0 && dev_g <= k * ref_g + 2e-6,
               "step %d: grad norm, %gx rule (ref %.3g)", s, k, ref_g);
    }
    /* Parameters: a tensor's own bf16 deviation alone is no scale for it: an expert that got one
     * or two tokens is barely updated and its CPU bf16 run can land within 1.5e-7 of fp32, while
     * a flip of one intermediate bf16 rounding (another fp32 summation order) moves the
     * device's by 2.5e-6 (measured 17x in the sanitizer build). The rule per tensor: the
     * device's bf16 run may differ from the CPU's bf16 run by at most 4 times the tensor's bf16
     * deviation (the CPU bf16 run against fp32), floored at the whole model's (all parameters
     * together); over all parameters, the device's deviation from fp32 is at most 2 times the
     * CPU's. */
    static double e_ref[256], e_dev[256], e_cross[256];
    static char names[256][128];
    double g_ref = 0, g_dev = 0;
    int n = param_errors("emu-cpu-bf16/checkpoint-3/model.safetensors",
                         "emu-cpu/checkpoint-3/model.safetensors", e_ref, names, 256, &g_ref);
    param_errors("emu-cuda-bf16/checkpoint-3/model.safetensors",
                 "emu-cpu/checkpoint-3/model.safetensors", e_dev, names, 256, &g_dev);
    param_errors("emu-cuda-bf16/checkpoint-3/model.safetensors",
                 "emu-cpu-bf16/checkpoint-3/model.safetensors", e_cross, names, 256, NULL);
    double worst = 0, moved = 0;
    const char *worst_name = "";
    for (int i = 0; i < n; i++) {
        const double scale = fmax(e_ref[i], g_ref);
        EXPECT(e_ref[i] >= 0 && e_cross[i] >= 0 && e_cross[i] <= 4 * scale,
               "%s: device bf16 off cpu bf16 by %.3g, more than 4x its bf16 deviation %.3g "
               "(the model's %.3g)",
               names[i], e_cross[i], e_ref[i], g_ref);
        if (e_cross[i] / scale > worst) worst = e_cross[i] / scale, worst_name = names[i];
        moved = fmax(moved, e_ref[i]);
    }
    printf("  parameters (%d tensors), relative L2 against fp32 over all: cpu bf16 %.3g, device "
           "bf16 %.3g (limit 2x); device vs cpu bf16 per tensor up to %.2fx its scale (%s; "
           "limit 4x)\n",
           n, g_ref, g_dev, worst, worst_name);
    EXPECT(g_dev <= 2 * g_ref, "device bf16 off fp32 by %.3g over all parameters, cpu bf16 by %.3g",
           g_dev, g_ref);
    EXPECT(moved > 1e-6, "bf16 mode changed no parameter: is it rounding at all?");
    return MT_TEST_OK;
}

/* The integer that follows `key` on the first line of a run's log containing it, else -1. */
static long long log_count(const char *log, const char *key) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir(), log);
    FILE *f = fopen(path, "r");
    long long v = -1;
    while (f && v < 0 && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, key);
        if (p) v = atoll(p + strlen(key));
    }
    if (f) fclose(f);
    EXPECT(v >= 0, "no \"%s\" in %s", key, path);
    return v;
}

/* data.eval_samples (tests/train/run_eval.sh eval): the eval loss the same on 1 and 2 ranks (at the
 * start too), after a resume and from the exported weights; and, at learning rate 0, the
 * held-out samples' eval loss and the training loss over the rest (one global batch) weighted
 * by their labelled tokens give the loss over all the samples: the split is a partition and
 * the forward-only eval computes the training loss's function (checked against transformers by
 * the parity tests). */
static int test_eval_match(void) {
    compare_runs("eval-np1", "eval-np2", 1, 10, 1e-5, 1e-5, true);
    double e1[MAX_STEPS] = {0}, e2[MAX_STEPS] = {0}, er[MAX_STEPS] = {0};
    long long n1[MAX_STEPS] = {0}, n2[MAX_STEPS] = {0}, nr[MAX_STEPS] = {0};
    EXPECT(read_evals("eval-np1", e1, n1) == 3 && read_evals("eval-np2", e2, n2) == 3,
           "eval.csv: want the rows of steps 0 (train.eval_on_start), 5 and 10");
    for (int s = 0; s <= 10; s += 5) compare_evals("eval-np1", "eval-np2", s, 1e-5);
    EXPECT(e2[5] < e2[0], "the eval loss did not fall from the start (%g -> %g)", e2[0], e2[5]);
    EXPECT(e2[10] < e2[5], "the eval loss did not fall (%g -> %g)", e2[5], e2[10]);
    /* resumed from checkpoint-5: its own output directory has the step-10 row, to the bit, and
     * no start row (train.eval_on_start is for a run's start, not a resume's) */
    EXPECT(read_evals("eval-resume", er, nr) == 1 && er[10] == e2[10],
           "resumed eval loss %.9g vs %.9g straight", er[10], e2[10]);

    double lp[MAX_STEPS] = {0}, la[MAX_STEPS] = {0}, el[MAX_STEPS] = {0};
    long long ne[MAX_STEPS] = {0};
    read_losses("eval-lr0", lp, NULL);
    read_losses("eval-all-lr0", la, NULL);
    read_evals("eval-lr0", el, ne);
    const long long tp = log_count("eval-lr0.log", "to train on ("),
                    ta = log_count("eval-all-lr0.log", "tokens, ");
    EXPECT(tp > 0 && ne[1] > 0 && tp + ne[1] == ta,
           "labelled tokens: %lld trained + %lld held out != %lld in all", tp, ne[1], ta);
    const double mix = (lp[1] * (double)tp + el[1] * (double)ne[1]) / (double)ta;
    const double rel = fabs(mix - la[1]) / la[1];
    printf("  lr 0: train %.6f x %lld + eval %.6f x %lld -> %.7f; all samples %.6f (relative "
           "%.3g)\n",
           lp[1], tp, el[1], ne[1], mix, la[1], rel);
    /* data.eval_path = the data file: all of it evaluates to the loss over all samples, and
     * 16 drawn from it are the 16 that data.eval_samples holds out (the same eval loss); the
     * training data is left whole (the training loss over all samples) */
    double ef[MAX_STEPS] = {0}, ef16[MAX_STEPS] = {0}, lf[MAX_STEPS] = {0};
    long long nf[MAX_STEPS] = {0}, nf16[MAX_STEPS] = {0};
    read_evals("eval-file-lr0", ef, nf);
    read_evals("eval-file16-lr0", ef16, nf16);
    read_losses("eval-file-lr0", lf, NULL);
    printf("  data.eval_path: all %.6f over %lld tokens (the loss over all %.6f), 16 drawn %.6f "
           "(held out %.6f)\n",
           ef[1], nf[1], la[1], ef16[1], el[1]);
    EXPECT(nf[1] == ta && fabs(ef[1] - la[1]) <= 1e-6 * la[1] && lf[1] == la[1],
           "eval over the whole file %.9g (%lld tokens), training loss %.9g; all samples %.9g "
           "(%lld tokens)",
           ef[1], nf[1], lf[1], la[1], ta);
    EXPECT(nf16[1] == ne[1] && ef16[1] == el[1],
           "16 drawn from the eval file: %.9g over %lld tokens, held out: %.9g over %lld", ef16[1],
           nf16[1], el[1], ne[1]);
    /* at learning rate 0 the step changes no weight: the start's eval equals the end's, to the
     * bit */
    EXPECT(el[0] > 0 && el[0] == el[1], "eval loss at the start %.9g, after a step at lr 0 %.9g",
           el[0], el[1]);
    /* the eval of the run that wrote that export, after its last step: the same weights */
    EXPECT(fabs(el[1] - e2[10]) <= 1e-6 * e2[10],
           "eval loss from the step-10 export %.9g, in the run after step 10 %.9g", el[1], e2[10]);
    /* fp32 cross-entropy values summed in double, printed with 6 decimals (3e-7 relative) */
    EXPECT(la[1] > 0 && rel <= 1e-6, "the weighted losses give %.9g, the loss over all %.9g", mix,
           la[1]);
    return MT_TEST_OK;
}

/* Expert parallelism (tests/train/run_ep.sh ep) against the 1-rank runs of the same recipes: the
 * same losses and exports up to the experts' rows running in other GEMM batches (and, for
 * Text-01 and M2, gather unit expert against layer: the lm_head's vocabulary parts); 10 +
 * resume + 10 under EP equals 20 straight to the bit in the parameters. */
static int test_ep_match(void) {
    compare_runs("ranks-np1", "ep-np4-p2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("ranks-np1", "ep-np4-p4", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m2-ranks-np1", "m2-ep-np4-p4", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np1", "m3-ep-np2-p2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ep-np2-p2", "m3-ep-resume", 11, 20, 1e-7, 0.0, true);
    return MT_TEST_OK;
}

/* Context parallelism (tests/train/run_cp.sh cp) against the 1-rank runs of mode ranks: C = 2
 * and 4, C = 2 x data parallel 2, C = 2 with expert parallelism 2 (Text-01), C = 2 and 4 (M2),
 * the per-step losses and final parameters to 1e-5 (issue 39); 10 + resume + 10 equals 20
 * straight bit for bit. */
static int test_cp_match(void) {
    compare_runs("ranks-np1", "cp-np2-c2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("ranks-np1", "cp-np4-c4", 1, 20, 1e-5, 1e-5, true);
    compare_runs("ranks-np1", "cp-np4-c2-dp2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("ranks-np1", "cp-np4-c2-ep2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m2-ranks-np1", "m2-cp-np2-c2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m2-ranks-np1", "m2-cp-np4-c4", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np1", "m3-cp-np2-c2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np1", "m3-cp-np4-c4", 1, 20, 1e-5, 1e-5, true);
    compare_runs("m3-ranks-np1", "m3-cp-np4-c2-ep2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("cp-np2-c2", "cp-resume", 11, 20, 1e-7, 0.0, true);
    compare_runs("m3-cp-np2-c2", "m3-cp-resume", 11, 20, 1e-7, 0.0, true);
    return MT_TEST_OK;
}

/* Context parallelism on the emulated CUDA backend with NCCL (device K/V and state exchanges,
 * Text-01; MSA's gathers and slots, M3) against the CPU trainer (tests/train/run_emu.sh
 * cp-emu). */
static int test_cp_emu_match(void) {
    compare_runs("cp-emu-cpu", "cp-emu-cuda", 1, 3, 1e-5, 1e-5, false);
    compare_runs("cp-emu-m3-cpu", "cp-emu-m3-cuda", 1, 3, 1e-5, 1e-5, false);
    return MT_TEST_OK;
}

/* Expert parallelism on the emulated CUDA backend with NCCL (device row exchanges, expert
 * gathers by ncclSend/ncclRecv) against the CPU trainer (tests/train/run_emu.sh ep-emu). */
static int test_ep_emu_match(void) {
    compare_runs("ep-emu-cpu", "ep-emu-cuda", 1, 3, 1e-5, 1e-5, false);
    return MT_TEST_OK;
}

/* The head metrics of eval.csv's row after `step` (accuracy, count, margin: the columns after
 * step, eval_loss, tokens, seconds); false when the row or the columns are missing. */
static bool read_head_eval(const char *dir, int step, double *acc, double *count, double *margin) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s/eval.csv", tmp_dir(), dir);
    FILE *f = fopen(path, "r");
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f)) {
        int st;
        double loss, tokens, secs;
        *margin = 0;
        found = sscanf(line, "%d,%lf,%lf,%lf,%lf,%lf,%lf", &st, &loss, &tokens, &secs, acc, count,
                       margin) >= 6 &&
                st == step;
    }
    if (f) fclose(f);
    EXPECT(found, "%s: no head metrics after step %d", path, step);
    return found;
}

/* Two head runs' eval rows after `step`: the loss to rtol, the same count, the accuracy equal
 * and the mean margin (reward) to rtol. */
static void compare_head_evals(const char *a, const char *b, int step, double rtol) {
    compare_evals(a, b, step, rtol);
    double acc[2], count[2], margin[2];
    if (!read_head_eval(a, step, &acc[0], &count[0], &margin[0]) ||
        !read_head_eval(b, step, &acc[1], &count[1], &margin[1]))
        return;
    printf(
        "  eval after step %d: accuracy %.4f of %.0f, margin %.6f (%s); %.4f of %.0f, %.6f (%s)\n",
        step, acc[0], count[0], margin[0], a, acc[1], count[1], margin[1], b);
    EXPECT(count[0] > 0 && count[0] == count[1] && acc[0] == acc[1],
           "step %d: accuracy %g of %g (%s) vs %g of %g (%s)", step, acc[0], count[0], a, acc[1],
           count[1], b);
    EXPECT(fabs(margin[0] - margin[1]) <= rtol * fmax(fabs(margin[0]), 1e-3),
           "step %d: mean margin %.9g (%s) vs %.9g (%s)", step, margin[0], a, margin[1], b);
}

/* A reward model (tests/train/run_head.sh reward) on 1, 2 and 4 ranks, and the tiny M2 and M3
 * on 1 and 2: the losses, gradient norms, exported parameters (score.weight among them) and eval
 * rows agree; the loss falls. */
static int test_rm_ranks_match(void) {
    compare_runs("rm-np1", "rm-np2", 1, 20, 1e-5, 1e-5, true);
    compare_runs("rm-np1", "rm-np4", 1, 20, 1e-5, 1e-5, true);
    compare_head_evals("rm-np1", "rm-np2", 20, 1e-5);
    compare_head_evals("rm-np1", "rm-np4", 20, 1e-5);
    compare_runs("rm-m2-np1", "rm-m2-np2", 1, 20, 1e-5, 1e-5, true);
    compare_head_evals("rm-m2-np1", "rm-m2-np2", 20, 1e-5);
    compare_runs("rm-m3-np1", "rm-m3-np2", 1, 20, 1e-5, 1e-5, true);
    compare_head_evals("rm-m3-np1", "rm-m3-np2", 20, 1e-5);
    return MT_TEST_OK;
}

/* The reward model's other layouts (run_head.sh reward-layouts): 10 + resume + 10 equals 20
 * straight to the bit; expert parallelism equals 1 rank up to summation order; --eval-only of
 * the final model gives the run's last eval row; bf16 gathers and
 * GEMMs train (their rounding: the loss falls, step 1 near the fp32 run's). */
static int test_rm_layouts_match(void) {
    compare_runs("rm-np2", "rm-resume", 11, 20, 0.0, 0.0, false);
    compare_runs("rm-np1", "rm-ep", 1, 20, 1e-5, 1e-5, true);
    /* --eval-only of the step-20 model on the same held-out pairs (data.eval_path): its
     * step-0 row is the run's eval after step 20 */
    double ea[MAX_STEPS] = {0}, eb[MAX_STEPS] = {0}, acc[2], count[2], margin[2];
    long long na[MAX_STEPS] = {0}, nb[MAX_STEPS] = {0};
    read_evals("rm-np2", ea, na);
    read_evals("rm-eval-only", eb, nb);
    if (read_head_eval("rm-np2", 20, &acc[0], &count[0], &margin[0]) &&
        read_head_eval("rm-eval-only", 0, &acc[1], &count[1], &margin[1]))
        EXPECT(fabs(eb[0] - ea[20]) <= 1e-6 * ea[20] && nb[0] == na[20] && nb[0] == 8 &&
                   acc[0] == acc[1] && count[0] == count[1],
               "--eval-only: loss %.9g over %lld, accuracy %g of %g; the run after step 20: "
               "%.9g over %lld, %g of %g",
               eb[0], nb[0], acc[1], count[1], ea[20], na[20], acc[0], count[0]);
    /* bf16 gathers and GEMMs: step 1's loss within the rounding of the operands to bf16 (2^-8
     * relative), then its own trajectory, whose loss must fall as the fp32 one's does */
    double l32[MAX_STEPS] = {0}, l16[MAX_STEPS] = {0};
    read_losses("rm-np2", l32, NULL);
    read_losses("rm-bf16", l16, NULL);
    printf("  bf16 gathers: loss %.6f -> %.6f (fp32: %.6f -> %.6f)\n", l16[1], l16[20], l32[1],
           l32[20]);
    EXPECT(fabs(l16[1] - l32[1]) <= l32[1] / 256 && l16[20] < l16[1] - 0.05,
           "bf16 gathers: loss %.9g -> %.9g, fp32 %.9g -> %.9g", l16[1], l16[20], l32[1], l32[20]);
    return MT_TEST_OK;
}

/* The reward model on the emulated CUDA backend with NCCL against the CPU trainer. */
static int test_rm_emu_match(void) {
    compare_runs("rm-emu-cpu", "rm-emu-cuda", 1, 3, 1e-5, 1e-5, false);
    return MT_TEST_OK;
}

/* Classification, token classification and QA (run_head.sh heads) on 1 and 2 ranks. */
static int test_heads_match(void) {
    const char *runs[3] = {"cls", "tok", "qa"};
    for (int k = 0; k < 3; k++) {
        char a[32], b[32];
        snprintf(a, sizeof(a), "%s-np1", runs[k]);
        snprintf(b, sizeof(b), "%s-np2", runs[k]);
        compare_losses(a, b, 1, 20, 1e-5, true);
        char pa[512], pb[512];
        snprintf(pa, sizeof(pa), "%s/checkpoint-20/model.safetensors", a);
        snprintf(pb, sizeof(pb), "%s/checkpoint-20/model.safetensors", b);
        /* the QA bias adds one constant to every position's logit, which a softmax over the
         * positions ignores: its gradient is 0 up to rounding, which AdamW turns into steps of
         * either sign (transformers' too) */
        compare_params_but(pa, pb, 1e-5, k == 2 ? "qa_outputs.bias" : NULL);
        compare_head_evals(a, b, 20, 1e-5);
    }
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_rm_ranks_match", test_rm_ranks_match},
    {"dist_rm_layouts_match", test_rm_layouts_match},
    {"dist_rm_emu_match", test_rm_emu_match},
    {"dist_heads_match", test_heads_match},
    {"dist_emu_cuda_bf16", test_emu_cuda_bf16},
    {"dist_ranks_match", test_ranks_match},
    {"dist_m2_ranks_match", test_m2_ranks_match},
    {"dist_m3_ranks_match", test_m3_ranks_match},
    {"dist_resume_match", test_resume_match},
    {"dist_global_batch_match", test_global_batch_match},
    {"dist_trim_match", test_trim_match},
    {"dist_padfree_match", test_padfree_match},
    {"dist_mpi_copies_match", test_mpi_copies_match},
    {"dist_emu_cuda_match", test_emu_cuda_match},
    {"dist_expert_match", test_expert_match},
    {"dist_bf16_gather_match", test_bf16_gather_match},
    {"dist_recompute_match", test_recompute_match},
    {"dist_eval_match", test_eval_match},
    {"dist_ep_match", test_ep_match},
    {"dist_cp_match", test_cp_match},
    {"dist_cp_emu_match", test_cp_emu_match},
    {"dist_ep_emu_match", test_ep_emu_match},
};
MT_TEST_MAIN(cases)
