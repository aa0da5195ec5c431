/* minimax-info: parameter counts of a MiniMax config (any family: models/family.h), and what
 * training it costs per rank under ZeRO-3.
 *
 *   minimax-info --config CONFIG.json [--num-hidden-layers N] [--ranks N]
 *                [--gather-unit layer|expert] [--gather-dtype fp32|bf16] [--offload]
 *                [--seq T [--batch B]] [--fit-gib G]
 *
 * params_total: every parameter of the layout (models/layout.c), transformers' count: buffers
 *   (the routers' e_score_correction_bias) are not parameters there and are printed apart
 *   (params_buffers), though they are sharded and gathered like parameters.
 * params_active: the parameters one token uses, as the model card counts them (45.9B for
 *   MiniMax-Text-01, 10B for MiniMax-M2): attention, norms, routers and top-k of the E experts
 *   of every layer, plus the final norm; the input embedding and lm_head matrices are not
 *   counted.
 * params_active_with_embeddings: the same plus both V x C matrices (embed_tokens, lm_head).
 * zero3_*: with --ranks N, the memory one of N ranks holds for the sharded state (train/zero.h:
 *   fp32 master weights, gradients, AdamW m and v of 1/N of every bucket) and for the gather
 *   slots (two buckets of parameters and two of gradients at full size), before activations
 *   (dist.arena_mb). The largest bucket is a decoder layer with all its experts with
 *   --gather-unit layer (the default, as dist.gather_unit), else a layer's attention or an
 *   expert (embed_tokens and lm_head come in vocabulary parts of about an expert's size).
 *   --offload (dist.offload_optimizer): m and v in host memory instead (zero3_host_bytes_*),
 *   and with --gather-dtype bf16 the fp32 master weights too (the device keeps their bf16
 *   rounding: 6 bytes per owned parameter instead of 8).
 * activation_*: with --seq T, the activation arena one micro-step of B x T tokens needs per rank
 *   (the peak of live tensors, from a dry run of the model code: mt_minimax_plan_activations),
 *   with every layer's activations kept and with train.gradient_checkpointing; kernels' scratch
 *   comes on top. total_*: with both, zero3 + activations per rank.
 * fit_ranks_*: with --fit-gib G, for each gather unit, without and with --offload, the fewest
 *   ranks whose per-rank sum (state, slots, and with --seq the recomputed activations) is at
 *   most G GiB (the CUDA context, cuBLAS workspace, NCCL buffers and kernel scratch on top). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/minimax.h"
#include "kernels/version.h"
#include "train/zero.h"

/* --help: on stdout, exit 0; a bad command line: on stderr, exit 2 */
static void usage(int status) {
    fprintf(
        status ? stderr : stdout,
        "usage: minimax-info --config CONFIG.json [--num-hidden-layers N] [--ranks N]\n"
        "                    [--gather-unit layer|expert] [--gather-dtype fp32|bf16]\n"
        "                    [--offload] [--seq T [--batch B]] [--fit-gib G]\n"
        "       minimax-info --help | --version\n"
        "  parameter counts of a config and, with --ranks, --seq or --fit-gib, the memory\n"
        "  one rank needs to train it under ZeRO-3 (the key list: models/minimax_info_main.c)\n");
    exit(status);
}

static void print_count(const char *key, int64_t n, const char *note) {
    double x = (double)n;
    const char *unit = x >= 1e9 ? "B" : x >= 1e6 ? "M" : "K";
    double div = x >= 1e9 ? 1e9 : x >= 1e6 ? 1e6 : 1e3;
    printf("%s=%lld (%.2f%s)%s%s\n", key, (long long)n, x / div, unit, note[0] ? "  # " : "", note);
}

/* The per-rank bytes of N ranks: state + slots (+ recomputed activations, the same at any N). */
static int64_t info_rank_bytes(const mt_minimax *m, int N, mt_dtype gather_dtype, bool offload,
                               int64_t act, int64_t *host) {
    const mt_zero_sizes z = mt_zero_plan(N, m->n_buckets, m->bucket_numel, gather_dtype, offload);
    *host = z.host_bytes;
    return z.owned_bytes + z.slot_bytes + act;
}

/* --fit-gib: per gather unit and offload, the fewest ranks that fit (the bytes fall with N, so
 * a bisection over [1, 2^20]). */
