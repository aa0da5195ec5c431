/* info_cp.c: minimax-info's sizing of context parallelism (apps/info_cp.h). */
#include "apps/info_cp.h"

#include <stdio.h>
#include <stdlib.h>

#include "apps/info_ep.h"
#include "core/check.h"

bool mt_info_cp_divides(int64_t T, int C) { return C == 1 || (C > 1 && T % (2 * (int64_t)C) == 0); }

mt_info_cp_exchange mt_info_cp_exchange_plan(const mt_minimax *m, int C, int64_t B, int64_t T) {
    mt_info_cp_exchange x = {0};
    if (C <= 1) return x;
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t f = (int64_t)sizeof(float), D = cfg->head_dim;
    const int64_t kv = B * T * cfg->num_key_value_heads * D; /* one of K, V: (B,T,Hkv,D) */
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        switch (m->plan[l].mixer) {
        case MT_MIXER_SOFTMAX:
            x.softmax = 4 * kv * f;
            break;
        case MT_MIXER_MSA:
            x.msa = (5 * kv + 2 * B * T * cfg->msa_index_dim) * f;
            x.msa_kept += (2 * kv + B * T * cfg->msa_index_dim) * f;
            break;
        default:
            x.lightning = 2 * (int64_t)C * B * cfg->num_attention_heads * D * D * f;
            break;
        }
    }
    x.peak = x.softmax > x.lightning ? x.softmax : x.lightning;
    if (x.msa > x.peak) x.peak = x.msa;
    return x;
}

int64_t mt_info_cp_exchange_bytes(const mt_info_cp_exchange *x, bool recompute) {
    return x->peak + (recompute ? 0 : x->msa_kept);
}

int64_t mt_info_cp_activations(const mt_minimax_config *cfg, mt_gather_unit unit, bool recompute,
                               int64_t B, int64_t T, int C) {
    MT_CHECK(mt_info_cp_divides(T, C),
             "context parallel %d: %lld tokens do not split into %d chunks", C, (long long)T,
             2 * C);
    const int64_t act = mt_minimax_plan_activations(cfg, unit, recompute, B, T / C);
    if (C == 1) return act;
    mt_minimax m;
    mt_minimax_init_unit(&m, cfg, unit);
    const mt_info_cp_exchange x = mt_info_cp_exchange_plan(&m, C, B, T);
    mt_minimax_free(&m);
    return act + mt_info_cp_exchange_bytes(&x, recompute);
}

int mt_info_lcm(int a, int b) {
    int x = a, y = b;
    while (y) {
        const int t = x % y;
        x = y, y = t;
    }
    return a / x * b;
}

/* One layout (C, P) of the search: the fewest ranks (a multiple of step = lcm(C, P)) whose
 * per-rank bytes fit cap with activations act, 0 when none up to 2^20; *bytes, *traffic: at
 * that count. in: the model's EP inputs (ranks overwritten). The bytes fall with the ranks until
 * the padding of the shards (64 N elements a bucket) takes over (small models, many ranks): the
 * first fitting count of step x 2^k, then a bisection below it. */
static int64_t info_cp_bytes(mt_info_ep_in *in, int n, int64_t act, mt_info_ep_out *o) {
    in->ranks = n;
    *o = mt_info_ep_plan(in);
    return o->owned_bytes + o->slot_bytes + act;
}

static int info_cp_fit(mt_info_ep_in *in, int step, int64_t act, int64_t cap, int64_t *bytes,
                       int64_t *traffic) {
    mt_info_ep_out o;
    int hi = 1;
    while (info_cp_bytes(in, hi * step, act, &o) > cap)
        if ((hi *= 2) > (1 << 20) / step) return 0;
    int lo = hi / 2 + 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (info_cp_bytes(in, mid * step, act, &o) <= cap)
            hi = mid;
        else
            lo = mid + 1;
    }
    *bytes = info_cp_bytes(in, hi * step, act, &o);
    *traffic = o.gather_bytes + o.reduce_bytes + o.alltoall_bytes;
    return hi * step;
}

