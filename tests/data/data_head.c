/* data_head.c: the datasets of the head objectives (data/head_data.h) on the test tokenizer
 * (tests/fixtures/tokenizer) and its chat template.
 *
 * Expected values come from transformers 5.24 / jinja2 3.1.6, written out here and recomputed
 * by tools/check_head_data_refs.py (/work/pyref; not run by ctest): the rendered conversations
 * are apply_chat_template(messages, tools=..., tokenize=False) of the fixture tokenizer (whose
 * tokenized form equals the tokenization of that text), the ids AutoTokenizer(text,
 * add_special_tokens=False), and the word / answer tokens follow from HF's offset mappings
 * (character offsets there, bytes here). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "data/chat.h"
#include "data/head_data.h"
#include "data/token_cache.h"
#include "tests/support/data_util.h"

typedef struct {
    char dir[4096];
    mt_tokenizer *tok;
    mt_chat_template *tmpl;
} head_env;

static void env_open(head_env *e, const char *tmpl_dir) {
    char path[4200], err[MT_ERR_LEN];
    make_tmpdir(e->dir, sizeof(e->dir));
    snprintf(path, sizeof(path), "%s/tokenizer.json", tokenizer_dir());
    e->tok = mt_tokenizer_load(path);
    const mt_chat_source src = {.dir = tmpl_dir ? tmpl_dir : tokenizer_dir()};
    e->tmpl = mt_chat_template_open(&src, err, sizeof(err));
    MT_CHECK(e->tmpl, "%s", err);
}

static void env_close(head_env *e) {
    mt_chat_template_free(e->tmpl);
    mt_tokenizer_free(e->tok);
    rm_tree(e->dir);
}

static void data_free(mt_token_data *d) {
    free(d->head_i32);
    free(d->head_f32);
    d->head_i32 = NULL;
    d->head_f32 = NULL;
    mt_token_data_free(d);
}

/* Writes text to <dir>/name and builds it. 0 or -1 (err). */
static int build(head_env *e, const char *name, const char *text, mt_objective obj, int num_labels,
                 const char *const *names, int n_names, int64_t max_length, mt_trunc_policy pol,
                 bool skip_bad, mt_token_data *d, char *path, char *err) {
    snprintf(path, 4200, "%s/%s", e->dir, name);
    write_text(path, text);
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    o.max_length = max_length;
    o.policy = pol;
    const mt_head_data_opts h = {
        .objective = obj, .num_labels = num_labels, .label_names = names, .n_label_names = n_names};
    const char *paths[1] = {path};
    err[0] = 0;
    return mt_head_data_build_files(paths, 1, e->tok, e->tmpl, &o, &h, skip_bad, d, err);
}

/* Sample s of d has the tokens of text (the first `keep` of them; -1: all). */
static void expect_text(head_env *e, const mt_token_data *d, int64_t s, const char *text,
                        int64_t keep, const char *what) {
    mt_token_buf tb = {0};
    mt_tokenizer_encode(e->tok, text, strlen(text), &tb);
    const int64_t want = keep < 0 || keep > tb.n ? tb.n : keep;
    const int64_t n = s < d->n_samples ? d->offsets[s + 1] - d->offsets[s] : -1;
    EXPECT(n == want && !memcmp(d->ids + d->offsets[s], tb.ids, sizeof(int32_t) * (size_t)want),
           "%s: sample %lld has %lld tokens, want the %lld of \"%s\"", what, (long long)s,
           (long long)n, (long long)want, text);
    for (int64_t i = 0; n == want && i < n; i++)
        if (d->labels[d->offsets[s] + i] != MT_IGNORE_INDEX) {
            EXPECT(false, "%s: sample %lld token %lld labelled", what, (long long)s, (long long)i);
            break;
        }
    mt_token_buf_free(&tb);
}

static void expect_ids(const mt_token_data *d, int64_t s, const int32_t *ids, const int32_t *lab,
                       int64_t n, const char *what) {
    const int64_t got = s < d->n_samples ? d->offsets[s + 1] - d->offsets[s] : -1;
    EXPECT(got == n, "%s: %lld tokens, want %lld", what, (long long)got, (long long)n);
    for (int64_t i = 0; got == n && i < n; i++) {
        EXPECT(d->ids[d->offsets[s] + i] == ids[i], "%s: id %lld is %d, want %d", what,
               (long long)i, d->ids[d->offsets[s] + i], ids[i]);
        const int32_t want = lab ? lab[i] : MT_IGNORE_INDEX;
        EXPECT(d->labels[d->offsets[s] + i] == want, "%s: label %lld is %d, want %d", what,
               (long long)i, d->labels[d->offsets[s] + i], want);
    }
}

