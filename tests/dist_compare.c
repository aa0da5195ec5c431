/* dist_compare.c: compares the outputs of the end-to-end runs of tests/dist_run.sh:
 * loss.csv rows and the exported fp32 parameters of two run directories. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/safetensors.h"

#define MAX_STEPS 64

static const char *tmp_dir(void) {
    const char *t = getenv("MT_TEST_TMPDIR");
    return t ? t : "/tmp";
}

/* losses[step] from <dir>/loss.csv; returns the number of rows. */
static int read_losses(const char *dir, double *loss) {
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
        double l;
        if (sscanf(line, "%d,%lf", &step, &l) == 2 && step > 0 && step < MAX_STEPS) {
            loss[step] = l;
            rows++;
        }
    }
    fclose(f);
    return rows;
}

static void compare_losses(const char *a, const char *b, int first, int last, double rtol) {
    double la[MAX_STEPS] = {0}, lb[MAX_STEPS] = {0};
    read_losses(a, la);
    read_losses(b, lb);
    double worst = 0;
    for (int s = first; s <= last; s++) {
        double rel = fabs(la[s] - lb[s]) / fmax(fabs(la[s]), 1e-30);
        if (rel > worst) worst = rel;
        EXPECT(la[s] > 0 && lb[s] > 0 && rel <= rtol, "step %d: loss %.9g (%s) vs %.9g (%s)", s,
               la[s], a, lb[s], b);
    }
    printf("  losses %s vs %s, steps %d..%d: max relative diff %.3g (tol %g)\n", a, b, first, last,
           worst, rtol);
    EXPECT(la[last] < la[first] - 0.05, "%s: the loss did not fall (%g -> %g)", a, la[first],
           la[last]);
}

static void compare_params(const char *a, const char *b, double rtol) {
    char pa[2048], pb[2048];
    snprintf(pa, sizeof(pa), "%s/%s", tmp_dir(), a);
    snprintf(pb, sizeof(pb), "%s/%s", tmp_dir(), b);
    mt_safetensors *sa = mt_safetensors_open(pa), *sb = mt_safetensors_open(pb);
    EXPECT(mt_safetensors_count(sa) == mt_safetensors_count(sb), "tensor counts differ");
    double worst = 0;
    const char *worst_name = "";
    int n_tensors = mt_safetensors_count(sa);
    for (int i = 0; i < n_tensors; i++) {
        const mt_st_tensor *ta = mt_safetensors_tensor(sa, i);
        const mt_st_tensor *tb = mt_safetensors_find(sb, ta->name);
        EXPECT(tb && tb->numel == ta->numel, "%s missing or resized in %s", ta->name, b);
        if (!tb || tb->numel != ta->numel) continue;
        float *x = mt_malloc(sizeof(float) * ta->numel, "x"),
              *y = mt_malloc(sizeof(float) * ta->numel, "y");
        mt_safetensors_read(sa, ta, 0, ta->numel, x);
        mt_safetensors_read(sb, tb, 0, tb->numel, y);
        double num = 0, den = 0;
        for (int64_t j = 0; j < ta->numel; j++) {
            num += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
            den += (double)x[j] * x[j];
        }
        double rel = sqrt(num / fmax(den, 1e-300));
        if (rel > worst) worst = rel, worst_name = ta->name;
        EXPECT(rel <= rtol, "%s: relative L2 difference %.3g (tol %g)", ta->name, rel, rtol);
        free(x);
        free(y);
    }
    printf("  parameters %s vs %s: %d tensors, max relative L2 diff %.3g (%s)\n", a, b, n_tensors,
           worst, worst_name);
    mt_safetensors_close(sa);
    mt_safetensors_close(sb);
}

/* "owned params+grads+moments X MiB" of rank 0 in a run's log. */
static double owned_mib(const char *log) {
    char path[2048], line[1024];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir(), log);
    FILE *f = fopen(path, "r");
    double mib = -1;
    while (f && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "memory[rank 0]: owned params+grads+moments ");
        if (p) mib = atof(p + strlen("memory[rank 0]: owned params+grads+moments "));
    }
    if (f) fclose(f);
    EXPECT(mib > 0, "no memory line in %s", path);
    return mib;
}

static int test_ranks_match(void) {
    compare_losses("ranks-np1", "ranks-np2", 1, 20, 1e-5);
    compare_losses("ranks-np1", "ranks-np4", 1, 20, 1e-5);
    compare_params("ranks-np1/checkpoint-20/model.safetensors",
                   "ranks-np2/checkpoint-20/model.safetensors", 1e-5);
    compare_params("ranks-np1/checkpoint-20/model.safetensors",
                   "ranks-np4/checkpoint-20/model.safetensors", 1e-5);
    double m1 = owned_mib("ranks-np1.log"), m4 = owned_mib("ranks-np4.log");
    printf("  owned params+grads+moments per rank: %.2f MiB on 1 rank, %.2f MiB on 4 (%.3fx)\n", m1,
           m4, m4 / m1);
    EXPECT(m4 <= 0.3 * m1, "owned memory at N=4 is %.3fx of N=1 (limit 0.3)", m4 / m1);
    return MT_TEST_OK;
}

static int test_resume_match(void) {
    compare_losses("resume-a", "resume-b", 11, 20, 1e-7);
    compare_params("resume-a/checkpoint-20/model.safetensors",
                   "resume-b/checkpoint-20/model.safetensors", 0.0);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_ranks_match", test_ranks_match},
    {"dist_resume_match", test_resume_match},
};
MT_TEST_MAIN(cases)
