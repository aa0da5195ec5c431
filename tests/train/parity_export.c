/* parity_export.c: the block-FP8 export (output.export_dtype = "fp8", models/weights_fp8.c).
 *
 * data_fp8_e4m3: fp32 -> float8_e4m3fn against the format's definition (every code's value
 * back to itself, midpoints between neighbours to the even code, saturation at 448, the
 * subnormals), and the block rule of transformers' Fp8Quantize on a crafted matrix (each
 * block's amax becomes +-448, weight_scale_inv = amax / 448, an all-zero block has scale 1).
 *
 * parity_fp8_quantize: mt_fp8_quantize against transformers' Fp8Quantize, bit for bit (below).
 *
 * parity_export_fp8 (after dist_export_fp8_run, tests/train/run_export.sh fp8): the fine-tune of
 * tests/fixtures/models/tiny_m2_fp8 exported as fp8 ($MT_TEST_TMPDIR/export-fp8/final) and the
 * same run exported as fp32 (export-fp32/final, the fp32 master weights):
 *   - the byte layout equals the source's: the same tensor names, dtypes and shapes (scales
 *     included) and the same quantization_config in config.json;
 *   - loaded through the project's FP8 loader (mt_weights_load: q x weight_scale_inv), every
 *     parameter is within the FP8 rounding of the master: for an FP8 tensor, per element
 *     |w - x| <= inv x h(|x| / inv) + 4 |x| 2^-24, h(y) the half-ulp of e4m3 at y (2^-10 below
 *     2^-6, else 2^(floor(log2 y) - 4): three mantissa bits), inv the block's weight_scale_inv,
 *     the last term the fp32 roundings of x * scale, of 1 / scale and of q x inv; every other
 *     tensor (kept as the source keeps it, F32 here) equal;
 *   - every block's largest |q| is 448 (the scale is amax / 448, not its inverse);
 *   - the run trained: the master differs from the source's weights beyond that rounding. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "models/safetensors.h"
#include "models/weights.h"
#include "tests/support/harness.h"

static float e4m3_value(uint8_t b) { return mt_f8e4m3_to_f32(b); }

static int test_e4m3(void) {
    int bad = 0;
    for (int b = 0; b < 256; b++) { /* every finite code is its own value */
        if ((b & 0x7f) == 0x7f) continue;
        const float v = e4m3_value((uint8_t)b);
        const uint8_t back = mt_f32_to_f8e4m3(v);
        if (back != b && !(v == 0 && (back & 0x7f) == 0)) bad++;
    }
    EXPECT(bad == 0, "%d codes do not round-trip", bad);
    /* midpoints between positive neighbours: ties to the even code (mantissa bit 0 clear) */
    int ties = 0;
    for (int b = 0; b < 0x7e; b++) {
        const float lo = e4m3_value((uint8_t)b), hi = e4m3_value((uint8_t)(b + 1));
        const float mid = lo + (hi - lo) / 2; /* exact in fp32 */
        const uint8_t want = (b & 1) ? (uint8_t)(b + 1) : (uint8_t)b;
        ties += mt_f32_to_f8e4m3(mid) == want && mt_f32_to_f8e4m3(-mid) == (want | 0x80);
        /* just off the midpoint: the nearer code */
        EXPECT(mt_f32_to_f8e4m3(nextafterf(mid, 0)) == b &&
                   mt_f32_to_f8e4m3(nextafterf(mid, 1000)) == b + 1,
               "near the midpoint of codes %d and %d", b, b + 1);
    }
    EXPECT(ties == 0x7e, "%d of %d midpoints go to the even code", ties, 0x7e);
    EXPECT(mt_f32_to_f8e4m3(448) == 0x7e && mt_f32_to_f8e4m3(1e9f) == 0x7e &&
               mt_f32_to_f8e4m3(-500) == 0xfe && mt_f32_to_f8e4m3(464) == 0x7e,
           "saturation at +-448 (e4m3fn has no infinity; 480 would be NaN)");
    EXPECT(mt_f32_to_f8e4m3(0x1p-9f) == 1 && mt_f32_to_f8e4m3(0x1p-10f) == 0 &&
               mt_f32_to_f8e4m3(0x1.8p-10f) == 1 && mt_f32_to_f8e4m3(0x1p-6f) == 8,
           "subnormals: 2^-9 is code 1, 2^-10 ties to 0, 1.5 x 2^-10 rounds to 1, 2^-6 is 8");
    EXPECT((mt_f32_to_f8e4m3(NAN) & 0x7f) == 0x7f, "NaN");

    /* the block rule: 2 matrices of 3 x 5 in blocks of 2 x 2 (ragged edges) */
    enum { R = 3, C = 5, M = 2 };
    float x[M * R * C];
    for (int i = 0; i < M * R * C; i++) x[i] = (float)((i * 37) % 23 - 11) / 7.0f;
    for (int i = 0; i < 2; i++) x[R * C + i] = x[R * C + C + i] = 0; /* matrix 1, block (0,0) */
    uint8_t q[M * R * C];
    float inv[M * 2 * 3];
    mt_fp8_quantize(x, M, R, C, 2, 2, q, inv);
    for (int k = 0; k < M; k++)
        for (int bi = 0; bi < 2; bi++)
            for (int bj = 0; bj < 3; bj++) {
                float amax = 0, qmax = 0;
                for (int i = bi * 2; i < R && i < bi * 2 + 2; i++)
                    for (int j = bj * 2; j < C && j < bj * 2 + 2; j++) {
                        amax = fmaxf(amax, fabsf(x[(k * R + i) * C + j]));
                        qmax = fmaxf(qmax, fabsf(e4m3_value(q[(k * R + i) * C + j])));
                    }
                const float s = inv[(k * 2 + bi) * 3 + bj];
                if (amax == 0)
                    EXPECT(s == 1 && qmax == 0, "an all-zero block: scale 1, codes 0");
                else
                    EXPECT(qmax == 448 && fabsf(s - amax / 448) <= amax / 448 * 0x1p-22f,
                           "block (%d,%d,%d): max |q| %g (448), scale_inv %g (amax/448 = %g)", k,
                           bi, bj, (double)qmax, (double)s, (double)(amax / 448));
            }
    return MT_TEST_OK;
}

