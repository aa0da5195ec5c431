/* data_recipe.c: recipe keys, defaults, overrides and the one-line errors for bad recipes. */
#include "tests/support/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/chat_template.h"
#include "core/file_io.h"
#include "train/recipe.h"

/* The folder of the recipes written below: relative paths in a recipe name files next to it, so
 * it holds links to the repository's recipes/ and tests/ (the tests run in the repository). */
static char temp_dir_made[64];
static void temp_dir_remove(void) {
    char at[128];
    const char *names[] = {"recipes", "tests", "r.toml"};
    for (int i = 0; i < 3; i++) {
        snprintf(at, sizeof(at), "%s/%s", temp_dir_made, names[i]);
        unlink(at);
    }
    rmdir(temp_dir_made);
}

static const char *temp_dir(void) {
    static char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/mt_recipe_%d.d", (int)getpid());
    if (access(dir, F_OK) != 0) {
        char cwd[1024], link[1200];
        MT_CHECK(getcwd(cwd, sizeof(cwd)) && mkdir(dir, 0755) == 0, "cannot make %s", dir);
        const char *names[] = {"recipes", "tests"};
        for (int i = 0; i < 2; i++) {
            snprintf(link, sizeof(link), "%s/%s", cwd, names[i]);
            char at[128];
            snprintf(at, sizeof(at), "%s/%s", dir, names[i]);
            MT_CHECK(symlink(link, at) == 0, "cannot link %s", at);
        }
        snprintf(temp_dir_made, sizeof(temp_dir_made), "%s", dir);
        atexit(temp_dir_remove);
    }
    return dir;
}

static const char *write_temp(const char *text) {
    static char path[128];
    snprintf(path, sizeof(path), "%s/r.toml", temp_dir());
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

#define BASE                                                                                       \
    "[model]\nconfig = \"/tmp/mt_recipe_c.json\"\n[data]\ntokenizer_dir = "                        \
    "\"/tmp/mt_recipe_tok\"\n"

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
    /* data.paths / data.weights: read, formatted back, in the hash */
    {
        const char *sets[] = {"data.paths=[\"/tmp/mt_recipe_c.json\", \"/tmp/mt_recipe_c.json\"]",
                              "data.weights=[2, 1.5]"};
        mt_recipe a, b2;
        char e2[1024] = "", text[16384];
        const char *p2 = write_temp(BASE);
        EXPECT(mt_recipe_load(&a, p2, sets, 2, e2, sizeof(e2)), "data.paths: %s", e2);
        EXPECT(a.data_n_paths == 2 && a.data_n_weights == 2 && a.data_weights[0] == 2.0 &&
                   a.data_weights[1] == 1.5 && !strcmp(a.data_paths[1], "/tmp/mt_recipe_c.json"),
               "data.paths read as %d paths, %d weights", a.data_n_paths, a.data_n_weights);
        mt_recipe_format(&a, text, sizeof(text));
        EXPECT(strstr(text, "paths = [\"/tmp/mt_recipe_c.json\", \"/tmp/mt_recipe_c.json\"]") &&
                   strstr(text, "weights = [2.0, 1.5]"),
               "formatted: %s", text);
        const char *sets2[] = {sets[0], "data.weights=[2, 1]"};
        EXPECT(mt_recipe_load(&b2, p2, sets2, 2, e2, sizeof(e2)), "%s", e2);
        EXPECT(mt_recipe_hash(&a) != mt_recipe_hash(&b2), "data.weights outside the hash");
        unlink(p2);
    }
    /* train.seed: the default of data.seed and model.init_seed, a key set explicitly (in the
     * file or by --set) keeping its own value */
    {
        mt_recipe a;
        char e2[1024] = "";
        const char *p2 = write_temp(BASE "[train]\nseed = 7\n");
        EXPECT(mt_recipe_load(&a, p2, NULL, 0, e2, sizeof(e2)), "train.seed: %s", e2);
        EXPECT(a.train_seed == 7 && a.data_seed == 7 && a.model_init_seed == 7,
               "train.seed 7: data.seed %lld, model.init_seed %lld", (long long)a.data_seed,
               (long long)a.model_init_seed);
        const char *sets2[] = {"model.init_seed=3"};
        EXPECT(mt_recipe_load(&a, p2, sets2, 1, e2, sizeof(e2)), "%s", e2);
        EXPECT(a.model_init_seed == 3 && a.data_seed == 7, "--set model.init_seed=3: %lld, %lld",
               (long long)a.model_init_seed, (long long)a.data_seed);
        p2 = write_temp(BASE "seed = 5\n[train]\nseed = 7\n"); /* BASE ends in [data] */
        EXPECT(mt_recipe_load(&a, p2, NULL, 0, e2, sizeof(e2)), "%s", e2);
        EXPECT(a.data_seed == 5 && a.model_init_seed == 7, "data.seed = 5: %lld, %lld",
               (long long)a.data_seed, (long long)a.model_init_seed);
        EXPECT(mt_recipe_load(&a, write_temp(BASE), NULL, 0, e2, sizeof(e2)) &&
                   a.train_seed == 42 && a.data_seed == 42 && a.model_init_seed == 42,
               "all unset: 42");
        unlink(p2);
    }
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
    snprintf(want_full, sizeof(want_full), want, path, path); /* (a second %s: the same file) */
    EXPECT(!ok && strstr(err, want_full), "got '%s', want '%s'", ok ? "ok" : err, want_full);
    EXPECT(!strchr(err, '\n'), "one-line error: '%s'", err);
    unlink(path);
}

