/* serve_webui.c: minimax-serve's chat page (serve/webui/index.html, GET /) on a random 1-layer
 * model of recipes/configs/tiny.json with the test tokenizer.
 *
 * Over HTTP: GET / and /index.html answer the source file's bytes as text/html; charset=utf-8
 * with a Content-Security-Policy that allows no inline code but by hash, without the API key;
 * with --no-webui, / is 404.
 * In a real browser (headless Chromium over the DevTools protocol, tests/support/cdp.h), on a
 * server with --api-key: the page opened as /?q=...&system=...&temperature=0&max_tokens=16 asks
 * for the key (its 401), takes it, sends the question through the streamed
 * /v1/chat/completions, and the DOM dumped once it says data-state="done" holds the reply equal
 * to the API's own greedy (non-streamed) reply to the same messages; a second question typed
 * into the page is sent with the whole conversation without asking for the key again, and its
 * reply equals the API's to the three messages; a request the server refuses shows its error
 * message in the page; the stop button ends a long stream (the server's row freed); reasoning,
 * content and tool calls in vLLM's streamed shape (tests/serve/webui_fake_stream.js in place of
 * the server's stream) are shown as such and sent back in the next turn. The screenshot after the
 * second reply is kept in the test's build directory (MT_WEBUI_OUT/serve_webui.png, beside
 * serve_webui.dom.html). Skipped when no browser is installed ($MT_BROWSER, chromium,
 * chromium-browser, google-chrome). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file_io.h"
#include "tests/support/cdp.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"
#include "tests/support/serve_http.h"

#define KEY        "webui-test-key"
#define MAX_TOKENS 16

static char wu_dir[4096], wu_model[4200];

/* s, or "(none)" for NULL (a printf argument). */
static const char *wu_s(const char *s) { return s ? s : "(none)"; }

/* GET path: the status line and headers (before the blank line) in head, the body returned
 * (malloc'ed; *n its length). */
static char *wu_get(int port, const char *path, char *head, size_t head_n, size_t *n) {
    const int fd = http_connect(port, 30);
    MT_CHECK(fd >= 0, "cannot connect to port %d", port);
    http_send(fd, "GET", path, NULL, NULL);
    mt_strbuf b = {0};
    char chunk[8192];
    for (ssize_t k; (k = recv(fd, chunk, sizeof(chunk), 0)) > 0;)
        mt_strbuf_append(&b, chunk, (size_t)k);
    close(fd);
    const char *sep = b.p ? strstr(b.p, "\r\n\r\n") : NULL;
    MT_CHECK(sep, "GET %s: no HTTP answer", path);
    snprintf(head, head_n, "%.*s", (int)(sep - b.p), b.p);
    *n = b.len - (size_t)(sep + 4 - b.p);
    char *body = mt_malloc(*n + 1, "body");
    memcpy(body, sep + 4, *n);
    body[*n] = '\0';
    mt_strbuf_free(&b);
    return body;
}

/* The page over HTTP: the source file's bytes, its headers, no key needed. */
static void wu_check_http(int port) {
    char path[4400], err[MT_ERR_LEN], head[4096];
    snprintf(path, sizeof(path), "%s/serve/webui/index.html", source_dir());
    size_t want_n = 0, n = 0;
    char *want = mt_file_read(path, &want_n, err);
    MT_CHECK(want, "%s", err);
    const char *routes[] = {"/", "/index.html"};
    for (int i = 0; i < 2; i++) {
        char *body = wu_get(port, routes[i], head, sizeof(head), &n);
        EXPECT(has(head, " 200 ") && n == want_n && !memcmp(body, want, n),
               "GET %s: %.40s, %zu bytes (the file has %zu)", routes[i], head, n, want_n);
        EXPECT(strcasestr(head, "Content-Type: text/html; charset=utf-8"),
               "GET %s: no html content type: %s", routes[i], head);
        const char *csp = strcasestr(head, "Content-Security-Policy: ");
        EXPECT(csp && has(csp, "default-src 'self'") && has(csp, "script-src 'sha256-") &&
                   has(csp, "style-src 'sha256-") && !has(csp, "unsafe-inline"),
               "GET %s: CSP %.300s", routes[i], csp ? csp : "(none)");
        free(body);
    }
    free(want);
    char *body = wu_get(port, "/v1/models", head, sizeof(head), &n);
    EXPECT(has(head, " 401 "), "/v1/models without the key: %.40s", head);
    free(body);
}

