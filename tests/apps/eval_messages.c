/* eval_messages.c: evaluation on the user's own chat data (eval/messages_eval.h).
 * eval_messages_match: the metrics against values worked out from their definitions in Python
 *   (normalised: " ".join(s.lower().split()).strip(string.punctuation + " "); regex: re.search's
 *   group 1 or group 0), including where they part from lm-eval's exact_match.
 * eval_messages_prompt: a record's prompt is the conversation before its reference rendered with
 *   the generation prompt, and with a shot the shot's turns after the system message: both equal
 *   transformers' renderings of the same turns (tests/fixtures/template/chat_cases.json); a
 *   record that does not end with an assistant message is refused naming its line.
 * eval_messages_task: a tiny fine-tune (recipes/configs/tiny.json, 100 steps on 16 synthetic
 *   conversations: which sound an animal makes, 4 phrasings) with eval.generate_task = "messages"
 *   on its training file; minimax-eval --task messages on the export reports the same results,
 *   byte for byte, the model has learned the answers (exact match >= 14 / 16), and on a file of
 *   references written in other forms each metric counts what its definition gives (1, 3, 4 and 2
 *   of 5); the shots overlap warning; the refusals. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/file_io.h"
#include "data/chat.h"
#include "data/chat_cli.h"
#include "eval/messages_eval.h"
#include "tests/support/data_util.h"
#include "tests/support/harness.h"

static int test_eval_messages_match(void) {
    static const struct {
        const char *in, *norm;
    } norms[] = {
        {"  Hello,   World!! ", "hello, world"},
        {"\"Quack.\"\n", "quack"},
        {"a.b", "a.b"},
        {"...", ""},
        {"\tMoo\t moo\n", "moo moo"},
        {"Ünïcode ÄB", "Ünïcode Äb"}, /* ASCII letters only, as the definition says */
    };
    for (size_t k = 0; k < sizeof(norms) / sizeof(norms[0]); k++) {
        char *n = mt_match_normalize(norms[k].in);
        EXPECT(!strcmp(n, norms[k].norm), "normalize(\"%s\") = \"%s\", want \"%s\"", norms[k].in, n,
               norms[k].norm);
        free(n);
    }
    mt_match m;
    char err[512];
    static const char *const names[2] = {"--metric", "--answer-regex"};
    EXPECT(mt_match_init(&m, NULL, "answer: *([0-9]+)", names, err, sizeof(err)) == 0, "%s", err);
    EXPECT(m.metric == MT_MATCH_REGEX, "a regex makes regex the default metric");
    static const struct {
        const char *answer, *ref;
        bool hit[MT_MATCH_COUNT]; /* exact, normalized, contains, regex */
    } cases[] = {
        {"answer: 42", "answer: 42", {true, true, true, true}},
        {"Answer: 42.", "answer: 42", {false, true, true, false}}, /* the regex is case-sensitive */
        {"so the answer: 42, I think", "answer: 42", {false, false, true, true}},
        {"answer:42", "answer: 42", {false, false, false, true}},
        {"answer: 7", "answer: 42", {false, false, false, false}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        bool hit[MT_MATCH_COUNT];
        mt_match_score(&m, cases[k].answer, cases[k].ref, hit);
        for (int j = 0; j < MT_MATCH_COUNT; j++)
            EXPECT(hit[j] == cases[k].hit[j], "\"%s\" vs \"%s\": %s %d, want %d", cases[k].answer,
                   cases[k].ref, mt_match_metric_name((mt_match_metric)j), hit[j], cases[k].hit[j]);
    }
    EXPECT(!mt_match_reference_usable(&m, "no number", err, sizeof(err)) &&
               has(err, "finds nothing in the reference \"no number\""),
           "a reference the regex cannot read: %s", err);
    char *x = mt_match_extract(&m, "x answer:  17 y");
    EXPECT(x && !strcmp(x, "17"), "the first group: %s", x ? x : "(none)");
    free(x);
    mt_match_free(&m);
    /* no group: the whole match */
    EXPECT(mt_match_init(&m, "exact", "[0-9]+", names, err, sizeof(err)) == 0, "%s", err);
    x = mt_match_extract(&m, "a 12 b 34");
    EXPECT(x && !strcmp(x, "12") && m.metric == MT_MATCH_EXACT, "the whole match: %s",
           x ? x : "(none)");
    free(x);
    mt_match_free(&m);
    EXPECT(mt_match_init(&m, "regex", NULL, names, err, sizeof(err)) != 0 &&
               has(err, "--metric regex needs --answer-regex"),
           "regex without a pattern: %s", err);
    EXPECT(mt_match_init(&m, "fuzzy", NULL, names, err, sizeof(err)) != 0 &&
               has(err, "--metric is exact, normalized, contains or regex, got \"fuzzy\""),
           "an unknown metric: %s", err);
    EXPECT(mt_match_init(&m, NULL, "([0-9]", names, err, sizeof(err)) != 0 &&
               has(err, "--answer-regex \"([0-9]\" is not a POSIX extended regular expression"),
           "a bad regex: %s", err);
    return MT_TEST_OK;
}

