/* model_io_files.c: safetensors reading/writing and the three checkpoint layouts (cases of
 * test_model_io, see model_io.c). bf16 and f16 references are the IEEE bit formulas, computed
 * here independently of the code under test. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "model_io.h"
#include "models/safetensors.h"
#include "models/weights.h"

/* ---- safetensors ---- */

/* bf16 by the definition of round-to-nearest-even: the two bf16 neighbours of x (by value),
 * the nearer one, the even one on a tie. Independent of the bit trick in the writer. */
static float ref_bf16(float x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x;
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t t = u & 0xffff0000u; /* toward zero */
    float ft;
    memcpy(&ft, &t, 4);
    int e = (int)((t >> 23) & 0xff);
    double ulp = e == 0 ? ldexp(1.0, -133) : ldexp(1.0, e - 127 - 7);
    double lo = fabs((double)ft), hi = lo + ulp, ax = fabs((double)x);
    bool up = (ax - lo > hi - ax) || (ax - lo == hi - ax && ((t >> 16) & 1));
    uint32_t r = up ? t + 0x10000u : t; /* past the largest finite value this is inf */
    float fr;
    memcpy(&fr, &r, 4);
    return fr;
}

static double ref_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static bool same_float(float a, float b) {
    return (isnan(a) && isnan(b)) || (a == b && !signbit(a) == !signbit(b));
}

/* The data digest every export records (docs/checkpoints.md): the values of the exports already
 * written (pinned: fnv1a64x4 as first released), and the same fed in pieces of any sizes, as the
 * loaders feed it while they read (models/weights_load.c). */
int test_safetensors_digest(void) {
    static const struct {
        size_t n;
        uint64_t want;
    } pinned[] = {{0, 0xf1fce322bc1daf2full},   {1, 0x927626e620c4792dull},
                  {31, 0xeb3709b9cbe2cdc4ull},  {32, 0x1e8104bbea7be423ull},
                  {33, 0x951990f1e6ff2fc7ull},  {999, 0x6d4dc9d145e38edaull},
                  {1000, 0x0698c84e7d933c7full}};
    uint8_t b[1000];
    for (int i = 0; i < 1000; i++) b[i] = (uint8_t)(i * 7 + 3);
    mt_rng rng;
    mt_rng_seed(&rng, 5);
    for (size_t k = 0; k < sizeof(pinned) / sizeof(pinned[0]); k++) {
        const size_t n = pinned[k].n;
        EXPECT(mt_digest64(b, n) == pinned[k].want, "digest of %zu bytes", n);
        for (int trial = 0; trial < 20; trial++) {
            mt_digest d;
            mt_digest_init(&d);
            for (size_t at = 0; at < n;) {
                size_t step = (size_t)(mt_rng_u64(&rng) % 70);
                if (step > n - at) step = n - at;
                mt_digest_update(&d, b + at, step);
                at += step;
            }
            EXPECT(mt_digest_final(&d) == pinned[k].want, "digest of %zu bytes in pieces", n);
        }
    }
    b[500] ^= 1;
    EXPECT(mt_digest64(b, 1000) != pinned[6].want, "one changed bit changes the digest");
    return MT_TEST_OK;
}