static void info_fit(const mt_minimax_config *cfg, mt_dtype gather_dtype, long seq, long batch,
                     double gib) {
    const int64_t cap = (int64_t)(gib * (double)(1 << 30));
    for (int u = 0; u < 2; u++) {
        const mt_gather_unit unit = u ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
        mt_minimax m;
        mt_minimax_init_unit(&m, cfg, unit);
        const int64_t act = seq ? mt_minimax_plan_activations(cfg, unit, true, batch, seq) : 0;
        for (int off = 0; off < 2; off++) {
            int64_t host;
            int lo = 1, hi = 1 << 20;
            if (info_rank_bytes(&m, hi, gather_dtype, off, act, &host) > cap) {
                printf("fit_ranks_%s%s=none  # more than %d ranks, or the activations alone "
                       "exceed %.1f GiB\n",
                       u ? "expert" : "layer", off ? "_offload" : "", hi, gib);
                continue;
            }
            while (lo < hi) {
                const int mid = lo + (hi - lo) / 2;
                if (info_rank_bytes(&m, mid, gather_dtype, off, act, &host) <= cap)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            const int64_t bytes = info_rank_bytes(&m, lo, gather_dtype, off, act, &host);
            printf("fit_ranks_%s%s=%d  # %.2f GiB per rank of %.1f (state, slots%s)%s",
                   u ? "expert" : "layer", off ? "_offload" : "", lo, (double)bytes / (1 << 30),
                   gib, seq ? ", recomputed activations" : "", off ? "" : "\n");
            if (off) printf(", host %.2f GiB per rank\n", (double)host / (1 << 30));
        }
        mt_minimax_free(&m);
    }
}

int main(int argc, char **argv) {
    const char *config = NULL;
    int keep = 0, ranks = 0;
    long seq = 0, batch = 1;
    mt_gather_unit unit = MT_GATHER_LAYER;
    mt_dtype gather_dtype = MT_F32;
    bool offload = false;
    double fit_gib = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--num-hidden-layers") == 0 && i + 1 < argc) {
            char *end;
            keep = (int)strtol(argv[++i], &end, 10);
            if (*end || keep < 1) usage(2);
        } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
            char *end;
            ranks = (int)strtol(argv[++i], &end, 10);
            if (*end || ranks < 1) usage(2);
        } else if ((strcmp(argv[i], "--seq") == 0 || strcmp(argv[i], "--batch") == 0) &&
                   i + 1 < argc) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            if (*end || v < 1 || v > (1L << 24)) usage(2);
            *(strcmp(argv[i], "--seq") == 0 ? &seq : &batch) = v;
            i++;
        } else if (strcmp(argv[i], "--gather-unit") == 0 && i + 1 < argc) {
            const char *u = argv[++i];
            if (strcmp(u, "layer") && strcmp(u, "expert")) usage(2);
            unit = strcmp(u, "expert") == 0 ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
        } else if (strcmp(argv[i], "--fit-gib") == 0 && i + 1 < argc) {
            char *end;
            fit_gib = strtod(argv[++i], &end);
            if (*end || !(fit_gib > 0)) usage(2);
        } else if (strcmp(argv[i], "--offload") == 0) {
            offload = true;
        } else if (strcmp(argv[i], "--gather-dtype") == 0 && i + 1 < argc) {
            const char *d = argv[++i];
            if (strcmp(d, "fp32") && strcmp(d, "bf16")) usage(2);
            gather_dtype = strcmp(d, "bf16") == 0 ? MT_BF16 : MT_F32;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(0);
        } else if (strcmp(argv[i], "--version") == 0) {
            mt_version_print(stdout, "minimax-info");
            return 0;
        } else {
            usage(2);
        }
    }
    if (!config) usage(2);
    mt_minimax_config cfg;
    mt_minimax_config_load(config, &cfg);
    if (keep) mt_minimax_config_keep_layers(&cfg, keep);
    mt_minimax m;
    mt_minimax_init_unit(&m, &cfg, unit);

    int64_t total = 0, embed = 0, experts = 0, small = 0, buffers = 0;
    for (int p = 0; p < m.n_params; p++) {
        const mt_param_info *info = &m.info[p];
        if (info->buffer) { /* loaded and sharded, not a parameter (as in transformers) */
            buffers += info->numel;
            continue;
        }
        total += info->numel;
        if (strcmp(info->name, "model.embed_tokens.weight") == 0 ||
            strcmp(info->name, "lm_head.weight") == 0)
            embed += info->numel;
        else if (strstr(info->name, ".block_sparse_moe.experts."))
            experts += info->numel;
        if (strstr(info->name, "norm.weight") || strstr(info->name, ".block_sparse_moe.gate."))
            small += info->numel;
    }
    /* every expert of every layer has the same size: top-k of E is exactly k/E of them */
    int64_t active_experts = experts / cfg.num_local_experts * cfg.num_experts_per_tok;
    int64_t active = total - embed - experts + active_experts;
    int n_full = 0, n_msa = 0;
    for (int l = 0; l < cfg.num_hidden_layers; l++) {
        n_full += m.plan[l].mixer == MT_MIXER_SOFTMAX;
        n_msa += m.plan[l].mixer == MT_MIXER_MSA;
    }

    printf("config=%s\n", config);
    if (n_msa)
        printf(
            "family=%s model_type=%s layers=%d (softmax %d, msa sparse %d) experts=%d top_k=%d\n",
            mt_config_family(&cfg)->name, cfg.model_type, cfg.num_hidden_layers, n_full, n_msa,
            cfg.num_local_experts, cfg.num_experts_per_tok);
    else
        printf("family=%s model_type=%s layers=%d (lightning %d, softmax %d) experts=%d top_k=%d\n",
               mt_config_family(&cfg)->name, cfg.model_type, cfg.num_hidden_layers,
               cfg.num_hidden_layers - n_full, n_full, cfg.num_local_experts,
               cfg.num_experts_per_tok);
    print_count("params_total", total, "every parameter (equals transformers' count)");
    /* The 456.07B often quoted for Text-01 leaves out the router and RMSNorm weights. */
    print_count("params_total_matrices", total - small, "without router gates and RMSNorm weights");
    print_count("params_active", active,
                "per token, model-card definition: without embed_tokens and lm_head");
    print_count("params_active_with_embeddings", active + embed,
                "per token, including embed_tokens and lm_head");
    print_count("params_embeddings", embed, "embed_tokens + lm_head");
    print_count("params_experts", experts, "all experts of all layers");
    if (buffers)
        printf("params_buffers=%lld  # e_score_correction_bias: loaded, sharded, exported, never "
               "trained; not in the counts above\n",
               (long long)buffers);
    int64_t zero_bytes = 0; /* with --ranks: the state and slots one rank holds */
    if (ranks) {
        const mt_zero_sizes z =
            mt_zero_plan(ranks, m.n_buckets, m.bucket_numel, gather_dtype, offload);
        const double gib = 1.0 / (1 << 30);
        const double b_owned = (double)z.owned_bytes, b_slots = (double)z.slot_bytes;
        const bool bf16 = gather_dtype == MT_BF16;
        printf("zero3_ranks=%d gather_unit=%s gather_dtype=%s buckets=%d\n", ranks,
               unit == MT_GATHER_EXPERT ? "expert" : "layer", bf16 ? "bf16" : "fp32", m.n_buckets);
        const bool host_master = offload && bf16; /* zero.h: the fp32 master on the host */
        printf("zero3_owned_bytes_per_rank=%.0f (%.2f GiB)  # %s master, grad%s of %lld "
               "parameters\n",
               b_owned, b_owned * gib, host_master ? "bf16" : "fp32", offload ? "" : ", adam m, v",
               (long long)z.owned);
        if (offload)
            printf("zero3_host_bytes_per_rank=%.0f (%.2f GiB)  # adam m, v%s in host memory "
                   "(dist.offload_optimizer), and the staging of the host update\n",
                   (double)z.host_bytes, (double)z.host_bytes * gib,
                   host_master ? ", fp32 master" : "");
        int64_t largest = 0;
        for (int b = 0; b < m.n_buckets; b++)
            if (m.bucket_numel[b] > largest) largest = m.bucket_numel[b];
        printf("zero3_slot_bytes_per_rank=%.0f (%.2f GiB)  # %s (largest bucket %lld "
               "parameters)\n",
               b_slots, b_slots * gib,
               z.slot_numel == 0 ? "none: one rank computes on its shards"
               : host_master     ? "2 gathered buckets + their grads, bf16 landing, reduce landing"
               : bf16 ? "2 gathered buckets + their grads, bf16 send and landing, reduce landing"
                      : "2 gathered buckets + their grads, reduce landing",
               (long long)largest);
        printf("zero3_bytes_per_rank=%.0f (%.2f GiB)  # before activations (dist.arena_mb)\n",
               b_owned + b_slots, (b_owned + b_slots) * gib);
        zero_bytes = z.owned_bytes + z.slot_bytes;
    }
    if (seq) {
        const double gib = 1.0 / (1 << 30);
        const char *u = unit == MT_GATHER_EXPERT ? "expert" : "layer";
        for (int r = 0; r < 2; r++) {
            const int64_t bytes = mt_minimax_plan_activations(&cfg, unit, r == 1, batch, seq);
            printf("activation_bytes_%s=%lld (%.2f GiB)  # B=%ld T=%ld, gather unit %s: live "
                   "outputs, saved buffers and gradients at their peak; kernels' scratch on top\n",
                   r ? "recomputed" : "kept", (long long)bytes, (double)bytes * gib, batch, seq, u);
            if (zero_bytes)
                printf("total_bytes_per_rank_%s=%lld (%.2f GiB)  # zero3 + activations; the "
                       "CUDA context, cuBLAS workspace, NCCL buffers and scratch on top\n",
                       r ? "recomputed" : "kept", (long long)(zero_bytes + bytes),
                       (double)(zero_bytes + bytes) * gib);
        }
    }
    if (fit_gib > 0) info_fit(&cfg, gather_dtype, seq, batch, fit_gib);
    mt_minimax_free(&m);
    return 0;
}