/* parity_fp8_quantize: tests/fixtures/models/tiny_m2_fp8 is tiny_m2's fp32 weights quantised by
 * transformers' Fp8Quantize (tools/make_fixtures_m2.py, 16 x 16 blocks): mt_fp8_quantize of
 * tiny_m2's tensors gives the same bytes, every e4m3 code and every weight_scale_inv. */
static int test_fp8_quantize(void) {
    const char *srcdir = getenv("MT_SOURCE_DIR");
    char a[1024], b[1024];
    snprintf(a, sizeof(a), "%s/tests/fixtures/models/tiny_m2", srcdir ? srcdir : ".");
    snprintf(b, sizeof(b), "%s/tests/fixtures/models/tiny_m2_fp8", srcdir ? srcdir : ".");
    mt_safetensors *fp32 = mt_safetensors_open(a), *fp8 = mt_safetensors_open(b);
    int tensors = 0, codes_off = 0, scales_off = 0;
    int64_t codes = 0;
    for (int i = 0; i < mt_safetensors_count(fp8); i++) {
        const mt_st_tensor *q = mt_safetensors_tensor(fp8, i);
        const mt_st_tensor *x = mt_safetensors_find(fp32, q->name);
        if (q->dtype != MT_ST_F8_E4M3 || !x) continue; /* the MTP tensors are the fixture's own */
        EXPECT(x->dtype == MT_ST_F32 && x->numel == q->numel, "%s: the fp32 source", q->name);
        char sname[220];
        snprintf(sname, sizeof(sname), "%.*s.weight_scale_inv", (int)(strlen(q->name) - 7),
                 q->name);
        const mt_st_tensor *sc = mt_safetensors_find(fp8, sname);
        EXPECT(sc && sc->dtype == MT_ST_F32, "%s", sname);
        if (!sc || x->numel != q->numel) continue;
        const int64_t rows = q->shape[0], cols = q->shape[1];
        float *xv = malloc(sizeof(float) * (size_t)x->numel);
        float *want_s = malloc(sizeof(float) * (size_t)sc->numel);
        float *got_s = malloc(sizeof(float) * (size_t)sc->numel);
        uint8_t *got = malloc((size_t)q->numel);
        mt_safetensors_read(fp32, x, 0, x->numel, xv);
        mt_safetensors_read(fp8, sc, 0, sc->numel, want_s);
        mt_fp8_quantize(xv, 1, rows, cols, 16, 16, got, got_s);
        const uint8_t *want = mt_safetensors_bytes(fp8, q);
        for (int64_t e = 0; e < q->numel; e++) codes_off += got[e] != want[e];
        scales_off += memcmp(got_s, want_s, sizeof(float) * (size_t)sc->numel) != 0;
        codes += q->numel;
        tensors++;
        free(xv);
        free(want_s);
        free(got_s);
        free(got);
    }
    printf("  %d tensors, %lld e4m3 codes: %d differ from transformers' Fp8Quantize; %d tensors' "
           "scales differ\n",
           tensors, (long long)codes, codes_off, scales_off);
    EXPECT(tensors == 56 && codes_off == 0 && scales_off == 0,
           "mt_fp8_quantize is transformers' Fp8Quantize bit for bit");
    mt_safetensors_close(fp32);
    mt_safetensors_close(fp8);
    return MT_TEST_OK;
}

