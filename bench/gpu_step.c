/* gpu_step.c: one full training step of a MiniMax-Text-01-shaped model on one device: tokens/s
 * and MFU. The model (models/minimax.h) runs under ZeRO-3 with one rank (train/sharded.h:
 * gather, forward, backward, reduce-scatter, grad norm, clip, AdamW), so the step timed is the
 * trainer's step without data loading. Plain C through the backend table: the same source runs
 * on the CUDA backend (built with -DMT_CUDA=ON, run by launch/gpu-check.sh), on the CPU backend
 * (--backend cpu, a small shape) and on the CUDA emulator (ctest op_cuda_emu_step).
 *
 * The config is built here, without config.json (no model directory needed): Text-01's layer
 * shapes (head_dim 128, GQA with 8 kv heads, 32 experts top-2, vocab 200064, lightning block 256,
 * partial RoPE on half the head) at a width and depth that fit one GPU. Layer l is softmax when
 * (l+1) % 8 == 0, Text-01's pattern; with fewer than 8 layers the last one is softmax so every
 * run has both mixers.
 *
 * FLOPs per token (printed with the result):
 *   matmuls:   6 * N_active, N_active = lm_head V*C + per layer (router E*C, K active experts
 *              3*K*F*C, lightning qkv/gate/out 5*H*D*C or softmax q/k/v/o (2*H*D + 2*Hkv*D)*C);
 *              the embedding is a lookup (no FLOPs);
 *   softmax:   3 * 2*2*(T/2)*D*H per layer (QK^T and PV over T/2 keys on average, causal);
 *   lightning: 3 * H*(2*min(block,T)*D + 4*D^2) per layer (docs/cuda.md's convention: intra-block
 *              part plus state readout and update; the backward counted as 2x the forward).
 * MFU = achieved FLOP/s / --peak (default 989.4 TFLOP/s: H100/H200 SXM dense bf16). The loss is
 * the trainer's fused lm_head + cross-entropy (--fused-loss 1, no (B,T,V) logits) or the full
 * logits (0); the FLOP count is the same (a recomputation inside the fused op is not counted).
 *
 * Usage: bench-gpu-step [--backend cuda|cpu] [--dtype fp32|bf16] [--hidden C] [--layers L]
 *        [--heads H] [--kv-heads Hkv] [--head-dim D] [--experts E] [--topk K] [--ffn F]
 *        [--vocab V] [--seq T] [--batch B] [--block N] [--steps N] [--warmup N] [--peak TF]
 *        [--fused-loss 0|1] [--recompute 0|1] [--offload 0|1] [--gather-dtype fp32|bf16]
 *        [--arena-mb N] [--profile 0|1] [--comm nccl|self] [--decode N] [--decode-batch B]
 *        [--check]
 * --recompute 1: every layer recomputed in the backward (train.gradient_checkpointing); the
 * FLOP count stays the model's (the recomputation is overhead, as MFU conventionally counts).
 * --offload 1: AdamW moments in host memory and the update on the host (dist.offload_optimizer);
 * the step time includes the copies and the host update.
 * --gather-dtype bf16 (dist.gather_dtype): the parameters used rounded to bf16, gathered (one
 * rank: copied) into slots; with --offload 1 the master weights live on the host (train/zero.h).
 * --check applies it to the CPU runs too.
 * --profile 1: after the timed steps, one more forward and backward with the backend's sync
 * around every op's kernels, so each op's device time (launches included) shows, forward and
 * backward apart, and what is left of the wall time (gathers, reduce-scatters, host work): where
 * the step's time goes, not how fast it is (the syncs stop the host from running ahead).
 * --comm self: ZeRO's collectives on the device as copies on the compute stream
 * (mt_comm_self_device) instead of NCCL over one rank (the default, the trainer's path with its
 * communication stream): the single-GPU step without NCCL, for machines where it is missing or
 * its bootstrap fails.
 * --decode N (after the steps): greedy decoding through the ZeRO-3 gathers, as the trainer's
 * evaluation by generation (train/trainer_generate.c: one gather of each bucket per decode step
 * for the whole batch), of 1, then --decode-batch B (default 1, at most MT_GEN_BATCH_MAX) random
 * prompts of DECODE_PROMPT tokens, N new tokens each: decode tokens/s = B (N - 1) / (the time of N
 * new tokens - the time of 1), so the prefill and the first step do not count (RESULT decode).
 * --check (a small shape): the same steps on the CPU backend and on the device, per-step loss and
 * gradient norm compared: fp32 to 1e-5 relative; bf16 by issue 6's rule, |dev - cpu fp32| <=
 * 2 |cpu bf16 - cpu fp32| (the CPU's bf16 run is the rounding reference) on the first step, 4x
 * after AdamW updates. Exit 1 on a miss.
 * Exit 77 when the CUDA backend is asked for and no usable device exists. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/generate.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "train/comm.h"
#include "train/sharded.h"
#include "train/zero.h"

#define MIB           1048576.0
#define DECODE_PROMPT 128 /* --decode's prompt length */

