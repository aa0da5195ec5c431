/* eval_chat_template.c: the chat template of minimax-generate --prompt and minimax-chat
 * (data/chat_cli.h), on a random 1-layer model of recipes/configs/tiny.json.
 *
 * eval_chat_template_flags: --chat-template FILE renders the prompt instead of the directory's
 * template, with the variables of --template-kwargs (a template that prints them: the prompt
 * ids are the tokenization of the text it must render, in generate's one turn and in chat's
 * conversation with a system turn and an earlier reply); without the flags the test tokenizer's
 * template gives transformers' ids; a tokenizer directory whose tokenizer_config.json holds
 * another template is rendered with it; a turn the template refuses (raise_exception) is one
 * line and the chat goes on; and the bad values (no chat_template in the directory, a missing
 * or invalid template file, kwargs that are not a JSON object or set a reserved name, the flags
 * with --ids) fail with one line naming the flag or the file.
 * eval_chat_template_released: MiniMax-M2's and M3's released templates (../shared/templates,
 * skipped without them) with the tokenizers of tests/fixtures/tokenizer_m2 and _m3 (which have
 * no chat_template): the prompt ends with the generation prompt transformers renders
 * (tests/fixtures/chat/multiturn_expected.json), M3's following --template-kwargs'
 * thinking_mode; minimax-chat's prompt is minimax-generate's.
 * eval_chat_reasoning: minimax-chat and minimax-eval with a reply format (models/reply.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "data/chat.h"
#include "core/file_io.h"
#include "data/tokenizer.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"

static char ct_out[1 << 16], ct_err[1 << 14];

static void ct_slurp(const char *path, char *buf, size_t n) {
    char err[MT_ERR_LEN];
    char *s = mt_file_read(path, NULL, err);
    snprintf(buf, n, "%s", s ? s : "");
    free(s);
}

/* `$env args < input`: stdout in ct_out, stderr in ct_err; the exit status. */
static int ct_run(const char *dir, const char *env, const char *args, const char *input) {
    const char *exe = getenv(env);
    MT_CHECK(exe && *exe, "%s not set; run through ctest", env);
    char cmd[20000], in[4200], out[4200], err[4200];
    snprintf(in, sizeof(in), "%s/ct.in", dir);
    snprintf(out, sizeof(out), "%s/ct.out", dir);
    snprintf(err, sizeof(err), "%s/ct.err", dir);
    write_text(in, input ? input : "");
    snprintf(cmd, sizeof(cmd), "'%s' %s <'%s' >'%s' 2>'%s'", exe, args, in, out, err);
    const int st = system(cmd);
    ct_slurp(out, ct_out, sizeof(ct_out));
    ct_slurp(err, ct_err, sizeof(ct_err));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The number of lines of s. */
static int ct_lines(const char *s) {
    int n = 0;
    for (; (s = strchr(s, '\n')); s++) n++;
    return n;
}

/* Whether the JSON id list a is text's tokenization by tok. */
static bool ct_ids_are(const cJSON *a, const mt_tokenizer *tok, const char *text) {
    mt_token_buf buf = {0};
    mt_tokenizer_encode(tok, text, strlen(text), &buf);
    bool same = cJSON_GetArraySize(a) == buf.n;
    for (int i = 0; same && i < buf.n; i++)
        same = (int32_t)cJSON_GetArrayItem(a, i)->valuedouble == buf.ids[i];
    mt_token_buf_free(&buf);
    return same;
}

/* The ids of a JSON list decoded with the special tokens kept (malloc'ed). */
static char *ct_decode(const cJSON *a, const mt_tokenizer *tok) {
    const int n = cJSON_GetArraySize(a);
    int32_t *ids = mt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1), "ids");
    for (int i = 0; i < n; i++) ids[i] = (int32_t)cJSON_GetArrayItem(a, i)->valuedouble;
    char *text = mt_tokenizer_decode(tok, ids, n, false);
    free(ids);
    return text;
}