/* err is one line "path:line: ..." holding want. */
static void expect_err(const char *err, const char *path, int line, const char *want,
                       const char *what) {
    char prefix[4300];
    snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
    EXPECT(!strncmp(err, prefix, strlen(prefix)) && has(err, want) && !strchr(err, '\n'),
           "%s: \"%s\", want \"%s...%s\"", what, err, prefix, want);
}

#define U(t)  "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"" t "\"}]}"
#define A(t)  "{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"" t "\"}]}"
#define RU(t) "<beginning_of_sentence>user name=user\n" t "<end_of_sentence>\n"
#define RA(t) "<beginning_of_sentence>ai name=assistant\n" t "<end_of_sentence>\n"
#define TOOLS "[{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": {}}}]"
#define RTOOLS                                                                                     \
    "<beginning_of_sentence>system function_setting=functions\n{\"type\": \"function\", "          \
    "\"function\": {\"name\": \"w\", \"parameters\": {}}}<end_of_sentence>\n"

/* ---------------- data_head_reward ---------------- */

// clang-format off
static const char *const reward_jsonl =
    "{\"chosen\": [" U("Hi") ", " A("Hello there") "], \"rejected\": [" U("Hi") ", " A("Go away") "], \"margin\": 2}\n"
    "{\"prompt\": [" U("Weather?") "], \"chosen\": [" A("Sunny") "], \"rejected\": [" A("No") "], \"tools\": " TOOLS "}\n"
    "{\"chosen\": \"The sky is blue.\", \"rejected\": \"The sky is green.<end_of_sentence>\", \"margin\": 0.5}\n"
    "\n"
    "{\"prompt\": \"Q: sky? A:\", \"chosen\": \" blue\", \"rejected\": \" green\"}\n";
// clang-format on