typedef struct {
    int hidden, layers, heads, kv_heads, head_dim, experts, topk, ffn, vocab, seq, batch, block;
    int steps, warmup;
    int fused_loss; /* lm_head + cross-entropy as one chunked op, as the trainer (1) */
    int recompute;  /* train.gradient_checkpointing: each layer recomputed in the backward */
    int offload;    /* dist.offload_optimizer: AdamW on the host with host moments */
    mt_dtype dtype;
    mt_dtype gather_dtype; /* dist.gather_dtype */
    bool cpu;
    double peak_tflops;
    long arena_mb;  /* 0: planned */
    bool check;     /* --check: the device's steps against the CPU backend's (see step_check) */
    int profile;    /* --profile 1: one more fwd+bwd timed op by op (step_profile) */
    bool comm_self; /* --comm self: mt_comm_self_device instead of NCCL over one rank */
    int decode, decode_batch; /* --decode N new tokens for --decode-batch B prompts (step_decode) */
} step_opts;

static void step_usage(void) {
    fprintf(stderr,
            "usage: bench-gpu-step [--backend cuda|cpu] [--dtype fp32|bf16] [--hidden C] "
            "[--layers L] [--heads H] [--kv-heads Hkv] [--head-dim D] [--experts E] [--topk K] "
            "[--ffn F] [--vocab V] [--seq T] [--batch B] [--block N] [--steps N] [--warmup N] "
            "[--fused-loss 0|1] [--recompute 0|1] [--offload 0|1] [--gather-dtype fp32|bf16] "
            "[--peak TFLOPS] [--arena-mb N] [--profile 0|1] [--comm nccl|self] [--decode N] "
            "[--decode-batch B] [--check]\n");
    exit(2);
}

static long step_int_arg(const char *flag, const char *v) {
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < 0) {
        fprintf(stderr, "bench-gpu-step: %s expects a non-negative integer, got '%s'\n", flag, v);
        step_usage();
    }
    return x;
}

static void step_parse(int argc, char **argv, step_opts *o) {
    *o = (step_opts){.hidden = 2048,
                     .layers = 2,
                     .heads = 16,
                     .kv_heads = 8,
                     .head_dim = 128,
                     .experts = 32,
                     .topk = 2,
                     .ffn = 2048,
                     .vocab = 200064,
                     .seq = 4096,
                     .batch = 1,
                     .block = 256,
                     .steps = 5,
                     .warmup = 2,
                     .fused_loss = 1,
                     .decode_batch = 1,
                     .dtype = MT_F32,
                     .gather_dtype = MT_F32,
                     .peak_tflops = 989.4};
    struct {
        const char *flag;
        int *dst;
    } ints[] = {{"--hidden", &o->hidden},
                {"--layers", &o->layers},
                {"--heads", &o->heads},
                {"--kv-heads", &o->kv_heads},
                {"--head-dim", &o->head_dim},
                {"--experts", &o->experts},
                {"--topk", &o->topk},
                {"--ffn", &o->ffn},
                {"--vocab", &o->vocab},
                {"--seq", &o->seq},
                {"--batch", &o->batch},
                {"--block", &o->block},
                {"--steps", &o->steps},
                {"--warmup", &o->warmup},
                {"--fused-loss", &o->fused_loss},
                {"--recompute", &o->recompute},
                {"--offload", &o->offload},
                {"--profile", &o->profile},
                {"--decode", &o->decode},
                {"--decode-batch", &o->decode_batch}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--check") == 0) {
            o->check = true;
            continue;
        }
        if (i + 1 >= argc) step_usage();
        const char *v = argv[++i];
        bool done = false;
        for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]) && !done; k++)
            if (strcmp(a, ints[k].flag) == 0) {
                long x = step_int_arg(a, v);
                if (x > (1L << 30)) step_usage();
                *ints[k].dst = (int)x;
                done = true;
            }
        if (done) continue;
        if (strcmp(a, "--backend") == 0 && (!strcmp(v, "cuda") || !strcmp(v, "cpu")))
            o->cpu = strcmp(v, "cpu") == 0;
        else if (strcmp(a, "--dtype") == 0 && (!strcmp(v, "fp32") || !strcmp(v, "bf16")))
            o->dtype = strcmp(v, "bf16") == 0 ? MT_BF16 : MT_F32;
        else if (strcmp(a, "--gather-dtype") == 0 && (!strcmp(v, "fp32") || !strcmp(v, "bf16")))
            o->gather_dtype = strcmp(v, "bf16") == 0 ? MT_BF16 : MT_F32;
        else if (strcmp(a, "--peak") == 0 && atof(v) > 0)
            o->peak_tflops = atof(v);
        else if (strcmp(a, "--arena-mb") == 0)
            o->arena_mb = step_int_arg(a, v);
        else if (strcmp(a, "--comm") == 0 && (!strcmp(v, "nccl") || !strcmp(v, "self")))
            o->comm_self = strcmp(v, "self") == 0;
        else
            step_usage();
    }
    if (o->steps < 1 || o->fused_loss > 1 || o->profile > 1 || o->decode_batch < 1 ||
        o->decode_batch > MT_GEN_BATCH_MAX || o->decode == 1)
        step_usage();
}