/* The prompt_ids of line `line` (0-based) of ct_out, a JSON object per line: a new cJSON list
 * (NULL when there is no such line). */
static cJSON *ct_prompt_ids(int line) {
    const char *p = ct_out;
    for (int i = 0; i < line && p; i++) p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    if (!p || !*p) return NULL;
    cJSON *o = cJSON_ParseWithLength(p, strcspn(p, "\n"));
    cJSON *ids = cJSON_DetachItemFromObject(o, "prompt_ids");
    cJSON_Delete(o);
    return ids;
}

/* The text of line `line` of ct_out (a minimax-chat --json turn), malloc'ed ("" when none). */
static char *ct_turn_text(int line) {
    const char *p = ct_out;
    for (int i = 0; i < line && p; i++) p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    cJSON *o = p && *p ? cJSON_ParseWithLength(p, strcspn(p, "\n")) : NULL;
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(o, "text"));
    char *s = strdup(t ? t : "");
    cJSON_Delete(o);
    return s;
}

/* A template that shows what it was given: every message as <<role:content>>, then the
 * generation prompt with the kwarg `greeting` and the special token eos_token. */
#define CT_MARK                                                                                    \
    "{%- for m in messages %}<<{{ m.role }}:{{ m.content }}>>{% endfor -%}\n"                      \
    "{%- if add_generation_prompt %}[{{ greeting }}|{{ eos_token }}]{% endif %}"

/* The failure of a bad value: exit status st (1, or 2 for usage), one line on stderr holding
 * both parts. */
static void ct_expect_refused(int st, int want, const char *what, const char *part1,
                              const char *part2) {
    EXPECT(st == want && has(ct_err, part1) && has(ct_err, part2) && ct_lines(ct_err) == 1,
           "%s: exit %d (want %d), stderr: %s", what, st, want, ct_err);
    if (st == want) printf("  %s: %s", what, ct_err);
}

/* --chat-template and --template-kwargs in minimax-generate --prompt. */
static void ct_generate_flags(const char *dir, const char *model, const char *mark,
                              const mt_tokenizer *tok) {
    char a[16384];
    snprintf(a, sizeof(a),
             "--model '%s' --prompt 'hi' --max-new-tokens 2 --json --chat-template '%s' "
             "--template-kwargs '{\"greeting\": \"hola\"}'",
             model, mark);
    EXPECT(ct_run(dir, "MT_GENERATE_CLI", a, NULL) == 0, "generate: %s", ct_err);
    cJSON *ids = ct_prompt_ids(0);
    EXPECT(ct_ids_are(ids, tok, "<<user:hi>>[hola|<end_of_sentence>]"),
           "generate --chat-template --template-kwargs: the prompt is not the file's rendering");
    cJSON_Delete(ids);
    snprintf(a, sizeof(a),
             "--model '%s' --prompt 'hi' --max-new-tokens 2 --json --chat-template '%s'", model,
             mark);
    EXPECT(ct_run(dir, "MT_GENERATE_CLI", a, NULL) == 0, "generate: %s", ct_err);
    ids = ct_prompt_ids(0);
    EXPECT(ct_ids_are(ids, tok, "<<user:hi>>[|<end_of_sentence>]"),
           "generate --chat-template without kwargs: not the file's rendering");
    cJSON_Delete(ids);
    /* without the flags: the directory's (Text-01) template, as transformers renders it */
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")),
                   "generation_prompt_no_system"))
            continue;
        const char *q = cJSON_GetStringValue(
            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "messages"), 0), "text"));
        snprintf(a, sizeof(a), "--model '%s' --prompt '%s' --max-new-tokens 2 --json", model, q);
        EXPECT(ct_run(dir, "MT_GENERATE_CLI", a, NULL) == 0, "generate: %s", ct_err);
        ids = ct_prompt_ids(0);
        char *got = cJSON_PrintUnformatted(ids),
             *want = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "input_ids"));
        EXPECT(got && !strcmp(got, want), "generate, the directory's template: %s, want %s", got,
               want);
        free(got);
        free(want);
        cJSON_Delete(ids);
    }
    cJSON_Delete(root);
    printf("minimax-generate: --chat-template renders the prompt, --template-kwargs its "
           "variables; without them the directory's template (transformers' ids)\n");
}

