/* op_schedule.c: the learning-rate schedules (train/schedule.h) against transformers'
 * get_scheduler at every step of 100-step schedules (tests/fixtures/schedule/lr_cases.json,
 * tools/make_schedule_fixtures.py), warmup from a ratio, steps from epochs, scheduler names. */
#include <cjson/cJSON.h>
#include <math.h>

#include "tests/support/data_util.h"
#include "train/schedule.h"

static double num(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble;
}

static int test_op_lr_schedules(void) {
    cJSON *root = read_json_fixture("tests/fixtures/schedule/lr_cases.json");
    if (!root) return MT_TEST_OK;
    const cJSON *c;
    int n_cases = 0, seen[5] = {0};
    double worst = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        const char *kind = cJSON_GetObjectItemCaseSensitive(c, "kind")->valuestring;
        const char *hf = cJSON_GetObjectItemCaseSensitive(c, "hf_name")->valuestring;
        const int k = mt_lr_kind_parse(kind);
        EXPECT(k >= 0 && mt_lr_kind_parse(hf) == k, "%s / %s: names not parsed alike", kind, hf);
        if (k < 0) continue;
        seen[k]++;
        const int max_steps = (int)num(c, "max_steps");
        const double ratio = num(c, "warmup_ratio");
        const int hf_warmup = (int)num(c, "warmup_steps");
        const int warmup = mt_lr_warmup_steps(ratio > 0 ? 0 : hf_warmup, ratio, max_steps);
        EXPECT(warmup == hf_warmup, "%s: warmup ratio %g gives %d steps, HF %d", kind, ratio,
               warmup, hf_warmup);
        const mt_lr_schedule s = {.kind = (mt_lr_kind)k,
                                  .base_lr = num(c, "base_lr"),
                                  .warmup_steps = warmup,
                                  .max_steps = max_steps,
                                  .min_lr_ratio = num(c, "min_lr_ratio"),
                                  .decay_steps = (int)num(c, "decay_steps")};
        const cJSON *lr = cJSON_GetObjectItemCaseSensitive(c, "lr");
        EXPECT(cJSON_GetArraySize(lr) == max_steps, "%s: %d values", kind, cJSON_GetArraySize(lr));
        int miss = 0;
        for (int step = 0; step < cJSON_GetArraySize(lr); step++) {
            const double want = cJSON_GetArrayItem(lr, step)->valuedouble, got = mt_lr_at(&s, step);
            const double rel = want != 0 ? fabs(got - want) / fabs(want) : fabs(got);
            if (rel > 1e-7 && miss++ < 3)
                printf("%s (warmup %d): step %d: %.17g, HF %.17g\n", kind, warmup, step, got, want);
            worst = rel > worst ? rel : worst;
        }
        EXPECT(miss == 0, "%s (%s, warmup %d): %d of %d steps differ from HF by more than 1e-7",
               kind, hf, warmup, miss, max_steps);
        n_cases++;
    }
    for (int k = 0; k < 5; k++) EXPECT(seen[k] >= 1, "no fixture case of scheduler %d", k);
    printf("schedules: %d cases x 100 steps equal to transformers, largest relative difference "
           "%.2g\n",
           n_cases, worst);
    cJSON_Delete(root);
    /* HF Trainer: max_steps = ceil(num_train_epochs * update steps per epoch) */
    EXPECT(mt_lr_epoch_steps(3, 935) == 2805 && mt_lr_epoch_steps(2.5, 7) == 18 &&
               mt_lr_epoch_steps(0.1, 935) == 94,
           "steps from epochs");
    EXPECT(mt_lr_kind_parse("cosine_with_restarts") == -1 && mt_lr_kind_parse("") == -1,
           "unknown scheduler names");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"op_lr_schedules", test_op_lr_schedules}};
MT_TEST_MAIN(cases)
