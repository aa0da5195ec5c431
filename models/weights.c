/* weights.c: see weights.h. */
#include "models/weights.h"

#include "models/block.h"
#include "models/weights_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

/* Expert parameter: layer, expert and matrix (1, 2 or 3 for w1/w2/w3); false otherwise. */
static bool wt_expert(const char *name, int *layer, int *e, int *w) {
    int used = 0;
    if (sscanf(name, "model.layers.%d.block_sparse_moe.experts.%d.w%d.weight%n", layer, e, w,
               &used) != 3)
        return false;
    return name[used] == 0;
}

static bool wt_router(const char *name, int *layer) {
    int used = 0;
    return sscanf(name, "model.layers.%d.block_sparse_moe.gate.weight%n", layer, &used) == 1 &&
           name[used] == 0;
}

static bool wt_router_bias(const char *name, int *layer) {
    int used = 0;
    return sscanf(name, "model.layers.%d.block_sparse_moe.e_score_correction_bias%n", layer,
                  &used) == 1 &&
           name[used] == 0;
}

/* The dense MLP's and the shared expert's gate or up projection (MiniMax-M3): layer, up (0
 * gate, 1 up), shared; transformers v5 fuses each pair as gate_up_proj (2F, C) = [gate; up]. */
static bool wt_gate_up(const char *name, int *layer, int *up, bool *shared) {
    char which[8];
    int used = 0;
    *shared = false;
    if (sscanf(name, "model.layers.%d.mlp.%7[a-z]_proj.weight%n", layer, which, &used) != 2 ||
        name[used] != 0) {
        used = 0;
        if (sscanf(name, "model.layers.%d.block_sparse_moe.shared_experts.%7[a-z]_proj.weight%n",
                   layer, which, &used) != 2 ||
            name[used] != 0)
            return false;
        *shared = true;
    }
    *up = strcmp(which, "up") == 0;
    return *up || strcmp(which, "gate") == 0;
}

/* A VL checkpoint (MiniMax-M3) keeps the text model under "language_model." (spec 8.2). */
static const char *wt_prefix(const mt_minimax *m) {
    return m->cfg.vl_config[0] ? "language_model." : "";
}

void mt_weights_source_name(const mt_minimax *m, int p, mt_naming naming, char *name, size_t n,
                            int64_t *offset) {
    const char *internal = m->info[p].name;
    const char *pre = wt_prefix(m);
    const size_t k = strlen(pre);
    if (k > 0 && n > k) { /* the prefix, then the name in the naming */
        memcpy(name, pre, k);
        name += k;
        n -= k;
    }
    int64_t C = m->cfg.hidden_size, F = m->cfg.intermediate_size;
    int layer, e, w;
    bool shared;
    const char *rest;
    *offset = m->info[p].src_offset; /* a vocabulary part: its rows of the whole tensor */
    if (naming == MT_NAMING_HF_V5 && wt_expert(internal, &layer, &e, &w)) {
        if (w == 2) {
            snprintf(name, n, "model.layers.%d.mlp.experts.down_proj", layer);
            *offset = e * C * F;
        } else {
            snprintf(name, n, "model.layers.%d.mlp.experts.gate_up_proj", layer);
            *offset = e * 2 * F * C + (w == 3 ? F * C : 0);
        }
    } else if (naming == MT_NAMING_HF_V5 && wt_router(internal, &layer)) {
        snprintf(name, n, "model.layers.%d.mlp.gate.weight", layer);
    } else if (naming == MT_NAMING_HF_V5 && wt_router_bias(internal, &layer)) {
        const char *fmt = mt_config_family(&m->cfg)->v5_router_bias;
        MT_CHECK(fmt, "weights: %s has no transformers v5 name", internal);
        snprintf(name, n, fmt, layer);
    } else if (naming == MT_NAMING_HF_V5 && wt_gate_up(internal, &layer, &w, &shared)) {
        snprintf(name, n, "model.layers.%d.mlp.%sgate_up_proj.weight", layer,
                 shared ? "shared_experts." : "");
        *offset = w ? m->info[p].numel : 0;
    } else if (naming == MT_NAMING_HF_V5 &&
               (rest = strstr(internal, ".block_sparse_moe.shared_"))) {
        snprintf(name, n, "%.*s.mlp.shared_%s", (int)(rest - internal), internal,
                 rest + strlen(".block_sparse_moe.shared_"));
    } else if (naming == MT_NAMING_HF_V5 && (rest = strstr(internal, ".self_attn.index_"))) {
        snprintf(name, n, "%.*s.self_attn.indexer.%s", (int)(rest - internal), internal,
                 rest + strlen(".self_attn.index_"));
    } else {
        snprintf(name, n, "%s", internal);
    }
}