static int test_reward(void) {
    head_env e;
    env_open(&e, NULL);
    char path[4200], err[MT_ERR_LEN];
    mt_token_data d;
    int rc = build(&e, "r.jsonl", reward_jsonl, MT_OBJECTIVE_REWARD, 0, NULL, 0, 512, MT_TRUNC_DROP,
                   false, &d, path, err);
    EXPECT(rc == 0, "reward: %s", err);
    if (rc == 0) {
        EXPECT(d.n_samples == 8 && d.n_lines == 4 && d.n_targets == 4 && d.n_dropped == 0 &&
                   d.objective == MT_OBJECTIVE_REWARD && d.f32_width == 1 && d.i32_width == 0,
               "reward: %lld samples, %lld lines, %lld targets, widths %d %d",
               (long long)d.n_samples, (long long)d.n_lines, (long long)d.n_targets, d.i32_width,
               d.f32_width);
        static const char *const want[8] = {
            RU("Hi") RA("Hello there"),          RU("Hi") RA("Go away"),
            RU("Weather?") RA("Sunny") RTOOLS,   RU("Weather?") RA("No") RTOOLS,
            "The sky is blue.<end_of_sentence>", "The sky is green.<end_of_sentence>",
            "Q: sky? A: blue<end_of_sentence>",  "Q: sky? A: green<end_of_sentence>"};
        static const float margins[8] = {2, 2, 0, 0, 0.5f, 0.5f, 0, 0};
        for (int s = 0; s < 8 && d.n_samples == 8; s++) {
            expect_text(&e, &d, s, want[s], -1, "reward");
            EXPECT(d.head_f32[s] == margins[s] && d.source[s] == 0, "sample %d: margin %g", s,
                   d.head_f32[s]);
        }
        /* the HF counts of the two conversations of record 1 and of the strings */
        EXPECT(d.n_samples == 8 && d.offsets[1] == 26 && d.offsets[2] - d.offsets[1] == 25 &&
                   d.offsets[5] - d.offsets[4] == 6 && d.offsets[7] - d.offsets[6] == 8,
               "reward: token counts against transformers");
    }
    data_free(&d);
    /* record 1 alone: chosen 26 tokens, rejected 25. max_length 25: dropped (both); truncate
     * cuts the chosen side only; 24 cuts both */
    const char *one = "{\"chosen\": [" U("Hi") ", " A("Hello there") "], \"rejected\": [" U(
        "Hi") ", " A("Go away") "]}\n";
    rc = build(&e, "one.jsonl", one, MT_OBJECTIVE_REWARD, 0, NULL, 0, 25, MT_TRUNC_DROP, false, &d,
               path, err);
    EXPECT(rc == 0 && d.n_samples == 0 && d.n_dropped == 2 && d.n_targets == 0,
           "drop: the pair with a side over max_length stays (%lld samples) %s",
           (long long)d.n_samples, err);
    data_free(&d);
    rc = build(&e, "one.jsonl", one, MT_OBJECTIVE_REWARD, 0, NULL, 0, 25, MT_TRUNC_TRUNCATE, false,
               &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 2 && d.n_truncated == 1 && d.n_targets == 1,
           "truncate 25: %lld samples, %lld truncated %s", (long long)d.n_samples,
           (long long)d.n_truncated, err);
    if (rc == 0 && d.n_samples == 2) {
        expect_text(&e, &d, 0, RU("Hi") RA("Hello there"), 25, "truncate 25 chosen");
        expect_text(&e, &d, 1, RU("Hi") RA("Go away"), 25, "truncate 25 rejected");
    }
    data_free(&d);
    rc = build(&e, "one.jsonl", one, MT_OBJECTIVE_REWARD, 0, NULL, 0, 24, MT_TRUNC_TRUNCATE, false,
               &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 2 && d.n_truncated == 2 && d.offsets[2] - d.offsets[1] == 24 &&
               d.offsets[1] == 24,
           "truncate 24: both cut %s", err);
    data_free(&d);
    env_close(&e);

    /* chat_template_kwargs reach the template; strings need an eos_token */
    char tdir[4096], cfg[4200];
    make_tmpdir(tdir, sizeof(tdir));
    snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", tdir);
    write_text(cfg, "{\"eos_token\": \"<end_of_sentence>\", \"chat_template\": \"{% for m in "
                    "messages %}{{ m.role }}:{{ m.content }}|{% endfor %}{{ flavor }}\"}");
    env_open(&e, tdir);
    rc = build(&e, "kw.jsonl",
               "{\"chosen\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", "
               "\"content\": \"b\"}], \"rejected\": [{\"role\": \"user\", \"content\": \"a\"}, "
               "{\"role\": \"assistant\", \"content\": \"c\"}], \"chat_template_kwargs\": "
               "{\"flavor\": \"X\"}}\n",
               MT_OBJECTIVE_REWARD, 0, NULL, 0, 512, MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 2, "kwargs: %s", err);
    if (rc == 0 && d.n_samples == 2) {
        expect_text(&e, &d, 0, "user:a|assistant:b|X", -1, "kwargs chosen");
        expect_text(&e, &d, 1, "user:a|assistant:c|X", -1, "kwargs rejected");
    }
    data_free(&d);
    env_close(&e);
    write_text(cfg, "{\"chat_template\": \"{% for m in messages %}{{ m.content }}{% endfor %}\"}");
    env_open(&e, tdir);
    rc = build(&e, "s.jsonl", "{\"chosen\": \"a\", \"rejected\": \"b\"}\n", MT_OBJECTIVE_REWARD, 0,
               NULL, 0, 512, MT_TRUNC_DROP, true, &d, path, err);
    EXPECT(rc != 0, "strings without an eos_token: built (even under skip_bad)");
    expect_err(err, path, 1, "eos_token", "no eos_token");
    env_close(&e);
    rm_tree(tdir);
    return MT_TEST_OK;
}

/* ---------------- data_head_classification ---------------- */