int test_safetensors_roundtrip(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 11);
    enum { NT = 5 };
    const char *names[NT] = {"a.weight", "b", "c.x", "scalar", "empty"};
    int ndims[NT] = {2, 1, 3, 0, 2};
    int64_t shapes[NT][3] = {{3, 5}, {700}, {2, 3, 4}, {0}, {0, 4}};
    int64_t numel[NT] = {15, 700, 24, 1, 0};
    float *data[NT];
    for (int i = 0; i < NT; i++) {
        data[i] = malloc(sizeof(float) * (size_t)(numel[i] + 1));
        mt_fill_normal(data[i], numel[i], 3.0f, &rng);
    }
    /* special values for the bf16 rounding: ties both ways, overflow to inf, subnormals */
    static const uint32_t special[] = {
        0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x00008000u, 0x00018000u,
        0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x3f80ffffu, 0xbf808001u, 0x00000001u};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        memcpy(&data[1][i], &special[i], 4);

    for (int pass = 0; pass < 2; pass++) {
        mt_st_dtype dt = pass == 0 ? MT_ST_F32 : MT_ST_BF16;
        const char *dir = tmp_path(pass == 0 ? "f32" : "bf16");
        /* 200-byte shards: several files and an index (the 700-element tensor alone) */
        mt_safetensors_writer *w = mt_safetensors_writer_open(dir, pass == 0 ? 200 : 0);
        for (int i = 0; i < NT; i++)
            mt_safetensors_writer_add(w, names[i], dt, ndims[i], shapes[i], data[i]);
        mt_safetensors_writer_close(w);
        EXPECT(access(tmp_path(pass == 0 ? "f32/model.safetensors.index.json"
                                         : "bf16/model.safetensors"),
                      F_OK) == 0,
               "pass %d: file layout", pass);
        mt_safetensors *st = mt_safetensors_open(dir);
        EXPECT(mt_safetensors_count(st) == NT, "tensor count %d", mt_safetensors_count(st));
        for (int i = 0; i < NT; i++) {
            const mt_st_tensor *t = mt_safetensors_find(st, names[i]);
            EXPECT(t && t->ndim == ndims[i] && t->numel == numel[i] && t->dtype == dt, "%s header",
                   names[i]);
            if (!t) continue;
            float *back = malloc(sizeof(float) * (size_t)(numel[i] + 1));
            mt_safetensors_read(st, t, 0, numel[i], back);
            int bad = 0;
            for (int64_t j = 0; j < numel[i]; j++) {
                float want = pass == 0 ? data[i][j] : ref_bf16(data[i][j]);
                bad += !same_float(back[j], want);
                if (!same_float(back[j], want) && bad < 4)
                    printf("  %s[%lld]: %.9g -> %.9g, want %.9g\n", names[i], (long long)j,
                           (double)data[i][j], (double)back[j], (double)want);
            }
            EXPECT(bad == 0, "%s (%s): %d elements differ", names[i], pass ? "bf16" : "f32", bad);
            /* element ranges */
            for (int k = 0; k < 5 && numel[i] > 0; k++) {
                int64_t lo = (int64_t)(mt_rng_u64(&rng) % (uint64_t)numel[i]);
                int64_t hi = lo + (int64_t)(mt_rng_u64(&rng) % (uint64_t)(numel[i] - lo + 1));
                float part[700];
                mt_safetensors_read(st, t, lo, hi, part);
                EXPECT(memcmp(part, back + lo, sizeof(float) * (size_t)(hi - lo)) == 0,
                       "%s range [%lld, %lld)", names[i], (long long)lo, (long long)hi);
            }
            free(back);
        }
        mt_safetensors_close(st);
    }
    /* Every bf16 and f16 bit pattern converts as the IEEE formulas say. */
    enum { N16 = 65536 };
    uint16_t *bits = malloc(2 * N16);
    for (int i = 0; i < N16; i++) bits[i] = (uint16_t)i;
    for (int pass = 0; pass < 2; pass++) {
        char header[256];
        snprintf(header, sizeof(header),
                 "{\"x\": {\"dtype\": \"%s\", \"shape\": [%d], \"data_offsets\": [0, %d]}}",
                 pass ? "F16" : "BF16", N16, 2 * N16);
        uint64_t hl = strlen(header);
        size_t total = 8 + hl + 2 * N16;
        uint8_t *file = malloc(total);
        memcpy(file, &hl, 8);
        memcpy(file + 8, header, hl);
        memcpy(file + 8 + hl, bits, 2 * N16);
        write_bytes(tmp_path("all16.safetensors"), file, total);
        free(file);
        mt_safetensors *st = mt_safetensors_open(tmp_path("all16.safetensors"));
        float *out = malloc(sizeof(float) * N16);
        mt_safetensors_read(st, mt_safetensors_find(st, "x"), 0, N16, out);
        int bad = 0;
        for (int i = 0; i < N16; i++) {
            uint32_t u = (uint32_t)i << 16;
            float want_bf;
            memcpy(&want_bf, &u, 4);
            double want = pass ? ref_f16((uint16_t)i) : (double)want_bf;
            bool ok = isnan(want) ? isnan(out[i])
                                  : ((double)out[i] == want && !signbit(out[i]) == !signbit(want));
            bad += !ok;
        }
        EXPECT(bad == 0, "%s decoding: %d of 65536 patterns wrong", pass ? "F16" : "BF16", bad);
        free(out);
        mt_safetensors_close(st);
    }
    free(bits);
    for (int i = 0; i < NT; i++) free(data[i]);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* A safetensors file with this header and data_len zero bytes; hl_override != 0 replaces the
 * length prefix. */
static const char *write_st(const char *name, const char *header, size_t data_len,
                            uint64_t hl_override) {
    const char *path = tmp_path(name);
    uint64_t hl = strlen(header);
    size_t total = 8 + hl + data_len;
    uint8_t *buf = calloc(1, total);
    uint64_t prefix = hl_override ? hl_override : hl;
    memcpy(buf, &prefix, 8);
    memcpy(buf + 8, header, hl);
    write_bytes(path, buf, total);
    free(buf);
    return path;
}

static void expect_st_error(const char *path, const char *needle, const char *needle2) {
    char err[1024] = "";
    mt_safetensors *st = mt_safetensors_try_open(path, err, sizeof(err));
    EXPECT(!st, "%s should be rejected (%s)", path, needle);
    EXPECT(strstr(err, needle) && (!needle2 || strstr(err, needle2)),
           "message \"%s\" should contain \"%s\"%s%s", err, needle, needle2 ? " and " : "",
           needle2 ? needle2 : "");
    mt_safetensors_close(st);
}

#define T_F32(name, shape, b, e)                                                                   \
    "\"" name "\": {\"dtype\": \"F32\", \"shape\": " shape ", \"data_offsets\": [" #b ", " #e "]}"