/* Shape of the checkpoint tensor that holds parameter p. */
static int wt_source_shape(const mt_minimax *m, int p, mt_naming naming, int64_t *shape) {
    int layer, e, w;
    const mt_param_info *info = &m->info[p];
    if (naming == MT_NAMING_HF_V5 && wt_expert(info->name, &layer, &e, &w)) {
        shape[0] = m->cfg.num_local_experts;
        shape[1] = w == 2 ? m->cfg.hidden_size : 2 * (int64_t)m->cfg.intermediate_size;
        shape[2] = w == 2 ? m->cfg.intermediate_size : m->cfg.hidden_size;
        return 3;
    }
    bool shared;
    if (naming == MT_NAMING_HF_V5 && wt_gate_up(info->name, &layer, &w, &shared)) {
        shape[0] = 2 * info->shape[0];
        shape[1] = info->shape[1];
        return 2;
    }
    for (int d = 0; d < info->ndim; d++) shape[d] = info->shape[d];
    shape[0] = info->src_shape0; /* a vocabulary part's tensor is the whole vocabulary */
    return info->ndim;
}

/* ---- reading ---- */

static bool wt_fail(char *err, size_t n, const char *fmt, ...) MT_PRINTF(3, 4);
static bool wt_fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return false;
}

/* transformers >= 5 saves the lightning decay buffers of each linear layer (derived from the
 * config; transformers uses the stored values when loading): their shapes must match, and
 * slope_rate must equal the decay this config gives, within the stored dtype's rounding (which
 * catches a slope-denominator variant that differs where it matters numerically). */
static bool wt_check_buffer(mt_weights_reader *r, const mt_st_tensor *t, int layer,
                            const char *what, char *err, size_t n) {
    const mt_minimax_config *cfg = &r->m->cfg;
    int64_t H = cfg->num_attention_heads, BS = cfg->block_size, shape[4];
    int ndim;
    if (strcmp(what, "slope_rate") == 0)
        ndim = 3, shape[0] = H, shape[1] = 1, shape[2] = 1;
    else if (strcmp(what, "diagonal_decay") == 0)
        ndim = 4, shape[0] = 1, shape[1] = H, shape[2] = BS, shape[3] = BS;
    else
        ndim = 3, shape[0] = H, shape[1] = BS, shape[2] = 1;
    if (!mt_safetensors_check(r->st, t, ndim, shape, err, n)) return false;
    /* A truncated model (first-N-layers override) has its own decay: f_l uses the new L, as
     * transformers computes for a model built with num_hidden_layers = N. */
    if (strcmp(what, "slope_rate") != 0 || cfg->num_hidden_layers != cfg->num_hidden_layers_source)
        return true;
    float *s = mt_malloc(sizeof(float) * (size_t)H, "slope_rate");
    mt_safetensors_read(r->st, t, 0, H, s);
    double tol = t->dtype == MT_ST_F32 ? 1e-5 : t->dtype == MT_ST_F16 ? 2e-3 : 8e-3;
    bool ok = true;
    for (int h = 0; h < H && ok; h++) {
        double want = r->m->decay[layer * H + h];
        if (fabs(s[h] - want) > tol * fabs(want))
            ok = wt_fail(err, n,
                         "%s: tensor %s: head %d slope %.9g differs from the config's decay "
                         "%.9g (the lightning slope denominator, \"lightning_slope_denominator\" "
                         "in docs/checkpoints.md)",
                         mt_safetensors_file(r->st, t), t->name, h, (double)s[h], want);
    }
    free(s);
    return ok;
}