/* The chat-template keys: [data.template_kwargs] as one JSON object (the template's variables,
 * with Python's int / float distinction), or given as a JSON string. */
static int test_recipe_chat(void) {
    make_files();
    const char *path = write_temp(BASE "reasoning_history = \"split\"\n"
                                       "[data.template_kwargs]\nthinking_mode = \"enabled\"\n"
                                       "n = 3\nx = 2.0\nflag = true\nlist = [1, \"a\\\"b\"]\n");
    mt_recipe r;
    char err[512] = "";
    EXPECT(mt_recipe_load(&r, path, NULL, 0, err, sizeof(err)), "load failed: %s", err);
    EXPECT(!strcmp(r.data_template_kwargs,
                   "{\"thinking_mode\": \"enabled\", \"n\": 3, \"x\": 2.0, \"flag\": true, "
                   "\"list\": [1, \"a\\\"b\"]}") &&
               !strcmp(r.data_reasoning_history, "split"),
           "template_kwargs \"%s\"", r.data_template_kwargs);
    const char *sets[] = {"data.template_kwargs={\"model_identity\": \"Ada\"}"};
    path = write_temp(BASE);
    EXPECT(mt_recipe_load(&r, path, sets, 1, err, sizeof(err)) &&
               !strcmp(r.data_template_kwargs, "{\"model_identity\": \"Ada\"}") &&
               !strcmp(r.data_reasoning_history, "as_template") && !r.data_chat_template[0],
           "kwargs as a string: %s", err);
    return MT_TEST_OK;
}

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
                 "%s:6:21: train.lr_scheduler_type: must be one of constant, linear, cosine, "
                 "cosine_with_min_lr, wsd, not \"warmup\"");
    expect_error(BASE, "train.warmup_ratio=1.5",
                 "--set train.warmup_ratio: train.warmup_ratio: must be in [0, 1)");
    expect_error(BASE "[train]\nwarmup_steps = 5\nwarmup_ratio = 0.1\n", NULL,
                 "%s:7:16: train.warmup_ratio: set train.warmup_steps or train.warmup_ratio, not "
                 "both");
    expect_error(BASE, "train.num_train_epochs=-1",
                 "--set train.num_train_epochs: train.num_train_epochs: must be a finite number "
                 ">= 0 (0: train.max_steps)");
    expect_error(BASE, "train.min_lr_ratio=2",
                 "--set train.min_lr_ratio: train.min_lr_ratio: must be in [0, 1]");
    expect_error(BASE, "train.wsd_decay_ratio=0",
                 "--set train.wsd_decay_ratio: train.wsd_decay_ratio: must be in (0, 1]");
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
    /* data: formats, what is trained, several files and their weights */
    expect_error(BASE, "data.format=chatml",
                 "--set data.format: data.format: \"chatml\" is not a format; one of auto, gsm8k, "
                 "messages, sharegpt, alpaca");
    expect_error(BASE, "data.train_on=everything",
                 "--set data.train_on: data.train_on: must be all_assistant or last_assistant, "
                 "not \"everything\"");
    expect_error(BASE, "data.reasoning_history=all",
                 "--set data.reasoning_history: data.reasoning_history: must be as_template or "
                 "split, not \"all\"");
    expect_error(BASE, "data.chat_template=/nonexistent/t.jinja",
                 "--set data.chat_template: data.chat_template: cannot read /nonexistent/t.jinja");
    expect_error(BASE, "data.template_kwargs='[1]'",
                 "--set data.template_kwargs: data.template_kwargs: a [data.template_kwargs] "
                 "table, or a JSON object as a string, is expected (not an object)");
    expect_error(BASE "[data.template_kwargs]\nmode.deep = 1\n", NULL,
                 "%s:6:13: data.template_kwargs.mode.deep: nested tables are not taken here");
    expect_error(BASE "template_kwargs = '{}'\n[data.template_kwargs]\nmode = 1\n", NULL,
                 "%s:7:8: data.template_kwargs is set as a string and as a table");
    expect_error(BASE "[data.template_kwargs]\nx = nan\n", NULL,
                 "%s:6:5: data.template_kwargs.x: not a value JSON can hold");
    expect_error(
        BASE, "data.synthetic_kind=chat",
        "--set data.synthetic_kind: data.synthetic_kind: must be gsm8k, agentic or pairs, not "
        "\"chat\"");
    expect_error(BASE "path = \"/tmp/mt_recipe_c.json\"\npaths = [\"/tmp/mt_recipe_c.json\"]\n",
                 NULL,
                 "%s:6:9: data.paths: set data.path or data.paths, not both (data.path is "
                 "\"/tmp/mt_recipe_c.json\")");
    expect_error(BASE "paths = [\"/tmp/mt_recipe_c.json\", \"/nonexistent/b.jsonl\"]\n", NULL,
                 "%s:5:9: data.paths: cannot read /nonexistent/b.jsonl (entry 1)");
    expect_error(BASE "paths = [\"/tmp/mt_recipe_c.json\", \"/tmp/mt_recipe_c.json\"]\n"
                      "weights = [2.0]\n",
                 NULL, "%s:6:11: data.weights: 1 weights for 2 data.paths");
    expect_error(BASE "paths = [\"/tmp/mt_recipe_c.json\"]\nweights = [0]\n", NULL,
                 "%s:6:11: data.weights: entry 0 is 0; weights must be finite and > 0");
    expect_error(BASE "paths = [\"/tmp/mt_recipe_c.json\", 3]\n", NULL,
                 "%s:5:9: data.paths must be a list of at most 16 paths");
    expect_error(BASE "weights = \"2:1\"\n", NULL,
                 "%s:5:11: data.weights must be a list of at most 16 numbers");
    /* output.report_to: HF's report_to, with the destinations this trainer writes */
    expect_error(BASE, "output.report_to=[\"csv\", \"wandb\"]",
                 "--set output.report_to: output.report_to: \"wandb\" is not a destination: "
                 "\"csv\" (loss.csv, eval.csv, metrics.jsonl: always written) or \"tensorboard\"");
    expect_error(BASE, "output.report_to=[\"tensorboard\", \"tensorboard\"]",
                 "--set output.report_to: output.report_to: lists \"tensorboard\" twice");
    expect_error(BASE, "output.report_to=\"tensorboard\"",
                 "--set output.report_to: output.report_to must be a list of at most 16 names "
                 "(each shorter than 16 bytes)");
    {
        const char *path = write_temp(BASE), *tb[] = {"output.report_to=[\"tensorboard\"]"};
        mt_recipe r;
        char err[1024] = "";
        EXPECT(mt_recipe_load(&r, path, NULL, 0, err, sizeof(err)) &&
                   mt_recipe_reports_to(&r, "csv") && !mt_recipe_reports_to(&r, "tensorboard"),
               "output.report_to's default is [\"csv\"]: %s", err);
        EXPECT(mt_recipe_load(&r, path, tb, 1, err, sizeof(err)) &&
                   mt_recipe_reports_to(&r, "tensorboard") && r.output_n_report_to == 1,
               "output.report_to = [\"tensorboard\"]: %s", err);
        unlink(path);
    }
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
                 "of /tmp/mt_recipe_");
    expect_error(REAL, "data.max_length=100000000",
                 ".d/recipes/configs/tiny.json (hidden_size 128, num_experts_per_tok 2, "
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
                 NULL, "%s:4:17: data.tokenizer_dir: /tmp/mt_recipe_");
    expect_error("[model]\nconfig = \"/tmp/mt_recipe_v4000.json\"\n[data]\ntokenizer_dir = "
                 "\"tests/fixtures/tokenizer\"\n",
                 NULL,
                 ".d/tests/fixtures/tokenizer/tokenizer.json has 6144 "
                 "token ids but the model's vocab_size is 4000 (/tmp/mt_recipe_v4000.json)");
    unlink("/tmp/mt_recipe_v4000.json");
    /* model.path and model.config: both in the recipe, or both by --set, name both; one by
     * --set over the recipe's other replaces it */
    mkdir("/tmp/mt_recipe_model", 0755);
    FILE *cf = fopen("/tmp/mt_recipe_model/config.json", "w");
    MT_CHECK(cf, "cannot write /tmp/mt_recipe_model/config.json");
    fputs("{}", cf);
    fclose(cf);
    expect_error("[model]\nconfig = \"/tmp/mt_recipe_c.json\"\npath = \"/tmp/mt_recipe_model\"\n"
                 "[data]\ntokenizer_dir = \"/tmp/mt_recipe_tok\"\n",
                 NULL,
                 "%s:3:8: model.path and model.config are both set (model.config at %s:2:10): "
                 "model.path loads a checkpoint, model.config initialises a model at random; "
                 "keep one");
    mt_recipe r;
    char err[512];
    const char *over[] = {"model.path=/tmp/mt_recipe_model"};
    EXPECT(mt_recipe_load(&r, write_temp(BASE), over, 1, err, sizeof(err)) &&
               !strcmp(r.model_path, "/tmp/mt_recipe_model") && !r.model_config[0],
           "--set model.path over the recipe's model.config: %s", err);
    unlink("/tmp/mt_recipe_model/config.json");
    rmdir("/tmp/mt_recipe_model");
    EXPECT(mt_recipe_load(&r, write_temp(REAL), NULL, 0, err, sizeof(err)), "real files: %s", err);
    return MT_TEST_OK;
}