/* A Text-01-shaped config (see the header); the derived fields config.c would compute from a
 * config.json (head_dim, rotary_dim, layer types, slope denominator) are set explicitly. */
static void step_config(const step_opts *o, mt_minimax_config *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->model_type, sizeof(cfg->model_type), "minimax");
    cfg->vocab_size = o->vocab;
    cfg->hidden_size = o->hidden;
    cfg->intermediate_size = o->ffn;
    cfg->num_hidden_layers = cfg->num_hidden_layers_source = o->layers;
    cfg->num_attention_heads = o->heads;
    cfg->num_key_value_heads = o->kv_heads;
    cfg->head_dim = o->head_dim;
    cfg->num_local_experts = o->experts;
    cfg->num_experts_per_tok = o->topk;
    cfg->block_size = o->block;
    cfg->rotary_dim = o->head_dim / 2 / 2 * 2; /* Text-01: 64 of 128 */
    /* the positions a step trains on, or --decode's prompt and its new tokens if more: the
     * generation refuses a prompt past the context */
    cfg->max_position_embeddings = o->seq;
    if (o->decode > 0 && DECODE_PROMPT + o->decode > o->seq)
        cfg->max_position_embeddings = DECODE_PROMPT + o->decode;
    cfg->rms_norm_eps = 1e-5f;
    cfg->rope_theta = 1e7f;
    cfg->initializer_range = 0.02f;
    cfg->router_aux_loss_coef = 0.001f;
    cfg->output_router_logits = false; /* as the released config */
    cfg->full_attn_alpha = cfg->full_attn_beta = 1.0f;
    cfg->linear_attn_alpha = cfg->linear_attn_beta = 1.0f;
    cfg->mlp_alpha = cfg->mlp_beta = 1.0f;
    cfg->slope_hf_denominator = true;
    cfg->bos_token_id = 1;
    cfg->eos_token_id = 2;
    cfg->pad_token_id = -1;
    MT_CHECK(o->layers >= 1 && o->layers <= MT_MAX_LAYERS, "bench: --layers %d is outside [1, %d]",
             o->layers, MT_MAX_LAYERS);
    for (int l = 0; l < o->layers; l++)
        cfg->layer_types[l] = (l + 1) % 8 == 0 ? MT_LAYER_FULL : MT_LAYER_LINEAR;
    if (o->layers < 8 && o->layers > 1) cfg->layer_types[o->layers - 1] = MT_LAYER_FULL;
    MT_CHECK(o->hidden > 0 && o->heads > 0 && o->kv_heads > 0 && o->heads % o->kv_heads == 0,
             "bench: --heads %d must be a positive multiple of --kv-heads %d (hidden %d)", o->heads,
             o->kv_heads, o->hidden);
    MT_CHECK(o->head_dim >= 4 && o->head_dim <= 256,
             "bench: --head-dim %d must be in [4, 256] (the kernels' limit)", o->head_dim);
    MT_CHECK(o->topk >= 1 && o->topk <= o->experts && o->ffn > 0 && o->vocab > 0 && o->block > 0 &&
                 o->seq > 0 && o->batch > 0,
             "bench: need 1 <= --topk %d <= --experts %d and positive --ffn, --vocab, --block, "
             "--seq, --batch",
             o->topk, o->experts);
}

/* Model FLOPs per token, split into matmuls (6 N_active) and the two attentions (header). */
static void step_flops(const mt_minimax_config *cfg, int64_t T, double *matmul, double *attn) {
    const double C = cfg->hidden_size, V = cfg->vocab_size, F = cfg->intermediate_size;
    const double H = cfg->num_attention_heads, Hkv = cfg->num_key_value_heads, D = cfg->head_dim;
    const double E = cfg->num_local_experts, K = cfg->num_experts_per_tok;
    const double blk = cfg->block_size < T ? cfg->block_size : (double)T;
    double n_active = V * C, a = 0;
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        n_active += E * C + 3 * K * F * C;
        if (cfg->layer_types[l] == MT_LAYER_LINEAR) {
            n_active += 5 * H * D * C;
            a += 3 * H * (2 * blk * D + 4 * D * D);
        } else {
            n_active += (2 * H * D + 2 * Hkv * D) * C;
            a += 3 * 2 * 2 * ((double)T / 2) * D * H;
        }
    }
    *matmul = 6 * n_active;
    *attn = a;
}

/* The activation arena: a generous bound on what one forward+backward carves (outputs, saved
 * buffers, activation gradients, kernel scratch), per token and layer in floats, plus the
 * per-block lightning states, the attention backward's doubles, the logits (with their gradient
 * and the cross-entropy scratch) and, for bf16 GEMMs, the weights' rounded copies. Checked
 * against the measured peak on the CPU backend and the emulator (the run prints both). */
