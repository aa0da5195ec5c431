/* eval_generate.c: ragged batched greedy decoding (models/generate.h, mt_minimax_generate_batch)
 * on the transformers fixtures of every family: a batch of prompts of different lengths gives,
 * token for token, what each prompt gives alone, and the full-length rows equal transformers'
 * generate (gen_a); with an eos, rows stop at their own step and leave the step batch while
 * the others go on. */
#include <stdio.h>
#include <stdlib.h>

#include "models/generate.h"
#include "tests/support/harness.h"
#include "tests/models/parity_model.h"

#define EG_ROWS 6
#define EG_NEW  20

/* A stop rule: row 3 stops after its 4th token (what a stop string does, without a tokenizer). */
static bool eg_stop_row3(void *user, int b, const int32_t *toks, int n) {
    (void)user;
    (void)toks;
    return b == 3 && n == 4;
}

/* Row r of the batch: a prefix of ids_a's row r % 2, lengths ragged (both full rows first, so
 * they are gen_a's; the M3 lengths straddle the 12-token dense/sparse switch). */
static int eg_case(const char *name) {
    printf("fixture %s\n", name);
    pm_model pm;
    pm_load(&pm, name, false);
    mt_safetensors *st = pm_ref_open(name);
    int64_t shape[2], gshape[2];
    float *fi = pm_ref(st, "ids_a", NULL, shape);
    float *fg = pm_ref(st, "gen_a", NULL, gshape);
    const int T = (int)shape[1], NG = (int)gshape[1];
    EXPECT(shape[0] == 2 && NG <= EG_NEW && T >= 15, "fixture %s: ids_a (%lld,%d), gen_a N = %d",
           name, (long long)shape[0], T, NG);
    const int lens[EG_ROWS] = {T, T, 3, 14, 1, 11};
    int32_t *ids = mt_malloc((size_t)2 * T * sizeof(int32_t), "ids");
    for (int i = 0; i < 2 * T; i++) ids[i] = (int32_t)fi[i];
    const int32_t *prompts[EG_ROWS];
    for (int r = 0; r < EG_ROWS; r++) prompts[r] = ids + (size_t)(r % 2) * T;

    mt_ctx c;
    mt_test_ctx_init(&c);
    int32_t one[EG_ROWS][EG_NEW], out[EG_ROWS * EG_NEW];
    int n_out[EG_ROWS], n1;
    for (int r = 0; r < EG_ROWS; r++) { /* each prompt alone */
        mt_minimax_generate_batch(&pm.m, &c, &prompts[r], &lens[r], 1, EG_NEW, NULL, one[r], &n1);
        EXPECT(n1 == EG_NEW, "row %d alone: %d tokens", r, n1);
    }
    mt_minimax_generate_batch(&pm.m, &c, prompts, lens, EG_ROWS, EG_NEW, NULL, out, n_out);
    int same = 0, ref = 0;
    for (int r = 0; r < EG_ROWS; r++) {
        EXPECT(n_out[r] == EG_NEW, "row %d: %d tokens", r, n_out[r]);
        for (int s = 0; s < EG_NEW; s++) same += out[r * EG_NEW + s] == one[r][s];
    }
    for (int r = 0; r < 2; r++)
        for (int s = 0; s < NG; s++) ref += out[r * EG_NEW + s] == (int32_t)fg[r * NG + s];
    printf("  %-28s %d of %d tokens equal one-at-a-time (lengths %d %d %d %d %d %d)\n",
           "ragged batch", same, EG_ROWS * EG_NEW, lens[0], lens[1], lens[2], lens[3], lens[4],
           lens[5]);
    printf("  %-28s %d of %d tokens equal transformers' generate\n", "full rows vs gen_a", ref,
           2 * NG);
    EXPECT(same == EG_ROWS * EG_NEW, "ragged batch differs from one-at-a-time greedy");
    EXPECT(ref == 2 * NG, "ragged batch differs from transformers' generate");

    /* eos = row 2's 6th token: the rows that produce it stop there (eos kept, eos padding), the
     * others run to the end after the stopped rows have left the batch */
    const int eos = one[2][5];
    const mt_gen_opts oe = {.eos = eos};
    mt_minimax_generate_batch(&pm.m, &c, prompts, lens, EG_ROWS, EG_NEW, &oe, out, n_out);
    int bad = 0, stopped = 0;
    for (int r = 0; r < EG_ROWS; r++) {
        int want = EG_NEW;
        for (int s = 0; s < EG_NEW; s++)
            if (one[r][s] == eos) {
                want = s + 1;
                break;
            }
        stopped += want < EG_NEW;
        bad += n_out[r] != want;
        for (int s = 0; s < EG_NEW; s++) bad += out[r * EG_NEW + s] != (s < want ? one[r][s] : eos);
    }
    printf("  %-28s eos %d: %d of %d rows stop early, %d mismatches\n", "eos stop", eos, stopped,
           EG_ROWS, bad);
    EXPECT(stopped >= 1 && bad == 0, "eos: %d mismatches (%d rows stopped)", bad, stopped);

    /* sampling: fixed seed, each prompt its own row id. Two runs, each row alone, and the batch
     * in reverse order all give the same tokens; a stop callback ends row 3 after 4 tokens. */
    int64_t ids_fwd[EG_ROWS], ids_rev[EG_ROWS];
    const int32_t *rev[EG_ROWS];
    int lens_rev[EG_ROWS];
    for (int r = 0; r < EG_ROWS; r++) {
        ids_fwd[r] = 1000 + r;
        ids_rev[r] = 1000 + EG_ROWS - 1 - r;
        rev[r] = prompts[EG_ROWS - 1 - r];
        lens_rev[r] = lens[EG_ROWS - 1 - r];
    }
    mt_gen_opts os = {.temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .seed = 7, .eos = -1};
    int32_t s1[EG_ROWS * EG_NEW], s2[EG_ROWS * EG_NEW], s3[EG_ROWS * EG_NEW], s4[EG_NEW];
    os.row_ids = ids_fwd;
    mt_minimax_generate_batch(&pm.m, &c, prompts, lens, EG_ROWS, EG_NEW, &os, s1, n_out);
    mt_minimax_generate_batch(&pm.m, &c, prompts, lens, EG_ROWS, EG_NEW, &os, s2, n_out);
    os.row_ids = ids_rev;
    mt_minimax_generate_batch(&pm.m, &c, rev, lens_rev, EG_ROWS, EG_NEW, &os, s3, n_out);
    int diff_run = 0, diff_rev = 0, diff_alone = 0, diff_greedy = 0;
    for (int r = 0; r < EG_ROWS; r++) {
        os.row_ids = &ids_fwd[r];
        mt_minimax_generate_batch(&pm.m, &c, &prompts[r], &lens[r], 1, EG_NEW, &os, s4, &n1);
        for (int s = 0; s < EG_NEW; s++) {
            const int32_t t = s1[r * EG_NEW + s];
            diff_run += t != s2[r * EG_NEW + s];
            diff_rev += t != s3[(EG_ROWS - 1 - r) * EG_NEW + s];
            diff_alone += t != s4[s];
            diff_greedy += t != one[r][s];
        }
    }
    printf("  %-28s differences: rerun %d, reversed batch %d, alone %d; vs greedy %d of %d\n",
           "sampling seed 7", diff_run, diff_rev, diff_alone, diff_greedy, EG_ROWS * EG_NEW);
    EXPECT(diff_run == 0 && diff_rev == 0 && diff_alone == 0,
           "sampling depends on the run or the batch composition");
    EXPECT(diff_greedy > 0, "sampling at temperature 1 gave the greedy tokens everywhere");
    os.row_ids = ids_fwd;
    os.stop = eg_stop_row3;
    mt_minimax_generate_batch(&pm.m, &c, prompts, lens, EG_ROWS, EG_NEW, &os, s2, n_out);
    int bad_stop = 0;
    for (int r = 0; r < EG_ROWS; r++) {
        const int want = r == 3 ? 4 : EG_NEW;
        bad_stop += n_out[r] != want;
        for (int s = 0; s < EG_NEW; s++)
            bad_stop += s2[r * EG_NEW + s] != (s < want ? s1[r * EG_NEW + s] : -1);
    }
    EXPECT(bad_stop == 0, "stop callback: %d mismatches", bad_stop);

    mt_ctx_free(&c);
    mt_safetensors_close(st);
    free(ids);
    free(fi);
    free(fg);
    pm_free(&pm);
    return MT_TEST_OK;
}

int eval_generate_text01(void) { return eg_case("tiny_mqa"); }
int eval_generate_released8(void) { return eg_case("tiny_released8"); }
int eval_generate_m2(void) { return eg_case("tiny_m2"); }

int eval_generate_m3(void) {
    pm_model pm; /* the lengths must straddle the dense/sparse switch of the MSA layers */
    pm_load(&pm, "tiny_m3", false);
    const int cover = pm.m.cfg.msa_topk * pm.m.cfg.msa_block;
    pm_free(&pm);
    printf("tiny_m3: dense cached steps up to %d visible tokens\n", cover);
    EXPECT(3 + EG_NEW > cover && 3 < cover && 14 > cover, "lengths do not straddle %d", cover);
    return eg_case("tiny_m3");
}