/* The model's auxiliary loss terms by name ([model.aux_coef], [model.aux_detach]): passed
 * through to the model, which decides the names (against the config when it reads); formatted
 * back, in the hash and the resume diff; the [train] keys they replace read under the new names. */
static int test_recipe_aux(void) {
    make_files();
#define M3                                                                                         \
    "[model]\nconfig = \"recipes/configs/tiny-m3.json\"\n[data]\ntokenizer_dir = "                 \
    "\"tests/fixtures/tokenizer_m3\"\n"
#define TEXT01                                                                                     \
    "[model]\nconfig = \"recipes/configs/tiny.json\"\n[data]\ntokenizer_dir = "                    \
    "\"tests/fixtures/tokenizer\"\n"
    mt_recipe a, b;
    char err[1024] = "", text[16384];
    const char *path = write_temp(M3 "[model.aux_coef]\nindex_kl = 0.5\n"
                                     "[model.aux_detach]\nindex_kl = false\n");
    EXPECT(mt_recipe_load(&a, path, NULL, 0, err, sizeof(err)), "M3 index_kl: %s", err);
    EXPECT(a.model_n_aux == 1 && !strcmp(a.model_aux[0].name, "index_kl") &&
               a.model_aux[0].has_coef && a.model_aux[0].coef == 0.5 && a.model_aux[0].has_detach &&
               !a.model_aux[0].detach,
           "read as %d terms", a.model_n_aux);
    mt_recipe_format(&a, text, sizeof(text));
    EXPECT(strstr(text, "init_seed = 42\naux_coef.index_kl = 0.5\naux_detach.index_kl = false\n"
                        "\n[data]"),
           "formatted at the end of [model]: %s", text);
    EXPECT(mt_recipe_load(&b, write_temp(text), NULL, 0, err, sizeof(err)) &&
               mt_recipe_hash(&a) == mt_recipe_hash(&b),
           "format round trip: %s", err);
    EXPECT(mt_recipe_load(&b, write_temp(M3), NULL, 0, err, sizeof(err)), "%s", err);
    EXPECT(mt_recipe_hash(&a) != mt_recipe_hash(&b), "model.aux_coef outside the hash");
    char diff[2048];
    EXPECT(
        mt_recipe_resume_diff(&a, &b, false, diff, sizeof(diff)) == 2 &&
            strstr(diff, "model.aux_coef.index_kl = (unset) differs from the checkpoint's 0.5") &&
            strstr(diff, "model.aux_detach.index_kl = (unset) differs from the checkpoint's "
                         "false"),
        "resume diff: %s", diff);
    const char *sets[] = {"model.aux_coef.index_kl=1"};
    EXPECT(mt_recipe_load(&a, write_temp(M3), sets, 1, err, sizeof(err)) &&
               mt_recipe_resume_diff(&b, &a, false, diff, sizeof(diff)) == 1 &&
               strstr(diff, "model.aux_coef.index_kl = 1.0 differs from the checkpoint's (unset)"),
           "resume diff: %s %s", err, diff);
    unlink(path);
    /* the names against the model */
    expect_error(TEXT01, "model.aux_coef.index_kl=0.5",
                 "--set model.aux_coef.index_kl: model.aux_coef.index_kl: MiniMax-Text-01 models "
                 "have no auxiliary term \"index_kl\" whose coefficient can be set (none has one)");
    expect_error(M3, "model.aux_detach.index_kI=true",
                 "model.aux_detach.index_kI: MiniMax-M3 models have no auxiliary term "
                 "\"index_kI\" whose detachment can be set (the terms: index_kl)");
    expect_error(M3 "[model.aux_coef]\naux_loss = 0.1\n", NULL,
                 "%s:6:12: model.aux_coef.aux_loss: the router aux loss's coefficient is the "
                 "config's router_aux_loss_coef");
    /* and their values */
    expect_error(M3, "model.aux_coef.index_kl=true",
                 "--set model.aux_coef.index_kl: model.aux_coef.index_kl: must be a finite number");
    expect_error(M3, "model.aux_coef.index_kl=nan", "model.aux_coef.index_kl: must be a finite");
    expect_error(M3, "model.aux_detach.index_kl=1",
                 "model.aux_detach.index_kl: must be true or false");
    expect_error(M3, "model.aux_coef.index.kl=1",
                 "model.aux_coef.index.kl: the name the model gives a term");
    /* the keys they replace: their old defaults (what every recipe.toml written before holds)
     * dropped for any family, so that those checkpoints resume; another value read under the
     * new name; both keys refused */
    EXPECT(mt_recipe_load(&a, write_temp(TEXT01), NULL, 0, err, sizeof(err)) &&
               mt_recipe_load(&b,
                              write_temp(TEXT01 "[train]\nindexer_kl_coef = 1.0\n"
                                                "indexer_detach = true\n"),
                              NULL, 0, err, sizeof(err)) &&
               b.model_n_aux == 0 && mt_recipe_hash(&a) == mt_recipe_hash(&b),
           "Text-01 with the old keys at their defaults: %s", err);
    const char *old_sets[] = {"train.indexer_kl_coef=0.5", "train.indexer_detach=false"};
    const char *new_sets[] = {"model.aux_coef.index_kl=0.5", "model.aux_detach.index_kl=false"};
    EXPECT(mt_recipe_load(&a, write_temp(M3), old_sets, 2, err, sizeof(err)) &&
               mt_recipe_load(&b, write_temp(M3), new_sets, 2, err, sizeof(err)) &&
               a.model_n_aux == 1 && a.model_aux[0].coef == 0.5 && !a.model_aux[0].detach &&
               mt_recipe_hash(&a) == mt_recipe_hash(&b),
           "M3 with the old keys set: %s", err);
    expect_error(M3 "[model.aux_coef]\nindex_kl = 0.5\n", "train.indexer_kl_coef=0.25",
                 "--set train.indexer_kl_coef: train.indexer_kl_coef is now "
                 "model.aux_coef.index_kl, which the recipe sets too");
    expect_error(TEXT01 "[train]\nindexer_kl_coef = 0.5\n", NULL,
                 "%s:6:19: model.aux_coef.index_kl: MiniMax-Text-01 models have no auxiliary "
                 "term \"index_kl\"");
#undef M3
#undef TEXT01
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

/* docs/training.md's list of the keys that may change on resume (the paragraph that begins
 * "Keys that may change on resume") against the table: every recipe key it names in backticks
 * may change (MT_RESUME_FREE) or is a batch layout key, and every such key is named; and the
 * refusal's list (mt_recipe_resume_free_keys) names each of them too. */
static int test_recipe_resume_docs(void) {
    char path[4096];
    const char *src = getenv("MT_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/docs/training.md", src ? src : ".");
    FILE *f = fopen(path, "r");
    MT_CHECK(f, "cannot read %s", path);
    static char para[16384];
    char line[4096];
    bool in = false;
    para[0] = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!in && !strncmp(line, "Keys that may change on resume", 30)) in = true;
        if (in && line[0] == '\n') break;
        if (in) strncat(para, line, sizeof(para) - strlen(para) - 1);
    }
    fclose(f);
    EXPECT(in, "%s: no paragraph \"Keys that may change on resume\"", path);
    enum { MAX_KEYS = 128 };
    bool named[MAX_KEYS] = {false};
    char *words[256];
    const int n_words = cell_words(para, words, 256);
    const char *key, *def;
    bool numerics;
    int n_keys = 0;
    while (mt_recipe_key_at(n_keys, &key, &def, &numerics)) n_keys++;
    MT_CHECK(n_keys <= MAX_KEYS, "more than %d recipe keys", MAX_KEYS);
    for (int w = 0; w < n_words; w++) {
        int i = 0;
        while (mt_recipe_key_at(i, &key, &def, &numerics) && strcmp(key, words[w]) != 0) i++;
        if (i == n_keys) continue; /* not a key (a value, a file) */
        EXPECT(mt_recipe_key_rule(i) != MT_RESUME_NUMERICS,
               "%s: %s is listed as changeable on resume but changes the numerics", path, key);
        named[i] = true;
    }
    char refusal[4096];
    mt_recipe_resume_free_keys(refusal, sizeof(refusal));
    int n_free = 0;
    for (int i = 0; i < n_keys; i++) {
        if (mt_recipe_key_rule(i) == MT_RESUME_NUMERICS) continue;
        mt_recipe_key_at(i, &key, &def, &numerics);
        EXPECT(named[i], "%s: %s may change on resume but is not in the list", path, key);
        EXPECT(strstr(refusal, key), "the refusal's list lacks %s: %s", key, refusal);
        n_free++;
    }
    printf("%d keys may change on resume, as %s lists them\n", n_free, path);
    return MT_TEST_OK;
}

