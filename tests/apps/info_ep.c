/* info_ep.c: minimax-info's expert-parallel sizing (apps/info_ep.h) against hand computation.
 *
 * op_info_ep_formula: four buckets {640 dense, 2048 expert 0, 2048 expert 1, 512 dense} (gather
 * unit expert: a bucket per expert), fp32 gathers, one MoE layer, E = 2, top_k 2, C = 8, 10
 * tokens per rank, 4-byte rows. Ring collectives over R ranks pad a bucket to a multiple of
 * 64 R and send R - 1 of its R shards (4 bytes each); a bucket is gathered twice, except the
 * last of each gather slot (slot b % 2; the final bucket, index 3, odd, goes to slot 1 since
 * bucket 1 is at least as large: the last of slot 0 is bucket 2, of slot 1 bucket 3), once; each
 * is reduce-scattered once.
 *   ZeRO-3, N = 4 (pad to 256): 640 -> 768 moves 576; 2048 moves 1536 (each expert); 512 moves
 *     384: gathers (2 x 576 + 2 x 1536 + 1536 + 384) x 4 = 24576 bytes, reduce
 *     (576 + 1536 + 1536 + 384) x 4 = 16128; owned (768 + 2048 + 2048 + 512) / 4 = 1344
 *     elements x 16 bytes (master, grad, m, v) = 21504.
 *   EP, N = 4, P = 2: the same shards (owned 21504); the dense buckets as ZeRO-3 (gathers
 *     (2 x 576 + 384) x 4 = 6144, reduce (576 + 384) x 4 = 3840), each expert moved to its
 *     N / P = 2 owners: a rank sends its 512-element shard to the owners but itself, (N - 1) / P
 *     = 1.5 shards per expert on average, the ring's bytes over P: gathers
 *     (2 x 1536 + 1536) x 4 / 2 = 9216, reduce (1536 + 1536) x 4 / 2 = 6144; totals gathers
 *     15360, reduce 9984; all-to-all: (4 x (10 x 2 rows) x 8 x 4 + 2 x 20 x 4) / 2 x 1 = 1360
 *     plus the counts, (P - 1) x E / P x 8 = 8: 1368; slots: ZeRO-3's + the send buffer
 *     N / P x 512 x 4 = 4096 bytes.
 *   EP, N = P = 2 (pad to 128): dense 640 moves 320, 512 moves 256, each expert 1024: gathers
 *     (2 x 320 + 256) x 4 + (2 x 1024 + 1024) x 4 / 2 = 3584 + 6144 = 9728, reduce
 *     (320 + 256) x 4 + 2048 x 4 / 2 = 2304 + 4096 = 6400; all-to-all 1368 again; owned
 *     (640 + 2048 + 2048 + 512) / 2 = 2624 elements, 41984 bytes.
 * op_info_ep_cli: minimax-info --expert-parallel 1 prints the ZeRO-3 numbers again (ep_* equal
 *   zero3_* and traffic_zero3_*), a P that does not divide the ranks is refused (exit 2), and so
 *   is P > 1 with the gather unit layer.
 * op_info_cp_cli: --context-parallel (apps/info_cp.h) on the tiny Text-01 config (H = 4 heads,
 *   Hkv = 2, D = 32; 3 lightning layers and 1 softmax layer): C = 1 prints exactly what no flag
 *   prints; C = 2, B = 2, T = 128: per rank the dry run of T / 2 = 64 tokens (minimax-info --seq 64
 *   --batch 2, no flag) plus the larger of one layer's exchange buffers, fp32: softmax
 *   4 B T Hkv D x 4 = 4 x 2 x 128 x 2 x 32 x 4 = 262144 (K, V gathered + dK, dV), lightning
 *   2 C B H D D x 4 = 2 x 2 x 2 x 4 x 32 x 32 x 4 = 131072 (2C chunk states); below C = 1's;
 *   C = 8, B = 1, T = 16: lightning 2 x 8 x 4 x 32 x 32 x 4 = 262144 over softmax
 *   4 x 16 x 2 x 32 x 4 = 16384 (the larger, not the sum); a T that 2C does not divide, a C
 *   without --seq and a C that does not divide --ranks are refused in one line, exit 2.
 * op_info_cp_fit: the released Text-01 config (recipes/configs/minimax-text-01.json) on H200s
 *   at T = 32768: with C = 2 fit_ranks_expert is even, fewer than without, and minimax-info
 *   --ranks at it prints a total within 141 GB (131.3 GiB), at two ranks fewer above it; auto's
 *   best_layout N cp=C ep=P: its ranks a multiple of C and P, no more than any best_cp<C> line,
 *   and --ranks N --expert-parallel P --context-parallel C prints a total within 141 GB. */