static int test_classification(void) {
    head_env e;
    env_open(&e, NULL);
    char path[4200], err[MT_ERR_LEN];
    mt_token_data d;
    static const char *const names[2] = {"neg", "pos"};
    /* class ids: integers, names, -100 */
    int rc =
        build(&e, "c.jsonl",
              "{\"text\": \"good\", \"label\": 1}\n{\"text\": \"bad\", \"label\": \"neg\"}\n"
              "{\"messages\": [" U("hi") "], \"label\": \"pos\"}\n"
                                         "{\"text\": \"meh\", \"label\": -100}\n",
              MT_OBJECTIVE_CLASSIFICATION, 2, names, 2, 512, MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 4 && d.i32_width == 1 && d.f32_width == 0 &&
               d.n_targets == 3 && d.objective == MT_OBJECTIVE_CLASSIFICATION,
           "class ids: %s", err);
    if (rc == 0 && d.n_samples == 4) {
        static const int32_t want[4] = {1, 0, 1, -100};
        for (int s = 0; s < 4; s++) EXPECT(d.head_i32[s] == want[s], "sample %d class", s);
        expect_text(&e, &d, 0, "good", -1, "text as is");
        expect_text(&e, &d, 2, RU("hi"), -1, "messages rendered whole");
    }
    data_free(&d);
    /* a number: regression (num_labels 1; an integer is a number there) */
    rc =
        build(&e, "f.jsonl", "{\"text\": \"x\", \"label\": 0.5}\n{\"text\": \"y\", \"label\": 2}\n",
              MT_OBJECTIVE_CLASSIFICATION, 1, NULL, 0, 512, MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 2 && d.f32_width == 1 && d.i32_width == 0 &&
               d.head_f32[0] == 0.5f && d.head_f32[1] == 2.f,
           "regression: %s", err);
    data_free(&d);
    /* lists of num_labels numbers */
    rc = build(&e, "l.jsonl",
               "[{\"text\": \"x\", \"label\": [1, 0, 1]},\n {\"text\": \"y\", \"label\": [0.5, "
               "0.25, 0]}]\n",
               MT_OBJECTIVE_CLASSIFICATION, 3, NULL, 0, 512, MT_TRUNC_DROP, false, &d, path, err);
    static const float lw[6] = {1, 0, 1, 0.5f, 0.25f, 0};
    EXPECT(rc == 0 && d.n_samples == 2 && d.f32_width == 3 && d.n_targets == 6 &&
               !memcmp(d.head_f32, lw, sizeof(lw)),
           "lists: %s", err);
    data_free(&d);
    /* mixed kinds refused naming both records */
    rc = build(&e, "m.jsonl",
               "{\"text\": \"x\", \"label\": 1}\n{\"text\": \"y\", \"label\": [0, 1]}\n",
               MT_OBJECTIVE_CLASSIFICATION, 2, NULL, 0, 512, MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc != 0, "mixed kinds built");
    expect_err(err, path, 2, "label: lists of numbers", "mixed kinds");
    char first[4300];
    snprintf(first, sizeof(first), "%s:1 gave class ids", path);
    EXPECT(has(err, first), "mixed kinds: \"%s\" does not name the first record", err);
    /* a number with num_labels 2 */
    rc = build(&e, "n.jsonl", "{\"text\": \"x\", \"label\": 0.5}\n", MT_OBJECTIVE_CLASSIFICATION, 2,
               NULL, 0, 512, MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc != 0, "a float label with num_labels 2 built");
    expect_err(err, path, 1, "num_labels 1", "float with 2 labels");
    /* max_length */
    rc = build(&e, "t.jsonl", "{\"text\": \"one two three four\", \"label\": 1}\n",
               MT_OBJECTIVE_CLASSIFICATION, 2, NULL, 0, 2, MT_TRUNC_TRUNCATE, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 1 && d.n_truncated == 1 && d.n_tokens == 2, "truncate: %s",
           err);
    data_free(&d);
    rc = build(&e, "t.jsonl", "{\"text\": \"one two three four\", \"label\": 1}\n",
               MT_OBJECTIVE_CLASSIFICATION, 2, NULL, 0, 2, MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 0 && d.n_dropped == 1, "drop: %s", err);
    data_free(&d);
    /* the cache key names the objective, num_labels and the label names */
    mt_token_cache_cfg cfg = {
        .data_path = path, .tokenizer_dir = tokenizer_dir(), .cache_path = "unused.h5"};
    mt_sample_opts_default(&cfg.sample);
    mt_cache_key k0, k1, k2, k3;
    mt_head_data_opts h = {.objective = MT_OBJECTIVE_CLASSIFICATION, .num_labels = 2};
    EXPECT(mt_token_cache_key(&cfg, e.tmpl, &k0, err) == 0, "%s", err);
    cfg.head = &h;
    EXPECT(mt_token_cache_key(&cfg, e.tmpl, &k1, err) == 0 && k1.options_hash != k0.options_hash &&
               has(k1.options, "objective=classification num_labels=2"),
           "objective not in the key: %s", k1.options);
    h.label_names = names;
    h.n_label_names = 2;
    EXPECT(mt_token_cache_key(&cfg, e.tmpl, &k2, err) == 0 && k2.options_hash != k1.options_hash &&
               has(k2.options, "labels=neg,pos"),
           "label names not in the key: %s", k2.options);
    h.num_labels = 3;
    EXPECT(mt_token_cache_key(&cfg, e.tmpl, &k3, err) == 0 && k3.options_hash != k2.options_hash,
           "num_labels not in the key");
    env_close(&e);
    return MT_TEST_OK;
}