/* A tensor no parameter uses: skipped for dropped layers, else as the family says (derived
 * buffers checked, carried tensors counted). */
static bool wt_check_extra(mt_weights_reader *r, const mt_st_tensor *t, char *err, size_t n) {
    const mt_minimax_config *cfg = &r->m->cfg;
    const char *name = t->name;
    const char *pre = wt_prefix(r->m);
    if (strncmp(name, pre, strlen(pre)) == 0) name += strlen(pre);
    int layer = -1, used = 0;
    if (sscanf(name, "model.layers.%d.%n", &layer, &used) == 1 && used > 0 &&
        layer >= cfg->num_hidden_layers && layer < cfg->num_hidden_layers_source)
        return true; /* a layer dropped by the first-N-layers override */
    const char *what = "";
    int buffer_layer = -1;
    switch (mt_config_family(cfg)->extra(cfg, name, &buffer_layer, &what)) {
    case MT_EXTRA_DERIVED:
        return strcmp(what, "inv_freq") == 0 || wt_check_buffer(r, t, buffer_layer, what, err, n);
    case MT_EXTRA_CARRIED:
        r->carried[r->n_carried++] = t;
        r->n_vision += strcmp(what, "vision") == 0;
        return true;
    case MT_EXTRA_UNEXPECTED:
        break;
    }
    if (used > 0 && layer >= cfg->num_hidden_layers_source)
        return wt_fail(err, n, "%s: tensor %s belongs to layer %d but the config has %d layers",
                       mt_safetensors_file(r->st, t), name, layer, cfg->num_hidden_layers_source);
    return wt_fail(err, n, "%s: unexpected tensor %s (checkpoint layout %s)",
                   mt_safetensors_file(r->st, t), name, mt_naming_name(r->naming));
}

/* An FP8 tensor's block scales: <name minus .weight>.weight_scale_inv, F32 (or BF16/F16), of
 * ceil(rows / block) x ceil(columns / block) per matrix (leading dims as the tensor's). */
static bool wt_fp8_scale(mt_weights_reader *r, int p, const mt_st_tensor *t, bool *used, char *err,
                         size_t n) {
    const mt_minimax_config *cfg = &r->m->cfg;
    if (!cfg->fp8)
        return wt_fail(err, n,
                       "%s: tensor %s is F8_E4M3 but config.json has no fp8 quantization_config",
                       mt_safetensors_file(r->st, t), t->name);
    char name[200];
    const size_t len = strlen(t->name);
    if (len < 7 || strcmp(t->name + len - 7, ".weight") != 0)
        return wt_fail(err, n, "%s: FP8 tensor %s has no weight_scale_inv name",
                       mt_safetensors_file(r->st, t), t->name);
    snprintf(name, sizeof(name), "%.*s.weight_scale_inv", (int)(len - 7), t->name);
    const mt_st_tensor *sc = mt_safetensors_find(r->st, name);
    if (!sc)
        return wt_fail(err, n, "%s: FP8 tensor %s has no block scales %s",
                       mt_safetensors_file(r->st, t), t->name, name);
    int64_t shape[MT_ST_MAX_DIMS];
    const int nd = t->ndim;
    for (int d = 0; d < nd; d++) shape[d] = t->shape[d];
    shape[nd - 2] = (t->shape[nd - 2] + cfg->fp8_block[0] - 1) / cfg->fp8_block[0];
    shape[nd - 1] = (t->shape[nd - 1] + cfg->fp8_block[1] - 1) / cfg->fp8_block[1];
    if (nd < 2 || !mt_safetensors_check(r->st, sc, nd, shape, err, n) || sc->dtype == MT_ST_F8_E4M3)
        return nd < 2                       ? wt_fail(err, n, "%s: FP8 tensor %s is not a matrix",
                                                      mt_safetensors_file(r->st, t), t->name)
               : sc->dtype == MT_ST_F8_E4M3 ? wt_fail(err, n, "%s: block scales %s are FP8",
                                                      mt_safetensors_file(r->st, sc), sc->name)
                                            : false;
    used[sc - mt_safetensors_tensor(r->st, 0)] = true;
    /* a fused tensor holds several parameters: count each source tensor once */
    bool first = true;
    for (int q = 0; q < p; q++) first = first && r->src[q] != t;
    r->n_fp8 += first;
    r->scale[p] = sc;
    return true;
}