#include "tests/support/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/apps/info_cli.h"
#include "apps/info_ep.h"

static int test_formula(void) {
    const int64_t numel[4] = {640, 2048, 2048, 512}, experts[4] = {0, 2048, 2048, 0};
    mt_info_ep_in in = {.ranks = 4,
                        .ep = 1,
                        .n_buckets = 4,
                        .bucket_numel = numel,
                        .bucket_expert_numel = experts,
                        .experts = 2,
                        .moe_layers = 1,
                        .top_k = 2,
                        .hidden = 8,
                        .tokens = 10,
                        .gather_dtype = MT_F32,
                        .act_bytes = 4};
    mt_info_ep_out o = mt_info_ep_plan(&in);
    EXPECT(o.gather_bytes == 24576 && o.reduce_bytes == 16128 && o.alltoall_bytes == 0 &&
               o.owned_bytes == 21504,
           "ZeRO-3: gather %lld reduce %lld a2a %lld owned %lld", (long long)o.gather_bytes,
           (long long)o.reduce_bytes, (long long)o.alltoall_bytes, (long long)o.owned_bytes);
    const int64_t zero3_slots = o.slot_bytes;
    in.ep = 2;
    o = mt_info_ep_plan(&in);
    EXPECT(o.gather_bytes == 15360 && o.reduce_bytes == 9984 && o.alltoall_bytes == 1368 &&
               o.owned_bytes == 21504 && o.slot_bytes == zero3_slots + 4096,
           "EP 2 of 4: gather %lld reduce %lld a2a %lld owned %lld slots +%lld",
           (long long)o.gather_bytes, (long long)o.reduce_bytes, (long long)o.alltoall_bytes,
           (long long)o.owned_bytes, (long long)(o.slot_bytes - zero3_slots));
    in.ranks = 2;
    o = mt_info_ep_plan(&in);
    EXPECT(o.gather_bytes == 9728 && o.reduce_bytes == 6400 && o.alltoall_bytes == 1368 &&
               o.owned_bytes == 41984,
           "EP 2 of 2: gather %lld reduce %lld a2a %lld owned %lld", (long long)o.gather_bytes,
           (long long)o.reduce_bytes, (long long)o.alltoall_bytes, (long long)o.owned_bytes);
    return MT_TEST_OK;
}

/* the integer after "key=" in out, -1 when absent */
static long long info_key(const char *out, const char *key) {
    char pat[128];
    snprintf(pat, sizeof(pat), "\n%s=", key);
    const char *p = strstr(out, pat);
    long long v = -1;
    if (p) sscanf(p + strlen(pat), "%lld", &v);
    return v;
}