/* The API's greedy reply (non-streamed) to messages, a JSON list. */
static char *wu_api_reply(int port, cJSON *messages) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", "model");
    cJSON_AddItemReferenceToObject(o, "messages", messages);
    cJSON_AddNumberToObject(o, "temperature", 0);
    cJSON_AddNumberToObject(o, "max_tokens", MAX_TOKENS);
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    http_resp r = http_request(port, "POST", "/v1/chat/completions",
                               "Authorization: Bearer " KEY "\r\n", body);
    free(body);
    cJSON *a = r.body ? cJSON_Parse(r.body) : NULL;
    MT_CHECK(r.status == 200 && a, "the API's reply: %d %s", r.status, r.body);
    const cJSON *m =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "choices"), 0), "message");
    char *text = strdup(cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")));
    cJSON_Delete(a);
    http_resp_free(&r);
    return text;
}

static void wu_add(cJSON *messages, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(messages, m);
}

/* The text of element id in serialized HTML (a text-only element: &amp; &lt; &gt; &nbsp; are
 * the only escapes of text), malloc'ed, or NULL when it is not there. */
static char *wu_dom_text(const char *html, const char *id) {
    char attr[128];
    snprintf(attr, sizeof(attr), "id=\"%s\"", id);
    const char *at = strstr(html, attr), *start = at ? strchr(at, '>') : NULL;
    const char *end = start ? strstr(start, "</div>") : NULL;
    if (!end) return NULL;
    mt_strbuf b = {0};
    mt_strbuf_append(&b, "", 0);
    static const char *const esc[][2] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&nbsp;", "\xc2\xa0"}};
    for (const char *p = start + 1; p < end;) {
        int e = 0;
        while (e < 4 && strncmp(p, esc[e][0], strlen(esc[e][0]))) e++;
        if (e < 4) {
            mt_strbuf_append(&b, esc[e][1], strlen(esc[e][1]));
            p += strlen(esc[e][0]);
        } else
            mt_strbuf_append(&b, p++, 1);
    }
    return b.p;
}

/* Waits for the page's state to be done (or error/stopped), dumps the DOM into
 * MT_WEBUI_OUT/serve_webui.dom.html and checks the reply element id holds want. */
static void wu_check_reply(cdp_browser *b, const char *id, const char *want) {
    char *state = cdp_wait_for(b, "document.body ? document.body.dataset.state : ''",
                               "done|error|stopped", 120);
    EXPECT(state && !strcmp(state, "done"), "page state %s (loading: its script did not run)",
           state ? state : "(none)");
    free(state);
    char *html = cdp_eval(b, "document.documentElement.outerHTML");
    MT_CHECK(html, "no DOM from the page");
    const char *out = getenv("MT_WEBUI_OUT");
    char path[4400];
    snprintf(path, sizeof(path), "%s/serve_webui.dom.html", out && *out ? out : wu_dir);
    write_text(path, html);
    char *got = wu_dom_text(html, id);
    EXPECT(got && !strcmp(got, want), "%s in the DOM: \"%s\"; the API's reply: \"%s\"", id,
           got ? got : "(missing)", want);
    if (got && !strcmp(got, want))
        printf("%s in the DOM equals the API's greedy reply (%zu bytes): \"%s\"\n", id,
               strlen(want), want);
    free(got);
    free(html);
}

/* The page in the browser against a server with --api-key. */
static bool wu_check_browser(cdp_browser *b, int port) {
    const char *q = "Hello there, what is 2 + 2?", *sys = "Answer briefly.";
    char url[1024];
    snprintf(url, sizeof(url),
             "http://127.0.0.1:%d/?q=Hello%%20there%%2C%%20what%%20is%%202%%20%%2B%%202%%3F"
             "&system=Answer%%20briefly.&temperature=0&top_p=0.9&max_tokens=%d",
             port, MAX_TOKENS);
    MT_CHECK(cdp_navigate(b, url), "cannot load %s", url);
    /* the key, asked for once */
    char *asked = cdp_wait_for(
        b, "String(!document.getElementById('keyform').classList.contains('hidden'))", "true", 30);
    const bool ran = asked && !strcmp(asked, "true");
    EXPECT(ran, "the page did not ask for the API key (%s): its script did not run (CSP?)",
           wu_s(asked));
    free(asked);
    if (!ran) return false;
    free(cdp_eval(b, "document.getElementById('apikey').value = '" KEY "';"
                     "document.getElementById('keyform').requestSubmit(); 'ok'"));
    cJSON *messages = cJSON_CreateArray();
    wu_add(messages, "system", sys);
    wu_add(messages, "user", q);
    char *want = wu_api_reply(port, messages);
    wu_check_reply(b, "reply-1", want);
    /* a second turn: the whole conversation, no key asked again */
    const char *q2 = "And 3 + 3?";
    wu_add(messages, "assistant", want);
    wu_add(messages, "user", q2);
    free(want);
    want = wu_api_reply(port, messages);
    free(cdp_eval(b, "document.getElementById('input').value = 'And 3 + 3?';"
                     "document.getElementById('ask').requestSubmit(); 'ok'"));
    char *busy = cdp_wait_for(b, "document.body.dataset.lastReply", "reply-2", 120);
    free(busy);
    char *key_again =
        cdp_eval(b, "String(!document.getElementById('keyform').classList.contains('hidden'))");
    EXPECT(key_again && !strcmp(key_again, "false"), "the key was asked for again");
    free(key_again);
    wu_check_reply(b, "reply-2", want);
    free(want);
    cJSON_Delete(messages);
    const char *out = getenv("MT_WEBUI_OUT");
    char shot[4400];
    snprintf(shot, sizeof(shot), "%s/serve_webui.png", out && *out ? out : wu_dir);
    EXPECT(cdp_screenshot(b, shot), "no screenshot");
    printf("screenshot: %s\n", shot);
    /* an error from the server is shown */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/?q=hi&max_tokens=0", port);
    MT_CHECK(cdp_navigate(b, url), "cannot load %s", url);
    char *st = cdp_wait_for(b, "document.body ? document.body.dataset.state : ''", "error", 60);
    char *shown = cdp_eval(b, "[...document.querySelectorAll('.msg.error')]"
                              ".map(e => e.textContent).join(' | ')");
    EXPECT(st && !strcmp(st, "error") && shown && has(shown, "HTTP 400") &&
               has(shown, "max_tokens"),
           "max_tokens 0: state %s, shown \"%s\"", wu_s(st), wu_s(shown));
    printf("a refused request shows: %s\n", wu_s(shown));
    free(st);
    free(shown);
    return true;
}