/* Relative paths: a recipe's against its folder (made absolute, "." and ".." out), --set's
 * against the working directory, output.dir and data.cache_dir left as given; a resolved
 * recipe's (recipe.toml) against the working directory; a resume compares the files the paths
 * name, not their spelling (docs/recipes.md, "Paths"). */
static int test_recipe_paths(void) {
    char cwd[1024], want[1400], err[1024] = "";
    MT_CHECK(getcwd(cwd, sizeof(cwd)), "getcwd");
    const char *dir = temp_dir();
    const char *path = write_temp("[model]\nconfig = \"./recipes/x/../configs/tiny.json\"\n"
                                  "[data]\ntokenizer_dir = \"tests/fixtures/tokenizer\"\n"
                                  "cache_dir = \"cache\"\n[output]\ndir = \"runs/x\"\n");
    mt_recipe a, b;
    EXPECT(mt_recipe_load(&a, path, NULL, 0, err, sizeof(err)), "%s", err);
    snprintf(want, sizeof(want), "%s/recipes/configs/tiny.json", dir);
    EXPECT(!strcmp(a.model_config, want), "model.config %s, want %s", a.model_config, want);
    snprintf(want, sizeof(want), "%s/tests/fixtures/tokenizer", dir);
    EXPECT(!strcmp(a.data_tokenizer_dir, want), "data.tokenizer_dir %s, want %s",
           a.data_tokenizer_dir, want);
    EXPECT(!strcmp(a.output_dir, "runs/x") && !strcmp(a.data_cache_dir, "cache") &&
               !strcmp(a.data_path, "synthetic"),
           "written paths and \"synthetic\" as given: %s, %s, %s", a.output_dir, a.data_cache_dir,
           a.data_path);
    /* --set: the working directory's (the repository: ctest runs there) */
    const char *sets[] = {"model.config=recipes/configs/../configs/tiny.json",
                          "data.paths=[\"tests/fixtures/formats/messages.jsonl\"]"};
    EXPECT(mt_recipe_load(&b, path, sets, 2, err, sizeof(err)), "%s", err);
    snprintf(want, sizeof(want), "%s/recipes/configs/tiny.json", cwd);
    EXPECT(!strcmp(b.model_config, want), "--set model.config: %s, want %s", b.model_config, want);
    snprintf(want, sizeof(want), "%s/tests/fixtures/formats/messages.jsonl", cwd);
    EXPECT(b.data_n_paths == 1 && !strcmp(b.data_paths[0], want), "--set data.paths: %s, want %s",
           b.data_paths[0], want);
    /* the same files by other names: no difference for a resume */
    char diff[4096];
    EXPECT(mt_recipe_resume_diff(&a, &b, false, diff, sizeof(diff)) == 1 &&
               strstr(diff, "data.paths") && !strstr(diff, "model.config"),
           "resume diff: %s", diff);
    /* a resolved recipe: relative paths are the working directory's */
    EXPECT(mt_recipe_load_resolved(&b, path, NULL, 0, err, sizeof(err)), "%s", err);
    snprintf(want, sizeof(want), "%s/recipes/configs/tiny.json", cwd);
    EXPECT(!strcmp(b.model_config, want), "resolved: %s, want %s", b.model_config, want);
    /* a file missing where the recipe's folder puts it: named as resolved */
    path = write_temp("[model]\nconfig = \"configs/tiny.json\"\n");
    mt_recipe c;
    snprintf(want, sizeof(want), "%s/configs/tiny.json", dir);
    EXPECT(!mt_recipe_load(&c, path, NULL, 0, err, sizeof(err)) && strstr(err, want) &&
               strstr(err, "r.toml:2:10: model.config"),
           "missing config: '%s', want it to name %s", err, want);
    unlink(path);
    return MT_TEST_OK;
}

