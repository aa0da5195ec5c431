/* minimax-info: parameter counts of a MiniMax config (any family: models/family.h), and what
 * training it costs per rank under ZeRO-3.
 *
 *   minimax-info --config CONFIG.json [--num-hidden-layers N] [--ranks N]
 *                [--gather-unit layer|expert] [--gather-dtype fp32|bf16] [--offload]
 *                [--seq T [--batch B]] [--fit-gib G | --gpu NAME] [--expert-parallel P]
 *                [--context-parallel C|auto]
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
 * gpu: with --gpu NAME (h100, h200, b200, a100-80), the device's memory as its vendor states it
 *   (decimal GB), converted to GiB: --fit-gib with that value (H200: 141 GB = 131.3 GiB).
 * fit_ranks_*: with --fit-gib G, for each gather unit, without and with --offload, the fewest
 *   ranks whose per-rank sum (state, slots, and with --seq the recomputed activations) is at
 *   most G GiB (the CUDA context, cuBLAS workspace, NCCL buffers and kernel scratch on top).
 *   fit_ranks_ep: the fewest ranks over every expert-parallel size P (a divisor of E; the ranks
 *   a multiple of P), the given gather unit, no offload, and that layout's traffic. Expert
 *   parallelism gathers fp32 parameters one expert at a time (train/zero_ep.c): with
 *   --gather-dtype bf16 or --gather-unit layer, fit_ranks_ep_settings names the recipe keys to
 *   change and the fit_ranks_ep* lines are for those settings.
 * traffic_*, ep_*: with --ranks (and --seq for the all-to-all), the bytes one rank sends per
 *   micro-step (apps/info_ep.h: ring collectives, two gathers and one reduce-scatter per
 *   bucket but the last of each slot, the all-to-all under uniform routing, rows in the gather
 * dtype) for ZeRO-3 (traffic_zero3_*) and, with --expert-parallel P, for EP over P ranks per group
 * (ep_*: its memory per rank and traffic; P = 1 prints today's numbers again).
 * cp_*: with --context-parallel C (C > 1, --seq T a multiple of 2C; --ranks a multiple of C):
 *   each row's T tokens over C ranks (autograd/context_parallel.h), and per rank
 *     activation_bytes_* = dry run of B x T/C tokens + cp_exchange_bytes
 *     cp_exchange_bytes = max over the model's layer kinds of (fp32, 4 bytes an element)
 *       softmax   4 B T Hkv D x 4   K, V of the whole row all-gathered + dK, dV reduce-scattered
 *       lightning 2 C B H D D x 4   the all-gather of every rank's 2 chunk states (B,H,D,D)
 *       msa       (4 Hkv D + 2 Di) B T x 4   as softmax + the index keys (B,T,Di) and gradients
 *   (one layer's exchange buffers are live while it runs, one layer at a time: the largest
 *   kind, on top of the dry run's peak; apps/info_cp.h). The fit_ranks_* lines then use these
 *   activations and the fewest ranks that are a multiple of C (and of P for fit_ranks_ep*);
 *   the ZeRO-3 state stays sharded over all ranks. C = 1 prints exactly what no flag prints.
 * best_*: with --context-parallel auto (needs --seq and --gpu/--fit-gib): over C = 1, 2, 4, ...
 *   (T a multiple of 2C, C below the best count so far) and every expert-parallel size P, the
 *   fewest ranks that fit with fit_ranks_ep's settings (gather unit expert, fp32 gathers, no
 *   offload), best_cp<C> per C, best_layout the fewest of all (ties: smaller C, then less
 *   traffic), best_layout_nodes the same in whole 8-GPU nodes.
 * predict_*: with --predict-step and --gpu h200|h100, a roofline time of one full-parameter
 *   training step per kernel kind at the fit_ranks_ep layout or the --ranks given, --seq 4096
 *   unless given (apps/info_predict.h; docs/benchmarks.md, "Predicted H200 step"). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli_flags.h"
#include "apps/info_cp.h"
#include "apps/info_ep.h"
#include "apps/info_predict.h"
#include "models/minimax.h"
#include "core/version.h"
#include "train/zero.h"

/* --help: on stdout, exit 0; a bad command line: on stderr, exit 2 */
static void usage(int status) {
    fprintf(status ? stderr : stdout,
            "usage: minimax-info --config CONFIG.json [--num-hidden-layers N] [--ranks N]\n"
            "                    [--gather-unit layer|expert] [--gather-dtype fp32|bf16]\n"
            "                    [--offload] [--seq T [--batch B]] [--fit-gib G | --gpu NAME]\n"
            "                    [--expert-parallel P] [--context-parallel C|auto]\n"
            "                    [--predict-step]\n"
            "  --gpu h100|h200|b200|a100-80: --fit-gib with the device's memory as its vendor\n"
            "    states it (H200: 141 GB = 131.3 GiB)\n"
            "  --predict-step (with --gpu h200|h100): a roofline time of one full-parameter step\n"
            "    per kernel kind at the fit_ranks_ep layout (or --ranks), --seq 4096 by default\n"
            "  --context-parallel C: activations per rank with each row's T tokens over C ranks\n"
            "    (T a multiple of 2C) and the fits for it; auto: the fewest GPUs over C and P\n"
            "       minimax-info --help | --version\n"
            "  parameter counts of a config and, with --ranks, --seq or --fit-gib, the memory\n"
            "  one rank needs to train it under ZeRO-3: one key=value a line, what it means\n"
            "  after its # (docs/training.md, \"Sizing: what fits where\")\n");
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

/* tokens: the all-to-all was sized (EP with --seq); ep: a layout that has one */
static void print_traffic(const char *key, const mt_info_ep_out *o, bool tokens, bool ep) {
    const double gb = 1e-9;
    printf("%s_gather_bytes=%lld (%.2f GB)  # sent per rank per micro-step: forward and backward "
           "gathers\n",
           key, (long long)o->gather_bytes, (double)o->gather_bytes * gb);
    printf("%s_reduce_bytes=%lld (%.2f GB)  # 1 fp32 reduce-scatter per bucket\n", key,
           (long long)o->reduce_bytes, (double)o->reduce_bytes * gb);
    if (tokens && ep)
        printf("%s_alltoall_bytes=%lld (%.2f GB)  # the token rows (4 exchanges per MoE layer) and "
               "their weights (2), uniform routing\n",
               key, (long long)o->alltoall_bytes, (double)o->alltoall_bytes * gb);
    const int64_t sum = o->gather_bytes + o->reduce_bytes + o->alltoall_bytes;
    printf("%s_bytes_per_step=%lld (%.2f GB)%s\n", key, (long long)sum, (double)sum * gb,
           tokens || !ep ? "" : "  # without the all-to-all (give --seq)");
}

/* --fit-gib over expert-parallel sizes: per P dividing E, the fewest multiple of P whose
 * per-rank sum fits (the sum falls with N at fixed P: a bisection over multiples), printed as
 * fit_ranks_ep<P>; then the best layout for whole 8-GPU nodes: the fewest nodes any P fits,
 * and there the P (dividing the rank count) that sends the fewest bytes. With context
 * parallelism over cp ranks: its activations (apps/info_cp.h), the ranks a multiple of cp too. */
static void info_fit_ep(const mt_minimax_config *cfg, mt_gather_unit unit, mt_dtype gather_dtype,
                        long seq, long batch, int cp, double gib, int *pick_n, int *pick_p) {
    if (unit != MT_GATHER_EXPERT || gather_dtype != MT_F32) {
        /* the layout the trainer's expert parallelism runs: what changes, named as recipe keys */
        const bool u = unit != MT_GATHER_EXPERT, d = gather_dtype != MT_F32;
        printf("fit_ranks_ep_settings=%s%s%s  # expert parallelism (dist.expert_parallel = P > 1) "
               "gathers fp32 parameters one expert at a time: set %s%s%s with it; the "
               "fit_ranks_ep lines below are for %s%s%s (the fit_ranks_expert* lines above keep "
               "the given settings)\n",
               d ? "dist.gather_dtype=fp32" : "", d && u ? "," : "",
               u ? "dist.gather_unit=expert" : "", d ? "dist.gather_dtype = \"fp32\"" : "",
               d && u ? " and " : "", u ? "dist.gather_unit = \"expert\"" : "",
               d ? "--gather-dtype fp32" : "", d && u ? " " : "", u ? "--gather-unit expert" : "");
        unit = MT_GATHER_EXPERT;
        gather_dtype = MT_F32;
    }
    const int64_t cap = (int64_t)(gib * (double)(1 << 30));
    mt_minimax m;
    mt_minimax_init_unit(&m, cfg, unit);
    const int64_t act = seq ? mt_info_cp_activations(cfg, unit, true, batch, seq, cp) : 0;
    const int64_t tokens = (int64_t)batch * (seq / cp); /* a rank's rows in the all-to-all */
    int64_t *expert_numel = mt_malloc(sizeof(int64_t) * (size_t)m.n_buckets, "expert numel");
    const int E = cfg->num_local_experts;
    int *fit = mt_calloc((size_t)E + 1, sizeof(int), "ep fit"); /* fit[P]: fewest ranks, 0 none */
    int fewest = 0;
    for (int P = 1; P <= E; P++) {
        if (E % P) continue;
        const int step = mt_info_lcm(P, cp);
        int lo = 1, hi = (1 << 20) / step;
        if (hi < 1) continue;
        mt_info_ep_in in =
            mt_info_ep_in_model(&m, expert_numel, hi * step, P, gather_dtype, false, tokens);
        mt_info_ep_out o = mt_info_ep_plan(&in);
        if (o.owned_bytes + o.slot_bytes + act > cap) continue;
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            in.ranks = mid * step;
            o = mt_info_ep_plan(&in);
            if (o.owned_bytes + o.slot_bytes + act <= cap)
                hi = mid;
            else
                lo = mid + 1;
        }
        in.ranks = lo * step;
        o = mt_info_ep_plan(&in);
        fit[P] = lo * step;
        if (!fewest || fit[P] < fewest) fewest = fit[P];
        printf("fit_ranks_ep%d=%d  # %.2f GiB per rank, %.2f GB sent per rank per micro-step\n", P,
               fit[P], (double)(o.owned_bytes + o.slot_bytes + act) / (1 << 30),
               (double)(o.gather_bytes + o.reduce_bytes + o.alltoall_bytes) * 1e-9);
    }
    if (!fewest) {
        printf("fit_ranks_ep=none  # no expert-parallel layout fits %.1f GiB per rank\n", gib);
    } else {
        int N = (fewest + 7) / 8 * 8 - 8, best_p = 0;
        int64_t best_t = 0, best_b = 0;
        while (!best_p) /* the fewest nodes where some P (and cp) divides the ranks */
            for (int P = 1, n = N += 8; P <= E; P++) {
                if (!fit[P] || fit[P] > n || n % mt_info_lcm(P, cp)) continue;
                mt_info_ep_in in =
                    mt_info_ep_in_model(&m, expert_numel, n, P, gather_dtype, false, tokens);
                const mt_info_ep_out o = mt_info_ep_plan(&in);
                const int64_t t = o.gather_bytes + o.reduce_bytes + o.alltoall_bytes;
                if (!best_p || t < best_t)
                    best_p = P, best_t = t, best_b = o.owned_bytes + o.slot_bytes;
            }
        printf("fit_ranks_ep=%d ep=%d  # whole 8-GPU nodes (fewest ranks of any layout: %d), "
               "gather unit %s: %.2f GiB per rank of %.1f (state, slots%s), the least traffic "
               "there: %.2f GB sent per rank per micro-step\n",
               N, best_p, fewest, unit == MT_GATHER_EXPERT ? "expert" : "layer",
               (double)(best_b + act) / (1 << 30), gib, seq ? ", recomputed activations" : "",
               (double)best_t * 1e-9);
        if (cp > 1)
            printf("fit_ranks_ep_cp=%d  # the fits above: activations of %ld local tokens a row "
                   "(apps/info_cp.h), ranks a multiple of C and P\n",
                   cp, seq / cp);
        *pick_n = N, *pick_p = best_p;
    }
    free(fit);
    free(expert_numel);
    mt_minimax_free(&m);
}