static size_t step_arena_bytes(const mt_minimax *m, int64_t B, int64_t T, mt_dtype dtype) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t N = B * T, C = cfg->hidden_size, F = cfg->intermediate_size;
    const int64_t H = cfg->num_attention_heads, D = cfg->head_dim, HD = H * D;
    const int64_t KVD = (int64_t)cfg->num_key_value_heads * D, E = cfg->num_local_experts,
                  K = cfg->num_experts_per_tok, V = cfg->vocab_size;
    const int64_t nblk = (T + cfg->block_size - 1) / cfg->block_size;
    int64_t floats = 8 * N * C + 4 * N * V; /* embedding, final norm; logits, grad, CE */
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        int64_t per_tok = 12 * C + 4 * E + 6 * K * C + 8 * K * F + 4 * K; /* norms, MoE */
        if (cfg->layer_types[l] == MT_LAYER_LINEAR) {
            per_tok += 18 * HD; /* qkv (x2: silu), lightning out, norm, gate, mul */
            /* the block form's scratch, forward and backward (kernels/cuda/lightning_block.cu,
             * fp32 operands: the larger case): R (17 D + 3 L) + 3 N D^2 floats, R = N L rows */
            const int64_t L = cfg->block_size < T ? cfg->block_size : T, Nb = B * H * nblk;
            floats += Nb * L * (17 * D + 3 * L) + 3 * Nb * D * D;
        } else {
            per_tok += 8 * HD + 6 * KVD + 4 * H; /* q,k,v, rope, attention out, lse */
        }
        floats += 2 * N * per_tok;   /* outputs + their gradients */
        floats += 2 * B * H * T * 2; /* attention backward doubles, rmsnorm partials */
    }
    /* bf16 GEMMs: rounded copies of the weights (forward and backward) are scratch too */
    if (dtype == MT_BF16)
        for (int b = 0; b < m->n_buckets; b++) floats += m->bucket_numel[b];
    return sizeof(float) * (size_t)floats + ((size_t)64 << 20);
}

static double step_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int step_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- --profile: every op's kernels timed between two syncs ---- */

static const mt_backend *prof_real;
static mt_op_impl prof_orig[MT_OP_COUNT];
static double prof_ms[MT_OP_COUNT][2];
static int prof_calls[MT_OP_COUNT][2];

static void prof_time(const mt_node *n, int dir) {
    const mt_kernel_fn fn = dir ? prof_orig[n->op].bwd : prof_orig[n->op].fwd;
    prof_real->sync();
    const double t0 = step_now();
    fn(n);
    prof_real->sync();
    prof_ms[n->op][dir] += 1e3 * (step_now() - t0);
    prof_calls[n->op][dir]++;
}
static void prof_fwd(const mt_node *n) { prof_time(n, 0); }
static void prof_bwd(const mt_node *n) { prof_time(n, 1); }

static int prof_order(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    const double tx = prof_ms[x][0] + prof_ms[x][1], ty = prof_ms[y][0] + prof_ms[y][1];
    return (tx < ty) - (tx > ty);
}

/* One more forward and backward through a copy of the backend whose ops time themselves (a
 * recomputed segment's ops count where they run); prints the table and a RESULT line. */
static void step_profile(const step_opts *o, const mt_backend *be, mt_ctx *ctx, mt_sharded *s,
                         mt_zero *z, const mt_minimax_batch *batch) {
    static mt_backend timed;
    timed = *be;
    prof_real = be;
    memset(prof_ms, 0, sizeof(prof_ms));
    memset(prof_calls, 0, sizeof(prof_calls));
    for (int op = 0; op < MT_OP_COUNT; op++) {
        prof_orig[op] = be->ops[op];
        if (be->ops[op].fwd) timed.ops[op].fwd = prof_fwd;
        if (be->ops[op].bwd) timed.ops[op].bwd = prof_bwd;
    }
    ctx->be = &timed;
    be->sync();
    const double t0 = step_now();
    mt_zero_zero_grad(z);
    (void)mt_sharded_micro_step(s, batch, NULL);
    be->sync();
    const double wall = 1e3 * (step_now() - t0);
    ctx->be = be;

    int order[MT_OP_COUNT], n = 0;
    double fwd = 0, bwd = 0;
    for (int op = 0; op < MT_OP_COUNT; op++) {
        fwd += prof_ms[op][0];
        bwd += prof_ms[op][1];
        if (prof_calls[op][0] + prof_calls[op][1]) order[n++] = op;
    }
    qsort(order, (size_t)n, sizeof(int), prof_order);
    printf("   profile: one more forward and backward with a sync around every op (launches "
           "included; the syncs stop the host running ahead, so the wall time is longer)\n");
    printf("   %-22s %10s %7s %10s %7s %7s\n", "op", "fwd ms", "calls", "bwd ms", "calls",
           "% wall");
    for (int i = 0; i < n; i++) {
        const int op = order[i];
        printf("   %-22s %10.3f %7d %10.3f %7d %6.1f%%\n", mt_op_name((mt_op)op), prof_ms[op][0],
               prof_calls[op][0], prof_ms[op][1], prof_calls[op][1],
               100 * (prof_ms[op][0] + prof_ms[op][1]) / wall);
    }
    printf("   ops: forward %.2f ms, backward %.2f ms; the rest of the %.2f ms (gathers, "
           "reduce-scatters, casts into the slots, host work) %.2f ms\n",
           fwd, bwd, wall, wall - fwd - bwd);
    printf("RESULT profile %s%s%s: fwd+bwd %.2f ms with a sync per op; ops %.2f ms (forward %.2f, "
           "backward %.2f)",
           o->dtype == MT_BF16 ? "bf16" : "fp32", o->recompute ? " recompute" : "",
           o->offload ? " offload" : "", wall, fwd + bwd, fwd, bwd);
    for (int i = 0; i < n && i < 4; i++)
        printf("%s %s %.1f%%", i ? "," : "; top:", mt_op_name((mt_op)order[i]),
               100 * (prof_ms[order[i]][0] + prof_ms[order[i]][1]) / wall);
    printf("\n");
}