/* The shared expert packed as routed expert E (experts.{E}.w1/w3/w2, the form some conversions
 * write when its width is the routed experts'): the tensor for shared-expert parameter p, its
 * name into name (for the messages); NULL when p is no shared-expert parameter or the file has
 * no such tensor. The shape check that follows requires the widths to agree. */
static const mt_st_tensor *wt_find_packed_shared(const mt_minimax *m, int p,
                                                 const mt_safetensors *st, char *name, size_t n) {
    static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
    static const char *const packed[3] = {"w1", "w3", "w2"};
    int layer = -1, used = 0;
    char which[16];
    if (sscanf(m->info[p].name,
               "model.layers.%d.block_sparse_moe.shared_experts.%15[a-z_].weight%n", &layer, which,
               &used) != 2 ||
        m->info[p].name[used] != 0 || layer < 0 || layer >= m->cfg.num_hidden_layers)
        return NULL;
    for (int k = 0; k < 3; k++)
        if (strcmp(which, proj[k]) == 0) {
            snprintf(name, n, "%smodel.layers.%d.block_sparse_moe.experts.%d.%s.weight",
                     wt_prefix(m), layer, m->plan[layer].n_experts, packed[k]);
            return mt_safetensors_find(st, name);
        }
    return NULL;
}

/* The decoder layers the tensors hold (model.layers.N.) against the config's count, before any
 * tensor is matched: a config of another depth is named as such, not as the first tensor or
 * derived buffer (a lightning slope depends on the layer count) that then disagrees. Layers
 * numbered after the last are the multi-token-prediction modules some releases carry. */
static bool wt_check_layer_count(const mt_weights_reader *r, const char *dir, char *err, size_t n) {
    const mt_minimax_config *cfg = &r->m->cfg;
    const char *pre = wt_prefix(r->m);
    int top = -1;
    for (int i = 0; i < mt_safetensors_count(r->st); i++) {
        const char *name = mt_safetensors_tensor(r->st, i)->name;
        int layer = -1, used = 0;
        if (strncmp(name, pre, strlen(pre)) == 0) name += strlen(pre);
        if (sscanf(name, "model.layers.%d.%n", &layer, &used) == 1 && used > 0 && layer > top)
            top = layer;
    }
    const int L = cfg->num_hidden_layers_source;
    if (top + 1 >= L && top + 1 <= L + cfg->num_mtp_modules) return true;
    return wt_fail(err, n,
                   "%s: the checkpoint's tensors hold %d decoder layers (model.layers.0 to "
                   "model.layers.%d) but config.json's num_hidden_layers is %d: the config of "
                   "another checkpoint?",
                   dir, top + 1, top, L);
}

/* A head model's head parameter p absent from a causal-LM checkpoint (one with lm_head.weight):
 * the usual start of a head model. The head is initialised as transformers' _init_weights does
 * (weight N(0, initializer_range) seeded by m->head_seed, bias 0) when read, lm_head.weight is
 * dropped; said once on stderr. */