static const cJSON *case_named(const cJSON *cases, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        if (!strcmp(cJSON_GetObjectItem(c, "name")->valuestring, name)) return c;
    }
    MT_CHECK(false, "chat_cases.json: no case %s", name);
    return NULL;
}

/* The fixture case's messages ({"role", "text"}) as a messages record, first..last-1, with an
 * assistant reference "R" appended when ref. */
static char *case_record(const cJSON *c, int first, int last, bool ref) {
    cJSON *rec = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(rec, "messages");
    const cJSON *m = cJSON_GetObjectItem(c, "messages");
    for (int i = first; i < last; i++) {
        const cJSON *x = cJSON_GetArrayItem(m, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", cJSON_GetObjectItem(x, "role")->valuestring);
        cJSON_AddStringToObject(o, "content", cJSON_GetObjectItem(x, "text")->valuestring);
        cJSON_AddItemToArray(msgs, o);
    }
    if (ref) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", "assistant");
        cJSON_AddStringToObject(o, "content", "R");
        cJSON_AddItemToArray(msgs, o);
    }
    char *s = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
    return s;
}

static int test_eval_messages_prompt(void) {
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    const cJSON *gp = case_named(cases, "generation_prompt"), *mt = case_named(cases, "multi_turn");
    char dir[4096], path[4200], err[MT_ERR_LEN + 4096];
    make_tmpdir(dir, sizeof(dir));
    /* data: the generation_prompt case's system + user turns and a reference; shots: the
     * multi_turn case's first exchange (its system turn is left out of the prompt) */
    char *rec = case_record(gp, 0, 2, true), *shot = case_record(mt, 0, 3, false);
    snprintf(path, sizeof(path), "%s/data.jsonl", dir);
    mt_strbuf b = {0};
    mt_strbuf_append(&b, rec, strlen(rec));
    mt_strbuf_append(&b, "\n", 1);
    write_text(path, b.p);
    mt_msgs_set set, shots;
    EXPECT(mt_msgs_read(path, &set, err, sizeof(err)) == 0, "%s", err);
    snprintf(path, sizeof(path), "%s/shots.jsonl", dir);
    write_text(path, shot);
    EXPECT(mt_msgs_read(path, &shots, err, sizeof(err)) == 0, "%s", err);
    mt_chat_template *t = mt_chat_cli_open(tokenizer_dir(), NULL, NULL, err, sizeof(err));
    MT_CHECK(t, "%s", err);
    EXPECT(set.n == 1 && !strcmp(set.reference[0], "R") &&
               !strcmp(set.question[0],
                       cJSON_GetObjectItem(
                           cJSON_GetArrayItem(cJSON_GetObjectItem(gp, "messages"), 1), "text")
                           ->valuestring),
           "the reference and the question of the record");
    mt_chat_rendered r = {0};
    EXPECT(mt_msgs_render(t, &set, 0, NULL, 0, &r, err, sizeof(err)) == 0, "%s", err);
    const char *want = cJSON_GetObjectItem(gp, "rendered")->valuestring;
    EXPECT(r.text && !strcmp(r.text, want), "zero-shot prompt:\n%s\nwant (transformers):\n%s",
           r.text ? r.text : "", want);
    mt_chat_rendered_free(&r);
    /* 1-shot: system, the shot's user + assistant, the question: multi_turn's rendering up to
     * its last assistant turn, then the generation prompt (the Text-01 template renders each
     * message on its own) */
    const char *mtr = cJSON_GetObjectItem(mt, "rendered")->valuestring;
    const char *gen = "<beginning_of_sentence>ai name=assistant\n";
    const char *last = NULL;
    for (const char *p = strstr(mtr, gen); p; p = strstr(p + 1, gen)) last = p;
    MT_CHECK(last, "multi_turn has no assistant turn");
    mt_strbuf w = {0};
    mt_strbuf_append(&w, mtr, (size_t)(last - mtr));
    mt_strbuf_append(&w, gen, strlen(gen));
    /* multi_turn's second question is not generation_prompt's: take multi_turn's own as data */
    char *rec2 = case_record(mt, 0, 4, true);
    snprintf(path, sizeof(path), "%s/data2.jsonl", dir);
    write_text(path, rec2);
    mt_msgs_set set2;
    EXPECT(mt_msgs_read(path, &set2, err, sizeof(err)) == 0, "%s", err);
    /* the record's own earlier exchange stays; the shot goes after the system turn: for the
     * expected text, the record without its earlier exchange */
    char *rec3 = case_record(mt, 3, 4, true), *sys = case_record(mt, 0, 1, false);
    cJSON *r3 = cJSON_Parse(rec3), *s1 = cJSON_Parse(sys);
    cJSON_InsertItemInArray(
        cJSON_GetObjectItem(r3, "messages"), 0,
        cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(s1, "messages"), 0), true));
    char *rec4 = cJSON_PrintUnformatted(r3);
    snprintf(path, sizeof(path), "%s/data4.jsonl", dir);
    write_text(path, rec4);
    mt_msgs_set set4;
    EXPECT(mt_msgs_read(path, &set4, err, sizeof(err)) == 0, "%s", err);
    EXPECT(mt_msgs_render(t, &set4, 0, &shots, 1, &r, err, sizeof(err)) == 0, "%s", err);
    EXPECT(r.text && !strcmp(r.text, w.p), "1-shot prompt:\n%s\nwant (transformers):\n%s",
           r.text ? r.text : "", w.p);
    mt_chat_rendered_free(&r);
    /* the multi-turn record's own prompt, zero-shot, is the same text */
    EXPECT(mt_msgs_render(t, &set2, 0, NULL, 0, &r, err, sizeof(err)) == 0 && r.text &&
               !strcmp(r.text, w.p),
           "multi-turn prompt:\n%s", r.text ? r.text : "");
    mt_chat_rendered_free(&r);
    /* refusals: a record ending with a user turn; a reference with no text */
    snprintf(path, sizeof(path), "%s/bad.jsonl", dir);
    write_text(path, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
                     "\"assistant\", \"content\": \"b\"}]}\n{\"messages\": [{\"role\": \"user\", "
                     "\"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, "
                     "{\"role\": \"user\", \"content\": \"c\"}]}\n");
    mt_msgs_set bad;
    EXPECT(mt_msgs_read(path, &bad, err, sizeof(err)) != 0 &&
               has(err, "bad.jsonl:2: the conversation must end with an assistant message") &&
               has(err, "it ends with a \"user\" message"),
           "a record without a reference: %s", err);
    write_text(path, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
                     "\"assistant\", \"content\": \"\", \"reasoning_content\": \"r\"}]}\n");
    EXPECT(mt_msgs_read(path, &bad, err, sizeof(err)) != 0 &&
               has(err, "bad.jsonl:1: messages[1], the reference, has no text content"),
           "a reference without text: %s", err);
    mt_msgs_set_free(&set);
    mt_msgs_set_free(&set2);
    mt_msgs_set_free(&set4);
    mt_msgs_set_free(&shots);
    mt_chat_template_free(t);
    mt_strbuf_free(&b);
    mt_strbuf_free(&w);
    free(rec);
    free(rec2);
    free(rec3);
    free(rec4);
    free(sys);
    free(shot);
    cJSON_Delete(r3);
    cJSON_Delete(s1);
    cJSON_Delete(root);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* `cmd` with stdout and stderr into out (malloc'ed, NUL-terminated); the exit status. */
static int run_cmd(const char *cmd, char **out) {
    mt_strbuf b = {0};
    char full[16384], buf[4096];
    snprintf(full, sizeof(full), "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    MT_CHECK(p, "cannot run %s", cmd);
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) mt_strbuf_append(&b, buf, n);
    const int st = pclose(p);
    *out = strdup(b.p ? b.p : "");
    mt_strbuf_free(&b);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *const animals[4][2] = {
    {"cat", "meow"}, {"dog", "woof"}, {"cow", "moo"}, {"duck", "quack"}};
static const char *const forms[4] = {"What does the %s say?", "Which sound does a %s make?",
                                     "The %s says what?", "Tell me what a %s says."};

static void write_record(mt_strbuf *b, const char *question, const char *ref) {
    cJSON *rec = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(rec, "messages");
    cJSON *u = cJSON_CreateObject(), *a = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", question);
    cJSON_AddStringToObject(a, "role", "assistant");
    cJSON_AddStringToObject(a, "content", ref);
    cJSON_AddItemToArray(msgs, u);
    cJSON_AddItemToArray(msgs, a);
    char *s = cJSON_PrintUnformatted(rec);
    mt_strbuf_append(b, s, strlen(s));
    mt_strbuf_append(b, "\n", 1);
    free(s);
    cJSON_Delete(rec);
}

/* The per-sample lines of path: the count of "key": true. */
static int count_true(const char *path, const char *key) {
    char err[MT_ERR_LEN];
    char *text = mt_file_read(path, NULL, err);
    MT_CHECK(text, "%s", err);
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        n += cJSON_IsTrue(cJSON_GetObjectItem(j, key));
        cJSON_Delete(j);
    }
    free(text);
    return n;
}

static int test_eval_messages_task(void) {
    const char *train = getenv("MT_TRAIN_CLI"), *eval = getenv("MT_EVAL_CLI");
    MT_CHECK(train && eval, "MT_TRAIN_CLI / MT_EVAL_CLI not set; run through ctest");
    char dir[1024], path[1200], cmd[16384];
    make_tmpdir(dir, sizeof(dir));
    mt_strbuf b = {0};
    char q[256];
    for (int f = 0; f < 4; f++)
        for (int a = 0; a < 4; a++) {
            snprintf(q, sizeof(q), forms[f], animals[a][0]);
            write_record(&b, q, animals[a][1]);
        }
    snprintf(path, sizeof(path), "%s/chat.jsonl", dir);
    write_text(path, b.p);
    mt_strbuf_free(&b);
    /* the fine-tune, evaluated on its data at the end by the trainer */
    snprintf(cmd, sizeof(cmd),
             "'%s' recipes/tiny.toml --set data.path=%s/chat.jsonl --set data.eval_samples=0 "
             "--set data.max_length=128 --set train.max_steps=100 --set train.eval_steps=0 "
             "--set train.eval_on_start=false --set train.learning_rate=5e-3 --set "
             "train.warmup_steps=5 --set eval.generate_data=%s/chat.jsonl --set "
             "eval.generate_task=messages --set eval.generate_samples=0 --set "
             "eval.generate_max_new_tokens=8 --set output.dir=%s/run --set data.cache_dir=%s/cache "
             "--set dist.arena_mb=256",
             train, dir, dir, dir, dir);
    char *out;
    int rc = run_cmd(cmd, &out);
    EXPECT(rc == 0 && has(out, "eval after step 100: exact match "), "training (exit %d):\n%s", rc,
           out);
    free(out);
    /* minimax-eval on the export: the trainer's results, byte for byte */
    snprintf(cmd, sizeof(cmd),
             "'%s' --model %s/run/checkpoint-100 --data %s/chat.jsonl --task messages "
             "--max-new-tokens 8 --out %s/eval.jsonl",
             eval, dir, dir, dir);
    rc = run_cmd(cmd, &out);
    EXPECT(rc == 0 && has(out, "messages exact "), "minimax-eval (exit %d):\n%s", rc, out);
    free(out);
    char err[MT_ERR_LEN], p1[4200], p2[4200];
    snprintf(p1, sizeof(p1), "%s/run/eval-generate-100.jsonl", dir);
    snprintf(p2, sizeof(p2), "%s/eval.jsonl", dir);
    char *a = mt_file_read(p1, NULL, err), *e = a ? mt_file_read(p2, NULL, err) : NULL;
    EXPECT(a && e && !strcmp(a, e), "the trainer's results differ from minimax-eval's");
    free(a);
    free(e);
    const int exact = count_true(p2, "exact");
    printf("the fine-tune: exact match %d / 16 on its training conversations\n", exact);
    EXPECT(exact >= 14, "the fine-tune learned %d of 16 answers", exact);
    /* references in other forms: exact, normalized, contains, regex hits worked out by hand
     * from each metric's definition for the learned answers */
    static const char *const refs[5][2] = {
        {"cat", "meow"}, {"dog", "Woof!"}, {"cow", "  moo "}, {"duck", "qua"}, {"cat", "purr"}};
    mt_strbuf c = {0};
    for (int k = 0; k < 5; k++) {
        snprintf(q, sizeof(q), forms[0], refs[k][0]);
        write_record(&c, q, refs[k][1]);
    }
    snprintf(path, sizeof(path), "%s/forms.jsonl", dir);
    write_text(path, c.p);
    mt_strbuf_free(&c);
    snprintf(cmd, sizeof(cmd),
             "'%s' --model %s/run/checkpoint-100 --data %s/forms.jsonl --task messages "
             "--max-new-tokens 8 --answer-regex '([a-z]+)' --out %s/forms-out.jsonl",
             eval, dir, dir, dir);
    rc = run_cmd(cmd, &out);
    printf("%s", out);
    EXPECT(rc == 0 && has(out, "messages regex 40.00% (2 / 5)") &&
               has(out, "exact 20.00% (1), normalized 60.00% (3), contains 80.00% (4), regex "
                        "40.00% (2)"),
           "the metrics on forms.jsonl (exit %d):\n%s", rc, out);
    free(out);
    snprintf(path, sizeof(path), "%s/forms-out.jsonl", dir);
    EXPECT(count_true(path, "normalized") == 3 && count_true(path, "correct") == 2,
           "forms-out.jsonl's per-sample metrics");
    /* shots from the evaluated file: warned */
    snprintf(cmd, sizeof(cmd),
             "'%s' --model %s/run/checkpoint-100 --data %s/chat.jsonl --task messages "
             "--max-new-tokens 8 --limit 6 --shots 2 --shots-file %s/chat.jsonl",
             eval, dir, dir, dir);
    rc = run_cmd(cmd, &out);
    EXPECT(rc == 0 && has(out, "warning: 2 of the 6 samples evaluated (the first: sample 0, line "
                               "1) have the question of one of the 2 shots"),
           "the overlap warning (exit %d):\n%s", rc, out);
    free(out);
    /* refusals, one line each: a reference the regex cannot read, a regex for GSM8K, a task */
    snprintf(cmd, sizeof(cmd),
             "'%s' --model %s/run/checkpoint-100 --data %s/forms.jsonl --task messages "
             "--answer-regex '^([a-z]+)'",
             eval, dir, dir);
    rc = run_cmd(cmd, &out);
    EXPECT(rc == 1 && has(out, "question 1 (line 2): the answer regex finds nothing in the "
                               "reference \"Woof!\""),
           "a reference the regex cannot read (exit %d):\n%s", rc, out);
    free(out);
    snprintf(cmd, sizeof(cmd),
             "'%s' --model %s/run/checkpoint-100 --data %s/forms.jsonl --answer-regex x", eval, dir,
             dir);
    rc = run_cmd(cmd, &out);
    EXPECT(rc == 1 && has(out, "--answer-regex is for --task messages"), "(exit %d):\n%s", rc, out);
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' --model %s/run/checkpoint-100 --data %s/forms.jsonl --task qa",
             eval, dir, dir);
    rc = run_cmd(cmd, &out);
    EXPECT(rc == 1 && has(out, "--task gsm8k (the default"), "(exit %d):\n%s", rc, out);
    free(out);
    snprintf(cmd, sizeof(cmd),
             "'%s' recipes/tiny.toml --set eval.generate_task=messages --set "
             "output.dir=%s/run-bad",
             train, dir);
    rc = run_cmd(cmd, &out);
    EXPECT(rc != 0 && has(out, "eval.generate_task: \"messages\" needs a file of conversations"),
           "eval.generate_task with synthetic problems (exit %d):\n%s", rc, out);
    free(out);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_messages_match", test_eval_messages_match},
    {"eval_messages_prompt", test_eval_messages_prompt},
    {"eval_messages_task", test_eval_messages_task},
};
MT_TEST_MAIN(cases)