/* --chat-template and --template-kwargs in minimax-chat: a system turn, two turns (the first
 * reply in the second's prompt); a turn the template refuses. */
static void ct_chat_flags(const char *dir, const char *model, const char *mark,
                          const mt_tokenizer *tok) {
    char a[16384], want[1 << 13];
    snprintf(a, sizeof(a),
             "--model '%s' --json --max-new-tokens 3 --system 'S' --chat-template '%s' "
             "--template-kwargs '{\"greeting\": \"hola\"}'",
             model, mark);
    EXPECT(ct_run(dir, "MT_CHAT_CLI", a, "q1\nq2\n") == 0, "chat: %s", ct_err);
    cJSON *ids = ct_prompt_ids(0);
    EXPECT(ct_ids_are(ids, tok, "<<system:S>><<user:q1>>[hola|<end_of_sentence>]"),
           "chat turn 1: not the file's rendering: %s", ct_out);
    cJSON_Delete(ids);
    char *reply = ct_turn_text(0);
    snprintf(want, sizeof(want), "<<system:S>><<user:q1>><<assistant:%s>><<user:q2>>[hola|%s]",
             reply, "<end_of_sentence>");
    ids = ct_prompt_ids(1);
    EXPECT(ct_ids_are(ids, tok, want), "chat turn 2: not the file's rendering of %s", want);
    cJSON_Delete(ids);
    free(reply);
    /* raise_exception on one turn: its line, the turn dropped, the next one answered */
    char refuse[4400];
    snprintf(refuse, sizeof(refuse), "%s/refuse.jinja", dir);
    write_text(refuse, "{% if messages[-1].content == 'boom' %}{{ raise_exception('no boom "
                       "here') }}{% endif %}" CT_MARK);
    snprintf(a, sizeof(a), "--model '%s' --json --max-new-tokens 2 --chat-template '%s'", model,
             refuse);
    EXPECT(ct_run(dir, "MT_CHAT_CLI", a, "boom\nhi\n") == 0, "chat: %s", ct_err);
    ids = ct_prompt_ids(0);
    EXPECT(has(ct_err, "no boom here") && ct_lines(ct_err) == 1 && ct_lines(ct_out) == 1 &&
               ct_ids_are(ids, tok, "<<user:hi>>[|<end_of_sentence>]"),
           "a refused turn: stderr %s, stdout %s", ct_err, ct_out);
    cJSON_Delete(ids);
    printf("minimax-chat: the conversation in the file's template with the kwargs; a refused "
           "turn: %s",
           ct_err);
}

/* A tokenizer directory of the test tokenizer's tokenizer.json and a tokenizer_config.json
 * holding tmpl (NULL: no chat_template), in dir/name; its path in out. */
static void ct_tok_dir(const char *dir, const char *name, const char *tmpl, char *out, size_t n) {
    snprintf(out, n, "%s/%s", dir, name);
    MT_CHECK(mkdir(out, 0755) == 0, "cannot make %s", out);
    char src[4400], dst[4400], err[MT_ERR_LEN];
    snprintf(src, sizeof(src), "%s/tokenizer.json", tokenizer_dir());
    snprintf(dst, sizeof(dst), "%s/tokenizer.json", out);
    size_t len = 0;
    char *bytes = mt_file_read(src, &len, err);
    MT_CHECK(bytes, "%s", err);
    write_bytes(dst, bytes, len);
    free(bytes);
    write_config(out, tmpl);
}

