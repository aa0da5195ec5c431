/* op_cpu_math.c: the CPU kernels' exp and sigmoid (kernels/cpu/cpu_math.h) against double libm,
 * in units in the last place of the fp32 result; the double exp against libm's exp, in ulps of
 * the double result. */
#include "tests/support/harness.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_math.h"

/* |got - want| in ulps of the float nearest want (want > 0 and normal here) */
static double ulps(float got, double want) {
    const float w = (float)want;
    const double ulp = (double)nextafterf(w, INFINITY) - (double)w;
    return fabs((double)got - want) / ulp;
}

/* The worst error(x) over every 61st float of [-neg, pos], both ends included. */
static double worst_over(float neg, float pos, double (*error)(float x), float *worst_x,
                         int64_t *n) {
    double worst = 0;
    *n = 0;
    for (int sign = 0; sign < 2; sign++) {
        const float hi = sign ? neg : pos; /* |x| up to hi, for x = -|x| or +|x| */
        uint32_t end;
        memcpy(&end, &hi, sizeof end);
        for (uint32_t b = 0; b <= end; b = b + 61 > end && b != end ? end : b + 61) {
            float a;
            memcpy(&a, &b, sizeof a);
            const float x = sign ? -a : a;
            const double e = error(x);
            if (e > worst) worst = e, *worst_x = x;
            ++*n;
        }
    }
    return worst;
}

static double expf_error(float x) { return ulps(cpu_expf(x), exp((double)x)); }

/* Below -87, where cpu_expf gives 0, the sigmoid is under e^-87 = 1.65e-38: compared
 * absolutely there. */
static double sigmoid_error(float x) {
    const double want = 1.0 / (1.0 + exp(-(double)x));
    const float got = cpu_sigmoidf(x);
    if (x < -87.0f) return fabs((double)got - want) <= 1.65e-38 ? 0 : 1e9;
    return ulps(got, want);
}

/* [-87, 1] (about 36 million points) and the special values. */
static int test_cpu_expf(void) {
    float worst_x = 0;
    int64_t n;
    const double worst = worst_over(87.0f, 1.0f, expf_error, &worst_x, &n);
    printf("cpu_expf: %lld points of [-87, 1], worst %.3f ulp at x = %.9g\n", (long long)n, worst,
           worst_x);
    EXPECT(worst <= 1.3, "cpu_expf: %.3f ulp at x = %.9g (bound 1.3)", worst, worst_x);
    EXPECT(cpu_expf(-88.0f) == 0.0f && cpu_expf(-INFINITY) == 0.0f && isnan(cpu_expf(NAN)),
           "cpu_expf below -87, at -inf, at NaN: %g %g %g", cpu_expf(-88.0f), cpu_expf(-INFINITY),
           cpu_expf(NAN));
    return MT_TEST_OK;
}

/* [-104, 17] (beyond it the sigmoid is 0 or 1 to fp32) and the infinities. */
static int test_cpu_sigmoid(void) {
    float worst_x = 0;
    int64_t n;
    const double worst = worst_over(104.0f, 17.0f, sigmoid_error, &worst_x, &n);
    printf("cpu_sigmoidf: %lld points of [-104, 17], worst %.3f ulp at x = %.9g\n", (long long)n,
           worst, worst_x);
    EXPECT(worst <= 2.5, "cpu_sigmoidf: %.3f ulp at x = %.9g (bound 2.5)", worst, worst_x);
    EXPECT(cpu_sigmoidf(INFINITY) == 1.0f && cpu_sigmoidf(-INFINITY) == 0.0f,
           "cpu_sigmoidf at +-inf: %g %g", cpu_sigmoidf(INFINITY), cpu_sigmoidf(-INFINITY));
    return MT_TEST_OK;
}

/* Every 7.13e-5 of [-708, 1] (about 9.9 million points; libm's exp is within 1 ulp itself, so
 * the two differ by at most its error and ours) and the special values. */
static int test_cpu_exp(void) {
    double worst = 0, worst_x = 0;
    int64_t n = 0;
    for (double x = -708.0; x <= 1.0; x += 7.13e-5, n++) {
        const double want = exp(x), ulp = nextafter(want, INFINITY) - want;
        const double e = fabs(cpu_exp(x) - want) / ulp;
        if (e > worst) worst = e, worst_x = x;
    }
    printf("cpu_exp: %lld points of [-708, 1], worst %.6f ulp at x = %.17g\n", (long long)n, worst,
           worst_x);
    EXPECT(worst <= 1.0, "cpu_exp: %.6f ulp at x = %.17g (bound 1)", worst, worst_x);
    EXPECT(cpu_exp(0.0) == 1.0 && cpu_exp(-709.0) == 0.0 && cpu_exp(-INFINITY) == 0.0 &&
               isnan(cpu_exp(NAN)),
           "cpu_exp at 0, below -708, at -inf, at NaN: %.17g %g %g %g", cpu_exp(0.0),
           cpu_exp(-709.0), cpu_exp(-INFINITY), cpu_exp(NAN));
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_cpu_expf", test_cpu_expf},
    {"op_cpu_sigmoid", test_cpu_sigmoid},
    {"op_cpu_exp", test_cpu_exp},
};
MT_TEST_MAIN(cases)