/* ---------------- data_head_token_classification ---------------- */

static int test_token_classification(void) {
    head_env e;
    env_open(&e, NULL);
    char path[4200], err[MT_ERR_LEN];
    mt_token_data d;
    static const char *const names[3] = {"O", "B-LOC", "I-LOC"};
    const char *text = "{\"tokens\": [\"New\", \"York\", \"is\", \"big\"], \"ner_tags\": [1, 2, 0, "
                       "0]}\n{\"tokens\": [\"Z\\u00fcrich\", \"unbelievably\", \"ok\"], "
                       "\"labels\": [\"B-LOC\", \"O\", \"O\"]}\n";
    int rc = build(&e, "t.jsonl", text, MT_OBJECTIVE_TOKEN_CLASSIFICATION, 3, names, 3, 512,
                   MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 2 && d.n_targets == 7 && d.i32_width == 0 &&
               d.f32_width == 0 && d.objective == MT_OBJECTIVE_TOKEN_CLASSIFICATION,
           "token classification: %s", err);
    /* "New York is big": N(0,1) ew(1,3) ĠYork(3,8) Ġis(8,11) Ġbig(11,15); the words start at
     * bytes 0, 4, 9, 12: tokens 0, 2, 3, 4 */
    static const int32_t ids0[5] = {50, 1748, 3077, 317, 1948}, lab0[5] = {1, -100, 2, 0, 0};
    /* "Zürich unbelievably ok": Z(0,1) Ã(1,3) ¼(1,3) ri(3,5) ch(5,7) Ġun(7,10) b el ie v ab ly
     * Ġo(20,22) k: the words start at bytes 0, 8, 21: tokens 0, 5, 12 */
    static const int32_t ids1[14] = {62,  132, 125, 396, 303, 1181, 70,
                                     459, 526, 90,  583, 474, 268,  79};
    static const int32_t lab1[14] = {1,    -100, -100, -100, -100, 0, -100,
                                     -100, -100, -100, -100, -100, 0, -100};
    if (rc == 0 && d.n_samples == 2) {
        expect_ids(&d, 0, ids0, lab0, 5, "New York");
        expect_ids(&d, 1, ids1, lab1, 14, "Zürich");
    }
    data_free(&d);
    rc = build(&e, "t.jsonl", text, MT_OBJECTIVE_TOKEN_CLASSIFICATION, 3, names, 3, 3,
               MT_TRUNC_TRUNCATE, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 2 && d.n_truncated == 2 && d.n_targets == 2 + 1,
           "truncate: %lld targets %s", (long long)d.n_targets, err);
    if (rc == 0 && d.n_samples == 2) expect_ids(&d, 0, ids0, lab0, 3, "New York cut");
    data_free(&d);
    rc = build(&e, "t.jsonl", text, MT_OBJECTIVE_TOKEN_CLASSIFICATION, 3, names, 3, 5,
               MT_TRUNC_DROP, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 1 && d.n_dropped == 1, "drop: %s", err);
    data_free(&d);
    env_close(&e);
    return MT_TEST_OK;
}

/* ---------------- data_head_qa ---------------- */

