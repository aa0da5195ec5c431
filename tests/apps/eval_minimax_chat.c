/* eval_minimax_chat.c: minimax-chat end to end on a random 1-layer model of
 * recipes/configs/tiny.json with the test tokenizer, its turns piped on stdin.
 *
 * eval_minimax_chat: three turns and a /reset (--json): each turn's prompt is the whole
 * conversation (the earlier replies as assistant turns) rendered with the chat template and the
 * generation prompt and tokenized, as this test renders it with the test tokenizer's template
 * (data/chat.h, checked against transformers' renderings in the data_chat_* tests); each
 * reply's ids are what
 * minimax-generate's one-prompt greedy decoding gives for that prompt (up to the reply's
 * <end_of_sentence>, where minimax-chat stops); the turn after /reset equals the first; the
 * streamed replies (no --json) are the replies' texts, one per line; --system puts a system
 * turn first and /reset keeps it; sampling with a seed repeats.
 * eval_minimax_chat_errors: no model directory (one line naming it, exit 1), an unknown command
 * and a turn past the model's context (one line each on stderr, the chat goes on); stdin that
 * ends inside a continued turn (a last line ending in '\': one line, exit 1). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "data/chat.h"
#include "core/file_io.h"
#include "data/tokenizer.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"

#define N_NEW 12

static char chat_out[1 << 16], chat_err[1 << 14];

static void chat_slurp(const char *path, char *buf, size_t n) {
    char err[MT_ERR_LEN];
    char *s = mt_file_read(path, NULL, err);
    snprintf(buf, n, "%s", s ? s : "");
    free(s);
}

/* `exe args < input`: stdout in chat_out, stderr in chat_err; the exit status. */
static int chat_run(const char *dir, const char *env, const char *args, const char *input) {
    const char *exe = getenv(env);
    MT_CHECK(exe && *exe, "%s not set; run through ctest", env);
    char cmd[16384], in[4200], out[4200], err[4200];
    snprintf(in, sizeof(in), "%s/chat.in", dir);
    snprintf(out, sizeof(out), "%s/chat.out", dir);
    snprintf(err, sizeof(err), "%s/chat.err", dir);
    write_text(in, input);
    snprintf(cmd, sizeof(cmd), "'%s' %s <'%s' >'%s' 2>'%s'", exe, args, in, out, err);
    const int st = system(cmd);
    chat_slurp(out, chat_out, sizeof(chat_out));
    chat_slurp(err, chat_err, sizeof(chat_err));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The lines of chat_out parsed as JSON objects (at most max); their count. */
static int chat_turns(cJSON **turns, int max) {
    int n = 0;
    for (char *line = strtok(chat_out, "\n"); line && n < max; line = strtok(NULL, "\n")) {
        turns[n] = cJSON_Parse(line);
        MT_CHECK(turns[n], "minimax-chat printed a line that is not JSON: %s", line);
        n++;
    }
    return n;
}

/* The ids of array key of a turn (at most max); their count. */
static int chat_ids(const cJSON *turn, const char *key, int32_t *ids, int max) {
    const cJSON *a = cJSON_GetObjectItem(turn, key);
    MT_CHECK(cJSON_IsArray(a), "a turn without \"%s\"", key);
    int n = 0;
    for (const cJSON *x = a->child; x && n < max; x = x->next) ids[n++] = (int32_t)x->valuedouble;
    return n;
}

static const char *chat_text(const cJSON *turn) {
    return cJSON_GetStringValue(cJSON_GetObjectItem(turn, "text"));
}

/* The conversation's prompt as this test renders (the test tokenizer's template) and tokenizes
 * it; the token count. */
static int chat_expected_prompt(const mt_tokenizer *tok, const mt_chat_msg *msgs, int n,
                                int32_t *ids, int max) {
    mt_chat_template *t = eval_text01_template();
    mt_chat_rendered r = {0};
    char err[MT_ERR_LEN];
    MT_CHECK(mt_chat_render_msgs(t, msgs, n, &r, err, sizeof(err)) == 0, "%s", err);
    mt_chat_template_free(t);
    mt_token_buf buf = {0};
    mt_tokenizer_encode(tok, r.text, r.len, &buf);
    const int T = (int)(buf.n < max ? buf.n : max);
    memcpy(ids, buf.ids, sizeof(int32_t) * (size_t)T);
    mt_token_buf_free(&buf);
    mt_chat_rendered_free(&r);
    return T;
}

/* minimax-generate's greedy ids for one prompt (N_NEW of them) into ref. */
static void chat_reference(const char *dir, const char *model, const int32_t *prompt, int T,
                           int32_t *ref) {
    char path[4200], args[12800];
    snprintf(path, sizeof(path), "%s/ids.json", dir);
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "cannot write %s", path);
    fputs("[[", f);
    for (int t = 0; t < T; t++) fprintf(f, t ? ", %d" : "%d", prompt[t]);
    fputs("]]\n", f);
    fclose(f);
    snprintf(args, sizeof(args), "--model '%s' --ids '%s' --max-new-tokens %d", model, path, N_NEW);
    MT_CHECK(chat_run(dir, "MT_GENERATE_CLI", args, "") == 0, "minimax-generate: %s", chat_err);
    cJSON *rows = cJSON_Parse(chat_out);
    MT_CHECK(cJSON_IsArray(rows) && cJSON_IsArray(rows->child), "minimax-generate: %s", chat_out);
    int n = 0;
    for (const cJSON *x = rows->child->child; x && n < N_NEW; x = x->next)
        ref[n++] = (int32_t)x->valuedouble;
    MT_CHECK(n == N_NEW, "minimax-generate gave %d ids", n);
    cJSON_Delete(rows);
}