static int test_eval_chat_template_flags(void) {
    char dir[4096], model[4200], mark[4400], path[4400], a[16384], other[4400], none[4400];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    snprintf(path, sizeof(path), "%s/tokenizer.json", model);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    snprintf(mark, sizeof(mark), "%s/mark.jinja", dir);
    write_text(mark, CT_MARK);
    ct_generate_flags(dir, model, mark, tok);
    ct_chat_flags(dir, model, mark, tok);

    /* another template in tokenizer_config.json: accepted, rendered with it (no eos_token) */
    ct_tok_dir(dir, "other", CT_MARK, other, sizeof(other));
    snprintf(a, sizeof(a), "--model '%s' --tokenizer '%s' --json --max-new-tokens 2", model, other);
    EXPECT(ct_run(dir, "MT_CHAT_CLI", a, "q1\n") == 0, "chat, another template: %s", ct_err);
    cJSON *ids = ct_prompt_ids(0);
    EXPECT(ct_ids_are(ids, tok, "<<user:q1>>[|]"), "another template: not its rendering: %s",
           ct_out);
    cJSON_Delete(ids);
    printf("a tokenizer_config.json with another template: rendered with it\n");

    /* the bad values */
    printf("bad values:\n");
    ct_tok_dir(dir, "none", NULL, none, sizeof(none));
    snprintf(a, sizeof(a), "--model '%s' --tokenizer '%s'", model, none);
    ct_expect_refused(ct_run(dir, "MT_CHAT_CLI", a, "hi\n"), 1, "no chat_template",
                      "none/tokenizer_config.json", "--chat-template");
    snprintf(a, sizeof(a), "--model '%s' --prompt hi --max-new-tokens 1 --tokenizer '%s'", model,
             none);
    ct_expect_refused(ct_run(dir, "MT_GENERATE_CLI", a, NULL), 1, "generate, no chat_template",
                      "none/tokenizer_config.json", "chat_template");
    snprintf(a, sizeof(a),
             "--model '%s' --prompt hi --max-new-tokens 1 --chat-template '%s/no.jinja'", model,
             dir);
    ct_expect_refused(ct_run(dir, "MT_GENERATE_CLI", a, NULL), 1, "a missing template file",
                      "--chat-template", "no.jinja");
    snprintf(path, sizeof(path), "%s/bad.jinja", dir);
    write_text(path, "{% for %}x");
    snprintf(a, sizeof(a), "--model '%s' --chat-template '%s'", model, path);
    ct_expect_refused(ct_run(dir, "MT_CHAT_CLI", a, "hi\n"), 1, "invalid Jinja", "bad.jinja",
                      "--chat-template");
    const char *kw[3] = {"nope", "[1]", "{\"messages\": []}"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof(a), "--model '%s' --template-kwargs '%s'", model, kw[i]);
        ct_expect_refused(ct_run(dir, "MT_CHAT_CLI", a, "hi\n"), 1, kw[i], "--template-kwargs",
                          i == 2 ? "messages" : "JSON object");
    }
    snprintf(path, sizeof(path), "%s/ids.json", dir);
    write_text(path, "[[1, 2]]");
    snprintf(a, sizeof(a), "--model '%s' --ids '%s' --max-new-tokens 1 --chat-template '%s'", model,
             path, mark);
    const int st = ct_run(dir, "MT_GENERATE_CLI", a, NULL);
    EXPECT(st == 2 && has(ct_err, "usage:"), "--ids with --chat-template: exit %d", st);
    mt_tokenizer_free(tok);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ../shared/templates/<name>, or NULL when this checkout has none. */
static const char *ct_shared_template(const char *name) {
    static char p[4096];
    const char *s = getenv("MT_SHARED_DIR");
    snprintf(p, sizeof(p), "%s/templates/%s", s && *s ? s : "../shared", name);
    return file_exists(p) ? p : NULL;
}

