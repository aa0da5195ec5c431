/* harness.c: see harness.h. */
#include "tests/support/harness.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int mt_test_failures = 0;

/* ---- owned test tensors ---- */
#define MT_TEST_MAX_OWNED 4096
static void *owned[MT_TEST_MAX_OWNED];
static int n_owned = 0;

static void *test_own(void *p) {
    MT_CHECK(n_owned < MT_TEST_MAX_OWNED, "test harness: too many test allocations");
    owned[n_owned++] = p;
    return p;
}

static void test_free_all(void) {
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    n_owned = 0;
}

mt_tensor *mt_test_tensor(mt_dtype dt, int ndim, const int64_t *shape, bool with_grad,
                          const char *name) {
    mt_tensor *t = test_own(mt_calloc(1, sizeof(mt_tensor), name));
    mt_tensor_wrap(t, dt, ndim, shape, NULL, NULL, name);
    size_t nb = mt_nbytes(t);
    t->data = test_own(mt_calloc(1, nb, name));
    if (with_grad) {
        t->grad = test_own(mt_calloc(1, nb, name));
        t->requires_grad = true;
    }
    return t;
}

int mt_test_main(int argc, char **argv, const mt_test_case *cases, int n_cases) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE   (cases:", argv[0]);
        for (int i = 0; i < n_cases; i++) fprintf(stderr, " %s", cases[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    for (int i = 0; i < n_cases; i++) {
        if (strcmp(cases[i].name, argv[1]) != 0) continue;
        int rc = cases[i].fn();
        test_free_all();
        if (rc == MT_TEST_SKIP) {
            printf("SKIP %s\n", cases[i].name);
            return MT_TEST_SKIP;
        }
        if (mt_test_failures || rc != MT_TEST_OK) {
            printf("FAILED %s (%d failed checks)\n", cases[i].name, mt_test_failures);
            return 1;
        }
        printf("PASSED %s\n", cases[i].name);
        return 0;
    }
    fprintf(stderr, "%s: no case named %s\n", argv[0], argv[1]);
    return 2;
}

/* ---- random numbers ---- */
void mt_rng_seed(mt_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

uint64_t mt_rng_u64(mt_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float mt_rng_uniform(mt_rng *r) { return (float)(mt_rng_u64(r) >> 40) / 16777216.0f; }

float mt_rng_normal(mt_rng *r) {
    double u1 = ((double)(mt_rng_u64(r) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(mt_rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void mt_fill_uniform(float *x, int64_t n, float lo, float hi, mt_rng *r) {
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * mt_rng_uniform(r);
}

void mt_fill_normal(float *x, int64_t n, float std, mt_rng *r) {
    for (int64_t i = 0; i < n; i++) x[i] = std * mt_rng_normal(r);
}

/* ---- comparisons ---- */
bool mt_check_close(const char *label, const float *a, const float *ref, int64_t n, double atol,
                    double rtol) {
    double max_abs = 0, max_rel = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        double rel = d / fmax(fabs((double)ref[i]), DBL_MIN);
        if (d > max_abs) max_abs = d;
        if (rel > max_rel && fabs(ref[i]) > 0) max_rel = rel;
        if (!(d <= atol + rtol * fabs((double)ref[i]))) {
            if (bad < 5)
                printf("  %s[%lld]: got %.9g want %.9g (diff %.3g)\n", label, (long long)i,
                       (double)a[i], (double)ref[i], d);
            bad++;
        }
    }
    printf("  %-32s n=%-8lld max_abs=%.3g max_rel=%.3g %s\n", label, (long long)n, max_abs, max_rel,
           bad ? "MISMATCH" : "ok");
    if (bad) {
        mt_test_failures++;
        printf("FAIL %s: %lld of %lld outside atol=%g rtol=%g\n", label, (long long)bad,
               (long long)n, atol, rtol);
    }
    return bad == 0;
}

bool mt_check_rel_l2(const char *label, const float *a, const float *ref, int64_t n, double tol) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    bool ok = rel <= tol;
    printf("  %-32s n=%-8lld rel_l2=%.3g (tol %.3g) %s\n", label, (long long)n, rel, tol,
           ok ? "ok" : "MISMATCH");
    if (!ok) mt_test_failures++;
    return ok;
}

void mt_test_ctx_init(mt_ctx *c) { mt_ctx_init(c, mt_backend_cpu(), (size_t)256 << 20, 16384); }

/* ---- finite differences ---- */
static double gradcheck_loss(mt_ctx *c, mt_gradcheck_build build, mt_tensor **in, void *user,
                             const float *r) {
    mt_ctx_reset(c);
    bool prev = mt_ctx_set_grad(c, false);
    mt_tensor *out = build(c, in, user);
    mt_ctx_set_grad(c, prev);
    const float *y = out->data;
    double L = 0;
    for (int64_t i = 0; i < mt_numel(out); i++) L += (double)y[i] * r[i];
    return L;
}

bool mt_gradcheck(const char *label, mt_gradcheck_build build, mt_tensor **in, int n_in, void *user,
                  const mt_gradcheck_opts *opts) {
    double h = (opts && opts->h > 0) ? opts->h : 1e-2;
    int max_elems = (opts && opts->max_elems > 0) ? opts->max_elems : 48;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_rng rng;
    mt_rng_seed(&rng, 1234);

    /* analytic */
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->grad) memset(in[i]->grad, 0, mt_nbytes(in[i]));
    mt_tensor *out = build(&c, in, user);
    MT_CHECK(out->dtype == MT_F32, "gradcheck %s: output must be f32", label);
    int64_t n_out = mt_numel(out);
    float *r = mt_malloc(sizeof(float) * n_out, "gradcheck seed");
    mt_fill_normal(r, n_out, 1.0f, &rng);
    double out_r_l2 = 0;
    for (int64_t i = 0; i < n_out; i++) {
        double v = (double)((float *)out->data)[i] * r[i];
        out_r_l2 += v * v;
    }
    out_r_l2 = sqrt(out_r_l2);
    mt_backward(&c, out, r);
    double noise = 8.0 * FLT_EPSILON * out_r_l2 / h;

    bool all_ok = true;
    for (int i = 0; i < n_in; i++) {
        mt_tensor *t = in[i];
        if (!t || !t->grad) continue;
        int64_t n = mt_numel(t);
        float *x = t->data;
        float *analytic = mt_malloc(sizeof(float) * n, "gradcheck analytic");
        memcpy(analytic, t->grad, sizeof(float) * n);
        int64_t n_check = n <= max_elems ? n : max_elems;
        int bad = 0;
        double max_err = 0, max_tol = 0, max_grad = 0;
        for (int64_t k = 0; k < n_check; k++) {
            int64_t j = n <= max_elems ? k
                        : k == 0       ? 0
                        : k == 1       ? n - 1
                                       : (int64_t)(mt_rng_u64(&rng) % (uint64_t)n);
            float x0 = x[j];
            double fd[2];
            for (int s = 0; s < 2; s++) {
                double step = s == 0 ? h : 2 * h;
                float xp = (float)(x0 + step), xm = (float)(x0 - step);
                x[j] = xp;
                double Lp = gradcheck_loss(&c, build, in, user, r);
                x[j] = xm;
                double Lm = gradcheck_loss(&c, build, in, user, r);
                fd[s] = (Lp - Lm) / ((double)xp - (double)xm);
            }
            x[j] = x0;
            double tol = noise + fabs(fd[0] - fd[1]) + 1e-5 * fabs(fd[0]);
            double err = fabs((double)analytic[j] - fd[0]);
            if (err > max_err) max_err = err;
            if (tol > max_tol) max_tol = tol;
            if (fabs(analytic[j]) > max_grad) max_grad = fabs(analytic[j]);
            if (!(err <= tol)) {
                if (bad < 5)
                    printf("  %s d%s[%lld]: analytic %.7g numeric %.7g (2h: %.7g) tol %.3g\n",
                           label, t->name, (long long)j, (double)analytic[j], fd[0], fd[1], tol);
                bad++;
            }
        }
        printf("  %-24s d%-12s checked %lld/%lld max_err=%.3g max_tol=%.3g max|grad|=%.3g %s\n",
               label, t->name, (long long)n_check, (long long)n, max_err, max_tol, max_grad,
               bad ? "MISMATCH" : "ok");
        if (bad) {
            mt_test_failures++;
            all_ok = false;
        }
        free(analytic);
    }
    free(r);
    mt_ctx_free(&c);
    return all_ok;
}

void mt_gradcheck_subsets(const char *const *labels, int n_sets, const int *masks,
                          mt_gradcheck_build build, mt_tensor **in, int n_in, void *user) {
    void *grads[MT_MAX_IN * 2];
    MT_CHECK(n_in <= MT_MAX_IN * 2, "gradcheck subsets: %d inputs", n_in);
    for (int s = 0; s < n_sets; s++) {
        for (int i = 0; i < n_in; i++) {
            grads[i] = in[i]->grad;
            if (!masks[s * n_in + i]) {
                in[i]->grad = NULL;
                in[i]->requires_grad = false;
            }
        }
        mt_gradcheck(labels[s], build, in, n_in, user, NULL);
        for (int i = 0; i < n_in; i++) {
            in[i]->grad = grads[i];
            in[i]->requires_grad = grads[i] != NULL;
        }
    }
}

bool mt_expect_death(void (*fn)(void *), void *arg, const char *want) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + len, sizeof(buf) - 1 - len)) > 0) len += (size_t)r;
    buf[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool died = WIFEXITED(status) && WEXITSTATUS(status) != 0;
    printf("  death test: exit %d, stderr: %s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           len ? buf : "(empty)\n");
    return died && strstr(buf, want) != NULL;
}
