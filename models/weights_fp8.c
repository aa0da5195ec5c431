/* weights_fp8.c: the block-FP8 export (output.export_dtype = "fp8", models/weights.h): fp32
 * weights quantised to float8_e4m3fn per block of the source's weight_block_size, with their
 * weight_scale_inv, as transformers' Fp8Quantize (integrations/finegrained_fp8.py, the code the
 * loader's Fp8Dequantize inverts) computes them: per block amax = max |x|; scale = 448 / amax
 * (1 for an all-zero block), weight_scale_inv = 1 / scale (fp32, what the loader multiplies
 * by: models/weights_load.c wt_fp8_dequantize), q = e4m3(clamp(x * scale, -448, 448)) rounded
 * to nearest, ties to even. Each division is torch's scalar-over-tensor one, a reciprocal then
 * a multiply, so that the bytes are Fp8Quantize's (parity_fp8_quantize). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "models/weights.h"
#include "models/weights_internal.h"

#define FP8_MAX 448.0f

uint8_t mt_f32_to_f8e4m3(float x) {
    if (isnan(x)) return 0x7f;
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    if (a >= FP8_MAX) return sign | 0x7e; /* saturate (e4m3fn has no infinity) */
    if (a < 0x1p-6f) { /* subnormal: m x 2^-9, m in [0, 8] (8 is the smallest normal 0x08) */
        return sign | (uint8_t)lrintf(a * 512.0f); /* exact scaling, rint: ties to even */
    }
    uint32_t u;
    memcpy(&u, &a, 4);
    u += 0x7ffffu + ((u >> 20) & 1u); /* keep 3 mantissa bits, ties to even */
    const int e = (int)(u >> 23) - 127 + 7, m = (int)((u >> 20) & 7u);
    if (e > 15 || (e == 15 && m == 7)) return sign | 0x7e;
    return sign | (uint8_t)(e << 3 | m);
}

void mt_fp8_quantize(const float *x, int64_t mats, int64_t rows, int64_t cols, int bm, int bn,
                     uint8_t *q, float *scale_inv) {
    const int64_t gr = (rows + bm - 1) / bm, gc = (cols + bn - 1) / bn;
    for (int64_t k = 0; k < mats; k++)
        for (int64_t bi = 0; bi < gr; bi++)
            for (int64_t bj = 0; bj < gc; bj++) {
                const int64_t r1 = bi * bm + bm < rows ? bi * bm + bm : rows;
                const int64_t c1 = bj * bn + bn < cols ? bj * bn + bn : cols;
                const float *xm = x + k * rows * cols;
                uint8_t *qm = q + k * rows * cols;
                float amax = 0;
                for (int64_t i = bi * bm; i < r1; i++)
                    for (int64_t j = bj * bn; j < c1; j++)
                        amax = fmaxf(amax, fabsf(xm[i * cols + j]));
                /* torch's `448 / amax` (a scalar over a tensor) is reciprocal, then multiply */
                const float scale = amax > 0 ? (1.0f / amax) * FP8_MAX : 1.0f;
                scale_inv[(k * gr + bi) * gc + bj] = 1.0f / scale;
                for (int64_t i = bi * bm; i < r1; i++)
                    for (int64_t j = bj * bn; j < c1; j++) {
                        float y = xm[i * cols + j] * scale;
                        y = y > FP8_MAX ? FP8_MAX : y < -FP8_MAX ? -FP8_MAX : y;
                        qm[i * cols + j] = mt_f32_to_f8e4m3(y);
                    }
            }
}

/* ---- the mirror of an FP8 source ---- */

mt_st_dtype mt_weights_mirror_dtype(const mt_safetensors *src, const char *name) {
    const mt_st_tensor *t = mt_safetensors_find(src, name);
    MT_CHECK(t,
             "output.export_dtype = \"fp8\": the source checkpoint has no tensor %s (the "
             "export mirrors the source's tensors)",
             name);
    MT_CHECK(t->dtype == MT_ST_F32 || t->dtype == MT_ST_BF16 || t->dtype == MT_ST_F8_E4M3,
             "output.export_dtype = \"fp8\": %s: tensor %s is %s in the source; the FP8 export "
             "writes F8_E4M3, F32 or BF16",
             mt_safetensors_file(src, t), name, t->dtype_name);
    return t->dtype;
}