static int test_eval_chat_template_released(void) {
    /* the generation prompts transformers renders (multiturn_expected.json's configs) */
    const struct {
        const char *template, *tokenizer, *kwargs, *gen_prompt;
    } cfgs[3] = {
        {"MiniMax-M2.jinja", "tokenizer_m2", NULL, "]~b]ai\n<think>\n"},
        {"MiniMax-M3.jinja", "tokenizer_m3", NULL, "]~b]ai\n"},
        {"MiniMax-M3.jinja", "tokenizer_m3", "{\"thinking_mode\": \"enabled\"}",
         "]~b]ai\n<mm:think>"},
    };
    if (!ct_shared_template("MiniMax-M2.jinja") || !ct_shared_template("MiniMax-M3.jinja")) {
        printf("no ../shared/templates: skipped\n");
        return MT_TEST_SKIP;
    }
    const char *q = "What is 7 times 6?";
    for (int i = 0; i < 3; i++) {
        char dir[4096], model[4200], tokdir[4400], tmpl[4096], a[16384], kw[256] = "";
        snprintf(tmpl, sizeof(tmpl), "%s", ct_shared_template(cfgs[i].template));
        snprintf(tokdir, sizeof(tokdir), "%s/tests/fixtures/%s", source_dir(), cfgs[i].tokenizer);
        if (cfgs[i].kwargs) snprintf(kw, sizeof(kw), "--template-kwargs '%s'", cfgs[i].kwargs);
        make_tmpdir(dir, sizeof(dir));
        /* the tokenizers' special tokens lie past tiny.json's 6144 ids */
        eval_make_model_tok("tiny.json", tokdir, 6160, dir, 1, 0, model, sizeof(model));
        char path[4400];
        snprintf(path, sizeof(path), "%s/tokenizer.json", model);
        mt_tokenizer *tok = mt_tokenizer_load(path);
        /* the directory has no template: refused without the flag */
        snprintf(a, sizeof(a), "--model '%s' --prompt '%s' --max-new-tokens 1 --json", model, q);
        EXPECT(ct_run(dir, "MT_GENERATE_CLI", a, NULL) != 0 &&
                   has(ct_err, "tokenizer_config.json: no chat_template"),
               "%s without --chat-template: %s", cfgs[i].tokenizer, ct_err);
        snprintf(a, sizeof(a),
                 "--model '%s' --prompt '%s' --max-new-tokens 1 --json --chat-template '%s' %s",
                 model, q, tmpl, kw);
        EXPECT(ct_run(dir, "MT_GENERATE_CLI", a, NULL) == 0, "generate: %s", ct_err);
        cJSON *ids = ct_prompt_ids(0);
        char *text = ct_decode(ids, tok);
        const size_t lt = strlen(text), lg = strlen(cfgs[i].gen_prompt);
        EXPECT(has(text, q) && lt >= lg && !strcmp(text + lt - lg, cfgs[i].gen_prompt),
               "%s %s: the prompt does not end with the generation prompt: %s", cfgs[i].template,
               kw, text);
        /* minimax-chat's prompt of the same turn */
        snprintf(a, sizeof(a), "--model '%s' --json --max-new-tokens 1 --chat-template '%s' %s",
                 model, tmpl, kw);
        char input[256];
        snprintf(input, sizeof(input), "%s\n", q);
        EXPECT(ct_run(dir, "MT_CHAT_CLI", a, input) == 0, "chat: %s", ct_err);
        cJSON *chat_ids = ct_prompt_ids(0);
        EXPECT(cJSON_Compare(ids, chat_ids, true), "%s %s: chat's prompt is not generate's",
               cfgs[i].template, kw);
        printf("%s %s: %d prompt tokens ending in the generation prompt; chat's the same\n",
               cfgs[i].template, kw, cJSON_GetArraySize(ids));
        cJSON_Delete(chat_ids);
        cJSON_Delete(ids);
        free(text);
        mt_tokenizer_free(tok);
        rm_tree(dir);
    }
    return MT_TEST_OK;
}

/* The M3 split of a reply whose prompt ends in "<mm:think>" (the released template with
 * thinking_mode "enabled"), transcribed from the template's own split of an assistant turn
 * (content.split('</mm:think>'), each side strip('\n')), for replies without tool-call
 * markup: reasoning up to the first close tag, content after it; no close tag: all reasoning. */