/* --fit-gib: per gather unit and offload, the fewest ranks that fit (the bytes fall with N, so
 * a bisection over [1, 2^20]); with context parallelism over cp ranks, its activations
 * (apps/info_cp.h) and the fewest multiple of cp. */
static void info_fit(const mt_minimax_config *cfg, mt_dtype gather_dtype, long seq, long batch,
                     int cp, double gib) {
    char note[96] = "";
    if (cp > 1)
        snprintf(note, sizeof(note), " of %ld local tokens, ranks a multiple of C=%d", seq / cp,
                 cp);
    const int64_t cap = (int64_t)(gib * (double)(1 << 30));
    for (int u = 0; u < 2; u++) {
        const mt_gather_unit unit = u ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
        mt_minimax m;
        mt_minimax_init_unit(&m, cfg, unit);
        const int64_t act = seq ? mt_info_cp_activations(cfg, unit, true, batch, seq, cp) : 0;
        for (int off = 0; off < 2; off++) {
            int64_t host;
            int lo = 1, hi = (1 << 20) / cp;
            if (info_rank_bytes(&m, hi * cp, gather_dtype, off, act, &host) > cap) {
                printf("fit_ranks_%s%s=none  # more than %d ranks, or the activations alone "
                       "exceed %.1f GiB\n",
                       u ? "expert" : "layer", off ? "_offload" : "", hi * cp, gib);
                continue;
            }
            while (lo < hi) {
                const int mid = lo + (hi - lo) / 2;
                if (info_rank_bytes(&m, mid * cp, gather_dtype, off, act, &host) <= cap)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            lo *= cp;
            const int64_t bytes = info_rank_bytes(&m, lo, gather_dtype, off, act, &host);
            printf("fit_ranks_%s%s=%d  # %.2f GiB per rank of %.1f (state, slots%s%s)%s",
                   u ? "expert" : "layer", off ? "_offload" : "", lo, (double)bytes / (1 << 30),
                   gib, seq ? ", recomputed activations" : "", note, off ? "" : "\n");
            if (off) printf(", host %.2f GiB per rank\n", (double)host / (1 << 30));
        }
        mt_minimax_free(&m);
    }
}

/* A flag's value refused by core/cli_flags.h: its one line, exit 2 (a bad command line). */
static void info_flag(bool ok, const char *msg) {
    if (ok) return;
    fprintf(stderr, "minimax-info: %s\n", msg);
    exit(2);
}

/* The flags, as given. */
typedef struct {
    const char *config;
    int keep, ranks, ep;
    long seq, batch;
    mt_gather_unit unit;
    mt_dtype gather_dtype;
    bool offload;
    double fit_gib;
    const char *gpu; /* --gpu's name: fit_gib from its memory */
    bool predict;    /* --predict-step */
    int cp;          /* --context-parallel C (1: none) */
    bool cp_auto;    /* --context-parallel auto: the best layout search */
} info_args;

/* The devices --gpu names: memory as the vendor states it, in decimal GB. */
static const struct {
    const char *name, *what;
    double gb;
} info_gpus[] = {
    {"h100", "NVIDIA H100 SXM/PCIe 80GB", 80},
    {"h200", "NVIDIA H200", 141},
    {"b200", "NVIDIA B200 (HGX/DGX B200: 8 x 180 GB)", 180},
    {"a100-80", "NVIDIA A100 80GB", 80},
};

/* --gpu NAME into a->fit_gib; a name it does not know: the list, exit 2. */
static void info_gpu_set(info_args *a, const char *name) {
    for (size_t i = 0; i < sizeof(info_gpus) / sizeof(info_gpus[0]); i++)
        if (!strcmp(name, info_gpus[i].name)) {
            a->gpu = info_gpus[i].name;
            a->fit_gib = info_gpus[i].gb * 1e9 / (double)(1 << 30);
            return;
        }
    fprintf(stderr,
            "minimax-info: --gpu %s: not a device it knows: h100, h200, b200, a100-80 "
            "(or give --fit-gib GIB)\n",
            name);
    exit(2);
}

/* gpu=NAME: what --gpu set, printed before the fits. */
static void info_gpu_print(const info_args *a) {
    for (size_t i = 0; a->gpu && i < sizeof(info_gpus) / sizeof(info_gpus[0]); i++)
        if (!strcmp(a->gpu, info_gpus[i].name))
            printf("gpu=%s fit_gib=%.1f  # %s: %.0f GB as the vendor states it = %.1f GiB; the "
                   "device may report a little more, and the trainer checks its free memory "
                   "before it loads anything\n",
                   a->gpu, a->fit_gib, info_gpus[i].what, info_gpus[i].gb, a->fit_gib);
}

/* --context-parallel: what it needs, one line each (exit 2). */
static void info_check_cp(const info_args *a) {
    char msg[256];
    if (a->cp_auto) {
        info_flag(a->seq > 0 && a->fit_gib > 0,
                  "--context-parallel auto needs --seq T and --gpu NAME or --fit-gib G");
        info_flag(!a->predict, "--predict-step predicts steps without --context-parallel");
        return;
    }
    if (a->cp == 1) return;
    info_flag(a->seq > 0, "--context-parallel needs --seq T");
    snprintf(msg, sizeof(msg),
             "--context-parallel %d: --seq %ld does not split into %d equal chunks (T must be a "
             "multiple of 2C = %d)",
             a->cp, a->seq, 2 * a->cp, 2 * a->cp);
    info_flag(mt_info_cp_divides(a->seq, a->cp), msg);
    snprintf(msg, sizeof(msg), "--context-parallel %d must divide --ranks %d", a->cp, a->ranks);
    info_flag(a->ranks % a->cp == 0, msg);
    info_flag(!a->predict, "--predict-step predicts steps without --context-parallel");
}

static info_args info_parse(int argc, char **argv) {
    info_args a = {.batch = 1, .unit = MT_GATHER_LAYER, .gather_dtype = MT_F32, .cp = 1};
    char msg[256];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            a.config = argv[++i];
        } else if (strcmp(argv[i], "--num-hidden-layers") == 0 && i + 1 < argc) {
            info_flag(mt_flag_int32(argv[i], argv[i + 1], 1, INT_MAX, &a.keep, msg, sizeof(msg)),
                      msg);
            i++;
        } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
            info_flag(mt_flag_int32(argv[i], argv[i + 1], 1, INT_MAX, &a.ranks, msg, sizeof(msg)),
                      msg);
            i++;
        } else if ((strcmp(argv[i], "--seq") == 0 || strcmp(argv[i], "--batch") == 0) &&
                   i + 1 < argc) {
            long long v = 0;
            info_flag(mt_flag_int(argv[i], argv[i + 1], 1, 1LL << 24, &v, msg, sizeof(msg)), msg);
            *(strcmp(argv[i], "--seq") == 0 ? &a.seq : &a.batch) = (long)v;
            i++;
        } else if (strcmp(argv[i], "--gather-unit") == 0 && i + 1 < argc) {
            const char *u = argv[++i];
            if (strcmp(u, "layer") && strcmp(u, "expert")) usage(2);
            a.unit = strcmp(u, "expert") == 0 ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
        } else if (strcmp(argv[i], "--fit-gib") == 0 && i + 1 < argc) {
            info_flag(!a.gpu, "give --gpu or --fit-gib, not both");
            info_flag(mt_flag_double(argv[i], argv[i + 1], 0, true, HUGE_VAL, true, &a.fit_gib, msg,
                                     sizeof(msg)),
                      msg);
            i++;
        } else if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc) {
            info_flag(a.fit_gib == 0, "give --gpu or --fit-gib, not both");
            info_gpu_set(&a, argv[++i]);
        } else if (strcmp(argv[i], "--expert-parallel") == 0 && i + 1 < argc) {
            info_flag(mt_flag_int32(argv[i], argv[i + 1], 1, INT_MAX, &a.ep, msg, sizeof(msg)),
                      msg);
            i++;
        } else if (strcmp(argv[i], "--context-parallel") == 0 && i + 1 < argc) {
            a.cp_auto = strcmp(argv[i + 1], "auto") == 0;
            if (!a.cp_auto)
                info_flag(mt_flag_int32(argv[i], argv[i + 1], 1, 1 << 20, &a.cp, msg, sizeof(msg)),
                          msg);
            i++;
        } else if (strcmp(argv[i], "--predict-step") == 0) {
            a.predict = true;
        } else if (strcmp(argv[i], "--offload") == 0) {
            a.offload = true;
        } else if (strcmp(argv[i], "--gather-dtype") == 0 && i + 1 < argc) {
            const char *d = argv[++i];
            if (strcmp(d, "fp32") && strcmp(d, "bf16")) usage(2);
            a.gather_dtype = strcmp(d, "bf16") == 0 ? MT_BF16 : MT_F32;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(0);
        } else if (strcmp(argv[i], "--version") == 0) {
            mt_version_print(stdout, "minimax-info");
            exit(0);
        } else {
            usage(2);
        }
    }
    if (!a.config) usage(2);
    info_check_cp(&a);
    if (a.predict) {
        info_flag(a.gpu != NULL, "--predict-step needs --gpu h200 or h100 (the device whose "
                                 "peaks it predicts with)");
        info_flag(mt_predict_gpu_find(a.gpu) != NULL,
                  "--predict-step knows the peaks of --gpu h200 and h100 only");
        info_flag(!a.offload, "--predict-step predicts steps without --offload");
        if (!a.seq) a.seq = 4096;
    }
    return a;
}

