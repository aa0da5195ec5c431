/* weights_init.c: random initialisation of the parameter buckets (models/weights.h,
 * mt_weights_init_random_range). Apart from weights.c so that builds without cJSON (the
 * standalone GPU benchmark build, launch/gpu-check.sh) can initialise a model. */
#include <math.h>
#include <string.h>

#include "models/weights.h"

static uint64_t wt_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a of a parameter's name: its stream does not depend on the layout (gather unit). */
static uint64_t wt_name_hash(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++) h = (h ^ (uint8_t)*name) * 1099511628211ull;
    return h;
}

/* Element j of a standard normal stream keyed by (seed, parameter): Box-Muller on the pair j/2, so
 * any element can be computed alone. */
static float wt_normal(uint64_t key, int64_t j) {
    uint64_t c = (uint64_t)(j / 2) * 2;
    uint64_t a = wt_mix(key + c * 0x9E3779B97F4A7C15ull);
    uint64_t b = wt_mix(key + (c + 1) * 0x9E3779B97F4A7C15ull);
    double u1 = ((double)(a >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
    double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
    return (float)(rad * ((j & 1) ? sin(ang) : cos(ang)));
}

void mt_weights_init_random_range(const mt_minimax *m, uint64_t seed, int bucket, int64_t lo,
                                  int64_t hi, float *dst) {
    MT_CHECK(bucket >= 0 && bucket < m->n_buckets && 0 <= lo && lo <= hi &&
                 hi <= m->bucket_numel[bucket],
             "init: range [%lld, %lld) of bucket %d is outside it", (long long)lo, (long long)hi,
             bucket);
    memset(dst, 0, sizeof(float) * (size_t)(hi - lo));
    float std = m->cfg.initializer_range;
    for (int p = 0; p < m->n_params; p++) {
        const mt_param_info *info = &m->info[p];
        int64_t a, b;
        if (!mt_minimax_param_overlap(m, p, bucket, lo, hi, &a, &b)) continue;
        float *out = dst + (a - lo);
        /* element j0 of the parameter's tensor (a vocabulary part: of the whole one), so that
         * every layout draws the same values */
        int64_t j0 = a - info->offset + info->src_offset, n = b - a;
        if (info->init != MT_INIT_NORMAL) { /* RMSNorm weights; correction biases, Gemma norms */
            const float v = info->init == MT_INIT_ONES ? 1.0f : 0.0f;
            for (int64_t i = 0; i < n; i++) out[i] = v;
            continue;
        }
        uint64_t key = wt_mix(seed ^ wt_mix(wt_name_hash(info->name) + 0x632BE59BD9B4E019ull));
#pragma omp parallel for schedule(static) if (n > (1 << 16))
        for (int64_t i = 0; i < n; i++) out[i] = std * wt_normal(key, j0 + i);
        /* nn.Embedding(padding_idx) keeps the pad row at zero */
        int pad = m->cfg.pad_token_id;
        if (pad >= 0 && strcmp(info->name, "model.embed_tokens.weight") == 0) {
            int64_t r0 = (int64_t)pad * info->shape[1], r1 = r0 + info->shape[1];
            for (int64_t j = r0 > j0 ? r0 : j0; j < r1 && j < j0 + n; j++) out[j - j0] = 0.0f;
        }
    }
}