/* A (B,T) I32 device tensor the benchmark owns, filled from host values. */
static mt_tensor *step_ids_tensor(const mt_backend *be, int64_t B, int64_t T, const int32_t *h,
                                  const char *name) {
    mt_tensor *t = mt_calloc(1, sizeof(mt_tensor), name);
    mt_tensor_wrap(t, MT_I32, 2, (int64_t[]){B, T}, NULL, NULL, name);
    t->data = be->alloc(mt_nbytes(t));
    MT_CHECK(t->data, "bench: cannot allocate %zu bytes for %s", mt_nbytes(t), name);
    t->dev = be->dev;
    be->to_device(t->data, h, mt_nbytes(t));
    return t;
}

#define STEP_MAX 64

/* Per-step loss and gradient norm of one run (--check compares them). */
static int step_decode_max_all(void *user, int v) { /* one rank: its own value */
    (void)user;
    return v;
}

/* Seconds of greedy decoding of B random prompts of DECODE_PROMPT tokens, n_new tokens each,
 * through the gathers (the buckets bound without gradients, as trainer_generate.c). */
static double step_decode_time(mt_sharded *s, mt_ctx *c, int B, int n_new) {
    const int V = s->model->cfg.vocab_size;
    int32_t *ids = mt_malloc(sizeof(int32_t) * (size_t)(B * DECODE_PROMPT), "decode prompts");
    int32_t *out = mt_malloc(sizeof(int32_t) * (size_t)(B * n_new), "decode tokens");
    const int32_t *prompts[MT_GEN_BATCH_MAX];
    int lens[MT_GEN_BATCH_MAX], n_out[MT_GEN_BATCH_MAX];
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < B * DECODE_PROMPT; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((rng >> 33) % (uint64_t)V);
    }
    for (int b = 0; b < B; b++) {
        prompts[b] = ids + b * DECODE_PROMPT;
        lens[b] = DECODE_PROMPT;
    }
    mt_bucket_hooks hooks = mt_sharded_forward_hooks(s);
    const mt_gen_sync sync = {.hooks = &hooks, .max_all = step_decode_max_all};
    const mt_gen_opts opts = {.eos = -1, .sync = &sync};
    mt_sharded_bind(s, false);
    c->be->sync();
    const double t0 = step_now();
    mt_minimax_generate_batch(s->model, c, prompts, lens, B, n_new, &opts, out, n_out);
    c->be->sync();
    const double dt = step_now() - t0;
    mt_sharded_bind(s, true);
    free(ids);
    free(out);
    return dt;
}

/* --decode: decode tokens/s, the prefill and the first step subtracted (see the header), at
 * batch 1 and at --decode-batch. */
static void step_decode(const step_opts *o, mt_sharded *s, mt_ctx *c) {
    const int N = o->decode;
    for (int B = 1;; B = o->decode_batch) {
        step_decode_time(s, c, B, 2);        /* warm-up: plans, cuBLAS heuristics */
        double t1 = INFINITY, tn = INFINITY; /* the best of 3 each */
        for (int r = 0; r < 3; r++) {
            t1 = fmin(t1, step_decode_time(s, c, B, 1));
            tn = fmin(tn, step_decode_time(s, c, B, N));
        }
        const double per_step = (tn - t1) / (N - 1);
        printf(
            "RESULT decode B=%d: %.0f tokens/s (%.2f ms per decode step of %d rows, prompt %d, "
            "%d new tokens in %.3f s, the prefill and first token %.3f s), GEMMs %s, through the "
            "gathers\n",
            B, B / per_step, 1e3 * per_step, B, DECODE_PROMPT, N, tn, t1,
            c->compute_dtype == MT_BF16 ? "bf16" : "fp32");
        fflush(stdout);
        if (B == o->decode_batch) break;
    }
}

typedef struct {
    double loss[STEP_MAX], gnorm[STEP_MAX];
    int n;
} step_trace;

/* Builds the model on be, runs warm-up + timed steps in GEMM precision dtype and prints the
 * report; the trace gets every step's loss and gradient norm. Returns 0, or 1 when a loss or
 * gradient was not finite. */