static int test_qa(void) {
    head_env e;
    env_open(&e, NULL);
    char path[4200], err[MT_ERR_LEN];
    mt_token_data d;
    /* "Where?\nIt is in Zürich, Switzerland.": the answer at character 17 of the context is
     * bytes [25, 36) of the text; ĠS (bytes 24..26) holds its first byte, land (32..36) its last */
    const char *rec = "{\"question\": \"Where?\", \"context\": \"It is in Z\\u00fcrich, "
                      "Switzerland.\", \"answers\": {\"text\": [\"Switzerland\"], "
                      "\"answer_start\": [%d]}}\n";
    char text[512];
    snprintf(text, sizeof(text), rec, 17);
    int rc = build(&e, "q.jsonl", text, MT_OBJECTIVE_QUESTION_ANSWERING, 0, NULL, 0, 512,
                   MT_TRUNC_DROP, false, &d, path, err);
    static const int32_t ids[21] = {59,  262, 269, 35,  203, 923, 317, 306, 1796, 132, 125,
                                    396, 303, 16,  418, 91,  319, 94,  272, 2309, 18};
    EXPECT(rc == 0 && d.n_samples == 1 && d.i32_width == 2 && d.n_targets == 1 &&
               d.objective == MT_OBJECTIVE_QUESTION_ANSWERING,
           "qa: %s", err);
    if (rc == 0 && d.n_samples == 1) {
        expect_ids(&d, 0, ids, NULL, 21, "qa");
        EXPECT(d.head_i32[0] == 14 && d.head_i32[1] == 19, "qa: start %d end %d, want 14 19",
               d.head_i32[0], d.head_i32[1]);
        char *span = mt_tokenizer_decode(e.tok, d.ids + 14, 6, false);
        EXPECT(!strcmp(span, " Switzerland"), "qa: the span decodes to \"%s\"", span);
        free(span);
    }
    data_free(&d);
    /* cut inside the answer: refused, or skipped under skip_bad; cut after it: kept */
    rc = build(&e, "q.jsonl", text, MT_OBJECTIVE_QUESTION_ANSWERING, 0, NULL, 0, 15,
               MT_TRUNC_TRUNCATE, false, &d, path, err);
    EXPECT(rc != 0, "an answer cut by max_length built");
    expect_err(err, path, 1, "cut by max_length 15", "answer cut");
    rc = build(&e, "q.jsonl", text, MT_OBJECTIVE_QUESTION_ANSWERING, 0, NULL, 0, 15,
               MT_TRUNC_TRUNCATE, true, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 0 && d.n_skipped == 1, "skip_bad: %s", err);
    data_free(&d);
    rc = build(&e, "q.jsonl", text, MT_OBJECTIVE_QUESTION_ANSWERING, 0, NULL, 0, 20,
               MT_TRUNC_TRUNCATE, false, &d, path, err);
    EXPECT(rc == 0 && d.n_samples == 1 && d.n_truncated == 1 && d.head_i32[1] == 19,
           "cut after the answer: %s", err);
    data_free(&d);
    /* the answer not at answer_start (18: its byte offset in the context, not its character's) */
    snprintf(text, sizeof(text), rec, 18);
    rc = build(&e, "q.jsonl", text, MT_OBJECTIVE_QUESTION_ANSWERING, 0, NULL, 0, 512, MT_TRUNC_DROP,
               false, &d, path, err);
    EXPECT(rc != 0, "an answer not at answer_start built");
    expect_err(err, path, 1, "answers.text[0] \"Switzerland\" is not at answers.answer_start[0]",
               "misplaced answer");
    env_close(&e);
    return MT_TEST_OK;
}

/* ---------------- data_head_errors ---------------- */

