/* info_predict.c: minimax-info --predict-step (apps/info_predict.h) against hand computation.
 *
 * op_predict_step_gemm_flops: the GEMM FLOPs of one step of recipes/configs/tiny.json (C 128,
 *   H 4, Hkv 2, D 32, 3 lightning layers and 1 softmax, E 4, top-2, F 256, V 6144) at B 1,
 *   T 64, one rank, layers not recomputed. By hand, per layer: lightning qkv_proj, output_gate,
 *   out_proj 5 H D C = 81920 weights; softmax q, k, v, o 2 H D C + 2 Hkv D C = 49152; the top-2
 *   of the experts 2 x 3 C F = 196608; the router E C = 512; lm_head V C = 786432. Forward 2,
 *   backward 4 FLOPs a weight and token: 6 x weights x tokens, plus 2 V C a token for the logits
 *   the chunked loss forms again in the backward. With recompute the layers' GEMMs count one
 *   forward more (8 x). Cross-check on every tiny family (tiny.json, tiny-m2.json,
 *   tiny-m3.json): the GEMM FLOPs equal 6 x tokens x the layout's matrices (every 2-D
 *   parameter but embed_tokens, the routed experts at top_k / E) + 2 T V C.
 * op_predict_step_roofline: max(1e12 / (1e15 x 0.5), 1e9 / (1e12 x 0.8)) = 2 ms and
 *   max(1e9 / 5e14, 1e10 / 8e11) = 12.5 ms; a ring over 8 ranks sends 7/8 of the bytes; on
 *   the h200 entry: AdamW over 1e9 owned parameters moves 28e9 bytes at 4.8 TB/s x 0.8 =
 *   7.2917 ms (its 15e9 FLOPs take 15 us); 50e9 collective bytes over 16 ranks (two nodes) go
 *   at InfiniBand's 50 GB/s: 1 s, over 8 ranks at NVLink's 450 GB/s: 0.111 s; an all-to-all of
 *   31e9 bytes over 32 ranks sends 24/31 of them off the node: 24e9 / 50e9 = 0.48 s.
 * op_predict_step_cli: --predict-step without --gpu, with --gpu b200 (no peaks known) and with
 *   an unknown --gpu is refused with one line (exit 2); on tiny.json it prints the table and the
 *   step at the fit_ranks_ep layout and at a given --ranks. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/apps/info_cli.h"
#include "apps/info_predict.h"

static bool close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

static void predict_tiny(const char *file, bool recompute, mt_minimax *m, mt_predict_out *o) {
    char path[512];
    snprintf(path, sizeof(path), "%s/recipes/configs/%s",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".", file);
    static mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    mt_minimax_init(m, &cfg);
    const mt_predict_in in = {.cfg = &m->cfg,
                              .plan = m->plan,
                              .batch = 1,
                              .seq = 64,
                              .ranks = 1,
                              .ep = 1,
                              .recompute = recompute,
                              .gather_bytes = 4};
    mt_predict_step(&in, mt_predict_gpu_find("h200"), o);
}

static int test_gemm_flops(void) {
    mt_minimax m;
    mt_predict_out o;
    const double t = 64, lightning = 81920, softmax = 49152, experts = 196608, router = 512,
                 lm = 786432;
    const double layers = 3 * lightning + softmax + 4 * (experts + router);
    predict_tiny("tiny.json", false, &m, &o);
    const double want = 6 * t * (layers + lm) + 2 * t * lm;
    EXPECT(o.gemm_flops == want, "tiny GEMM FLOPs %.0f, by hand %.0f", o.gemm_flops, want);
    EXPECT(o.kind[MT_PK_PROJ].flops == 6 * t * (3 * lightning + softmax) &&
               o.kind[MT_PK_EXPERTS].flops == 6 * t * 4 * experts,
           "projections %.0f experts %.0f", o.kind[MT_PK_PROJ].flops, o.kind[MT_PK_EXPERTS].flops);
    mt_minimax_free(&m);
    predict_tiny("tiny.json", true, &m, &o);
    EXPECT(o.gemm_flops == want + 2 * t * layers, "recomputed: %.0f, by hand %.0f", o.gemm_flops,
           want + 2 * t * layers);
    mt_minimax_free(&m);
    const char *files[] = {"tiny.json", "tiny-m2.json", "tiny-m3.json"};
    for (int f = 0; f < 3; f++) {
        predict_tiny(files[f], false, &m, &o);
        double dense = 0, routed = 0;
        for (int p = 0; p < m.n_params; p++) {
            const mt_param_info *info = &m.info[p];
            if (info->ndim != 2 || strstr(info->name, "embed_tokens")) continue;
            *(strstr(info->name, ".block_sparse_moe.experts.") ? &routed : &dense) +=
                (double)info->numel;
        }
        const mt_minimax_config *c = &m.cfg;
        const double lmw = (double)c->vocab_size * c->hidden_size;
        const double active = dense + routed * c->num_experts_per_tok / c->num_local_experts;
        const double ref = 6 * t * active + 2 * t * lmw;
        printf("%s: GEMM FLOPs %.0f, 6 x %.0f active matrix weights x %.0f tokens + re-formed "
               "logits %.0f\n",
               files[f], o.gemm_flops, active, t, ref);
        EXPECT(close_rel(o.gemm_flops, ref, 1e-12), "%s: %.0f != %.0f", files[f], o.gemm_flops,
               ref);
        mt_minimax_free(&m);
    }
    return MT_TEST_OK;
}

static int test_roofline(void) {
    EXPECT(close_rel(mt_predict_roofline(1e12, 1e9, 1e15, 0.5, 1e12, 0.8), 2e-3, 1e-12),
           "compute-bound case");
    EXPECT(close_rel(mt_predict_roofline(1e9, 1e10, 1e15, 0.5, 1e12, 0.8), 12.5e-3, 1e-12),
           "memory-bound case");
    EXPECT(mt_predict_ring_bytes(8e9, 8) == 7e9 && mt_predict_ring_bytes(8e9, 1) == 0, "ring");
    const mt_predict_gpu *g = mt_predict_gpu_find("h200");
    EXPECT(g && g->peak_flops == 989e12 && g->hbm_bw == 4.8e12 && g->nvlink_bw == 450e9 &&
               g->ib_bw == 50e9,
           "the H200 datasheet peaks");
    static mt_minimax_config cfg; /* no layers: the optimizer and the links alone */
    cfg.hidden_size = 1, cfg.vocab_size = 0;
    mt_predict_in in = {.cfg = &cfg,
                        .batch = 0,
                        .seq = 0,
                        .ranks = 16,
                        .ep = 32,
                        .owned_params = 1000000000,
                        .zero3_bytes = 50e9,
                        .alltoall_bytes = 31e9};
    mt_predict_out o;
    mt_predict_step(&in, g, &o);
    EXPECT(close_rel(o.kind[MT_PK_ADAMW].seconds, 28e9 / (4.8e12 * 0.8), 1e-12), "AdamW %.6f s",
           o.kind[MT_PK_ADAMW].seconds);
    EXPECT(close_rel(o.kind[MT_PK_ZERO3].seconds, 1.0, 1e-12) &&
               close_rel(o.kind[MT_PK_A2A].seconds, 0.48, 1e-12),
           "links: zero3 %.4f s, all-to-all %.4f s", o.kind[MT_PK_ZERO3].seconds,
           o.kind[MT_PK_A2A].seconds);
    EXPECT(close_rel(o.step_s, 1.48 + 28e9 / 3.84e12, 1e-12) && close_rel(o.overlap_s, 1.48, 1e-12),
           "step %.4f overlapped %.4f", o.step_s, o.overlap_s);
    in.ranks = 8;
    mt_predict_step(&in, g, &o);
    EXPECT(close_rel(o.kind[MT_PK_ZERO3].seconds, 50e9 / 450e9, 1e-12), "one node: %.4f s",
           o.kind[MT_PK_ZERO3].seconds);
    return MT_TEST_OK;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int test_cli(void) {
    if (!getenv("MT_MINIMAX_INFO")) return MT_TEST_SKIP;
    static char out[65536];
    const char *refused[] = {"--predict-step", "--predict-step --gpu b200",
                             "--predict-step --gpu x200", "--gpu a100-80 --predict-step"};
    for (int i = 0; i < 4; i++) {
        EXPECT(info_cli(refused[i], out, sizeof(out)) == 2 && lines(out) == 1 &&
                   !strncmp(out, "minimax-info: ", 14),
               "%s: not refused in one line:\n%s", refused[i], out);
        printf("%s -> %s", refused[i], out);
    }
    EXPECT(info_cli("--predict-step --gpu h200 --seq 64", out, sizeof(out)) == 0, "%s", out);
    EXPECT(strstr(out, "\npredict_source=fit_ranks_ep") && strstr(out, "\n| expert GEMMs") &&
               strstr(out, "\npredict_step_s=") && strstr(out, "\npredict_mfu=0.") &&
               strstr(out, "\npredict_decided_by="),
           "no prediction:\n%s", out);
    EXPECT(info_cli("--predict-step --gpu h100 --seq 64 --ranks 2", out, sizeof(out)) == 0 &&
               strstr(out, "\npredict_layout=ranks 2 ep 1 gather fp32"),
           "the given layout:\n%s", out);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_predict_step_gemm_flops", test_gemm_flops},
    {"op_predict_step_roofline", test_roofline},
    {"op_predict_step_cli", test_cli},
};
MT_TEST_MAIN(cases)