/* Random ids; labels are the next token (the last position ignored), as packed SFT data. */
static mt_minimax_batch step_batch_random(const mt_backend *be, int64_t B, int64_t T, int vocab,
                                          bool fused_loss) {
    int32_t *ids_h = mt_malloc(sizeof(int32_t) * (size_t)(B * T), "ids");
    int32_t *lab_h = mt_malloc(sizeof(int32_t) * (size_t)(B * T), "labels");
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < B * T; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ids_h[i] = (int32_t)((rng >> 33) % (uint64_t)vocab);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) lab_h[b * T + t] = t + 1 < T ? ids_h[b * T + t + 1] : -100;
    mt_minimax_batch batch = {.ids = step_ids_tensor(be, B, T, ids_h, "ids"),
                              .labels = step_ids_tensor(be, B, T, lab_h, "labels"),
                              .fused_loss = fused_loss};
    free(ids_h);
    free(lab_h);
    return batch;
}

/* The medians of the timed steps (ms, ms_fb: sorted here), the arena against the planner, and
 * the RESULT lines. */
static void step_report(const step_opts *o, const mt_minimax_config *cfg, const mt_ctx *ctx,
                        const mt_zero *z, double *ms, double *ms_fb, size_t arena,
                        double flops_step, double tokens) {
    qsort(ms, (size_t)o->steps, sizeof(double), step_cmp);
    qsort(ms_fb, (size_t)o->steps, sizeof(double), step_cmp);
    double med = ms[o->steps / 2] * 1e-3, tflops = flops_step / med * 1e-12;
    const double med_fb = ms_fb[o->steps / 2] * 1e-3, tflops_fb = flops_step / med_fb * 1e-12;
    /* the planner of minimax-info --seq and the trainer (a dry run of the model code), for the
     * trainer's batch form (positions, segments, every token labelled): close to the measured
     * peak without scratch, which this batch (no positions or segments given, the last token
     * of each row unlabelled) differs from by a few (B,T) integer buffers */
    const int64_t planned =
        mt_minimax_plan_activations(cfg, MT_GATHER_LAYER, o->recompute == 1, o->batch, o->seq);
    printf("   arena peak %.1f MiB (without kernel scratch %.1f MiB; mt_minimax_plan_activations "
           "%.1f MiB) of %.1f MiB planned here\n",
           (double)ctx->arena.peak / MIB, (double)ctx->arena.peak_live / MIB, (double)planned / MIB,
           (double)arena / MIB);
    printf(
        "   device memory: arena peak + ZeRO %.1f MiB (+ batch, cuBLAS workspace)\n",
        (double)(ctx->arena.peak + (size_t)mt_zero_owned_bytes(z) + (size_t)mt_zero_slot_bytes(z)) /
            MIB);
    printf("RESULT step %s%s%s: %.2f ms median of %d (min %.2f), %.0f tokens/s, %.3g TFLOP/s, MFU "
           "%.3g%% of %.1f TFLOP/s (dense bf16 peak)\n",
           o->dtype == MT_BF16 ? "bf16" : "fp32", o->recompute ? " recompute" : "",
           o->offload ? " offload" : "", med * 1e3, o->steps, ms[0], tokens / med, tflops,
           100 * tflops / o->peak_tflops, o->peak_tflops);
    /* the forward and backward alone (gathers and reduce-scatters included): what a step costs
     * when the optimizer is spread over N ranks or many accumulated micro-steps */
    printf("RESULT step %s%s%s fwd+bwd: %.2f ms median, %.3g TFLOP/s, MFU %.3g%%; the optimizer "
           "(grad norm, clip, AdamW over all %lld parameters on this one device) %.2f ms of the "
           "step\n",
           o->dtype == MT_BF16 ? "bf16" : "fp32", o->recompute ? " recompute" : "",
           o->offload ? " offload" : "", med_fb * 1e3, tflops_fb, 100 * tflops_fb / o->peak_tflops,
           (long long)z->total_shard, (med - med_fb) * 1e3);
}