/* The parameter counts (params_*) and the layer kinds. */
static void info_print_counts(const mt_minimax *m, const mt_minimax_config *cfg,
                              const char *config) {
    int64_t total = 0, embed = 0, experts = 0, small = 0, buffers = 0;
    for (int p = 0; p < m->n_params; p++) {
        const mt_param_info *info = &m->info[p];
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
    int64_t active_experts = experts / cfg->num_local_experts * cfg->num_experts_per_tok;
    int64_t active = total - embed - experts + active_experts;
    int n_full = 0, n_msa = 0;
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        n_full += m->plan[l].mixer == MT_MIXER_SOFTMAX;
        n_msa += m->plan[l].mixer == MT_MIXER_MSA;
    }

    printf("config=%s\n", config);
    if (n_msa)
        printf(
            "family=%s model_type=%s layers=%d (softmax %d, msa sparse %d) experts=%d top_k=%d\n",
            mt_config_family(cfg)->name, cfg->model_type, cfg->num_hidden_layers, n_full, n_msa,
            cfg->num_local_experts, cfg->num_experts_per_tok);
    else
        printf("family=%s model_type=%s layers=%d (lightning %d, softmax %d) experts=%d top_k=%d\n",
               mt_config_family(cfg)->name, cfg->model_type, cfg->num_hidden_layers,
               cfg->num_hidden_layers - n_full, n_full, cfg->num_local_experts,
               cfg->num_experts_per_tok);
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
}