/* ---- the fine-tune's export ---- */

static char *path_in(const char *a, const char *b) {
    static char buf[4][2048];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", a, b);
    return buf[k];
}

static cJSON *json_file(const char *path) {
    char err[1200];
    size_t len;
    char *text = mt_file_read_max(path, &len, 1 << 24, err, sizeof(err));
    EXPECT(text, "%s", err);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    free(text);
    return o;
}

/* The same names, dtypes and shapes in both. */
static void check_layout(const mt_safetensors *src, const mt_safetensors *out) {
    EXPECT(mt_safetensors_count(src) == mt_safetensors_count(out), "%d tensors in the source, %d",
           mt_safetensors_count(src), mt_safetensors_count(out));
    int same = 0;
    for (int i = 0; i < mt_safetensors_count(src); i++) {
        const mt_st_tensor *a = mt_safetensors_tensor(src, i);
        const mt_st_tensor *b = mt_safetensors_find(out, a->name);
        EXPECT(b, "the export lacks %s", a->name);
        if (!b) continue;
        bool ok = !strcmp(a->dtype_name, b->dtype_name) && a->ndim == b->ndim;
        for (int d = 0; ok && d < a->ndim; d++) ok = a->shape[d] == b->shape[d];
        EXPECT(ok, "%s: %s in the export, %s in the source (or another shape)", a->name,
               b->dtype_name, a->dtype_name);
        same += ok;
    }
    printf("  layout: %d of %d tensors with the source's name, dtype and shape\n", same,
           mt_safetensors_count(src));
}

static double half_ulp_e4m3(double y) {
    if (y < 0x1p-6) return 0x1p-10;
    return ldexp(1.0, (int)floor(log2(y)) - 4);
}

/* Parameter p's tensor in the FP8 export: the per-element bound check against the master. */
static void check_param(const mt_minimax *m, int p, const mt_safetensors *st, const float *w,
                        const float *x, const float *src_w, double stats[4]) {
    char name[200], sname[220];
    int64_t off;
    mt_weights_source_name(m, p, MT_NAMING_HF_V4, name, sizeof(name), &off);
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    EXPECT(t && off == 0, "%s not in the export as a whole tensor", name);
    if (!t || off != 0) return;
    const int64_t n = m->info[p].numel;
    if (t->dtype != MT_ST_F8_E4M3) {
        EXPECT(memcmp(w, x, sizeof(float) * (size_t)n) == 0, "%s (%s) differs from the master",
               name, t->dtype_name);
        return;
    }
    const int nd = t->ndim;
    const int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
    snprintf(sname, sizeof(sname), "%.*s.weight_scale_inv", (int)(strlen(name) - 7), name);
    const mt_st_tensor *sc = mt_safetensors_find(st, sname);
    EXPECT(sc, "no %s", sname);
    if (!sc) return;
    const int64_t gr = sc->shape[nd - 2], gc = sc->shape[nd - 1];
    const int64_t bm = (rows + gr - 1) / gr, bn = (cols + gc - 1) / gc;
    float *inv = malloc(sizeof(float) * (size_t)sc->numel), *q = malloc(sizeof(float) * (size_t)n);
    float *qmax = calloc((size_t)sc->numel, sizeof(float));
    mt_safetensors_read(st, sc, 0, sc->numel, inv);
    mt_safetensors_read(st, t, 0, n, q);
    int bad = 0;
    for (int64_t e = 0; e < n; e++) {
        const int64_t blk = (e / cols / bm) * gc + (e % cols) / bn;
        const double s = inv[blk], ax = fabs((double)x[e]);
        const double bound = s * half_ulp_e4m3(ax / s * (1 + 0x1p-20)) + 4 * ax * 0x1p-24;
        const double err = fabs((double)w[e] - (double)x[e]);
        bad += !(err <= bound);
        if (err / bound > stats[0]) stats[0] = err / bound;
        stats[1] += err > 0;
        stats[2] += fabs((double)x[e] - (double)src_w[e]) > bound; /* it trained */
        qmax[blk] = fmaxf(qmax[blk], fabsf(q[e]));
        if (bad == 1 && !(err <= bound))
            printf("  %s element %lld: master %.9g, loaded %.9g, error %.3g > bound %.3g\n", name,
                   (long long)e, (double)x[e], (double)w[e], err, bound);
    }
    int blocks_bad = 0;
    for (int64_t b = 0; b < sc->numel; b++) blocks_bad += qmax[b] != 448 && qmax[b] != 0;
    EXPECT(bad == 0, "%s: %d elements outside the FP8 rounding of the master", name, bad);
    EXPECT(blocks_bad == 0, "%s: %d blocks whose largest |q| is not 448", name, blocks_bad);
    stats[3] += 1;
    free(inv);
    free(q);
    free(qmax);
}