static bool wt_head_from_causal(mt_weights_reader *r, int p) {
    const mt_minimax *m = r->m;
    const mt_tensor *t = &m->params[p];
    const mt_st_tensor *lm = mt_safetensors_find(r->st, "lm_head.weight");
    if (m->lm_parts != 0 || (t != m->head_w && t != m->head_b) || !lm) return false;
    if (!r->head_init)
        fprintf(stderr,
                "weights: %s is a causal-LM checkpoint: lm_head.weight dropped, the %s head "
                "(%d labels) initialised N(0, %g) with seed %llu, bias 0\n",
                mt_safetensors_file(r->st, lm), mt_head_name(m->cfg.head), m->cfg.num_labels,
                (double)m->cfg.initializer_range, (unsigned long long)m->head_seed);
    r->head_init = true;
    r->lm_dropped = lm;
    return true;
}

mt_weights_reader *mt_weights_try_open(const char *dir, const mt_minimax *m, char *err,
                                       size_t err_len) {
    mt_safetensors *st = mt_safetensors_try_open(dir, err, err_len);
    if (!st) return NULL;
    mt_weights_reader *r = mt_calloc(1, sizeof(*r), "weights reader");
    r->m = m;
    r->st = st;
    int n_t = mt_safetensors_count(st);
    r->naming = m->cfg.original_schema ? MT_NAMING_ORIGINAL : MT_NAMING_HF_V4;
    for (int i = 0; i < n_t; i++) {
        const char *name = mt_safetensors_tensor(st, i)->name;
        if (strstr(name, ".mlp.experts.gate_up_proj") || strstr(name, ".mlp.experts.down_proj") ||
            strstr(name, ".mlp.gate.weight") || strstr(name, ".mlp.gate_up_proj.weight") ||
            strstr(name, ".self_attn.indexer."))
            r->naming = MT_NAMING_HF_V5;
    }
    r->src = mt_calloc((size_t)m->n_params, sizeof(*r->src), "weights sources");
    r->src_off = mt_calloc((size_t)m->n_params, sizeof(int64_t), "weights offsets");
    r->scale = mt_calloc((size_t)m->n_params, sizeof(*r->scale), "weights fp8 scales");
    bool *used = mt_calloc((size_t)(n_t ? n_t : 1), sizeof(bool), "weights used");
    r->carried = mt_calloc((size_t)(n_t ? n_t : 1), sizeof(*r->carried), "weights carried");
    bool ok = wt_check_layer_count(r, dir, err, err_len);
    for (int p = 0; p < m->n_params && ok; p++) {
        char name[160];
        int64_t shape[MT_ST_MAX_DIMS];
        mt_weights_source_name(m, p, r->naming, name, sizeof(name), &r->src_off[p]);
        const mt_st_tensor *t = mt_safetensors_find(st, name);
        if (!t) t = wt_find_packed_shared(m, p, st, name, sizeof(name));
        if (!t && wt_head_from_causal(r, p)) continue; /* initialised on read */
        if (!t) {
            ok = wt_fail(err, err_len, "%s: missing tensor %s (checkpoint layout %s)", dir, name,
                         mt_naming_name(r->naming));
            break;
        }
        int ndim = wt_source_shape(m, p, r->naming, shape);
        ok = mt_safetensors_check(st, t, ndim, shape, err, err_len);
        r->src[p] = t;
        used[t - mt_safetensors_tensor(st, 0)] = true;
        if (ok && t->dtype == MT_ST_F8_E4M3) ok = wt_fp8_scale(r, p, t, used, err, err_len);
    }
    if (ok && r->lm_dropped) used[r->lm_dropped - mt_safetensors_tensor(st, 0)] = true;
    for (int i = 0; i < n_t && ok; i++)
        if (!used[i]) ok = wt_check_extra(r, mt_safetensors_tensor(st, i), err, err_len);
    free(used);
    if (!ok) {
        mt_weights_close(r);
        return NULL;
    }
    return r;
}

mt_weights_reader *mt_weights_open(const char *dir, const mt_minimax *m) {
    char err[1024];
    mt_weights_reader *r = mt_weights_try_open(dir, m, err, sizeof(err));
    if (!r) MT_DIE("weights: %s", err);
    return r;
}

mt_naming mt_weights_naming(const mt_weights_reader *r) { return r->naming; }