/* --expert-parallel P (with --ranks): EP's memory per rank and traffic beside ZeRO-3's z3. The
 * bytes one rank holds before activations. */
static int64_t info_print_ep(const info_args *a, const mt_minimax_config *cfg, mt_info_ep_in in,
                             const mt_info_ep_out *z3) {
    const int ep = a->ep, ranks = a->ranks;
    const double gib = 1.0 / (1 << 30);
    if (ranks % ep || cfg->num_local_experts % ep) {
        fprintf(stderr,
                "minimax-info: --expert-parallel %d must divide --ranks %d and the %d experts\n",
                ep, ranks, cfg->num_local_experts);
        exit(2);
    }
    if (ep > 1 && (a->unit != MT_GATHER_EXPERT || a->gather_dtype != MT_F32)) {
        fprintf(stderr,
                "minimax-info: --expert-parallel %d needs --gather-unit expert and "
                "--gather-dtype fp32, as the trainer's dist.expert_parallel does: expert "
                "parallelism gathers fp32 parameters one expert at a time, so a recipe with it "
                "sets dist.gather_unit = \"expert\" and dist.gather_dtype = \"fp32\" (not the "
                "bf16 gathers recommended without it)\n",
                ep);
        exit(2);
    }
    in.ep = ep;
    const mt_info_ep_out e = mt_info_ep_plan(&in);
    printf("ep=%d ep_groups=%d experts_per_rank=%d  # each rank of a group of P "
           "computes E/P experts, gathered to it from their ZeRO-3 shards\n",
           ep, ranks / ep, cfg->num_local_experts / ep);
    printf("ep_owned_bytes_per_rank=%.0f (%.2f GiB)\n", (double)e.owned_bytes,
           (double)e.owned_bytes * gib);
    if (a->offload)
        printf("ep_host_bytes_per_rank=%.0f (%.2f GiB)\n", (double)e.host_bytes,
               (double)e.host_bytes * gib);
    printf("ep_slot_bytes_per_rank=%.0f (%.2f GiB)  # ZeRO-3's slots + the expert "
           "shards' send buffer\n",
           (double)e.slot_bytes, (double)e.slot_bytes * gib);
    printf("ep_bytes_per_rank=%.0f (%.2f GiB)  # before activations\n",
           (double)(e.owned_bytes + e.slot_bytes), (double)(e.owned_bytes + e.slot_bytes) * gib);
    print_traffic("traffic_ep", &e, a->seq > 0, true);
    const double t3 = (double)(z3->gather_bytes + z3->reduce_bytes + z3->alltoall_bytes);
    const double te = (double)(e.gather_bytes + e.reduce_bytes + e.alltoall_bytes);
    if (te > 0) printf("traffic_ratio_zero3_over_ep=%.3f\n", t3 / te);
    return e.owned_bytes + e.slot_bytes;
}