static int test_export_fp8(void) {
    const char *tmp = getenv("MT_TEST_TMPDIR"), *srcdir = getenv("MT_SOURCE_DIR");
    if (!tmp || !srcdir) return MT_TEST_SKIP;
    char fp8[1024], fp32[1024], src[1024];
    snprintf(fp8, sizeof(fp8), "%s/export-fp8/final", tmp);
    snprintf(fp32, sizeof(fp32), "%s/export-fp32/final", tmp);
    snprintf(src, sizeof(src), "%s/tests/fixtures/models/tiny_m2_fp8", srcdir);
    /* config.json: the source's quantization_config */
    cJSON *ca = json_file(path_in(src, "config.json")),
          *cb = json_file(path_in(fp8, "config.json"));
    EXPECT(ca && cb, "config.json of the source and the export");
    if (!ca || !cb) return MT_TEST_OK;
    const cJSON *qa = cJSON_GetObjectItem(ca, "quantization_config"),
                *qb = cJSON_GetObjectItem(cb, "quantization_config");
    EXPECT(qa && qb && cJSON_Compare(qa, qb, true),
           "quantization_config differs from the source's");
    cJSON_Delete(ca);
    cJSON_Delete(cb);
    mt_safetensors *ss = mt_safetensors_open(src), *so = mt_safetensors_open(fp8);
    check_layout(ss, so);

    /* the FP8 loader's weights against the fp32 master, parameter by parameter */
    mt_minimax_config cfg;
    mt_minimax_config_load(path_in(fp8, "config.json"), &cfg);
    EXPECT(cfg.fp8, "the export reads as FP8");
    mt_minimax mw, mx, ms;
    mt_minimax_init(&mw, &cfg);
    mt_minimax_init(&mx, &cfg);
    mt_minimax_init(&ms, &cfg);
    float **dw = mt_weights_load_host(fp8, &mw), **dx = mt_weights_load_host(fp32, &mx);
    float **ds = mt_weights_load_host(src, &ms);
    double stats[4] = {0, 0, 0, 0}; /* max err/bound, elements changed, trained, fp8 tensors */
    for (int p = 0; p < mw.n_params; p++)
        check_param(&mw, p, so, (const float *)mw.params[p].data, (const float *)mx.params[p].data,
                    (const float *)ms.params[p].data, stats);
    printf("  %g FP8 parameters: largest error %.3f of its bound, %g elements rounded, %g moved "
           "by the training beyond the rounding\n",
           stats[3], stats[0], stats[1], stats[2]);
    EXPECT(stats[3] > 0 && stats[1] > 0 && stats[2] > 0,
           "FP8 parameters checked, rounded, and trained");
    mt_weights_host_free(&mw, dw);
    mt_weights_host_free(&mx, dx);
    mt_weights_host_free(&ms, ds);
    mt_minimax_free(&mw);
    mt_minimax_free(&mx);
    mt_minimax_free(&ms);
    mt_safetensors_close(ss);
    mt_safetensors_close(so);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_fp8_e4m3", test_e4m3},
    {"parity_fp8_quantize", test_fp8_quantize},
    {"parity_export_fp8", test_export_fp8},
};
MT_TEST_MAIN(cases)
