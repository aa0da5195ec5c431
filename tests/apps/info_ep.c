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
 *   is P > 1 with the gather unit layer. */
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

static const mt_test_case cases[] = {
    {"op_info_ep_formula", test_formula},
    {"op_info_ep_cli", test_cli},
    {"op_info_gpu", test_gpu},
};
MT_TEST_MAIN(cases)