/* --ranks N: ZeRO-3's state and slots per rank (zero3_*), its traffic, and EP's with
 * --expert-parallel. The bytes one rank holds before activations under each (*ep_bytes 0
 * without --expert-parallel). */
static int64_t info_print_zero3(const info_args *a, const mt_minimax *m,
                                const mt_minimax_config *cfg, int64_t *ep_bytes) {
    const mt_zero_sizes z =
        mt_zero_plan(a->ranks, m->n_buckets, m->bucket_numel, a->gather_dtype, a->offload);
    const double gib = 1.0 / (1 << 30);
    const double b_owned = (double)z.owned_bytes, b_slots = (double)z.slot_bytes;
    const bool bf16 = a->gather_dtype == MT_BF16, offload = a->offload;
    printf("zero3_ranks=%d gather_unit=%s gather_dtype=%s buckets=%d\n", a->ranks,
           a->unit == MT_GATHER_EXPERT ? "expert" : "layer", bf16 ? "bf16" : "fp32", m->n_buckets);
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
    for (int b = 0; b < m->n_buckets; b++)
        if (m->bucket_numel[b] > largest) largest = m->bucket_numel[b];
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
    int64_t *expert_numel = mt_malloc(sizeof(int64_t) * (size_t)m->n_buckets, "expert numel");
    const mt_info_ep_in in = mt_info_ep_in_model(m, expert_numel, a->ranks, 1, a->gather_dtype,
                                                 offload, (int64_t)a->batch * (a->seq / a->cp));
    const mt_info_ep_out z3 = mt_info_ep_plan(&in);
    print_traffic("traffic_zero3", &z3, a->seq > 0, false);
    *ep_bytes = a->ep ? info_print_ep(a, cfg, in, &z3) : 0;
    free(expert_numel);
    return z.owned_bytes + z.slot_bytes;
}

