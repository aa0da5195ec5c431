/* dist_recipe.c: recipe keys, defaults, overrides and the one-line errors for bad recipes. */
#include "harness.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/recipe.h"

static const char *write_temp(const char *text) {
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/mt_recipe_%d.toml", (int)getpid());
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

/* files the recipes below point at */
static void make_files(void) {
    FILE *f = fopen("/tmp/mt_recipe_c.json", "w");
    fputs("{}", f);
    fclose(f);
    mkdir("/tmp/mt_recipe_tok", 0755);
    f = fopen("/tmp/mt_recipe_tok/tokenizer.json", "w");
    fputs("{}", f);
    fclose(f);
}

static int test_recipe_load(void) {
    make_files();
    const char *path =
        write_temp("[model]\nconfig = \"/tmp/mt_recipe_c.json\"\n[data]\ntokenizer_dir = "
                   "\"/tmp/mt_recipe_tok\"\n"
                   "[train]\nlearning_rate = 3e-4\nmax_steps = 7\n"
                   "lr_scheduler_type = \"cosine\"\n");
    mt_recipe r;
    char err[512] = "";
    const char *sets[] = {"train.max_steps=9", "output.dir=/tmp/x y"};
    bool ok = mt_recipe_load(&r, path, sets, 2, err, sizeof(err));
    EXPECT(ok, "load failed: %s", err);
    EXPECT(!strcmp(r.model_config, "/tmp/mt_recipe_c.json") && r.train_learning_rate == 3e-4,
           "file values");
    EXPECT(r.train_max_steps == 9 && !strcmp(r.output_dir, "/tmp/x y"), "overrides win");
    EXPECT(r.data_max_length == 512 && r.train_per_device_train_batch_size == 1 &&
               !r.data_shuffle && !strcmp(r.train_lr_scheduler_type, "cosine") &&
               r.dist_timeout == 1800,
           "defaults");
    /* the formatted recipe reads back to the same hash */
    char text[8192];
    mt_recipe_format(&r, text, sizeof(text));
    mt_recipe r2;
    ok = mt_recipe_load(&r2, write_temp(text), NULL, 0, err, sizeof(err));
    EXPECT(ok && mt_recipe_hash(&r) == mt_recipe_hash(&r2), "format round trip: %s", err);
    /* max_steps is not part of the numerics hash (resume may extend a run); lr is */
    r2.train_max_steps = 100;
    EXPECT(mt_recipe_hash(&r) == mt_recipe_hash(&r2), "max_steps outside the hash");
    r2.train_learning_rate = 1e-3;
    EXPECT(mt_recipe_hash(&r) != mt_recipe_hash(&r2), "learning_rate inside the hash");
    unlink(path);
    return MT_TEST_OK;
}

static void expect_error(const char *text, const char *set, const char *want) {
    const char *path = write_temp(text);
    mt_recipe r;
    char err[512] = "";
    const char *sets[] = {set};
    bool ok = mt_recipe_load(&r, path, sets, set ? 1 : 0, err, sizeof(err));
    char want_full[256];
    snprintf(want_full, sizeof(want_full), want, path);
    EXPECT(!ok && strstr(err, want_full), "got '%s', want '%s'", ok ? "ok" : err, want_full);
    EXPECT(!strchr(err, '\n'), "one-line error: '%s'", err);
    unlink(path);
}

#define BASE                                                                                       \
    "[model]\nconfig = \"/tmp/mt_recipe_c.json\"\n[data]\ntokenizer_dir = "                        \
    "\"/tmp/mt_recipe_tok\"\n"

static int test_recipe_errors(void) {
    make_files();
    expect_error("[model]\npath = \"/nonexistent/model\"\n", NULL,
                 "%s:2:8: model.path: directory /nonexistent/model does not exist");
    expect_error(BASE, "data.path=/nonexistent/train.jsonl",
                 "--set data.path: data.path: cannot read /nonexistent/train.jsonl");
    expect_error(BASE "[train]\nlearnig_rate = 1e-5\n", NULL,
                 "%s:6:16: unknown key 'train.learnig_rate'");
    expect_error(BASE "[train]\nmax_steps = \"ten\"\n", NULL,
                 "%s:6:13: train.max_steps must be an integer, not string");
    expect_error(BASE "[train]\nmax_steps = 10 steps\n", NULL, "%s:6:16: unexpected 's'");
    expect_error(BASE "[train]\nlr_scheduler_type = \"warmup\"\n", NULL,
                 "%s:6:21: train.lr_scheduler_type: must be constant, linear or cosine");
    expect_error(BASE, "train.adam_beta1=1.5",
                 "--set train.adam_beta1: train.adam_beta1: must be in [0, 1)");
    expect_error(BASE, "train.nope=1", "--set train.nope: unknown key 'train.nope'");
    expect_error(BASE, "output.save_total_limit=-1",
                 "--set output.save_total_limit: output.save_total_limit: must be >= 0 (0: keep "
                 "every checkpoint)");
    expect_error(BASE, "dist.timeout=-1",
                 "--set dist.timeout: dist.timeout: must be >= 0 seconds (0: no limit)");
    expect_error("[data]\ntokenizer_dir = \"/tmp/mt_recipe_tok\"\n", NULL,
                 "recipe: model.path: set model.path (an HF model dir) or model.config");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_recipe_load", test_recipe_load},
    {"dist_recipe_errors", test_recipe_errors},
};
MT_TEST_MAIN(cases)