/* train.objective and the head keys: each refusal one line naming the key, where it is set. */
static int test_recipe_objective(void) {
    make_files();
#define TINY                                                                                       \
    "[model]\nconfig = \"recipes/configs/tiny.json\"\n[data]\ntokenizer_dir = "                    \
    "\"tests/fixtures/tokenizer\"\n"
    mt_recipe r;
    char err[1024] = "";
    EXPECT(mt_recipe_load(&r,
                          write_temp(TINY "path = \"/tmp/mt_recipe_c.json\"\n"
                                          "[train]\nobjective = \"classification\"\n"),
                          (const char *[]){"model.labels=[\"neg\", \"pos\"]"}, 1, err,
                          sizeof(err)) &&
               r.model_n_labels == 2 && !strcmp(r.model_labels[1], "pos"),
           "classification with two labels: %s", err);
    expect_error(BASE "[train]\nobjective = \"dpo\"\n", NULL,
                 "%s:6:13: train.objective: \"dpo\" is none of sft, reward, classification, "
                 "token_classification, question_answering");
    expect_error(BASE "path = \"/tmp/mt_recipe_c.json\"\n"
                      "packing = true\n[train]\nobjective = \"reward\"\n",
                 NULL, "%s:6:11: data.packing: must be false with train.objective = \"reward\"");
    expect_error(BASE "path = \"/tmp/mt_recipe_c.json\"\n"
                      "padding_free = true\n[train]\nobjective = \"reward\"\n",
                 NULL,
                 "%s:6:16: data.padding_free: must be false with train.objective = \"reward\"");
    expect_error(BASE "path = \"/tmp/mt_recipe_c.json\"\n"
                      "format = \"messages\"\n[train]\nobjective = \"classification\"\n",
                 NULL, "%s:6:10: data.format: is for train.objective = \"sft\"");
    expect_error(BASE "synthetic_kind = \"pairs\"\n", NULL,
                 "%s:5:18: data.synthetic_kind: synthetic data of kind \"pairs\" is for "
                 "train.objective = \"reward\", not \"sft\"");
    expect_error(BASE "path = \"synthetic\"\n[train]\nobjective = \"classification\"\n", NULL,
                 "data.path: train.objective = \"classification\" has no synthetic data");
    expect_error(BASE "[train]\nobjective = \"reward\"\n[eval]\ngenerate_data = \"synthetic\"\n",
                 "data.synthetic_kind=pairs",
                 "%s:8:17: eval.generate_data: generation needs the causal LM");
    expect_error(TINY "path = \"/tmp/mt_recipe_c.json\"\n"
                      "[train]\nobjective = \"classification\"\n",
                 NULL, "%s:7:13: train.objective = \"classification\" on the causal LM ");
    expect_error(TINY "synthetic_kind = \"pairs\"\n[train]\nobjective = \"reward\"\n",
                 "model.num_labels=2", "train.objective = \"reward\" scores with one label");
    expect_error(TINY "path = \"/tmp/mt_recipe_c.json\"\n"
                      "[train]\nobjective = \"token_classification\"\n",
                 "model.problem_type=ranking",
                 "model.problem_type: \"ranking\" is none of regression");
    expect_error(TINY, "model.labels=[\"a\", \"b\"]",
                 "model.num_labels, model.problem_type and model.labels are for the head "
                 "objectives");
    expect_error(TINY "path = \"/tmp/mt_recipe_c.json\"\n"
                      "[train]\nobjective = \"classification\"\n",
                 "model.labels=[\"a\", \"a\"]", "model.labels: \"a\" is there twice");
#undef TINY
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_recipe_objective", test_recipe_objective},
    {"data_recipe_paths", test_recipe_paths},
    {"data_recipe_load", test_recipe_load},
    {"data_recipe_errors", test_recipe_errors},
    {"data_recipe_chat", test_recipe_chat},
    {"data_recipe_aux", test_recipe_aux},
    {"data_recipe_docs", test_recipe_docs},
    {"data_recipe_resume_docs", test_recipe_resume_docs},
};
MT_TEST_MAIN(cases)