static int test_errors(void) {
    head_env e;
    env_open(&e, NULL);
    char path[4200], err[MT_ERR_LEN];
    mt_token_data d;
    static const struct {
        mt_objective obj;
        int num_labels;
        const char *line2, *want;
    } cases[] = {
        {MT_OBJECTIVE_REWARD, 0, "{\"chosen\": \"a\"}", "missing \"rejected\""},
        {MT_OBJECTIVE_REWARD, 0, "{\"chosen\": [" U("a") "], \"rejected\": \"b\"}", "rejected:"},
        {MT_OBJECTIVE_REWARD, 0, "{\"chosen\": \"a\", \"rejected\": \"b\", \"margin\": \"big\"}",
         "margin: must be a finite number"},
        {MT_OBJECTIVE_REWARD, 0,
         "{\"chosen\": [" U("a") "], \"rejected\": [" U("b") "], "
                                                             "\"tools\": {}}",
         "tools: must be a list"},
        {MT_OBJECTIVE_CLASSIFICATION, 2, "{\"text\": \"a\"}", "missing \"label\""},
        {MT_OBJECTIVE_CLASSIFICATION, 2, "{\"text\": \"a\", \"label\": 5}", "label: class 5"},
        {MT_OBJECTIVE_CLASSIFICATION, 2, "{\"text\": \"a\", \"label\": \"pos\"}",
         "label: \"pos\" is not one of the label names"},
        {MT_OBJECTIVE_CLASSIFICATION, 2, "{\"label\": 1}", "missing \"text\""},
        {MT_OBJECTIVE_CLASSIFICATION, 1, "{\"text\": \"a\", \"label\": NaN}",
         "label: must be a finite number"},
        {MT_OBJECTIVE_TOKEN_CLASSIFICATION, 2, "{\"tokens\": [\"a\", \"b\"], \"ner_tags\": [0]}",
         "ner_tags: 1 labels for 2 words"},
        {MT_OBJECTIVE_TOKEN_CLASSIFICATION, 2, "{\"tokens\": [\"a\", \"\"], \"labels\": [0, 1]}",
         "tokens[1]: an empty word"},
        {MT_OBJECTIVE_TOKEN_CLASSIFICATION, 2, "{\"tokens\": [\"a\"], \"labels\": [7]}",
         "labels[0]: class 7"},
        {MT_OBJECTIVE_QUESTION_ANSWERING, 0, "{\"question\": \"q\", \"context\": \"c\"}",
         "missing \"answers\""},
        {MT_OBJECTIVE_QUESTION_ANSWERING, 0,
         "{\"question\": \"q\", \"context\": \"c\", \"answers\": {\"text\": [\"c\"], "
         "\"answer_start\": [\"0\"]}}",
         "answers.answer_start[0]"},
        {MT_OBJECTIVE_QUESTION_ANSWERING, 0,
         "{\"question\": \"q\", \"context\": \"c\", \"answers\": {", "malformed JSON"},
    };
    static const char *const good[MT_OBJECTIVE_COUNT] = {
        "", "{\"chosen\": [" U("a") "], \"rejected\": [" U("b") "]}",
        "{\"text\": \"a\", \"label\": 1}", "{\"tokens\": [\"a\"], \"labels\": [1]}",
        "{\"question\": \"q\", \"context\": \"c\", \"answers\": {\"text\": [\"c\"], "
        "\"answer_start\": [0]}}"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[1024];
        snprintf(text, sizeof(text), "%s\n%s\n%s\n", good[cases[i].obj], cases[i].line2,
                 good[cases[i].obj]);
        int rc = build(&e, "e.jsonl", text, cases[i].obj, cases[i].num_labels, NULL, 0, 512,
                       MT_TRUNC_DROP, false, &d, path, err);
        EXPECT(rc != 0, "case %zu (%s) built", i, cases[i].want);
        expect_err(err, path, 2, cases[i].want, cases[i].want);
        /* skip_bad: counted, the good records kept */
        rc = build(&e, "e.jsonl", text, cases[i].obj, cases[i].num_labels, NULL, 0, 512,
                   MT_TRUNC_DROP, true, &d, path, err);
        const int64_t per = cases[i].obj == MT_OBJECTIVE_REWARD ? 2 : 1;
        EXPECT(rc == 0 && d.n_skipped == 1 && d.n_lines == 3 && d.n_samples == 2 * per,
               "case %zu skip_bad: %lld skipped, %lld samples %s", i, (long long)d.n_skipped,
               (long long)d.n_samples, err);
        data_free(&d);
    }
    /* sft is not a head objective; classification needs num_labels */
    int rc = build(&e, "e.jsonl", "", MT_OBJECTIVE_SFT, 0, NULL, 0, 512, MT_TRUNC_DROP, false, &d,
                   path, err);
    EXPECT(rc != 0 && has(err, "not a head objective"), "sft: %s", err);
    rc = build(&e, "e.jsonl", "", MT_OBJECTIVE_CLASSIFICATION, 0, NULL, 0, 512, MT_TRUNC_DROP,
               false, &d, path, err);
    EXPECT(rc != 0 && has(err, "num_labels"), "num_labels 0: %s", err);
    EXPECT(
        mt_objective_parse("question_answering") == MT_OBJECTIVE_QUESTION_ANSWERING &&
            mt_objective_parse("ner") == -1 &&
            !strcmp(mt_objective_name(MT_OBJECTIVE_TOKEN_CLASSIFICATION), "token_classification") &&
            has(mt_objective_list(), "reward"),
        "objective names");
    env_close(&e);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_head_reward", test_reward},
    {"data_head_classification", test_classification},
    {"data_head_token_classification", test_token_classification},
    {"data_head_qa", test_qa},
    {"data_head_errors", test_errors},
};
MT_TEST_MAIN(cases)