void mt_weights_describe(const mt_weights_reader *r, char *buf, size_t n) {
    const mt_minimax_config *cfg = &r->m->cfg;
    int k = snprintf(buf, n, "checkpoint layout %s", mt_naming_name(r->naming));
    if (r->n_fp8 > 0 && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k,
                      "; %d FP8 (e4m3, %dx%d block scales) tensors dequantised to fp32 on load",
                      r->n_fp8, cfg->fp8_block[0], cfg->fp8_block[1]);
    const int mtp = r->n_carried - r->n_vision;
    if (mtp > 0 && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k,
                      "; %d multi-token-prediction tensors not trained, carried into exports "
                      "unchanged",
                      mtp);
    if (r->n_vision > 0 && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k,
                 "; %d vision tensors (tower, projector) not loaded by the text model, carried "
                 "into exports unchanged",
                 r->n_vision);
}

void mt_weights_close(mt_weights_reader *r) {
    if (!r) return;
    mt_safetensors_close(r->st);
    free(r->src);
    free(r->src_off);
    free(r->scale);
    free(r->carried);
    free(r);
}

/* The start of a bucket's bound memory. */
float *mt_weights_bucket_data(const mt_minimax *m, int bucket) {
    for (int p = 0; p < m->n_params; p++) {
        if (m->info[p].bucket != bucket) continue;
        MT_CHECK(m->params[p].data, "weights: bucket %d is not bound (mt_minimax_bind_bucket)",
                 bucket);
        return (float *)m->params[p].data - m->info[p].offset;
    }
    MT_DIE("weights: bucket %d has no parameters", bucket);
}

/* ---- random initialisation ---- */

void mt_weights_init_random(mt_minimax *m, uint64_t seed) {
    for (int b = 0; b < m->n_buckets; b++)
        mt_weights_init_random_range(m, seed, b, 0, m->bucket_numel[b],
                                     mt_weights_bucket_data(m, b));
}

/* ---- saving ---- */

struct mt_weights_writer {
    const mt_minimax *m;
    mt_naming naming;
    mt_st_dtype dtype;
    char *dir;
    mt_safetensors_writer *st;
    bool *added;  /* (n_buckets) */
    int fused[2]; /* HF v5: the reserved gate_up_proj and down_proj of the layer being added */
    int fused_layer;
    int gate_up_entry;  /* HF v5: the reserved gate_up_proj of a dense MLP or shared expert */
    int vocab_entry;    /* the reserved tensor whose vocabulary parts are being added, -1 none */
    int64_t vocab_next; /* the element its next part starts at */
    mt_safetensors *mirror; /* the FP8 source mirrored (mt_weights_writer_mirror), else NULL */
    char *mirror_dir;
};

mt_weights_writer *mt_weights_writer_open(const char *dir, const mt_minimax *m, mt_naming naming,
                                          mt_dtype dtype, int64_t shard_bytes) {
    MT_CHECK(dtype == MT_F32 || dtype == MT_BF16, "weights: can save F32 or BF16, not %s",
             mt_dtype_name(dtype));
    mt_weights_writer *w = mt_calloc(1, sizeof(*w), "weights writer");
    w->m = m;
    const mt_family *fam = mt_config_family(&m->cfg);
    w->naming = fam->export_naming ? (mt_naming)fam->export_naming(&m->cfg, naming) : naming;
    w->gate_up_entry = -1;
    w->dtype = dtype == MT_F32 ? MT_ST_F32 : MT_ST_BF16;
    w->dir = strdup(dir);
    w->st = mt_safetensors_writer_open(dir, shard_bytes);
    w->added = mt_calloc((size_t)m->n_buckets, sizeof(bool), "weights writer buckets");
    w->fused_layer = -1;
    w->vocab_entry = -1;
    return w;
}

/* The dtype of a tensor the export writes in pieces: the export's, or with an FP8 mirror the
 * source's (not F8_E4M3: a block needs the whole matrix). */