/* The stop button in the middle of a long reply: the page says stopped, keeps what came, and
 * the server frees the request's row (/health: nothing active) long before the reply's end. */
static void wu_check_stop(cdp_browser *b, int port) {
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/?temperature=0&max_tokens=3000", port);
    MT_CHECK(cdp_navigate(b, url), "cannot load %s", url);
    free(cdp_wait_for(b, "document.body ? document.body.dataset.state : ''", "idle", 30));
    /* the click as soon as the first text is shown, however fast the model */
    free(cdp_eval(b, "new MutationObserver((ms, ob) => {"
                     " const r = document.getElementById('reply-1');"
                     " if (!r || !r.textContent || document.body.dataset.state !== 'busy') return;"
                     " ob.disconnect(); document.getElementById('stop').click(); })"
                     ".observe(document.getElementById('log'),"
                     " {childList: true, subtree: true, characterData: true});"
                     "document.getElementById('input').value = 'Tell me a story';"
                     "document.getElementById('ask').requestSubmit(); 'ok'"));
    char *st = cdp_wait_for(b, "document.body.dataset.state", "stopped|done|error", 30);
    char *note = cdp_eval(b, "document.querySelector('.msg.assistant .note').textContent");
    EXPECT(st && !strcmp(st, "stopped") && note && !strcmp(note, "(stopped)"),
           "after stop: state %s, note %s", wu_s(st), wu_s(note));
    free(st);
    free(note);
    bool idle = false;
    for (int i = 0; i < 200 && !idle; i++) {
        http_resp h = http_request(port, "GET", "/health", NULL, NULL);
        idle = h.body && has(h.body, "\"active\":0,\"queued\":0");
        http_resp_free(&h);
        if (!idle) usleep(50000);
    }
    EXPECT(idle, "the stopped request still decodes 10 s after the stop");
    printf("stopped mid-stream: the page says so, the server's row is free\n");
}

/* Reasoning, content and tool calls in vLLM's streamed shape (tests/serve/webui_fake_stream.js
 * stands in for the server's stream): shown as such, text as text, and sent back whole in the
 * next turn; no system message when the field is empty. */