/* --context-parallel C > 1: the layout and the exchange buffers of one layer (apps/info_cp.h). */
static void info_print_cp(const info_args *a, const mt_info_cp_exchange *x) {
    const int C = a->cp;
    printf("cp=%d local_tokens=%ld chunk_tokens=%ld  # each row of T=%ld cut into %d chunks; "
           "rank r of a context group holds chunks r and %d-r\n",
           C, a->seq / C, a->seq / (2 * C), a->seq, 2 * C, 2 * C - 1);
    const struct {
        const char *kind, *what;
        int64_t bytes;
    } k[3] = {
        {"softmax", "K, V (B,T,Hkv,D) all-gathered + dK, dV reduce-scattered", x->softmax},
        {"lightning", "the all-gather of 2C chunk states (B,H,D,D)", x->lightning},
        {"msa",
         "K, V (B,T,Hkv,D) and the index keys (B,T,Di) all-gathered + their gradients + the "
         "reduce-scatter's copy of one",
         x->msa},
    };
    for (int i = 0; i < 3; i++)
        if (k[i].bytes)
            printf("cp_exchange_bytes_%s=%lld (%.2f GiB)  # per %s layer while it runs: %s, "
                   "fp32\n",
                   k[i].kind, (long long)k[i].bytes, (double)k[i].bytes / (1 << 30), k[i].kind,
                   k[i].what);
    printf("cp_exchange_bytes=%lld (%.2f GiB)  # the largest of one layer's (layers run one at "
           "a time), on top of the dry run's peak\n",
           (long long)x->peak, (double)x->peak / (1 << 30));
    if (x->msa_kept)
        printf("cp_msa_kept_bytes=%lld (%.2f GiB)  # the MSA layers' gathered K, V and index "
               "keys kept until their backward, without recompute (in activation_bytes_kept)\n",
               (long long)x->msa_kept, (double)x->msa_kept / (1 << 30));
}