static int step_run(const step_opts *opts, const mt_backend *be, mt_dtype dtype, step_trace *tr) {
    step_opts o = *opts;
    o.dtype = dtype;
    mt_minimax_config cfg;
    step_config(&o, &cfg);
    tr->n = 0;
    const int64_t B = o.batch, T = o.seq, L = cfg.num_hidden_layers;
    int n_full = 0;
    for (int l = 0; l < L; l++) n_full += cfg.layer_types[l] == MT_LAYER_FULL;
    printf("== training step, MiniMax-Text-01 shape: backend %s, GEMMs %s (fp32 accumulation), "
           "B=%lld T=%lld, loss %s%s%s%s\n",
           be->name, o.dtype == MT_BF16 ? "bf16" : "fp32", (long long)B, (long long)T,
           o.fused_loss ? "fused (lm_head + CE in chunks, as the trainer)" : "from full logits",
           o.recompute ? ", layers recomputed in the backward" : "",
           o.offload ? ", AdamW offloaded to the host" : "",
           o.gather_dtype == MT_BF16 ? ", bf16 gathers" : "");
    printf("   C=%d L=%d (%d lightning, %d softmax) H=%d Hkv=%d D=%d rotary=%d E=%d K=%d F=%d V=%d "
           "block=%d\n",
           cfg.hidden_size, (int)L, (int)L - n_full, n_full, cfg.num_attention_heads,
           cfg.num_key_value_heads, cfg.head_dim, cfg.rotary_dim, cfg.num_local_experts,
           cfg.num_experts_per_tok, cfg.intermediate_size, cfg.vocab_size, cfg.block_size);

    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    m.gradient_checkpointing = o.recompute == 1;
    int64_t n_params = 0, max_bucket = 0;
    for (int b = 0; b < m.n_buckets; b++) {
        n_params += m.bucket_numel[b];
        if (m.bucket_numel[b] > max_bucket) max_bucket = m.bucket_numel[b];
    }
    /* one rank: the host self communicator for the CPU backend; for device buffers ZeRO needs a
     * device communicator, NCCL over one rank (the self communicator as its host side), or with
     * --comm self device copies */
    mt_comm *comm = mt_comm_self();
    if (be->dev != MT_CPU && o.comm_self) {
        comm = mt_comm_self_device(be);
    } else if (be->dev != MT_CPU) {
        comm = mt_comm_nccl_init(mt_comm_self(), 1800); /* the recipe's default dist.timeout */
        MT_CHECK(comm, "bench: no NCCL communicator (CUDA backend built without "
                       "train/comm_nccl.cu?); --comm self runs without NCCL");
    }
    mt_zero z;
    mt_zero_init_gather(&z, comm, be, m.n_buckets, m.bucket_numel, o.gather_dtype, o.offload == 1);
    /* master weights: drawn on the host bucket by bucket, copied to the owned shard */
    float *host = mt_malloc(sizeof(float) * (size_t)max_bucket, "bench init buffer");
    double t_init = step_now();
    for (int b = 0; b < m.n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(&z, b, &lo, &hi);
        if (hi <= lo) continue;
        mt_weights_init_random_range(&m, 1234, b, lo, hi, host);
        mt_zero_set_master(&z, b, lo, hi, host);
    }
    free(host);
    printf("   parameters %.2f M (init %.1f s); ZeRO over %s: owned %.1f MiB (%s) + gather slots "
           "%.1f MiB; host %.1f MiB\n",
           (double)n_params * 1e-6, step_now() - t_init, comm->name,
           (double)mt_zero_owned_bytes(&z) / MIB,
           z.master_on_host ? "grad, bf16 master"
           : z.offload      ? "master, grad"
                            : "master, grad, m, v",
           (double)mt_zero_slot_bytes(&z) / MIB, (double)mt_zero_host_bytes(&z) / MIB);

    size_t arena = o.arena_mb > 0 ? (size_t)o.arena_mb << 20 : step_arena_bytes(&m, B, T, o.dtype);
    printf("   activation arena %.1f MiB (%s)\n", (double)arena / MIB,
           o.arena_mb > 0 ? "--arena-mb" : "planned");
    mt_ctx ctx;
    mt_ctx_init(&ctx, be, arena, 256 + 64 * (int)L);
    ctx.compute_dtype = o.dtype;
    mt_sharded s;
    mt_sharded_init(&s, &m, &z, &ctx);

    mt_minimax_batch batch = step_batch_random(be, B, T, cfg.vocab_size, o.fused_loss == 1);

    double f_mm, f_attn;
    step_flops(&cfg, T, &f_mm, &f_attn);
    const double tokens = (double)(B * T), flops_step = tokens * (f_mm + f_attn);
    printf("   FLOPs per token: %.3g matmul (6 x %.3g active params) + %.3g attention = %.3g; "
           "%.3g per step\n",
           f_mm, f_mm / 6, f_attn, f_mm + f_attn, flops_step);

    printf("%6s %10s %10s %10s %10s %10s %12s\n", "step", "ms", "fwd+bwd", "optimizer", "loss",
           "grad norm", "tokens/s");
    double *ms = mt_calloc((size_t)o.steps, sizeof(double), "step times");
    double *ms_fb = mt_calloc((size_t)o.steps, sizeof(double), "fwd+bwd times");
    bool all_finite = true;
    for (int i = 0; i < o.warmup + o.steps; i++) {
        be->sync();
        double t0 = step_now();
        mt_zero_zero_grad(&z);
        double loss = mt_sharded_micro_step(&s, &batch, NULL);
        /* the split: one sync more, so the optimizer's share shows (one device holds the whole
         * model's optimizer here; a rank of an N-rank ZeRO run updates 1/N of it) */
        be->sync();
        const double t_fb = step_now() - t0;
        mt_adamw opt = {.lr = 1e-5,
                        .beta1 = 0.9,
                        .beta2 = 0.95,
                        .eps = 1e-8,
                        .weight_decay = 0.1,
                        .step = i + 1};
        double gnorm = 0;
        bool ok = mt_sharded_optimizer_step(&s, &opt, 1.0, &gnorm);
        be->sync();
        double dt = step_now() - t0;
        all_finite &= ok && isfinite(loss);
        if (tr->n < STEP_MAX) {
            tr->loss[tr->n] = loss;
            tr->gnorm[tr->n++] = gnorm;
        }
        if (i >= o.warmup) {
            ms[i - o.warmup] = 1e3 * dt;
            ms_fb[i - o.warmup] = 1e3 * t_fb;
        }
        printf("%6d %10.2f %10.2f %10.2f %10.4f %10.4f %12.0f%s\n", i + 1, 1e3 * dt, 1e3 * t_fb,
               1e3 * (dt - t_fb), loss, gnorm, tokens / dt, i < o.warmup ? "  (warm-up)" : "");
        fflush(stdout);
    }
    step_report(&o, &cfg, &ctx, &z, ms, ms_fb, arena, flops_step, tokens);
    if (!all_finite) printf("FAIL: a loss or gradient was not finite\n");
    if (o.profile) step_profile(&o, be, &ctx, &s, &z, &batch);
    if (o.decode) step_decode(&o, &s, &ctx);

    free(ms_fb);
    free(ms);
    be->free(batch.ids->data);
    be->free(batch.labels->data);
    free(batch.ids);
    free(batch.labels);
    mt_ctx_free(&ctx);
    mt_zero_free(&z);
    mt_minimax_free(&m);
    if (comm->device && !o.comm_self) mt_comm_nccl_free(comm);
    return all_finite ? 0 : 1;
}