static void wu_check_stream_shapes(cdp_browser *b, int port) {
    char url[256], path[4400], err[MT_ERR_LEN];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
    MT_CHECK(cdp_navigate(b, url), "cannot load %s", url);
    free(cdp_wait_for(b, "document.body ? document.body.dataset.state : ''", "idle", 60));
    snprintf(path, sizeof(path), "%s/tests/serve/webui_fake_stream.js", source_dir());
    char *js = mt_file_read(path, NULL, err);
    MT_CHECK(js, "%s", err);
    char *ok = cdp_eval(b, js);
    EXPECT(ok && !strcmp(ok, "ok"), "%s did not run: %s", path, wu_s(ok));
    free(ok);
    free(js);
    const char *submit = "document.getElementById('input').value = 'What is 2 + 2?';"
                         "document.getElementById('ask').requestSubmit(); 'ok'";
    free(cdp_eval(b, submit));
    free(cdp_wait_for(b, "document.body.dataset.lastReply + document.body.dataset.state",
                      "reply-1done", 60));
    char *got = cdp_eval(
        b, "const d = document.querySelector('details.reasoning');"
           "JSON.stringify({reasoning: d.querySelector('.reasoning-text').textContent,"
           " open: d.open, hidden: d.classList.contains('hidden'),"
           " content: document.getElementById('reply-1').textContent,"
           " calls: [...document.querySelectorAll('.tool-call')].map(e =>"
           "   [e.querySelector('.name').textContent, e.querySelector('.args').textContent]),"
           " elements: document.querySelectorAll('#log b').length})");
    cJSON *g = got ? cJSON_Parse(got) : NULL,
          *want =
              cJSON_Parse("{\"reasoning\": \"Let me think: 2 < 3 & \u00e9t\u00e9.\","
                          " \"open\": false, \"hidden\": false,"
                          " \"content\": \"The answer is <b>4</b>.\","
                          " \"calls\": [[\"get_weather\", \"{\\\"city\\\": \\\"Par\u00eds\\\"}\"],"
                          " [\"get_time\", \"{}\"]], \"elements\": 0}");
    EXPECT(g && cJSON_Compare(g, want, true), "the streamed reply shows %s", wu_s(got));
    printf("reasoning, content and tool calls shown: %s\n", wu_s(got));
    free(got);
    cJSON_Delete(g);
    cJSON_Delete(want);
    /* the next turn carries the conversation, the assistant's reasoning and tool calls in it */
    free(cdp_eval(b, submit));
    free(cdp_wait_for(b, "document.body.dataset.lastReply + document.body.dataset.state",
                      "reply-2done", 60));
    char *sent = cdp_eval(b, "JSON.stringify(window.sentBodies.map(x => x.messages))");
    g = sent ? cJSON_Parse(sent) : NULL;
    want = cJSON_Parse(
        "[[{\"role\": \"user\", \"content\": \"What is 2 + 2?\"}],"
        " [{\"role\": \"user\", \"content\": \"What is 2 + 2?\"},"
        "  {\"role\": \"assistant\", \"content\": \"The answer is <b>4</b>.\","
        "   \"reasoning_content\": \"Let me think: 2 < 3 & \u00e9t\u00e9.\","
        "   \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\":"
        "     {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Par\u00eds\\\"}\"}},"
        "    {\"id\": \"call_2\", \"type\": \"function\", \"function\":"
        "     {\"name\": \"get_time\", \"arguments\": \"{}\"}}]},"
        "  {\"role\": \"user\", \"content\": \"What is 2 + 2?\"}]]");
    MT_CHECK(want, "the expected messages do not parse");
    EXPECT(g && cJSON_Compare(g, want, true), "the page sent %s", wu_s(sent));
    const char *out = getenv("MT_WEBUI_OUT");
    char shot[4400];
    snprintf(shot, sizeof(shot), "%s/serve_webui_tools.png", out && *out ? out : wu_dir);
    EXPECT(cdp_screenshot(b, shot), "no screenshot");
    printf("screenshot: %s\n", shot);
    free(sent);
    cJSON_Delete(g);
    cJSON_Delete(want);
}

static int test_serve_webui(void) {
    const char *exe = cdp_find_browser();
    if (!exe) {
        printf("SKIP: no browser (chromium: apt-get install chromium, or set MT_BROWSER)\n");
        return MT_TEST_SKIP;
    }
    make_tmpdir(wu_dir, sizeof(wu_dir));
    eval_make_model(wu_dir, 1, 0, wu_model, sizeof(wu_model));
    char args[8400], head[4096];
    size_t n;
    /* --no-webui: / is 404 as any unknown route */
    srv_proc s;
    snprintf(args, sizeof(args), "--model '%s' --no-webui", wu_model);
    srv_start(&s, wu_dir, args);
    char *body = wu_get(s.port, "/", head, sizeof(head), &n);
    EXPECT(has(head, " 404 ") && has(body, "not_found"), "--no-webui: GET /: %.40s", head);
    free(body);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");

    snprintf(args, sizeof(args), "--model '%s' --api-key " KEY, wu_model);
    srv_start(&s, wu_dir, args);
    wu_check_http(s.port);
    cdp_browser b;
    char profile[4200];
    snprintf(profile, sizeof(profile), "%s/browser", wu_dir);
    MT_CHECK(mkdir(profile, 0700) == 0, "mkdir %s", profile);
    if (!cdp_start(&b, exe, profile)) {
        EXPECT(false, "%s did not start (see %s/browser.log)", exe, profile);
    } else {
        printf("browser: %s\n", exe);
        if (wu_check_browser(&b, s.port)) {
            wu_check_stop(&b, s.port);
            wu_check_stream_shapes(&b, s.port);
        }
        cdp_stop(&b);
    }
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    if (!mt_test_failures) rm_tree(wu_dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"serve_webui", test_serve_webui},
};
MT_TEST_MAIN(cases)