static int test_eval_minimax_chat(void) {
    char dir[4096], model[4200], args[8400], tpath[4400];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 1, 0, model, sizeof(model));
    snprintf(tpath, sizeof(tpath), "%s/tokenizer.json", model);
    mt_tokenizer *tok = mt_tokenizer_load(tpath);
    const int32_t eos = mt_tokenizer_token_to_id(tok, "<end_of_sentence>");
    const char *q1 = "Natalia sold clips to 48 of her friends. How many?", *q2 = "And in May?";
    char input[512];
    snprintf(input, sizeof(input), "%s\n%s\n/reset\n%s\n/exit\nnot read\n", q1, q2, q1);
    snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens %d", model, N_NEW);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
    cJSON *turns[4] = {0};
    const int n_turns = chat_turns(turns, 4);
    EXPECT(n_turns == 3, "%d turns printed for 3 (the line after /exit is not read)", n_turns);
    if (n_turns != 3) return MT_TEST_OK;
    /* the prompts: q1; q1, reply 1, q2; q1 again */
    const mt_chat_msg conv[3] = {{.role = MT_CHAT_USER, .text = q1, .len = strlen(q1)},
                                 {.role = MT_CHAT_ASSISTANT,
                                  .text = chat_text(turns[0]),
                                  .len = strlen(chat_text(turns[0]))},
                                 {.role = MT_CHAT_USER, .text = q2, .len = strlen(q2)}};
    const int n_msgs[3] = {1, 3, 1};
    enum { MAXT = 1024 };
    static int32_t got[MAXT], want[MAXT], ids[3][N_NEW + 1], ref[N_NEW];
    int n_ids[3];
    for (int i = 0; i < 3; i++) {
        const int ng = chat_ids(turns[i], "prompt_ids", got, MAXT);
        const int nw = chat_expected_prompt(tok, conv, n_msgs[i], want, MAXT);
        EXPECT(ng == nw && !memcmp(got, want, sizeof(int32_t) * (size_t)nw),
               "turn %d: a prompt of %d tokens, the conversation renders to %d", i + 1, ng, nw);
        n_ids[i] = chat_ids(turns[i], "ids", ids[i], N_NEW + 1);
        chat_reference(dir, model, got, ng, ref);
        const int n = n_ids[i];
        EXPECT(n >= 1 && n <= N_NEW && !memcmp(ids[i], ref, sizeof(int32_t) * (size_t)n) &&
                   (n == N_NEW || ids[i][n - 1] == eos),
               "turn %d: %d reply ids, not minimax-generate's greedy ones (first %d vs %d)", i + 1,
               n, ids[i][0], ref[0]);
        char *text = mt_tokenizer_decode(tok, ids[i], n, true);
        EXPECT(!strcmp(text, chat_text(turns[i])), "turn %d: the text is not its ids' decoding",
               i + 1);
        free(text);
    }
    EXPECT(n_ids[2] == n_ids[0] && !memcmp(ids[2], ids[0], sizeof(int32_t) * (size_t)n_ids[0]),
           "the turn after /reset differs from the first");
    printf("3 turns (%d, %d, %d reply tokens): prompts as the template renders the conversation, "
           "replies as minimax-generate decodes them, /reset starts over\n",
           n_ids[0], n_ids[1], n_ids[2]);

    /* the stream: each reply's text on its own line */
    char expect[1 << 14];
    snprintf(expect, sizeof(expect), "%s\n%s\n%s\n", chat_text(turns[0]), chat_text(turns[1]),
             chat_text(turns[2]));
    snprintf(args, sizeof(args), "--model '%s' --max-new-tokens %d", model, N_NEW);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
    EXPECT(!strcmp(chat_out, expect), "streamed:\n%s\nreplies:\n%s", chat_out, expect);
    for (int i = 0; i < n_turns; i++) cJSON_Delete(turns[i]);

    /* --system first; kept by /reset */
    const char *sys = "You are a careful math tutor.";
    snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens 4 --system '%s'", model,
             sys);
    snprintf(input, sizeof(input), "%s\n/reset\n%s\n", q1, q1);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
    EXPECT(chat_turns(turns, 4) == 2, "--system: not 2 turns");
    const mt_chat_msg with_sys[2] = {{.role = MT_CHAT_SYSTEM, .text = sys, .len = strlen(sys)},
                                     {.role = MT_CHAT_USER, .text = q1, .len = strlen(q1)}};
    const int nw = chat_expected_prompt(tok, with_sys, 2, want, MAXT);
    for (int i = 0; i < 2; i++) {
        const int ng = chat_ids(turns[i], "prompt_ids", got, MAXT);
        EXPECT(ng == nw && !memcmp(got, want, sizeof(int32_t) * (size_t)nw),
               "--system, turn %d: the prompt is not the system turn and the question", i + 1);
    }
    cJSON_Delete(turns[0]);
    cJSON_Delete(turns[1]);

    /* sampling: the same seed, the same replies */
    static char first[sizeof(chat_out)];
    snprintf(args, sizeof(args),
             "--model '%s' --max-new-tokens %d --temperature 1 --top-p 0.9 --seed 5", model, N_NEW);
    snprintf(input, sizeof(input), "%s\n%s\n", q1, q2);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
    snprintf(first, sizeof(first), "%s", chat_out);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
    EXPECT(!strcmp(first, chat_out), "sampled replies differ across runs with one seed");
    mt_tokenizer_free(tok);
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_eval_minimax_chat_errors(void) {
    char dir[4096], model[4200], args[8400];
    make_tmpdir(dir, sizeof(dir));
    snprintf(args, sizeof(args), "--model '%s/none'", dir);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, "hi\n") == 1, "a missing model: not exit 1");
    const char *nl = strchr(chat_err, '\n');
    EXPECT(has(chat_err, "/none/config.json") && nl && !nl[1], "a missing model: %s", chat_err);
    /* a 48-position model: a long first turn is refused (too long alone: /reset cannot help),
     * the next one answered, a long turn after it refused with /reset */
    eval_make_model(dir, 1, 48, model, sizeof(model));
    char input[2048] = "/help\n", longer[512] = "";
    for (int i = 0; i < 40; i++) strcat(longer, "forty two ");
    snprintf(input + strlen(input), sizeof(input) - strlen(input), "%s\nhi\n%s\n", longer, longer);
    snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens 4", model);
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
    EXPECT(has(chat_err, "unknown command /help") &&
               has(chat_err, "max_position_embeddings) 48: shorten it") &&
               has(chat_err, "max_position_embeddings) 48: /reset"),
           "stderr: %s", chat_err);
    cJSON *turns[3] = {0};
    EXPECT(chat_turns(turns, 3) == 1, "not the one turn after the refused one: %s", chat_out);
    cJSON_Delete(turns[0]);
    /* stdin ending inside a continued turn (its last line ends in '\'): one line, exit 1; the
     * turn before it answered */
    EXPECT(chat_run(dir, "MT_CHAT_CLI", args, "hi\nforty \\\ntwo \\\n") == 1,
           "stdin ending after a continued line: not exit 1: %s", chat_err);
    nl = strchr(chat_err, '\n');
    EXPECT(has(chat_err, "ended after a line ending in '\\'") && nl && !nl[1],
           "stdin ending after a continued line: %s", chat_err);
    EXPECT(chat_turns(turns, 3) == 1, "not the one turn before the cut one: %s", chat_out);
    cJSON_Delete(turns[0]);
    printf("errors: %s", chat_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* --backend cuda (MT_CHAT_CLI_DEVICE: minimax-chat of a CUDA build on a GPU, or minimax-chat-emu
 * on the CUDA emulator): the same conversation's turns (prompts, reply ids and texts, greedy and
 * sampled) as the CPU backend's. Skipped without a device. */