static int test_cli(void) {
    if (!getenv("MT_MINIMAX_INFO")) return MT_TEST_SKIP;
    static char out[16384];
    EXPECT(info_cli("--ranks 4 --seq 64 --gather-unit expert --expert-parallel 1", out,
                    sizeof(out)) == 0,
           "failed:\n%s", out);
    printf("%s", out);
    const char *pairs[][2] = {
        {"ep_owned_bytes_per_rank", "zero3_owned_bytes_per_rank"},
        {"ep_slot_bytes_per_rank", "zero3_slot_bytes_per_rank"},
        {"ep_bytes_per_rank", "zero3_bytes_per_rank"},
        {"traffic_ep_gather_bytes", "traffic_zero3_gather_bytes"},
        {"traffic_ep_reduce_bytes", "traffic_zero3_reduce_bytes"},
        {"traffic_ep_bytes_per_step", "traffic_zero3_bytes_per_step"},
        {"ep_total_bytes_per_rank_recomputed", "total_bytes_per_rank_recomputed"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        const long long a = info_key(out, pairs[i][0]), b = info_key(out, pairs[i][1]);
        EXPECT(a > 0 && a == b, "%s %lld != %s %lld", pairs[i][0], a, pairs[i][1], b);
    }
    EXPECT(info_key(out, "traffic_ep_alltoall_bytes") == 0, "P = 1 exchanges nothing");
    EXPECT(info_cli("--ranks 4 --expert-parallel 3", out, sizeof(out)) == 2 &&
               strstr(out, "must divide"),
           "P = 3 of 4 ranks accepted:\n%s", out);
    EXPECT(info_cli("--ranks 4 --expert-parallel 2", out, sizeof(out)) == 2 &&
               strstr(out, "--gather-unit expert"),
           "P = 2 with the gather unit layer accepted:\n%s", out);
    return MT_TEST_OK;
}

/* The lines of out from the first "fit_ranks_" on, the comments' memory figures included. */
static const char *fit_lines(const char *out) {
    const char *p = strstr(out, "\nfit_ranks_");
    return p ? p : "";
}

/* --gpu NAME: --fit-gib with the vendor's decimal GB in GiB (H200 141 GB = 131.3 GiB, as the
 * recipes' headers had it by hand); with the GPU defaults (bf16 gathers, gather unit layer) the
 * expert-parallel fit names the settings it needs and is computed for them, not "none". */
static int test_gpu(void) {
    if (!getenv("MT_MINIMAX_INFO")) return MT_TEST_SKIP;
    static char out[32768], ref[32768];
    const struct {
        const char *name;
        double gb;
    } gpus[] = {{"h100", 80}, {"h200", 141}, {"b200", 180}, {"a100-80", 80}};
    for (size_t i = 0; i < sizeof(gpus) / sizeof(gpus[0]); i++) {
        char args[256], want[64];
        const double gib = gpus[i].gb * 1e9 / 1073741824.0;
        snprintf(args, sizeof(args), "--gpu %s --seq 64", gpus[i].name);
        EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s failed:\n%s", args, out);
        snprintf(want, sizeof(want), "\ngpu=%s fit_gib=%.1f ", gpus[i].name, gib);
        EXPECT(strstr(out, want), "%s: no '%s' in:\n%s", args, want + 1, out);
        snprintf(args, sizeof(args), "--fit-gib %.17g --seq 64", gib);
        EXPECT(info_cli(args, ref, sizeof(ref)) == 0, "%s failed:\n%s", args, ref);
        EXPECT(!strcmp(fit_lines(out), fit_lines(ref)), "--gpu %s differs from %s:\n%s\n%s",
               gpus[i].name, args, fit_lines(out), fit_lines(ref));
    }
    /* the GPU defaults: bf16 gathers, gather unit layer */
    EXPECT(info_cli("--gpu h200 --seq 64 --gather-dtype bf16", out, sizeof(out)) == 0, "%s", out);
    printf("%s", fit_lines(out));
    EXPECT(strstr(out, "\nfit_ranks_ep_settings=dist.gather_dtype=fp32,dist.gather_unit=expert  "
                       "# ") &&
               strstr(out, "set dist.gather_dtype = \"fp32\" and dist.gather_unit = \"expert\""),
           "no settings line naming the keys:\n%s", out);
    EXPECT(info_key(out, "fit_ranks_ep") > 0, "fit_ranks_ep not a rank count:\n%s", out);
    EXPECT(info_cli("--gpu h200 --seq 64 --gather-dtype fp32 --gather-unit expert", ref,
                    sizeof(ref)) == 0,
           "%s", ref);
    EXPECT(strstr(out, "\nfit_ranks_ep1=") &&
               !strcmp(strstr(out, "\nfit_ranks_ep1="), strstr(ref, "\nfit_ranks_ep1=")),
           "the EP fit is not the fp32 expert-unit one:\n%s\n%s", out, ref);
    EXPECT(!strstr(ref, "fit_ranks_ep_settings"), "a settings line where nothing changes");
    /* refusals */
    EXPECT(info_cli("--gpu x100", out, sizeof(out)) == 2 &&
               strstr(out, "h100, h200, b200, a100-80"),
           "--gpu x100:\n%s", out);
    EXPECT(info_cli("--gpu h200 --fit-gib 10", out, sizeof(out)) == 2 && strstr(out, "not both"),
           "--gpu with --fit-gib:\n%s", out);
    return MT_TEST_OK;
}

/* the integer after "key=" in out, -1 when absent (a key at the start of out too) */
static long long cp_key(const char *out, const char *key) {
    char pat[128];
    snprintf(pat, sizeof(pat), "%s=", key);
    if (!strncmp(out, pat, strlen(pat))) return atoll(out + strlen(pat));
    return info_key(out, key);
}

/* out is one line (ending in its newline) */
static bool one_line(const char *out) {
    const char *nl = strchr(out, '\n');
    return nl && !nl[1];
}

static int test_cp_cli(void) {
    if (!getenv("MT_MINIMAX_INFO")) return MT_TEST_SKIP;
    static char out[32768], ref[32768];
    /* C = 1: the same output, every line */
    const char *base = "--ranks 4 --seq 128 --batch 2 --gather-unit expert --expert-parallel 2 "
                       "--gpu h200";
    char args[512];
    EXPECT(info_cli(base, ref, sizeof(ref)) == 0, "%s:\n%s", base, ref);
    snprintf(args, sizeof(args), "%s --context-parallel 1", base);
    EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s:\n%s", args, out);
    EXPECT(!strcmp(out, ref), "C = 1 differs from no flag:\n%s\n----\n%s", out, ref);
    /* C = 2, B = 2, T = 128 */
    EXPECT(info_cli("--seq 64 --batch 2", ref, sizeof(ref)) == 0, "%s", ref);
    const long long half_kept = info_key(ref, "activation_bytes_kept"),
                    half_rec = info_key(ref, "activation_bytes_recomputed");
    EXPECT(info_cli("--seq 128 --batch 2", ref, sizeof(ref)) == 0, "%s", ref);
    const long long one_kept = info_key(ref, "activation_bytes_kept"),
                    one_rec = info_key(ref, "activation_bytes_recomputed");
    EXPECT(info_cli("--seq 128 --batch 2 --ranks 4 --context-parallel 2", out, sizeof(out)) == 0,
           "%s", out);
    printf("%s", out);
    const long long softmax = 4LL * 2 * 128 * 2 * 32 * 4, lightning = 2LL * 2 * 2 * 4 * 32 * 32 * 4;
    EXPECT(info_key(out, "cp_exchange_bytes_softmax") == softmax &&
               info_key(out, "cp_exchange_bytes_lightning") == lightning &&
               info_key(out, "cp_exchange_bytes") == softmax &&
               info_key(out, "cp_exchange_bytes_msa") == -1,
           "exchange buffers: want softmax %lld lightning %lld:\n%s", softmax, lightning, out);
    const long long kept = info_key(out, "activation_bytes_kept"),
                    rec = info_key(out, "activation_bytes_recomputed");
    EXPECT(half_kept > 0 && kept == half_kept + softmax && rec == half_rec + softmax,
           "C = 2: kept %lld recomputed %lld, want %lld + %lld and %lld + %lld", kept, rec,
           half_kept, softmax, half_rec, softmax);
    EXPECT(kept < one_kept && rec < one_rec, "C = 2 (%lld, %lld) not below C = 1 (%lld, %lld)",
           kept, rec, one_kept, one_rec);
    EXPECT(info_key(out, "total_bytes_per_rank_recomputed") ==
               info_key(out, "zero3_bytes_per_rank") + rec,
           "total is not zero3 + activations:\n%s", out);
    /* tiny M3 (recipes/configs/tiny-m3.json: Hkv 2, D 32, Di 32, layers 1 and 2 MSA): an MSA
     * layer's gathered K, V, index keys, their gradients and one reduce-scatter copy while it
     * runs; without recompute both layers keep their gathered K, V and index keys */
    char m3[384];
    snprintf(m3, sizeof(m3), "--config %s/recipes/configs/tiny-m3.json --batch 2",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    snprintf(args, sizeof(args), "%s --seq 64", m3);
    EXPECT(info_cli(args, ref, sizeof(ref)) == 0, "%s", ref);
    snprintf(args, sizeof(args), "%s --seq 128 --ranks 4 --context-parallel 2", m3);
    EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s", out);
    const long long kv = 2LL * 128 * 2 * 32, ik = 2LL * 128 * 32;
    const long long msa = (5 * kv + 2 * ik) * 4, msa_kept = 2 * (2 * kv + ik) * 4;
    EXPECT(info_key(out, "cp_exchange_bytes_msa") == msa &&
               info_key(out, "cp_exchange_bytes") == msa &&
               info_key(out, "cp_msa_kept_bytes") == msa_kept &&
               info_key(out, "activation_bytes_kept") ==
                   info_key(ref, "activation_bytes_kept") + msa + msa_kept &&
               info_key(out, "activation_bytes_recomputed") ==
                   info_key(ref, "activation_bytes_recomputed") + msa,
           "M3, C = 2: want msa %lld, kept %lld:\n%s", msa, msa_kept, out);
    /* C = 8, B = 1, T = 16: one token a chunk; the lightning states are the larger */
    EXPECT(info_cli("--seq 2", ref, sizeof(ref)) == 0, "%s", ref);
    EXPECT(info_cli("--seq 16 --context-parallel 8", out, sizeof(out)) == 0, "%s", out);
    const long long states = 2LL * 8 * 4 * 32 * 32 * 4;
    EXPECT(info_key(out, "cp_exchange_bytes_softmax") == 4LL * 16 * 2 * 32 * 4 &&
               info_key(out, "cp_exchange_bytes") == states &&
               info_key(out, "activation_bytes_recomputed") ==
                   info_key(ref, "activation_bytes_recomputed") + states,
           "C = 8, T = 16:\n%s", out);
    /* refusals: one line, exit 2 */
    EXPECT(info_cli("--seq 100 --context-parallel 4", out, sizeof(out)) == 2 &&
               !strcmp(out, "minimax-info: --context-parallel 4: --seq 100 does not split into 8 "
                            "equal chunks (T must be a multiple of 2C = 8)\n"),
           "T = 100, C = 4:\n%s", out);
    EXPECT(info_cli("--seq 6 --context-parallel 2", out, sizeof(out)) == 2 &&
               strstr(out, "does not split into 4 equal chunks") && one_line(out),
           "T = 6, C = 2:\n%s", out);
    EXPECT(info_cli("--context-parallel 2", out, sizeof(out)) == 2 && strstr(out, "needs --seq") &&
               one_line(out),
           "C without --seq:\n%s", out);
    EXPECT(info_cli("--seq 64 --ranks 6 --context-parallel 4", out, sizeof(out)) == 2 &&
               strstr(out, "must divide --ranks 6") && one_line(out),
           "C = 4 of 6 ranks:\n%s", out);
    EXPECT(info_cli("--seq 64 --context-parallel auto", out, sizeof(out)) == 2 &&
               strstr(out, "--fit-gib") && one_line(out),
           "auto without a budget:\n%s", out);
    EXPECT(info_cli("--seq 64 --context-parallel 0", out, sizeof(out)) == 2 && one_line(out),
           "C = 0:\n%s", out);
    return MT_TEST_OK;
}

/* H200: 141 GB as minimax-info's cap, (int64_t)(131.3... GiB x 2^30) */
static const long long h200_cap = 141000000000LL;

static int test_cp_fit(void) {
    if (!getenv("MT_MINIMAX_INFO")) return MT_TEST_SKIP;
    static char out[32768];
    const char *cfg = "--config recipes/configs/minimax-text-01.json --seq 32768 --gather-unit "
                      "expert";
    char args[512];
    snprintf(args, sizeof(args), "%s --gpu h200", cfg);
    EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s", out);
    const long long one = info_key(out, "fit_ranks_expert");
    snprintf(args, sizeof(args), "%s --gpu h200 --context-parallel 2", cfg);
    EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s", out);
    printf("%s", fit_lines(out));
    const long long n = info_key(out, "fit_ranks_expert");
    EXPECT(n > 0 && n % 2 == 0 && (one < 0 || n < one), "C = 2: %lld ranks (C = 1: %lld)", n, one);
    for (int d = 0; d <= 2; d += 2) {
        snprintf(args, sizeof(args), "%s --ranks %lld --context-parallel 2", cfg, n - d);
        EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s", out);
        const long long total = info_key(out, "total_bytes_per_rank_recomputed");
        EXPECT(d ? total > h200_cap : total > 0 && total <= h200_cap, "%lld ranks: %lld bytes",
               n - d, total);
    }
    snprintf(args, sizeof(args), "%s --gpu h200 --context-parallel auto", cfg);
    EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s", out);
    const char *best = strstr(out, "\nbest_layout=");
    EXPECT(best, "no best_layout line:\n%s", out);
    printf("%s", strstr(out, "\nbest_cp1="));
    int N = 0, C = 0, P = 0;
    EXPECT(sscanf(best, "\nbest_layout=%d cp=%d ep=%d", &N, &C, &P) == 3 && N % C == 0 &&
               N % P == 0,
           "best_layout:%s", best);
    for (const char *p = out; (p = strstr(p, "\nbest_cp")); p++) {
        int n2 = 0;
        if (sscanf(p, "\nbest_cp%*d=%d", &n2) == 1)
            EXPECT(N <= n2, "best_layout %d above a best_cp line (%d)", N, n2);
    }
    snprintf(args, sizeof(args), "%s --ranks %d --expert-parallel %d --context-parallel %d", cfg, N,
             P, C);
    EXPECT(info_cli(args, out, sizeof(out)) == 0, "%s", out);
    const long long total = cp_key(out, "ep_total_bytes_per_rank_recomputed");
    EXPECT(total > 0 && total <= h200_cap, "%d ranks, cp %d, ep %d: %lld bytes", N, C, P, total);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_info_ep_formula", test_formula},
    {"op_info_ep_cli", test_cli},
    {"op_info_gpu", test_gpu},
    {"op_info_cp_cli", test_cp_cli},
    {"op_info_cp_fit", test_cp_fit},
};
MT_TEST_MAIN(cases)