/* --seq T: the activation arena of one micro-step, kept and recomputed, and the totals with the
 * state per rank (zero_bytes, ep_bytes: 0 when not computed). */
static void info_print_activations(const info_args *a, const mt_minimax *m, int64_t zero_bytes,
                                   int64_t ep_bytes) {
    const double gib = 1.0 / (1 << 30);
    const char *u = a->unit == MT_GATHER_EXPERT ? "expert" : "layer";
    const int C = a->cp;
    const mt_info_cp_exchange x = mt_info_cp_exchange_plan(m, C, a->batch, a->seq);
    if (C > 1) info_print_cp(a, &x);
    for (int r = 0; r < 2; r++) {
        const int64_t bytes =
            mt_minimax_plan_activations(&m->cfg, a->unit, r == 1, a->batch, a->seq / C) +
            mt_info_cp_exchange_bytes(&x, r == 1);
        if (C > 1)
            printf("activation_bytes_%s=%lld (%.2f GiB)  # per rank, B=%ld T=%ld over C=%d "
                   "ranks, gather unit %s: the dry run of B x %ld local tokens + "
                   "cp_exchange_bytes; kernels' scratch on top\n",
                   r ? "recomputed" : "kept", (long long)bytes, (double)bytes * gib, a->batch,
                   a->seq, C, u, a->seq / C);
        else
            printf("activation_bytes_%s=%lld (%.2f GiB)  # B=%ld T=%ld, gather unit %s: live "
                   "outputs, saved buffers and gradients at their peak; kernels' scratch on "
                   "top\n",
                   r ? "recomputed" : "kept", (long long)bytes, (double)bytes * gib, a->batch,
                   a->seq, u);
        if (zero_bytes)
            printf("total_bytes_per_rank_%s=%lld (%.2f GiB)  # zero3 + activations; the "
                   "CUDA context, cuBLAS workspace, NCCL buffers and scratch on top\n",
                   r ? "recomputed" : "kept", (long long)(zero_bytes + bytes),
                   (double)(zero_bytes + bytes) * gib);
        if (ep_bytes)
            printf("ep_total_bytes_per_rank_%s=%lld (%.2f GiB)  # ep + activations (uniform "
                   "routing: the same expert rows per rank)\n",
                   r ? "recomputed" : "kept", (long long)(ep_bytes + bytes),
                   (double)(ep_bytes + bytes) * gib);
    }
}

/* --predict-step: the roofline step (apps/info_predict.h) at the layout given (--ranks,
 * --expert-parallel, --gather-unit, --gather-dtype) or else at the fit_ranks_ep pick (pick_n
 * ranks, EP pick_p, gather unit expert, fp32 gathers), recomputed layers as the fits assume. */