static mt_st_dtype wt_dtype_of(const mt_weights_writer *w, const char *name) {
    if (!w->mirror) return w->dtype;
    const mt_st_dtype dt = mt_weights_mirror_dtype(w->mirror, name);
    MT_CHECK(dt != MT_ST_F8_E4M3,
             "output.export_dtype = \"fp8\": %s is FP8 in the source but this export writes it "
             "in pieces (a fused or vocabulary-parallel layout); export bf16 instead",
             name);
    return dt;
}

/* A buffer derived from the config (mt_mixer.export_buffers), in the export's dtype. */
static void wt_add_buffer(void *user, const char *name, int ndim, const int64_t *shape,
                          const float *data) {
    mt_weights_writer *w = user;
    mt_safetensors_writer_add(w->st, name, w->dtype, ndim, shape, data);
}

/* HF v5 keeps a layer's experts in two fused tensors, gate_up_proj (E,2F,C) = [w1_e; w3_e] per
 * expert and down_proj (E,C,F). Both are reserved when the layer's first expert parameter
 * arrives (w1 of expert 0, first in either gather unit) and every expert parameter fills its
 * part, from this bucket or (gather unit "expert") the next ones. */
static void wt_add_fused_expert(mt_weights_writer *w, int p, const float *data) {
    const mt_minimax *m = w->m;
    int l, e, which;
    wt_expert(m->info[p].name, &l, &e, &which);
    if (e == 0 && which == 1) {
        char names[2][160];
        const char *np[2] = {names[0], names[1]};
        int64_t shapes[2][MT_ST_MAX_DIMS], off;
        int ndim[2];
        const int down = (int)(m->layers[l].moe.w2[0] - m->params);
        mt_weights_source_name(m, p, w->naming, names[0], sizeof(names[0]), &off);
        mt_weights_source_name(m, down, w->naming, names[1], sizeof(names[1]), &off);
        ndim[0] = wt_source_shape(m, p, w->naming, shapes[0]);
        ndim[1] = wt_source_shape(m, down, w->naming, shapes[1]);
        w->fused[0] =
            mt_safetensors_writer_reserve(w->st, 2, np, wt_dtype_of(w, names[0]), ndim, shapes);
        MT_CHECK(!w->mirror || wt_dtype_of(w, names[1]) == wt_dtype_of(w, names[0]),
                 "output.export_dtype = \"fp8\": %s and %s differ in dtype in the source", names[0],
                 names[1]);
        w->fused[1] = w->fused[0] + 1;
        w->fused_layer = l;
    }
    MT_CHECK(w->fused_layer == l,
             "weights: layer %d expert %d w%d added before expert 0 w1 of its layer", l, e, which);
    char name[160];
    int64_t off;
    mt_weights_source_name(m, p, w->naming, name, sizeof(name), &off);
    mt_safetensors_writer_fill(w->st, w->fused[which == 2], off, m->info[p].numel,
                               data + m->info[p].offset);
}