void mt_weights_mirror_add(mt_safetensors_writer *st, const mt_safetensors *src,
                           const mt_minimax_config *cfg, const char *name, int ndim,
                           const int64_t *shape, const float *data) {
    const mt_st_dtype dt = mt_weights_mirror_dtype(src, name);
    if (dt != MT_ST_F8_E4M3) {
        mt_safetensors_writer_add(st, name, dt, ndim, shape, data);
        return;
    }
    MT_CHECK(ndim >= 2, "output.export_dtype = \"fp8\": %s is not a matrix", name);
    const int64_t rows = shape[ndim - 2], cols = shape[ndim - 1];
    int64_t mats = 1;
    for (int d = 0; d < ndim - 2; d++) mats *= shape[d];
    const int bm = cfg->fp8_block[0], bn = cfg->fp8_block[1];
    int64_t sshape[MT_ST_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sshape[d] = shape[d];
    sshape[ndim - 2] = (rows + bm - 1) / bm;
    sshape[ndim - 1] = (cols + bn - 1) / bn;
    const int64_t n_scale = mats * sshape[ndim - 2] * sshape[ndim - 1];
    uint8_t *q = mt_malloc((size_t)(mats * rows * cols), "fp8 weights");
    float *inv = mt_malloc(sizeof(float) * (size_t)n_scale, "fp8 scales");
    mt_fp8_quantize(data, mats, rows, cols, bm, bn, q, inv);
    mt_safetensors_writer_add_raw(st, name, "F8_E4M3", ndim, shape, q,
                                  (size_t)(mats * rows * cols));
    char sname[200];
    const size_t len = strlen(name);
    MT_CHECK(len > 7 && !strcmp(name + len - 7, ".weight"), "fp8: %s is no .weight", name);
    snprintf(sname, sizeof(sname), "%.*s.weight_scale_inv", (int)(len - 7), name);
    const mt_st_tensor *ss = mt_safetensors_find(src, sname);
    MT_CHECK(ss && ss->dtype == MT_ST_F32,
             "output.export_dtype = \"fp8\": the source's block scales %s are %s; the FP8 export "
             "writes F32 scales",
             sname, ss ? ss->dtype_name : "missing");
    mt_safetensors_writer_add(st, sname, MT_ST_F32, ndim, sshape, inv);
    free(q);
    free(inv);
}

/* ---- config.json: dtype, and an FP8 export's quantization_config ---- */

/* The source config.json's value of key (NULL when absent), detached for the caller. */
static cJSON *wt_source_key(const char *src_dir, const char *key) {
    char path[4200], err[1200];
    snprintf(path, sizeof(path), "%s/config.json", src_dir);
    size_t len;
    char *text = mt_file_read_max(path, &len, (size_t)64 << 20, err, sizeof(err));
    MT_CHECK(text, "%s", err);
    cJSON *root = cJSON_Parse(text);
    free(text);
    MT_CHECK(root, "%s: not JSON", path);
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(root, key);
    cJSON_Delete(root);
    return v;
}

/* The keys are added to the text as written (a parse and print would turn 0.0 into 0, which
 * transformers' strict config fields refuse). */
void mt_weights_config_patch(const char *dir, const char *dtype, const char *fp8_src_dir) {
    char path[4200], err[1200];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    size_t len;
    char *text = mt_file_read_max(path, &len, (size_t)64 << 20, err, sizeof(err));
    MT_CHECK(text, "%s", err);
    cJSON *o = cJSON_Parse(text); /* keys a family writes itself (a VL config's) stay */
    MT_CHECK(o, "%s: not JSON", path);
    const bool has_dtype = cJSON_HasObjectItem(o, "dtype");
    const bool has_torch = cJSON_HasObjectItem(o, "torch_dtype");
    cJSON_Delete(o);
    char *end = strrchr(text, '}');
    MT_CHECK(end, "%s: not a JSON object", path);
    *end = 0;
    while (end > text && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) *--end = 0;
    cJSON *src_dtype = NULL;
    char *q_text = NULL;
    if (fp8_src_dir) { /* the release's: its unquantised tensors' dtype, its scheme */
        src_dtype = wt_source_key(fp8_src_dir, "dtype");
        if (!src_dtype) src_dtype = wt_source_key(fp8_src_dir, "torch_dtype");
        cJSON *q = wt_source_key(fp8_src_dir, "quantization_config");
        MT_CHECK(q, "%s/config.json: no quantization_config", fp8_src_dir);
        q_text = cJSON_Print(q);
        cJSON_Delete(q);
        MT_CHECK(q_text, "cannot format quantization_config");
    }
    const char *name = src_dtype && cJSON_IsString(src_dtype) ? src_dtype->valuestring : dtype;
    const size_t cap = strlen(text) + (q_text ? strlen(q_text) : 0) + 2 * strlen(name) + 128;
    char *out = mt_malloc(cap, "config.json");
    /* transformers v5 reads "dtype"; v4 releases (and v5 when dtype is absent) "torch_dtype" */
    int n = snprintf(out, cap, "%s", text);
    if (!has_dtype) n += snprintf(out + n, cap - (size_t)n, ",\n\t\"dtype\":\t\"%s\"", name);
    if (!has_torch && !has_dtype) /* a family's own dtype: no second opinion */
        n += snprintf(out + n, cap - (size_t)n, ",\n\t\"torch_dtype\":\t\"%s\"", name);
    if (q_text)
        n += snprintf(out + n, cap - (size_t)n, ",\n\t\"quantization_config\":\t%s", q_text);
    n += snprintf(out + n, cap - (size_t)n, "\n}\n");
    mt_file_write_atomic(path, out, (size_t)n);
    free(out);
    free(text);
    cJSON_free(q_text);
    cJSON_Delete(src_dtype);
}