static void ct_m3_split(const char *text, char *reasoning, char *content, size_t n) {
    const char *close = strstr(text, "</mm:think>");
    const char *r0 = text, *r1 = close ? close : text + strlen(text);
    const char *c0 = close ? close + strlen("</mm:think>") : r1, *c1 = c0 + strlen(c0);
    while (r0 < r1 && *r0 == '\n') r0++;
    while (r1 > r0 && r1[-1] == '\n') r1--;
    while (c0 < c1 && *c0 == '\n') c0++;
    while (c1 > c0 && c1[-1] == '\n') c1--;
    snprintf(reasoning, n, "%.*s", (int)(r1 - r0), r0);
    snprintf(content, n, "%.*s", (int)(c1 - c0), c0);
}

/* Field key of line `line` of ct_out as a string (NULL: absent or not a string), malloc'ed. */
static char *ct_turn_field(int line, const char *key) {
    const char *p = ct_out;
    for (int i = 0; i < line && p; i++) p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    cJSON *o = p && *p ? cJSON_ParseWithLength(p, strcspn(p, "\n")) : NULL;
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
    char *s = t ? strdup(t) : NULL;
    cJSON_Delete(o);
    return s;
}

/* minimax-chat and minimax-eval with M3's reply format (--reasoning-parser minimax_m3; the
 * tiny model is of the family without one): chat's reasoning_content and content are the
 * template's split of the reply, the next turn's prompt renders that reasoning back as M3's
 * template does (every assistant turn: <mm:think>R</mm:think>C[e~[), --hide-reasoning keeps it
 * off stdout; minimax-eval reads the answer from the content and counts the completions that
 * ended inside the reasoning. */
