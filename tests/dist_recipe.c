/* dist_recipe.c: recipe keys, defaults, overrides and the one-line errors for bad recipes. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/chat_template.h"
#include "data/data_io.h"
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
               r.dist_timeout == -1 && r.train_global_batch_size == 0,
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
    /* how often to evaluate changes no update; which samples are held out does */
    r2.train_eval_steps = 7;
    EXPECT(mt_recipe_hash(&r) == mt_recipe_hash(&r2), "eval_steps outside the hash");
    r2.data_eval_samples = 5;
    EXPECT(mt_recipe_hash(&r) != mt_recipe_hash(&r2), "eval_samples inside the hash");
    r2.data_eval_samples = 0;
    r2.train_learning_rate = 1e-3;
    EXPECT(mt_recipe_hash(&r) != mt_recipe_hash(&r2), "learning_rate inside the hash");
    unlink(path);
    return MT_TEST_OK;
}

static void expect_error(const char *text, const char *set, const char *want) {
    const char *path = write_temp(text);
    mt_recipe r;
    char err[1024] = "";
    const char *sets[] = {set};
    bool ok = mt_recipe_load(&r, path, sets, set ? 1 : 0, err, sizeof(err));
    char want_full[1024];
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
    expect_error(BASE, "data.eval_samples=-1",
                 "--set data.eval_samples: data.eval_samples: must be >= 0 (0: no evaluation, or "
                 "all of data.eval_path)");
    expect_error(BASE, "train.eval_steps=10",
                 "--set train.eval_steps: train.eval_steps: needs data.eval_samples > 0 or "
                 "data.eval_path: the samples to evaluate on");
    expect_error(BASE, "train.eval_on_start=true",
                 "--set train.eval_on_start: train.eval_on_start: needs data.eval_samples > 0 or "
                 "data.eval_path: the samples to evaluate on");
    expect_error(BASE, "data.eval_path=/nonexistent/test.jsonl",
                 "--set data.eval_path: data.eval_path: cannot read /nonexistent/test.jsonl");
    expect_error(BASE, "dist.timeout=-2",
                 "--set dist.timeout: dist.timeout: must be >= 0 seconds (0: no limit), or -1 "
                 "(automatic)");
    expect_error(BASE, "train.global_batch_size=-4",
                 "--set train.global_batch_size: train.global_batch_size: must be >= 0 (0: "
                 "per-device batch x accumulation x ranks)");
    expect_error("[data]\ntokenizer_dir = \"/tmp/mt_recipe_tok\"\n", NULL,
                 "recipe: model.path: set model.path (an HF model dir) or model.config");
    /* an output directory that is a file: the first write used to say "recipe.toml.tmp.PID:
     * cannot create: Not a directory" */
    expect_error(BASE, "output.dir=/tmp/mt_recipe_c.json",
                 "--set output.dir: output.dir: /tmp/mt_recipe_c.json is a file, not a directory");
    expect_error(BASE, "output.dir=/tmp/mt_recipe_c.json/out",
                 "--set output.dir: output.dir: /tmp/mt_recipe_c.json/out cannot be a directory: a "
                 "part of its path is a file");
    expect_error(BASE, "data.cache_dir=/tmp/mt_recipe_c.json",
                 "--set data.cache_dir: data.cache_dir: /tmp/mt_recipe_c.json is a file, not a "
                 "directory");
    /* sizes, before anything is written: they used to fail in the first forward's MoE op
     * ("exceed the int range"), or as an arena "too small" after 2^20 x arena_mb wrapped */
    expect_error(BASE, "dist.arena_mb=100000000000000",
                 "--set dist.arena_mb: dist.arena_mb: 100000000000000 MiB is more than any "
                 "machine has");
    expect_error(BASE "[train]\nper_device_train_batch_size = 2\n", "data.max_length=2000000000",
                 "--set data.max_length: data.max_length: train.per_device_train_batch_size x "
                 "data.max_length = 2 x 2000000000 = 4000000000 tokens per micro-batch");
    /* ... and against the model and the tokenizer when they read */
#define REAL                                                                                       \
    "[model]\nconfig = \"recipes/configs/tiny.json\"\n[data]\ntokenizer_dir = "                    \
    "\"tests/fixtures/tokenizer\"\n"
    expect_error(REAL, "data.max_length=100000000",
                 "--set data.max_length: data.max_length: train.per_device_train_batch_size x "
                 "data.max_length = 1 x 100000000 = 100000000 tokens per micro-batch; the kernels "
                 "of recipes/configs/tiny.json (hidden_size 128, num_experts_per_tok 2, "
                 "dist.gather_unit \"layer\") index at most 16777215");
    /* a model vocabulary smaller than the tokenizer's: found at step 1 in the embedding, or never
     * when the data happens to use no id beyond it */
    char *tiny = mt_file_read("recipes/configs/tiny.json", NULL, (char[MT_ERR_LEN]){0});
    MT_CHECK(tiny && strstr(tiny, "\"vocab_size\": 6144"), "recipes/configs/tiny.json changed");
    memcpy(strstr(tiny, "\"vocab_size\": 6144") + 14, "4000", 4);
    FILE *f = fopen("/tmp/mt_recipe_v4000.json", "w");
    MT_CHECK(f, "cannot write /tmp/mt_recipe_v4000.json");
    fputs(tiny, f);
    fclose(f);
    free(tiny);
    expect_error("[model]\nconfig = \"/tmp/mt_recipe_v4000.json\"\n[data]\ntokenizer_dir = "
                 "\"tests/fixtures/tokenizer\"\n",
                 NULL,
                 "%s:4:17: data.tokenizer_dir: tests/fixtures/tokenizer/tokenizer.json has 6144 "
                 "token ids but the model's vocab_size is 4000 (/tmp/mt_recipe_v4000.json)");
    unlink("/tmp/mt_recipe_v4000.json");
    mt_recipe r;
    char err[512];
    EXPECT(mt_recipe_load(&r, write_temp(REAL), NULL, 0, err, sizeof(err)), "real files: %s", err);
    return MT_TEST_OK;
}