/* --check: the device against the CPU backend on the same shape, seeds and steps. */
static int step_check(const step_opts *o, const mt_backend *dev) {
    step_trace ref, dev_tr, cpu_tr;
    const mt_backend *cpu = mt_backend_cpu();
    int rc = step_run(o, cpu, MT_F32, &ref) | step_run(o, dev, o->dtype, &dev_tr);
    const bool bf16 = o->dtype == MT_BF16;
    if (bf16) rc |= step_run(o, cpu, MT_BF16, &cpu_tr);
    printf("== check: %s on %s against the CPU backend (%s)\n", bf16 ? "bf16" : "fp32", dev->name,
           bf16 ? "|dev - cpu fp32| <= 2 (step 1; 4 later) |cpu bf16 - cpu fp32| + 1e-6 |cpu fp32|"
                : "relative difference <= 1e-5");
    printf("%6s %16s %16s %12s %16s %16s %12s\n", "step", "loss cpu", "loss dev", "rel diff",
           "grad norm cpu", "grad norm dev", "rel diff");
    int bad = 0;
    for (int i = 0; i < ref.n && i < dev_tr.n; i++) {
        const double *pairs[2][3] = {{&ref.loss[i], &dev_tr.loss[i], &cpu_tr.loss[i]},
                                     {&ref.gnorm[i], &dev_tr.gnorm[i], &cpu_tr.gnorm[i]}};
        double rel[2];
        for (int k = 0; k < 2; k++) {
            double r = *pairs[k][0], d = *pairs[k][1];
            rel[k] = fabs(d - r) / fmax(fabs(r), 1e-30);
            /* the bf16 rule on the first step (no update yet); after AdamW updates a 4x guard
             * (tests/train/dist_compare.c says why) */
            double rule = i == 0 ? 2 : 4;
            double limit =
                bf16 ? rule * fabs(*pairs[k][2] - r) / fmax(fabs(r), 1e-30) + 1e-6 : 1e-5;
            bad += !(rel[k] <= limit);
        }
        printf("%6d %16.9g %16.9g %12.3g %16.9g %16.9g %12.3g\n", i + 1, ref.loss[i],
               dev_tr.loss[i], rel[0], ref.gnorm[i], dev_tr.gnorm[i], rel[1]);
    }
    if (bf16)
        for (int i = 0; i < cpu_tr.n; i++)
            printf("   step %d, cpu bf16 vs fp32: loss %.3g, grad norm %.3g relative\n", i + 1,
                   fabs(cpu_tr.loss[i] - ref.loss[i]) / fabs(ref.loss[i]),
                   fabs(cpu_tr.gnorm[i] - ref.gnorm[i]) / fabs(ref.gnorm[i]));
    printf("RESULT check %s: %s (%d values outside the rule)\n", bf16 ? "bf16" : "fp32",
           bad || rc ? "FAIL" : "pass", bad);
    return bad || rc ? 1 : 0;
}

int main(int argc, char **argv) {
    step_opts o;
    step_parse(argc, argv, &o);
    setenv("MT_CUDA_VERBOSE", "1", 0); /* the backend prints the device's name and memory */
    const mt_backend *be = o.cpu ? mt_backend_cpu() : mt_backend_cuda();
    if (!be) {
        printf("SKIP bench-gpu-step: no usable CUDA device (or the CUDA backend was not built)\n");
        return 77;
    }
    if (o.check) return step_check(&o, be);
    step_trace tr;
    return step_run(&o, be, o.dtype, &tr);
}