void mt_weights_writer_add_bucket(mt_weights_writer *w, int bucket, const float *data) {
    const mt_minimax *m = w->m;
    MT_CHECK(bucket >= 0 && bucket < m->n_buckets && !w->added[bucket],
             "weights: bucket %d added twice or out of range", bucket);
    const int l = mt_minimax_bucket_layer(m, bucket);
    if (w->naming != MT_NAMING_ORIGINAL && l >= 0 && m->layers[l].mixer->export_buffers)
        m->layers[l].mixer->export_buffers(m, l, wt_add_buffer, w);
    w->added[bucket] = true;
    for (int p = 0; p < m->n_params; p++) {
        const mt_param_info *info = &m->info[p];
        if (info->bucket != bucket) continue;
        char name[160];
        int64_t off, shape[MT_ST_MAX_DIMS];
        int layer, e, which;
        if (w->naming == MT_NAMING_HF_V5 && wt_expert(info->name, &layer, &e, &which)) {
            wt_add_fused_expert(w, p, data);
            continue;
        }
        mt_weights_source_name(m, p, w->naming, name, sizeof(name), &off);
        int ndim = wt_source_shape(m, p, w->naming, shape);
        bool shared;
        if (w->naming == MT_NAMING_HF_V5 && wt_gate_up(info->name, &layer, &which, &shared)) {
            /* gate_up_proj: reserved with the gate (the layout puts the up right after it) */
            if (!which) {
                const char *np[1] = {name};
                w->gate_up_entry =
                    mt_safetensors_writer_reserve(w->st, 1, np, wt_dtype_of(w, name), &ndim,
                                                  (const int64_t(*)[MT_ST_MAX_DIMS]) & shape);
            }
            MT_CHECK(w->gate_up_entry >= 0, "weights: %s added before its gate", info->name);
            mt_safetensors_writer_fill(w->st, w->gate_up_entry, off, info->numel,
                                       data + info->offset);
            if (which) w->gate_up_entry = -1;
            continue;
        }
        if (info->src_shape0 == info->shape[0] && w->mirror) {
            mt_weights_mirror_add(w->st, w->mirror, &m->cfg, name, ndim, shape,
                                  data + info->offset);
            continue;
        }
        if (info->src_shape0 == info->shape[0]) {
            /* a buffer (the correction bias) is written in fp32 whatever the dtype: unchanged */
            mt_safetensors_writer_add(w->st, name, info->buffer ? MT_ST_F32 : w->dtype, ndim, shape,
                                      data + info->offset);
            continue;
        }
        /* a vocabulary part: the whole tensor is reserved with part 0, and every part fills
         * its rows, in order (buckets are added in order) */
        if (off == 0) {
            const char *np[1] = {name};
            w->vocab_entry =
                mt_safetensors_writer_reserve(w->st, 1, np, wt_dtype_of(w, name), &ndim,
                                              (const int64_t(*)[MT_ST_MAX_DIMS]) & shape);
            w->vocab_next = 0;
        }
        MT_CHECK(w->vocab_entry >= 0 && off == w->vocab_next,
                 "weights: %s rows from element %lld added out of order (buckets in order)", name,
                 (long long)off);
        mt_safetensors_writer_fill(w->st, w->vocab_entry, off, info->numel, data + info->offset);
        w->vocab_next = off + info->numel;
    }
}

void mt_weights_writer_carry(mt_weights_writer *w, const char *src_dir) {
    mt_weights_reader *r = mt_weights_open(src_dir, w->m);
    for (int i = 0; i < r->n_carried; i++) mt_safetensors_writer_copy(w->st, r->st, r->carried[i]);
    mt_weights_close(r);
}

void mt_weights_writer_mirror(mt_weights_writer *w, const char *src_dir) {
    MT_CHECK(w->m->cfg.fp8,
             "output.export_dtype = \"fp8\": %s/config.json has no fp8 quantization_config (only "
             "an FP8 source's layout is mirrored)",
             src_dir);
    w->mirror = mt_safetensors_open(src_dir);
    w->mirror_dir = strdup(src_dir);
}

void mt_weights_writer_close(mt_weights_writer *w) {
    for (int b = 0; b < w->m->n_buckets; b++)
        MT_CHECK(w->added[b], "weights: bucket %d was never added before close", b);
    mt_safetensors_writer_close(w->st);
    char path[4200];
    snprintf(path, sizeof(path), "%s/config.json", w->dir);
    mt_minimax_config_save_json(&w->m->cfg, path, w->naming);
    mt_weights_config_patch(w->dir, w->dtype == MT_ST_F32 ? "float32" : "bfloat16", w->mirror_dir);
    if (w->mirror) mt_safetensors_close(w->mirror);
    free(w->mirror_dir);
    free(w->added);
    free(w->dir);
    free(w);
}

void mt_weights_save(const char *dir, const mt_minimax *m, mt_naming naming, mt_dtype dtype,
                     int64_t shard_bytes) {
    mt_weights_writer *w = mt_weights_writer_open(dir, m, naming, dtype, shard_bytes);
    for (int b = 0; b < m->n_buckets; b++)
        mt_weights_writer_add_bucket(w, b, mt_weights_bucket_data(m, b));
    mt_weights_writer_close(w);
}