/* The backquoted words of a table cell, in order: "`a`, `b`" -> a, b. Returns their count. */
static int cell_words(char *cell, char **words, int max) {
    int n = 0;
    for (char *p = strchr(cell, '`'); p && n < max;) {
        char *end = strchr(p + 1, '`');
        if (!end) break;
        *end = '\0';
        words[n++] = p + 1;
        p = strchr(end + 1, '`');
    }
    return n;
}

/* docs/recipes.md's key table against the recipe's: every key documented, every documented
 * key real, the same default, and *numerics* exactly on the keys in the resume hash. */
static int test_recipe_docs(void) {
    char path[4096];
    const char *src = getenv("MT_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/docs/recipes.md", src ? src : ".");
    FILE *f = fopen(path, "r");
    MT_CHECK(f, "cannot read %s", path);
    enum { MAX_KEYS = 128 };
    bool documented[MAX_KEYS] = {false};
    int n_keys = 0, n_rows = 0;
    const char *key, *def;
    bool numerics;
    while (mt_recipe_key_at(n_keys, &key, &def, &numerics)) n_keys++;
    MT_CHECK(n_keys <= MAX_KEYS, "more than %d recipe keys", MAX_KEYS);
    char line[8192];
    for (int lineno = 1; fgets(line, sizeof(line), f); lineno++) {
        if (strncmp(line, "| `", 3) != 0) continue;
        /* | keys | defaults | what it does | */
        char *cells[3], *save = NULL;
        int nc = 0;
        for (char *c = strtok_r(line, "|", &save); c && nc < 3; c = strtok_r(NULL, "|", &save))
            cells[nc++] = c;
        EXPECT(nc == 3, "%s:%d: a key row needs 3 cells", path, lineno);
        if (nc < 3) continue;
        const bool row_numerics = strstr(cells[2], "*numerics*") != NULL;
        char *keys[8], *defs[8];
        const int nk = cell_words(cells[0], keys, 8), nd = cell_words(cells[1], defs, 8);
        EXPECT(nk > 0 && nk == nd, "%s:%d: %d keys but %d defaults", path, lineno, nk, nd);
        for (int k = 0; k < nk && k < nd; k++) {
            int i = 0;
            while (mt_recipe_key_at(i, &key, &def, &numerics) && strcmp(key, keys[k]) != 0) i++;
            EXPECT(i < n_keys, "%s:%d: %s is not a recipe key", path, lineno, keys[k]);
            if (i == n_keys) continue;
            EXPECT(!documented[i], "%s:%d: %s is documented twice", path, lineno, key);
            documented[i] = true;
            EXPECT(!strcmp(def, defs[k]), "%s:%d: %s: documented default %s, the code's %s", path,
                   lineno, key, defs[k], def);
            EXPECT(numerics == row_numerics, "%s:%d: %s: %s *numerics* (the resume hash %s it)",
                   path, lineno, key, row_numerics ? "marked" : "not marked",
                   numerics ? "covers" : "does not cover");
            n_rows++;
        }
    }
    fclose(f);
    for (int i = 0; i < n_keys; i++) {
        mt_recipe_key_at(i, &key, &def, &numerics);
        EXPECT(documented[i], "%s: recipe key %s (default %s) is not documented", path, key, def);
    }
    printf("%d recipe keys, %d documented in %s\n", n_keys, n_rows, path);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_recipe_load", test_recipe_load},
    {"dist_recipe_errors", test_recipe_errors},
    {"dist_recipe_docs", test_recipe_docs},
};
MT_TEST_MAIN(cases)