static int test_eval_chat_reasoning(void) {
    const char *m3 = ct_shared_template("MiniMax-M3.jinja");
    if (!m3) {
        printf("no ../shared/templates: skipped\n");
        return MT_TEST_SKIP;
    }
    char dir[4096], model[4200], tokdir[4400], tmpl[4096], a[24000], path[4400];
    snprintf(tmpl, sizeof(tmpl), "%s", m3);
    snprintf(tokdir, sizeof(tokdir), "%s/tests/fixtures/tokenizer_m3", source_dir());
    make_tmpdir(dir, sizeof(dir));
    eval_make_model_tok("tiny.json", tokdir, 6160, dir, 1, 0, model, sizeof(model));
    snprintf(path, sizeof(path), "%s/tokenizer.json", model);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    const char *flags = "--template-kwargs '{\"thinking_mode\": \"enabled\"}' "
                        "--reasoning-parser minimax_m3 --max-new-tokens 12";
    snprintf(a, sizeof(a), "--model '%s' --json --chat-template '%s' %s", model, tmpl, flags);
    EXPECT(ct_run(dir, "MT_CHAT_CLI", a, "What is 7 times 6?\nAnd 8 times 9?\n") == 0, "chat: %s",
           ct_err);
    /* turn 1: the reply's ids (special tokens kept, the end of turn left out) split by hand */
    const char *p = ct_out;
    cJSON *o = cJSON_ParseWithLength(p, strcspn(p, "\n"));
    cJSON *ids = cJSON_GetObjectItem(o, "ids");
    const int n = cJSON_GetArraySize(ids), eos = mt_tokenizer_token_to_id(tok, "[e~[");
    if (n > 0 && (int)cJSON_GetArrayItem(ids, n - 1)->valuedouble == eos)
        cJSON_DeleteItemFromArray(ids, n - 1);
    char *text = ct_decode(ids, tok), reasoning[4096], content[4096];
    ct_m3_split(text, reasoning, content, sizeof(reasoning));
    char *got_r = ct_turn_field(0, "reasoning_content"), *got_c = ct_turn_field(0, "content");
    EXPECT(!strstr(text, "]<]minimax[>["), "the reply holds tool-call markup: %s", text);
    EXPECT(got_c && !strcmp(got_c, content), "content %s, the template's split %s",
           got_c ? got_c : "(none)", content);
    EXPECT(*reasoning ? got_r && !strcmp(got_r, reasoning) : !got_r,
           "reasoning_content %s, the template's split %s", got_r ? got_r : "(null)", reasoning);
    /* turn 2's prompt: turn 1 as the template renders an assistant turn with that reasoning */
    cJSON *ids2 = ct_prompt_ids(1);
    char *prompt2 = ct_decode(ids2, tok), turn1[9000];
    if (*reasoning)
        snprintf(turn1, sizeof(turn1), "]~b]ai\n<mm:think>%s</mm:think>%s[e~[\n", reasoning,
                 content);
    else
        snprintf(turn1, sizeof(turn1), "]~b]ai\n</mm:think>%s[e~[\n", content);
    EXPECT(has(prompt2, turn1), "turn 2's prompt lacks turn 1 as the template renders it (%s): %s",
           turn1, prompt2);
    printf("chat: reasoning %zu bytes, content %zu bytes, rendered back in turn 2\n",
           strlen(reasoning), strlen(content));
    /* the stream: the reasoning shown, or hidden */
    snprintf(a, sizeof(a), "--model '%s' --chat-template '%s' %s", model, tmpl, flags);
    EXPECT(ct_run(dir, "MT_CHAT_CLI", a, "What is 7 times 6?\n") == 0, "chat: %s", ct_err);
    EXPECT(!*reasoning || has(ct_out, reasoning), "the stream lacks the reasoning: %s", ct_out);
    snprintf(a, sizeof(a), "--model '%s' --chat-template '%s' %s --hide-reasoning", model, tmpl,
             flags);
    EXPECT(ct_run(dir, "MT_CHAT_CLI", a, "What is 7 times 6?\n") == 0, "chat: %s", ct_err);
    EXPECT(!*reasoning || !has(ct_out, reasoning), "--hide-reasoning shows it: %s", ct_out);
    /* minimax-eval: every line split, the count printed */
    char data[4400], out[4400];
    snprintf(data, sizeof(data), "%s/q.jsonl", dir);
    snprintf(out, sizeof(out), "%s/r.jsonl", dir);
    write_text(data, "{\"question\": \"What is 7 times 6?\", \"answer\": \"7*6=42\\n#### 42\"}\n"
                     "{\"question\": \"And 8 times 9?\", \"answer\": \"#### 72\"}\n");
    snprintf(a, sizeof(a), "--model '%s' --data '%s' --out '%s' --chat-template '%s' %s", model,
             data, out, tmpl, flags);
    EXPECT(ct_run(dir, "MT_EVAL_CLI", a, NULL) == 0, "eval: %s", ct_err);
    ct_slurp(out, ct_out, sizeof(ct_out));
    int ended = 0, lines = 0;
    for (const char *l = ct_out; *l; l = strchr(l, '\n') + 1, lines++) {
        cJSON *j = cJSON_ParseWithLength(l, strcspn(l, "\n"));
        const bool in = cJSON_IsTrue(cJSON_GetObjectItem(j, "ended_in_reasoning"));
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(j, "content"));
        ended += in;
        EXPECT(c && (!in || !*c) && cJSON_GetObjectItem(j, "reasoning"),
               "eval line %d: no split, or content after unfinished reasoning", lines);
        cJSON_Delete(j);
    }
    EXPECT(lines == 2, "%d result lines", lines);
    ct_run(dir, "MT_EVAL_CLI", a, NULL);
    char said[128];
    snprintf(said, sizeof(said), "%d of 2 completions ended inside their reasoning", ended);
    EXPECT(ended == 0 || has(ct_out, said), "eval does not say \"%s\": %s", said, ct_out);
    printf("eval: %d of 2 completions ended inside their reasoning\n", ended);
    free(got_r);
    free(got_c);
    free(text);
    free(prompt2);
    cJSON_Delete(ids2);
    cJSON_Delete(o);
    mt_tokenizer_free(tok);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_chat_template_flags", test_eval_chat_template_flags},
    {"eval_chat_template_released", test_eval_chat_template_released},
    {"eval_chat_reasoning", test_eval_chat_reasoning},
};
MT_TEST_MAIN(cases)