static int test_eval_minimax_chat_device(void) {
    char dir[4096], model[4200], args[8400];
    static char cpu[sizeof(chat_out)];
    make_tmpdir(dir, sizeof(dir));
    eval_make_model(dir, 2, 0, model, sizeof(model));
    const char *input = "Natalia sold clips to 48 of her friends. How many?\nAnd in May?\n";
    const char *modes[2] = {"", "--temperature 1 --top-p 0.9 --seed 3"};
    for (int mi = 0; mi < 2; mi++) {
        snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens %d %s", model, N_NEW,
                 modes[mi]);
        EXPECT(chat_run(dir, "MT_CHAT_CLI", args, input) == 0, "minimax-chat: %s", chat_err);
        snprintf(cpu, sizeof(cpu), "%s", chat_out);
        snprintf(args, sizeof(args), "--model '%s' --json --max-new-tokens %d %s --backend cuda",
                 model, N_NEW, modes[mi]);
        if (chat_run(dir, "MT_CHAT_CLI_DEVICE", args, input) != 0 &&
            has(chat_err, "no usable CUDA")) {
            printf("%.*s: skipped\n", (int)strcspn(chat_err, "\n"), chat_err);
            rm_tree(dir);
            return MT_TEST_SKIP;
        }
        const bool same = !strcmp(cpu, chat_out);
        EXPECT(same, "--backend cuda: %s\nthe CPU: %s", chat_out, cpu);
        cJSON *turns[3] = {0};
        const int n = chat_turns(turns, 3); /* (cuts chat_out into lines) */
        for (int i = 0; i < n; i++) cJSON_Delete(turns[i]);
        printf("mode '%s': %d turns; the CPU's and --backend cuda's %s\n", modes[mi], n,
               same ? "identical" : "DIFFER");
        EXPECT(n == 2, "%d turns for 2", n);
    }
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_minimax_chat", test_eval_minimax_chat},
    {"eval_minimax_chat_errors", test_eval_minimax_chat_errors},
    {"eval_minimax_chat_device", test_eval_minimax_chat_device},
};
MT_TEST_MAIN(cases)