static void info_predict(const info_args *a, const mt_minimax_config *cfg, int pick_n, int pick_p) {
    const bool given = a->ranks > 0;
    if (!given && !pick_n) {
        fprintf(stderr,
                "minimax-info: --predict-step: no layout fits %.1f GiB per rank; give "
                "--ranks N\n",
                a->fit_gib);
        exit(2);
    }
    const int N = given ? a->ranks : pick_n, P = given ? (a->ep ? a->ep : 1) : pick_p;
    const mt_gather_unit unit = given ? a->unit : MT_GATHER_EXPERT;
    const mt_dtype dtype = given ? a->gather_dtype : MT_F32;
    mt_minimax m;
    mt_minimax_init_unit(&m, cfg, unit);
    const int64_t tokens = (int64_t)a->batch * a->seq;
    int64_t *expert_numel = mt_malloc(sizeof(int64_t) * (size_t)m.n_buckets, "expert numel");
    const mt_info_ep_in in = mt_info_ep_in_model(&m, expert_numel, N, P, dtype, false, tokens);
    const mt_info_ep_out o = mt_info_ep_plan(&in);
    const mt_zero_sizes z = mt_zero_plan(N, m.n_buckets, m.bucket_numel, dtype, false);
    const int gb = dtype == MT_BF16 ? 2 : 4;
    double zero3 = (double)(o.gather_bytes + o.reduce_bytes), a2a = (double)o.alltoall_bytes;
    if (unit == MT_GATHER_EXPERT) {
        /* recomputed layers gather their attention bucket (and shared expert) once more
         * (docs/training.md, "Activation memory"); with EP the forward's exchanges run
         * again (models/block_moe.c: the rows there and back, their weights once) */
        bool *again = mt_calloc((size_t)m.n_buckets, sizeof(bool), "predict buckets");
        for (int l = 0; l < cfg->num_hidden_layers; l++) again[mt_minimax_layer_bucket(&m, l)] = 1;
        for (int p = 0; p < m.n_params; p++)
            if (strstr(m.info[p].name, ".shared_experts.")) again[m.info[p].bucket] = 1;
        for (int b = 0; b < m.n_buckets; b++)
            if (again[b]) zero3 += mt_predict_ring_bytes((double)m.bucket_numel[b] * gb, N);
        free(again);
        if (P > 1)
            a2a += (double)in.moe_layers * (double)tokens * in.top_k * (2 * in.hidden * 4.0 + 4) *
                   (P - 1) / P;
    }
    int64_t total = 0, embed = 0, experts = 0;
    for (int p = 0; p < m.n_params; p++) {
        const mt_param_info *info = &m.info[p];
        if (info->buffer) continue;
        total += info->numel;
        if (!strncmp(info->name, "model.embed_tokens.", 19) || !strncmp(info->name, "lm_head.", 8))
            embed += info->numel;
        else if (strstr(info->name, ".block_sparse_moe.experts."))
            experts += info->numel;
    }
    const double active = (double)(total - embed - experts) +
                          (double)experts / cfg->num_local_experts * cfg->num_experts_per_tok;
    const mt_predict_in pin = {.cfg = cfg,
                               .plan = m.plan,
                               .batch = a->batch,
                               .seq = a->seq,
                               .ranks = N,
                               .ep = P,
                               .recompute = true,
                               .gather_bytes = gb,
                               .owned_params = z.owned,
                               .zero3_bytes = zero3,
                               .alltoall_bytes = a2a,
                               .params_active = active,
                               .params_lm_head = (double)cfg->vocab_size * cfg->hidden_size};
    const mt_predict_gpu *g = mt_predict_gpu_find(a->gpu);
    mt_predict_out out;
    mt_predict_step(&pin, g, &out);
    printf("predict_source=%s  # gather unit %s\n",
           given ? "the layout given (--ranks)" : "fit_ranks_ep (the fewest whole nodes)",
           unit == MT_GATHER_EXPERT ? "expert" : "layer");
    mt_predict_print(&pin, g, &out);
    free(expert_numel);
    mt_minimax_free(&m);
}

int main(int argc, char **argv) {
    const info_args a = info_parse(argc, argv);
    mt_minimax_config cfg;
    mt_minimax_config_load(a.config, &cfg);
    if (a.keep) mt_minimax_config_keep_layers(&cfg, a.keep);
    mt_minimax m;
    mt_minimax_init_unit(&m, &cfg, a.unit);
    info_print_counts(&m, &cfg, a.config);
    int64_t zero_bytes = 0, ep_bytes = 0; /* with --ranks: the state and slots one rank holds */
    int pick_n = 0, pick_p = 0;           /* the fit_ranks_ep layout (0: none fits) */
    if (a.ranks) zero_bytes = info_print_zero3(&a, &m, &cfg, &ep_bytes);
    if (a.seq) info_print_activations(&a, &m, zero_bytes, ep_bytes);
    if (a.fit_gib > 0) {
        info_gpu_print(&a);
        info_fit(&cfg, a.gather_dtype, a.seq, a.batch, a.cp, a.fit_gib);
        info_fit_ep(&cfg, a.unit, a.gather_dtype, a.seq, a.batch, a.cp, a.fit_gib, &pick_n,
                    &pick_p);
        if (a.cp_auto) mt_info_cp_best(&cfg, a.batch, a.seq, a.fit_gib);
    }
    if (a.predict) info_predict(&a, &cfg, pick_n, pick_p);
    mt_minimax_free(&m);
    return 0;
}