int test_safetensors_errors(void) {
    const char *p = tmp_path("short.safetensors");
    write_bytes(p, "\x10\0\0", 3);
    expect_st_error(p, "too short", NULL);
    p = write_st("hl_big.safetensors", "{}", 0, 1000);
    expect_st_error(p, "header length 1000", "past the end");
    p = write_st("hl_limit.safetensors", "{}", 0, 200000000ull);
    expect_st_error(p, "header length 200000000", "limit");
    p = write_st("json.safetensors", "{\"a\": {\"dtype\": ", 16, 0);
    expect_st_error(p, "JSON", NULL);
    p = write_st("size.safetensors", "{" T_F32("w.size", "[2, 2]", 0, 12) "}", 12, 0);
    expect_st_error(p, "w.size", "needs 16");
    p = write_st("overlap.safetensors",
                 "{" T_F32("w.a", "[4]", 0, 16) ", " T_F32("w.b", "[4]", 8, 24) "}", 24, 0);
    expect_st_error(p, "w.b", "overlap");
    p = write_st("gap.safetensors",
                 "{" T_F32("w.a", "[4]", 0, 16) ", " T_F32("w.b", "[4]", 20, 36) "}", 36, 0);
    expect_st_error(p, "w.b", "gap");
    p = write_st("past.safetensors", "{" T_F32("w.end", "[4]", 0, 16) "}", 8, 0);
    expect_st_error(p, "w.end", "8 bytes");
    p = write_st("tail.safetensors", "{" T_F32("w.tail", "[4]", 0, 16) "}", 20, 0);
    expect_st_error(p, "w.tail", "20 bytes");
    p = write_st("dtype.safetensors",
                 "{\"w.dt\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                 0);
    expect_st_error(p, "w.dt", "F33");
    p = write_st("dup.safetensors",
                 "{" T_F32("w.dup", "[1]", 0, 4) ", " T_F32("w.dup", "[1]", 4, 8) "}", 8, 0);
    expect_st_error(p, "w.dup", "twice");
    p = write_st("neg.safetensors", "{" T_F32("w.neg", "[-1]", 0, 4) "}", 4, 0);
    expect_st_error(p, "w.neg", "shape");

    /* dtype and shape against what the model needs */
    p = write_st(
        "typed.safetensors",
        "{\"w.int\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [0, 16]}, " T_F32(
            "w.f", "[2, 3]", 16, 40) "}",
        40, 0);
    mt_safetensors *st = mt_safetensors_open(p);
    char err[1024] = "";
    int64_t want[2] = {2, 3}, want2[2] = {3, 2};
    EXPECT(!mt_safetensors_check(st, mt_safetensors_find(st, "w.int"), 1, want, err, sizeof(err)) &&
               strstr(err, "w.int") && strstr(err, "I64"),
           "wrong dtype: %s", err);
    EXPECT(mt_safetensors_check(st, mt_safetensors_find(st, "w.f"), 2, want, err, sizeof(err)),
           "right shape accepted");
    EXPECT(!mt_safetensors_check(st, mt_safetensors_find(st, "w.f"), 2, want2, err, sizeof(err)) &&
               strstr(err, "w.f") && strstr(err, "[2, 3]") && strstr(err, "[3, 2]"),
           "shape mismatch: %s", err);
    mt_safetensors_close(st);

    /* sharded directory: index and files must agree */
    const char *dir = tmp_path("shards");
    mkdir(dir, 0777);
    write_st("shards/s1.safetensors", "{" T_F32("w.one", "[1]", 0, 4) "}", 4, 0);
    write_st("shards/s2.safetensors", "{" T_F32("w.two", "[1]", 0, 4) "}", 4, 0);
    write_text(tmp_path("shards/model.safetensors.index.json"),
               "{\"weight_map\": {\"w.one\": \"s1.safetensors\", \"w.two\": \"s1.safetensors\"}}");
    expect_st_error(dir, "w.two", "s1.safetensors");
    write_text(tmp_path("shards/model.safetensors.index.json"),
               "{\"weight_map\": {\"w.one\": \"s1.safetensors\"}}");
    st = mt_safetensors_try_open(dir, err, sizeof(err));
    EXPECT(st == NULL || mt_safetensors_count(st) == 1,
           "a file the index does not name is not read");
    mt_safetensors_close(st);
    write_text(tmp_path("shards/model.safetensors.index.json"),
               "{\"weight_map\": {\"w.one\": \"s1.safetensors\", \"w.two\": \"s3.safetensors\"}}");
    expect_st_error(dir, "s3.safetensors", NULL);
    write_text(tmp_path("shards/model.safetensors.index.json"),
               "{\"weight_map\": {\"w.one\": \"s1.safetensors\", \"w.two\": \"s2.safetensors\"}}");
    st = mt_safetensors_try_open(dir, err, sizeof(err));
    EXPECT(st && mt_safetensors_count(st) == 2, "a consistent index opens: %s", st ? "" : err);
    mt_safetensors_close(st);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* ---- weights ---- */

/* A model with every bucket bound to fresh memory (freed by model_free). */
static void model_new_unit(mt_minimax *m, const mt_minimax_config *cfg, mt_gather_unit unit) {
    mt_minimax_init_unit(m, cfg, unit);
    for (int b = 0; b < m->n_buckets; b++)
        mt_minimax_bind_bucket(m, b, calloc((size_t)m->bucket_numel[b], sizeof(float)), NULL);
}

static void model_new(mt_minimax *m, const mt_minimax_config *cfg) {
    model_new_unit(m, cfg, MT_GATHER_LAYER);
}

static float *bucket_data(const mt_minimax *m, int b) {
    for (int p = 0; p < m->n_params; p++)
        if (m->info[p].bucket == b) return (float *)m->params[p].data - m->info[p].offset;
    return NULL;
}

static void model_free(mt_minimax *m) {
    for (int b = 0; b < m->n_buckets; b++) free(bucket_data(m, b));
    mt_minimax_free(m);
}

static bool same_buckets(const mt_minimax *a, const mt_minimax *b, int n_buckets) {
    for (int k = 0; k < n_buckets; k++)
        if (a->bucket_numel[k] != b->bucket_numel[k] ||
            memcmp(bucket_data(a, k), bucket_data(b, k),
                   sizeof(float) * (size_t)a->bucket_numel[k]))
            return false;
    return true;
}

static void expect_weights_error(const char *dir, const mt_minimax *m, const char *needle,
                                 const char *needle2) {
    char err[1024] = "";
    mt_weights_reader *r = mt_weights_try_open(dir, m, err, sizeof(err));
    EXPECT(!r, "%s should be rejected (%s)", dir, needle);
    EXPECT(strstr(err, needle) && (!needle2 || strstr(err, needle2)),
           "message \"%s\" should contain \"%s\" %s", err, needle, needle2 ? needle2 : "");
    mt_weights_close(r);
}

/* Initialisation: norms 1, pad row 0 (pad_token_id 5), N(0, 0.02) elsewhere; ranges (drawn
 * from rng) match the whole. */
static void weights_check_init(const mt_minimax *m_, mt_rng *rng) {
    const mt_minimax m = *m_;
    for (int p = 0; p < m.n_params; p++) {
        const mt_param_info *i = &m.info[p];
        const float *x = m.params[p].data;
        double s1 = 0, s2 = 0;
        for (int64_t j = 0; j < i->numel; j++) s1 += x[j], s2 += (double)x[j] * x[j];
        if (i->ndim == 1) {
            EXPECT(s1 == (double)i->numel && s2 == (double)i->numel, "%s: ones", i->name);
        } else if (i->numel >= 3072) { /* the sample std is within 5% with >= 3000 draws */
            double sd = sqrt(s2 / (double)i->numel);
            EXPECT(fabs(sd - 0.02) < 0.001 && fabs(s1 / (double)i->numel) < 0.002,
                   "%s: std %.5f mean %.5f", i->name, sd, s1 / (double)i->numel);
        }
    }
    const float *emb = m.params[0].data;
    bool pad_zero = true;
    for (int c = 0; c < 32; c++) pad_zero &= emb[5 * 32 + c] == 0.0f;
    EXPECT(pad_zero && emb[4 * 32] != 0.0f, "pad row zero");
    for (int k = 0; k < 20; k++) {
        int b = (int)(mt_rng_u64(rng) % (uint64_t)m.n_buckets);
        int64_t n = m.bucket_numel[b];
        int64_t lo = (int64_t)(mt_rng_u64(rng) % (uint64_t)n);
        int64_t hi = lo + (int64_t)(mt_rng_u64(rng) % (uint64_t)(n - lo + 1));
        float *part = malloc(sizeof(float) * (size_t)(hi - lo + 1));
        mt_weights_init_random_range(&m, 1234, b, lo, hi, part);
        EXPECT(memcmp(part, bucket_data(&m, b) + lo, sizeof(float) * (size_t)(hi - lo)) == 0,
               "init range [%lld, %lld) of bucket %d", (long long)lo, (long long)hi, b);
        free(part);
    }
}

/* The v5 fused tensors of the export in dir, read directly: gate_up_proj[e] = [w1_e; w3_e],
 * down_proj[e] = w2_e. */
static void weights_check_v5_fused(const mt_minimax *m_, const char *dir) {
    const mt_minimax m = *m_;
    mt_safetensors *st = mt_safetensors_open(dir);
    const mt_st_tensor *gu = mt_safetensors_find(st, "model.layers.2.mlp.experts.gate_up_proj");
    const mt_st_tensor *dn = mt_safetensors_find(st, "model.layers.2.mlp.experts.down_proj");
    EXPECT(gu && gu->ndim == 3 && gu->shape[0] == 4 && gu->shape[1] == 48 && gu->shape[2] == 32,
           "gate_up_proj shape");
    EXPECT(dn && dn->ndim == 3 && dn->shape[0] == 4 && dn->shape[1] == 32 && dn->shape[2] == 24,
           "down_proj shape");
    EXPECT(mt_safetensors_find(st, "model.layers.2.mlp.gate.weight") &&
               !mt_safetensors_find(st, "model.layers.2.block_sparse_moe.gate.weight"),
           "v5 router name");
    if (gu && dn) {
        float *g = malloc(sizeof(float) * 4 * 48 * 32), *d = malloc(sizeof(float) * 4 * 32 * 24);
        mt_safetensors_read(st, gu, 0, gu->numel, g);
        mt_safetensors_read(st, dn, 0, dn->numel, d);
        for (int e = 0; e < 4; e++) {
            char name[128];
            snprintf(name, sizeof(name), "model.layers.2.block_sparse_moe.experts.%d.w1.weight", e);
            const float *w1 = m.params[mt_minimax_find_param(m_, name)].data;
            snprintf(name, sizeof(name), "model.layers.2.block_sparse_moe.experts.%d.w3.weight", e);
            const float *w3 = m.params[mt_minimax_find_param(m_, name)].data;
            snprintf(name, sizeof(name), "model.layers.2.block_sparse_moe.experts.%d.w2.weight", e);
            const float *w2 = m.params[mt_minimax_find_param(m_, name)].data;
            EXPECT(memcmp(g + e * 48 * 32, w1, sizeof(float) * 24 * 32) == 0 &&
                       memcmp(g + e * 48 * 32 + 24 * 32, w3, sizeof(float) * 24 * 32) == 0 &&
                       memcmp(d + e * 32 * 24, w2, sizeof(float) * 32 * 24) == 0,
                   "expert %d fused rows", e);
        }
        free(g);
        free(d);
    }
    mt_safetensors_close(st);
}

/* BF16 export: every value is a bf16 neighbour (half an ulp: relative error <= 2^-8). */
static void weights_check_bf16(const mt_minimax *m_, const mt_minimax_config *cfg) {
    const mt_minimax m = *m_;
    mt_weights_save(tmp_path("bf16"), m_, MT_NAMING_HF_V4, MT_BF16, 0);
    mt_minimax b16;
    model_new(&b16, cfg);
    mt_weights_load(tmp_path("bf16"), &b16);
    double worst = 0;
    for (int b = 0; b < m.n_buckets; b++)
        for (int64_t j = 0; j < m.bucket_numel[b]; j++) {
            double x = bucket_data(&m, b)[j], y = bucket_data(&b16, b)[j];
            if (x != 0) worst = fmax(worst, fabs(x - y) / fabs(x));
        }
    EXPECT(worst > 0 && worst <= 1.0 / 256, "bf16 export relative error %.3g", worst);
    model_free(&b16);
}

/* A config that disagrees with the exports in dirs (v4, v5, original): the tensor is named. */
static void weights_check_mismatch(const mt_minimax_config *cfg, const char *const *dirs) {
    mt_minimax_config other = *cfg;
    other.num_local_experts = 3;
    mt_minimax o;
    mt_minimax_init(&o, &other);
    expect_weights_error(dirs[0], &o, "model.layers.0.block_sparse_moe.gate.weight", "[3, 32]");
    mt_minimax_free(&o);
    other = *cfg;
    other.layer_types[3] = MT_LAYER_LINEAR;
    mt_minimax_init(&o, &other);
    expect_weights_error(dirs[2], &o, "missing tensor model.layers.3.self_attn.qkv_proj.weight",
                         NULL);
    mt_minimax_free(&o);
    other = *cfg;
    other.intermediate_size = 20;
    mt_minimax_init(&o, &other);
    expect_weights_error(dirs[0], &o, "experts.0.w1.weight", "[24, 32]");
    expect_weights_error(dirs[1], &o, "gate_up_proj", "[4, 48, 32]");
    mt_minimax_free(&o);
}

/* Checkpoints with more tensors than parameters. transformers >= 5 saves the lightning
 * decay buffers: accepted when slope_rate matches the config's decay (variant 0), else
 * the tensor is named (1: a slope off by 0.1%); anything else is unexpected (2, 3). */
static void weights_check_decay_buffers(const mt_minimax *m_, const mt_minimax_config *cfg_) {
    const mt_minimax m = *m_;
    const mt_minimax_config cfg = *cfg_;
    for (int variant = 0; variant < 4; variant++) {
        char dir[64];
        snprintf(dir, sizeof(dir), "extra%d", variant);
        mt_safetensors_writer *w = mt_safetensors_writer_open(tmp_path(dir), 0);
        for (int p = 0; p < m.n_params; p++)
            mt_safetensors_writer_add(w, m.info[p].name, MT_ST_F32, m.info[p].ndim, m.info[p].shape,
                                      m.params[p].data);
        int H = cfg.num_attention_heads, BS = cfg.block_size;
        float *zeros = calloc((size_t)(H * BS * BS), sizeof(float)), slope[4];
        for (int l = 0; l < 3; l++) { /* the linear layers */
            char name[128];
            for (int h = 0; h < H; h++)
                slope[h] = m.decay[l * H + h] * (variant == 1 && l == 2 ? 1.001f : 1.0f);
            snprintf(name, sizeof(name), "model.layers.%d.self_attn.slope_rate", l);
            mt_safetensors_writer_add(w, name, MT_ST_F32, 3, (int64_t[]){H, 1, 1}, slope);
            snprintf(name, sizeof(name), "model.layers.%d.self_attn.query_decay", l);
            mt_safetensors_writer_add(w, name, MT_ST_F32, 3, (int64_t[]){H, BS, 1}, zeros);
            snprintf(name, sizeof(name), "model.layers.%d.self_attn.key_decay", l);
            mt_safetensors_writer_add(w, name, MT_ST_F32, 3, (int64_t[]){H, BS, 1}, zeros);
            snprintf(name, sizeof(name), "model.layers.%d.self_attn.diagonal_decay", l);
            mt_safetensors_writer_add(w, name, MT_ST_F32, 4, (int64_t[]){1, H, BS, BS}, zeros);
        }
        if (variant == 2) /* the softmax layer has no decay */
            mt_safetensors_writer_add(w, "model.layers.3.self_attn.slope_rate", MT_ST_F32, 3,
                                      (int64_t[]){H, 1, 1}, slope);
        if (variant == 3)
            mt_safetensors_writer_add(w, "model.layers.1.self_attn.bias", MT_ST_F32, 1,
                                      (int64_t[]){4}, slope);
        mt_safetensors_writer_close(w);
        free(zeros);
        if (variant == 0) {
            mt_minimax back;
            model_new(&back, &cfg);
            mt_weights_load(tmp_path(dir), &back);
            EXPECT(same_buckets(&m, &back, m.n_buckets), "checkpoint with decay buffers loads");
            model_free(&back);
        } else if (variant == 1) {
            expect_weights_error(tmp_path(dir), &m, "model.layers.2.self_attn.slope_rate",
                                 "denominator");
        } else {
            expect_weights_error(tmp_path(dir), &m,
                                 variant == 2
                                     ? "unexpected tensor model.layers.3.self_attn.slope_rate"
                                     : "unexpected tensor model.layers.1.self_attn.bias",
                                 NULL);
        }
    }
}

int test_weights_layouts(void) {
    write_json_with(tmp_path("hf.json"), TINY_HF, "pad_token_id", "5");
    mt_minimax_config cfg = parse_ok(tmp_path("hf.json"));
    mt_minimax m;
    model_new(&m, &cfg);
    mt_weights_init_random(&m, 1234);

    mt_rng rng;
    mt_rng_seed(&rng, 3);
    weights_check_init(&m, &rng);

    /* Save in all three layouts (v4 sharded), load back: identical parameters. */
    const char *dirs[3] = {tmp_path("v4"), tmp_path("v5"), tmp_path("orig")};
    for (int k = 0; k < 3; k++) {
        mt_naming naming = (mt_naming)k;
        mt_weights_save(dirs[k], &m, naming, MT_F32, k == 0 ? 40000 : 0);
        mt_minimax_config back_cfg = parse_ok(dirs[k]);
        EXPECT(back_cfg.original_schema == (naming == MT_NAMING_ORIGINAL), "%s config schema",
               mt_naming_name(naming));
        mt_minimax back;
        model_new(&back, &back_cfg);
        mt_naming found = mt_weights_load(dirs[k], &back);
        EXPECT(found == naming, "layout detected as %s, saved as %s", mt_naming_name(found),
               mt_naming_name(naming));
        EXPECT(same_buckets(&m, &back, m.n_buckets), "%s: parameters differ after reload",
               mt_naming_name(naming));
        for (int t = 0; t < 10; t++) {
            int b = (int)(mt_rng_u64(&rng) % (uint64_t)m.n_buckets);
            int64_t n = m.bucket_numel[b];
            int64_t lo = (int64_t)(mt_rng_u64(&rng) % (uint64_t)n);
            int64_t hi = lo + (int64_t)(mt_rng_u64(&rng) % (uint64_t)(n - lo + 1));
            float *part = malloc(sizeof(float) * (size_t)(hi - lo + 1));
            mt_weights_load_range(dirs[k], &back, b, lo, hi, part);
            EXPECT(memcmp(part, bucket_data(&m, b) + lo, sizeof(float) * (size_t)(hi - lo)) == 0,
                   "%s: range [%lld, %lld) of bucket %d", mt_naming_name(naming), (long long)lo,
                   (long long)hi, b);
            free(part);
        }
        model_free(&back);
    }
    EXPECT(access(tmp_path("v4/model.safetensors.index.json"), F_OK) == 0, "v4 is sharded");

    weights_check_v5_fused(&m, dirs[1]);
    weights_check_bf16(&m, &cfg);

    /* First-N-layers override: the 4-layer checkpoint loads into 2 layers. */
    mt_minimax_config cut = cfg;
    mt_minimax_config_keep_layers(&cut, 2);
    mt_minimax small;
    model_new(&small, &cut);
    mt_weights_load(dirs[1], &small);
    EXPECT(same_buckets(&m, &small, 3), "first 2 layers + embedding equal");
    /* without the override a 2-layer config meets a 4-layer checkpoint: named as the layer
     * count in every naming, before the decay buffers of the transformers namings (whose
     * slopes depend on the layer count) are checked */
    small.cfg.num_hidden_layers_source = 2;
    for (int k = 0; k < 3; k++)
        expect_weights_error(dirs[k], &small, "tensors hold 4 decoder layers",
                             "config.json's num_hidden_layers is 2");
    model_free(&small);

    weights_check_mismatch(&cfg, dirs);

    weights_check_decay_buffers(&m, &cfg);
    model_free(&m);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* Every parameter of a holds the values of the same elements of its tensor in b (found by name;
 * a vocabulary part of either model at its offset in the other's parts), and b has no other. */
static bool same_params(const mt_minimax *a, const mt_minimax *b) {
    int64_t total_a = 0, total_b = 0;
    for (int q = 0; q < b->n_params; q++) total_b += b->info[q].numel;
    for (int p = 0; p < a->n_params; p++) {
        const mt_param_info *ia = &a->info[p];
        total_a += ia->numel;
        for (int64_t i = 0; i < ia->numel; i++) {
            const int64_t at = ia->src_offset + i; /* element of the tensor */
            bool found = false;
            for (int q = 0; q < b->n_params && !found; q++) {
                const mt_param_info *ib = &b->info[q];
                if (strcmp(ib->name, ia->name) || at < ib->src_offset ||
                    at >= ib->src_offset + ib->numel)
                    continue;
                if (((const float *)a->params[p].data)[i] !=
                    ((const float *)b->params[q].data)[at - ib->src_offset])
                    return false;
                found = true;
            }
            if (!found) return false;
        }
    }
    return total_a == total_b;
}

/* The gather units are a layout of memory only: the same random initialisation, the same
 * exported tensors in every naming (v5's fused experts come together from E buckets), and a
 * checkpoint saved from one loads into the other. */
int test_weights_gather_units(void) {
    write_json_with(tmp_path("hf.json"), TINY_HF, "pad_token_id", "5");
    mt_minimax_config cfg = parse_ok(tmp_path("hf.json"));
    mt_minimax ml, mx;
    model_new_unit(&ml, &cfg, MT_GATHER_LAYER);
    model_new_unit(&mx, &cfg, MT_GATHER_EXPERT);
    mt_weights_init_random(&ml, 77);
    mt_weights_init_random(&mx, 77);
    EXPECT(same_params(&ml, &mx), "random initialisation depends on the gather unit");
    for (int k = 0; k < 3; k++) {
        const mt_naming naming = (mt_naming)k;
        char dl[64], dx[64];
        snprintf(dl, sizeof(dl), "units-layer-%d", k);
        snprintf(dx, sizeof(dx), "units-expert-%d", k);
        /* small shards: shard boundaries fall between the expert buckets' tensors */
        mt_weights_save(tmp_path(dl), &ml, naming, MT_F32, 30000);
        mt_weights_save(tmp_path(dx), &mx, naming, MT_F32, 30000);
        mt_safetensors *sl = mt_safetensors_open(tmp_path(dl)),
                       *sx = mt_safetensors_open(tmp_path(dx));
        int same = mt_safetensors_count(sl) == mt_safetensors_count(sx);
        for (int i = 0; same && i < mt_safetensors_count(sl); i++) {
            const mt_st_tensor *a = mt_safetensors_tensor(sl, i);
            const mt_st_tensor *b = mt_safetensors_find(sx, a->name);
            same = b && b->numel == a->numel;
            if (!same) break;
            float *va = malloc(sizeof(float) * (size_t)a->numel),
                  *vb = malloc(sizeof(float) * (size_t)a->numel);
            mt_safetensors_read(sl, a, 0, a->numel, va);
            mt_safetensors_read(sx, b, 0, b->numel, vb);
            same = memcmp(va, vb, sizeof(float) * (size_t)a->numel) == 0;
            free(va);
            free(vb);
        }
        EXPECT(same, "%s: the exports of the two gather units differ", mt_naming_name(naming));
        mt_safetensors_close(sl);
        mt_safetensors_close(sx);
        /* across: layer-unit export into an expert-unit model, and back */
        mt_minimax bx, bl;
        const mt_minimax_config saved = parse_ok(tmp_path(dl)); /* the schema of the naming */
        model_new_unit(&bx, &saved, MT_GATHER_EXPERT);
        model_new_unit(&bl, &saved, MT_GATHER_LAYER);
        EXPECT(mt_weights_load(tmp_path(dl), &bx) == naming && same_params(&ml, &bx),
               "%s: layer-unit export into an expert-unit model", mt_naming_name(naming));
        EXPECT(mt_weights_load(tmp_path(dx), &bl) == naming && same_params(&ml, &bl),
               "%s: expert-unit export into a layer-unit model", mt_naming_name(naming));
        model_free(&bx);
        model_free(&bl);
    }
    model_free(&ml);
    model_free(&mx);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* An M2 export from the FP8 release form (tests/fixtures/models/tiny_m2_fp8: e4m3 weights with
 * block scales, a quantization_config, one multi-token-prediction module): bf16 weights, no
 * quantization_config in config.json, the MTP tensors (FP8 with their scales) byte for byte, the
 * correction biases in fp32 with the values read; the export loads again, the MTP tensors still
 * carried. */
int test_weights_export_m2(void) {
    char src[1024];
    snprintf(src, sizeof(src), "%s/tests/fixtures/models/tiny_m2_fp8",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    mt_minimax_config cfg;
    mt_minimax_config_load(src, &cfg);
    EXPECT(cfg.fp8 && cfg.num_mtp_modules == 1, "the fixture is FP8 with one MTP module");
    mt_minimax m;
    model_new(&m, &cfg);
    const mt_naming naming = mt_weights_load(src, &m);
    const char *dir = tmp_path("m2-export");
    mt_weights_writer *w = mt_weights_writer_open(dir, &m, naming, MT_BF16, 0);
    mt_weights_writer_carry(w, src);
    for (int b = 0; b < m.n_buckets; b++) mt_weights_writer_add_bucket(w, b, bucket_data(&m, b));
    mt_weights_writer_close(w);

    char path[1200], text[8192] = "";
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    EXPECT(f, "no %s", path);
    if (f) text[fread(text, 1, sizeof(text) - 1, f)] = 0, fclose(f);
    EXPECT(strstr(text, "\"minimax_m2\"") && !strstr(text, "quantization_config") &&
               strstr(text, "\"num_mtp_modules\":\t1"),
           "exported config.json: minimax_m2, no quantization_config, the MTP metadata:\n%s", text);
    mt_safetensors *in = mt_safetensors_open(src), *out = mt_safetensors_open(dir);
    int carried = 0, biases = 0, bf16 = 0;
    for (int i = 0; i < mt_safetensors_count(in); i++) {
        const mt_st_tensor *a = mt_safetensors_tensor(in, i);
        const bool mtp = strstr(a->name, ".mtp.") != NULL;
        const bool bias = strstr(a->name, "e_score_correction_bias") != NULL;
        if (!mtp && !bias) continue;
        const mt_st_tensor *b = mt_safetensors_find(out, a->name);
        EXPECT(b, "export lacks %s", a->name);
        if (!b) continue;
        bool same = b->ndim == a->ndim && b->numel == a->numel &&
                    strcmp(b->dtype_name, mtp ? a->dtype_name : "F32") == 0;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        float *va = malloc(sizeof(float) * (size_t)a->numel),
              *vb = malloc(sizeof(float) * (size_t)a->numel);
        if (same) {
            mt_safetensors_read(in, a, 0, a->numel, va);
            mt_safetensors_read(out, b, 0, b->numel, vb);
            same = memcmp(va, vb, sizeof(float) * (size_t)a->numel) == 0;
        }
        EXPECT(same, "%s: %s %s in the export, %s in the source, or other values", a->name,
               b->dtype_name, mtp ? "" : "(F32 expected)", a->dtype_name);
        free(va);
        free(vb);
        carried += mtp;
        biases += bias;
    }
    for (int i = 0; i < mt_safetensors_count(out); i++) {
        const mt_st_tensor *b = mt_safetensors_tensor(out, i);
        bf16 += strstr(b->name, "self_attn.q_proj.weight") && !strcmp(b->dtype_name, "BF16");
        EXPECT(!strstr(b->name, "weight_scale_inv") || strstr(b->name, ".mtp."),
               "%s: only the carried MTP tensors keep FP8 scales", b->name);
    }
    printf("  %d MTP tensors carried byte for byte, %d correction biases in fp32, %d q_proj in "
           "bf16\n",
           carried, biases, bf16);
    EXPECT(carried == 3 && biases == cfg.num_hidden_layers && bf16 == cfg.num_hidden_layers,
           "%d carried, %d biases, %d bf16 q_proj", carried, biases, bf16);
    mt_safetensors_close(in);
    mt_safetensors_close(out);
    /* the export loads again: unquantised, the MTP tensors carried, the biases as trained */
    mt_minimax_config ecfg;
    mt_minimax_config_load(dir, &ecfg);
    mt_minimax e;
    model_new(&e, &ecfg);
    mt_weights_reader *r = mt_weights_open(dir, &e);
    char what[512];
    mt_weights_describe(r, what, sizeof(what));
    printf("  export: %s\n", what);
    EXPECT(!ecfg.fp8 && strstr(what, "3 multi-token-prediction tensors") && !strstr(what, "FP8"),
           "export read back: fp8 %d, %s", ecfg.fp8, what);
    mt_weights_close(r);
    model_free(&e);
    model_free(&m);
    tmp_cleanup();
    return MT_TEST_OK;
}