typedef struct {
    int n, cp, ep;
    int64_t bytes, traffic, act;
} info_cp_pick;

/* a better than b: fewer ranks, then the smaller C, then less traffic */
static bool info_cp_better(const info_cp_pick *a, const info_cp_pick *b) {
    if (!b->n) return a->n > 0;
    if (a->n != b->n) return a->n < b->n;
    if (a->cp != b->cp) return a->cp < b->cp;
    return a->traffic < b->traffic;
}

static void info_cp_print(const char *key, const info_cp_pick *p, int64_t T, double gib) {
    printf("%s=%d cp=%d ep=%d dp=%d  # %lld local tokens a row, %.2f GiB per rank of %.1f "
           "(state, slots, recomputed activations %.2f GiB), %.2f GB ZeRO-3/EP traffic per rank "
           "per micro-step\n",
           key, p->n, p->cp, p->ep, p->n / p->cp, (long long)(T / p->cp),
           (double)p->bytes / (1 << 30), gib, (double)p->act / (1 << 30),
           (double)p->traffic * 1e-9);
}

void mt_info_cp_best(const mt_minimax_config *cfg, int64_t B, int64_t T, double gib) {
    const int64_t cap = (int64_t)(gib * (double)(1 << 30));
    mt_minimax m;
    mt_minimax_init_unit(&m, cfg, MT_GATHER_EXPERT);
    int64_t *expert_numel = mt_malloc(sizeof(int64_t) * (size_t)m.n_buckets, "expert numel");
    const int E = cfg->num_local_experts;
    info_cp_pick best = {0}, node = {0};
    /* a C at or above the best count cannot do better (the ranks are a multiple of C) */
    for (int C = 1; C <= (1 << 20) && mt_info_cp_divides(T, C) && (!best.n || C < best.n); C *= 2) {
        const int64_t act = mt_info_cp_activations(cfg, MT_GATHER_EXPERT, true, B, T, C);
        info_cp_pick here = {0}, here_node = {0};
        for (int P = 1; P <= E; P++) {
            if (E % P) continue;
            mt_info_ep_in in =
                mt_info_ep_in_model(&m, expert_numel, P, P, MT_F32, false, B * (T / C));
            const int step = mt_info_lcm(C, P);
            info_cp_pick p = {.cp = C, .ep = P, .act = act};
            p.n = info_cp_fit(&in, step, act, cap, &p.bytes, &p.traffic);
            if (!p.n) continue;
            if (info_cp_better(&p, &here)) here = p;
            /* whole 8-GPU nodes: the fewest multiple of 8 and of the step at or above p.n */
            info_cp_pick q = p;
            const int whole = mt_info_lcm(8, step);
            q.n = (p.n + whole - 1) / whole * whole;
            in.ranks = q.n;
            const mt_info_ep_out o = mt_info_ep_plan(&in);
            q.bytes = o.owned_bytes + o.slot_bytes + act;
            q.traffic = o.gather_bytes + o.reduce_bytes + o.alltoall_bytes;
            if (info_cp_better(&q, &here_node)) here_node = q;
        }
        char key[32];
        snprintf(key, sizeof(key), "best_cp%d", C);
        if (here.n)
            info_cp_print(key, &here, T, gib);
        else
            printf("%s=none  # activations %.2f GiB per rank: no layout fits %.1f GiB\n", key,
                   (double)act / (1 << 30), gib);
        if (here.n && info_cp_better(&here, &best)) best = here;
        if (here_node.n && info_cp_better(&here_node, &node)) node = here_node;
    }
    if (best.n) {
        info_cp_print("best_layout", &best, T, gib);
        info_cp_print("best_layout_nodes", &node, T, gib);
    } else {
        printf("best_layout=none  # no context- and expert-parallel layout fits %.1f GiB per "
               "rank\n",
               gib);
    }
    free(expert_numel);
    mt_minimax_free(&m);
}
