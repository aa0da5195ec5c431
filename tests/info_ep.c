/* info_ep.c: minimax-info's expert-parallel sizing (models/info_ep.h) against hand computation.
 *
 * op_info_ep_formula: three buckets {640, 1536 + 2048 experts, 512} elements, fp32 gathers, one
 * MoE layer, E = 4, top_k 2, C = 8, 10 tokens per rank, 4-byte rows. Ring collectives over R
 * ranks pad a bucket to a multiple of 64 R and send R - 1 of its R shards (4 bytes each); a
 * bucket is gathered twice, except the last of each gather slot (slot b % 2; the final bucket,
 * index 2, even: slot 0), gathered once; each is reduce-scattered once.
 *   ZeRO-3, N = 4 (pad to 256): 640 -> 768, moves 576; 3584 -> 3584, 2688; 512 -> 512, 384;
 *     buckets 1 (slot 1) and 2 (slot 0) once: gathers (2 x 576 + 2688 + 384) x 4 = 16896 bytes,
 *     reduce (576 + 2688 + 384) x 4 = 14592; owned (768 + 3584 + 512) / 4 = 1216 elements x 16
 *     bytes (master, grad, m, v) = 19456.
 *   EP, N = 4, P = 2 (D = 2): the dense parts {640, 1536, 512} over 4 move 576, 1152, 384:
 *     gathers (2 x 576 + 1152 + 384) x 4 = 10752; the local experts 2048 / 2 = 1024 over D = 2
 *     (pad 128), one bucket, once: 512 x 4 = 2048; gathers 12800, reduce (2112 + 512) x 4 =
 *     10496; all-to-all 1 layer x 4 x (10 x 2 rows) x 8 x 4 bytes x 1/2 = 1280; owned
 *     (768 + 1536 + 512) / 4 + 1024 / 2 = 1216 elements, 19456 bytes (EP keeps the state per
 *     rank: 1/N of everything).
 *   EP, N = P = 2 (D = 1): dense over 2 (pad 128) moves 320, 768, 256: gathers
 *     (2 x 320 + 768 + 256) x 4 = 6656, reduce 1344 x 4 = 5376; the local experts on one rank
 *     move nothing; all-to-all 4 x 20 x 8 x 4 / 2 = 1280; owned 1344 + 1024 = 2368 elements,
 *     37888 bytes.
 * op_info_ep_cli: minimax-info --expert-parallel 1 prints the ZeRO-3 numbers again (ep_* equal
 *   zero3_* and traffic_zero3_*), and a P that does not divide the ranks is refused (exit 2). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/info_ep.h"

static int test_formula(void) {
    const int64_t numel[3] = {640, 1536 + 2048, 512}, experts[3] = {0, 2048, 0};
    mt_info_ep_in in = {.ranks = 4,
                        .ep = 1,
                        .n_buckets = 3,
                        .bucket_numel = numel,
                        .bucket_expert_numel = experts,
                        .experts = 4,
                        .moe_layers = 1,
                        .top_k = 2,
                        .hidden = 8,
                        .tokens = 10,
                        .gather_dtype = MT_F32,
                        .act_bytes = 4};
    mt_info_ep_out o = mt_info_ep_plan(&in);
    EXPECT(o.gather_bytes == 16896 && o.reduce_bytes == 14592 && o.alltoall_bytes == 0 &&
               o.owned_bytes == 19456,
           "ZeRO-3: gather %lld reduce %lld a2a %lld owned %lld", (long long)o.gather_bytes,
           (long long)o.reduce_bytes, (long long)o.alltoall_bytes, (long long)o.owned_bytes);
    in.ep = 2;
    o = mt_info_ep_plan(&in);
    EXPECT(o.gather_bytes == 12800 && o.reduce_bytes == 10496 && o.alltoall_bytes == 1280 &&
               o.owned_bytes == 19456,
           "EP 2 of 4: gather %lld reduce %lld a2a %lld owned %lld", (long long)o.gather_bytes,
           (long long)o.reduce_bytes, (long long)o.alltoall_bytes, (long long)o.owned_bytes);
    in.ranks = 2;
    o = mt_info_ep_plan(&in);
    EXPECT(o.gather_bytes == 6656 && o.reduce_bytes == 5376 && o.alltoall_bytes == 1280 &&
               o.owned_bytes == 37888,
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

static int info_cli(const char *args, char *out, size_t n) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s --config %s/recipes/configs/tiny.json %s 2>&1",
             getenv("MT_MINIMAX_INFO"), getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".",
             args);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t len = fread(out, 1, n - 1, f);
    out[len] = 0;
    const int rc = pclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int test_cli(void) {
    if (!getenv("MT_MINIMAX_INFO")) return MT_TEST_SKIP;
    static char out[16384];
    EXPECT(info_cli("--ranks 4 --seq 64 --expert-parallel 1", out, sizeof(out)) == 0, "failed:\n%s",
           out);
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
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_info_ep_formula", test_formula},
    {"op_info_ep_cli", test_cli},
};
MT_TEST_MAIN(cases)
