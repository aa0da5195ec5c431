/* serve_schedule.c: head-of-line blocking in minimax-serve (serve/engine.h), checked by the
 * order of the engine's work, not by time: the counters of GET /health (decode_steps, and
 * prefill_tokens: prompt tokens prefilled) are read before a 4-token request is sent and after
 * it is answered, while one call of 32 prompts x 2,000 ids (8 tokens each, --max-batch 8) runs on
 * a random 1-layer model of recipes/configs/tiny.json; the short request is sent once the big
 * call is decoding (2 decode steps run).
 *
 * serve_schedule: the 4-token request is answered within 10 decode steps (its own 3, the one
 * that admits it, slack for the steps run while the answer travels and /health is read) and
 * while at most 3 prompts' worth of the big call's tokens are prefilled, with the default
 * --prefill-tokens (128 tokens between two decode steps, long prompts a chunk at a time): 4
 * steps and 0.13-0.25 prompts measured. Without a bound on the prefill (fair admission only) it
 * waited for the big call's rows to end and then for their refill in one go (about 7 prompts
 * before its second token); first come, first served (5e53e1d), behind the waves of all 32
 * prompts. The big call is still running when it is answered (else the check says nothing).
 * --prefill-tokens 0 and abc: no start, one line naming the flag. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"
#include "tests/support/serve_http.h"

#define SC_PROMPTS 32
#define SC_IDS     2000

static char sc_dir[4096], sc_model[4200];

/* /health's counters; prefill_tokens -1 when the server has none. */
typedef struct {
    double active, queued, steps, prefilled;
} sc_health;

static sc_health sc_read(int port) {
    http_resp r = http_request(port, "GET", "/health", NULL, NULL);
    MT_CHECK(r.status == 200 && r.body, "/health: status %d", r.status);
    cJSON *o = cJSON_Parse(r.body);
    const cJSON *p = cJSON_GetObjectItem(o, "prefill_tokens");
    sc_health h = {cJSON_GetNumberValue(cJSON_GetObjectItem(o, "active")),
                   cJSON_GetNumberValue(cJSON_GetObjectItem(o, "queued")),
                   cJSON_GetNumberValue(cJSON_GetObjectItem(o, "decode_steps")),
                   cJSON_IsNumber(p) ? cJSON_GetNumberValue(p) : -1};
    cJSON_Delete(o);
    http_resp_free(&r);
    return h;
}

typedef struct {
    int port;
    const char *body;
    volatile int done; /* read after the short request: only a flag, set once */
    int status;
} sc_big;

static void *sc_big_main(void *arg) {
    sc_big *b = arg;
    http_resp r = http_request(b->port, "POST", "/v1/completions", NULL, b->body);
    b->status = r.status;
    http_resp_free(&r);
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static int test_serve_schedule(void) {
    make_tmpdir(sc_dir, sizeof(sc_dir));
    eval_make_model(sc_dir, 1, 0, sc_model, sizeof(sc_model));
    const char *bad[] = {"--prefill-tokens 0", "--prefill-tokens abc"};
    for (int i = 0; i < 2; i++) {
        char err[2048];
        const int st = srv_refused(sc_dir, sc_model, bad[i], err, sizeof(err));
        const char *nl = strchr(err, '\n');
        EXPECT(st == 1 && strstr(err, "--prefill-tokens") && nl && !nl[1],
               "%s: exit %d, want 1 and one line naming --prefill-tokens: %s", bad[i], st, err);
    }

    char args[8400];
    snprintf(args, sizeof(args), "--model '%s' --max-batch 8", sc_model);
    srv_proc s;
    srv_start(&s, sc_dir, args);
    mt_strbuf body = {0};
    const char *head =
        "{\"model\": \"model\", \"max_tokens\": 8, \"temperature\": 0, \"prompt\": [";
    mt_strbuf_append(&body, head, strlen(head));
    for (int p = 0; p < SC_PROMPTS; p++) {
        mt_strbuf_append(&body, p ? ", [" : "[", p ? 3 : 1);
        for (int t = 0; t < SC_IDS; t++) {
            char x[16];
            const int k = snprintf(x, sizeof(x), t ? ", %d" : "%d", 10 + (p * 131 + t * 17) % 6000);
            mt_strbuf_append(&body, x, (size_t)k);
        }
        mt_strbuf_append(&body, "]", 1);
    }
    mt_strbuf_append(&body, "]}", 2);
    sc_big b = {.port = s.port, .body = body.p};
    pthread_t th;
    pthread_create(&th, NULL, sc_big_main, &b);
    sc_health h0 = {0};
    /* the big call is decoding (60 s at most): its rows hold the cache when the short one comes */
    for (int i = 0; i < 6000 && (h0.active < 1 || h0.steps < 2); i++) {
        usleep(10000);
        h0 = sc_read(s.port);
    }
    EXPECT(h0.active >= 1 && h0.steps >= 2 && h0.queued >= 1,
           "the big call did not start decoding with prompts left waiting: active %.0f, %.0f "
           "steps, %.0f queued",
           h0.active, h0.steps, h0.queued);
    http_resp r = http_request(s.port, "POST", "/v1/completions", NULL,
                               "{\"model\": \"model\", \"prompt\": [17, 400, 33, 1201], "
                               "\"max_tokens\": 4, \"temperature\": 0}");
    const int big_done = __atomic_load_n(&b.done, __ATOMIC_SEQ_CST);
    const sc_health h1 = sc_read(s.port);
    EXPECT(r.status == 200, "the 4-token request: status %d", r.status);
    http_resp_free(&r);
    const double steps = h1.steps - h0.steps,
                 prompts = h1.prefilled < 0 ? -1 : (h1.prefilled - h0.prefilled - 4) / SC_IDS;
    printf("beside %d prompts x %d ids (%.0f queued when it was sent): the 4-token request took "
           "%.0f decode steps and %.2f of the big call's prompts (-1: no prefill_tokens)\n",
           SC_PROMPTS, SC_IDS, h0.queued, steps, prompts);
    EXPECT(!big_done, "the big call ended before the 4-token request: nothing was checked");
    EXPECT(steps <= 10, "the 4-token request took %.0f decode steps (want <= 10)", steps);
    EXPECT(prompts >= 0 && prompts <= 3,
           "%.2f of the big call's prompts were prefilled during the 4-token request (want <= 3)",
           prompts);
    pthread_join(th, NULL);
    EXPECT(b.status == 200, "the big call: status %d", b.status);
    EXPECT(srv_stop(&s, SIGTERM, 60) == 0, "not exit 0 after SIGTERM");
    mt_strbuf_free(&body);
    rm_tree(sc_dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"serve_schedule", test_serve_schedule},
};
MT_TEST_MAIN(cases)
