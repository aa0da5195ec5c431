/* eval_sample.c: the next-token rule of generation (models/generate.h, mt_gen_sample and
 * mt_gen_uniform) against independent references on synthetic logits: greedy ties, the draws'
 * distribution at temperature 1 (chi-square against the softmax, fixed seed: deterministic),
 * top-k and top-p sets computed here by sorting, and the counter-based uniforms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/generate.h"
#include "tests/support/harness.h"

#define ES_V 8

/* softmax(l / t) in double: the reference */
static void es_softmax(const float *l, int V, double t, double *p) {
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, l[v]);
    for (int v = 0; v < V; v++) z += (p[v] = exp((l[v] - mx) / t));
    for (int v = 0; v < V; v++) p[v] /= z;
}

static int eval_sample_greedy(void) {
    const float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
    float wp[6];
    uint64_t wk[6];
    mt_gen_opts o = {.temperature = 0};
    EXPECT(mt_gen_sample(l, 6, NULL, 0.3, wp, wk) == 1, "greedy: not the lowest maximal id");
    EXPECT(mt_gen_sample(l, 6, &o, 0.9, wp, wk) == 1, "temperature 0: not greedy");
    return MT_TEST_OK;
}

/* 200000 draws at temperature 1 and 0.7 (seed 1234, steps 0..n-1): Pearson's chi-square
 * against n * softmax with V - 1 = 7 degrees of freedom stays under 24.32 (p = 0.001); the
 * seed is fixed, so this either always passes or always fails. */
static int eval_sample_chi2(void) {
    const float l[ES_V] = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -2.0f, 1.5f, 0.7f};
    const double temps[2] = {1.0, 0.7};
    float wp[ES_V];
    uint64_t wk[ES_V];
    const int n = 200000;
    for (int ti = 0; ti < 2; ti++) {
        double p[ES_V];
        es_softmax(l, ES_V, temps[ti], p);
        long count[ES_V] = {0};
        mt_gen_opts o = {.temperature = (float)temps[ti], .seed = 1234};
        for (int i = 0; i < n; i++)
            count[mt_gen_sample(l, ES_V, &o, mt_gen_uniform(1234, 5, i), wp, wk)]++;
        double chi2 = 0;
        for (int v = 0; v < ES_V; v++) {
            const double e = n * p[v];
            chi2 += (count[v] - e) * (count[v] - e) / e;
        }
        printf("temperature %.1f: chi2 %.2f over %d draws (7 dof, p=0.001 bound 24.32)\n",
               temps[ti], chi2, n);
        EXPECT(chi2 < 24.32, "temperature %.1f: chi2 %.2f", temps[ti], chi2);
    }
    return MT_TEST_OK;
}

/* Random logits (V = 50, with ties): every draw lies in the reference set; top-k = the k
 * largest (ties to lower ids), top-p = the smallest most-likely-first prefix of mass >= p of the
 * top-k-renormalised distribution; and every token of the set is drawn at least once. */
static int eval_sample_sets(void) {
    enum { V = 50 };
    mt_rng rng;
    mt_rng_seed(&rng, 99);
    float l[V], wp[V];
    uint64_t wk[V];
    mt_fill_normal(l, V, 2.0f, &rng);
    l[7] = l[3]; /* a tie */
    int order[V];
    for (int v = 0; v < V; v++) order[v] = v;
    for (int i = 0; i < V; i++) /* selection sort: descending, ties to the lower id */
        for (int j = i + 1; j < V; j++)
            if (l[order[j]] > l[order[i]] || (l[order[j]] == l[order[i]] && order[j] < order[i])) {
                const int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    const struct {
        int k;
        float p;
    } cases[4] = {{5, 1.0f}, {0, 0.5f}, {10, 0.8f}, {1, 1.0f}};
    int bad = 0;
    for (int ci = 0; ci < 4; ci++) {
        double p[V];
        es_softmax(l, V, 1.0, p);
        int n = cases[ci].k > 0 ? cases[ci].k : V;
        if (cases[ci].p < 1) {
            double tot = 0, acc = 0;
            for (int i = 0; i < n; i++) tot += p[order[i]];
            int keep = 0;
            while (keep < n) {
                acc += p[order[keep++]];
                if (acc >= cases[ci].p * tot) break;
            }
            n = keep;
        }
        bool allowed[V] = {false}, seen[V] = {false};
        for (int i = 0; i < n; i++) allowed[order[i]] = true;
        mt_gen_opts o = {.temperature = 1.0f, .top_k = cases[ci].k, .top_p = cases[ci].p};
        int outside = 0, unseen = 0;
        for (int i = 0; i < 20000; i++) {
            const int32_t t = mt_gen_sample(l, V, &o, mt_gen_uniform(3, ci, i), wp, wk);
            outside += !allowed[t];
            seen[t] = true;
        }
        for (int i = 0; i < n; i++) unseen += !seen[order[i]];
        printf("top_k %d top_p %.2f: set of %d tokens, %d draws outside, %d never drawn\n",
               cases[ci].k, cases[ci].p, n, outside, unseen);
        bad += outside + unseen;
    }
    EXPECT(bad == 0, "top-k/top-p: %d bad draws or unseen tokens", bad);
    return MT_TEST_OK;
}

/* The uniforms: in [0, 1), a pure function of (seed, row, step), and different keys differ. */
static int eval_sample_uniform(void) {
    double sum = 0;
    int out = 0, same = 0;
    for (int i = 0; i < 100000; i++) {
        const double u = mt_gen_uniform(42, i % 7, i / 7);
        out += !(u >= 0 && u < 1);
        sum += u;
        same += u == mt_gen_uniform(42, (i % 7) + 1, i / 7);
    }
    EXPECT(out == 0 && same == 0, "uniforms: %d out of range, %d collisions", out, same);
    EXPECT(mt_gen_uniform(1, 2, 3) == mt_gen_uniform(1, 2, 3), "uniforms not reproducible");
    EXPECT(mt_gen_uniform(1, 2, 3) != mt_gen_uniform(1, 3, 2), "uniforms symmetric in row/step");
    printf("mean of 100000 uniforms %.5f\n", sum / 100000);
    EXPECT(fabs(sum / 100000 - 0.5) < 0.005, "uniforms: mean %.5f", sum / 100000);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_sample_greedy", eval_sample_greedy},
    {"eval_sample_chi2", eval_sample_chi2},
    {"eval_sample_sets", eval_sample_sets},
    {"eval_sample_uniform", eval_sample_uniform},
};
MT_TEST_MAIN(cases)
