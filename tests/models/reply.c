/* reply.c: the reply parsers (models/reply.h) on hand-made replies.
 *
 * models_reply_values: M2 parameter values typed by a schema as vLLM's minimax_m2 tool parser
 * types them (vllm/tool_parsers/minimax_m2_tool_parser.py, _convert_param_value_with_types:
 * the expected values below are what that Python code returns for these strings, written as
 * json.dumps(ensure_ascii=False) writes them).
 * models_reply_markup: reasoning by the prompt's ending (M2's "<think>\n"; M3's "<mm:think>",
 * "</mm:think>", or neither), a reply that never closes its reasoning, malformed tool-call
 * markup returned as content, tool_choice "none", M3's nested elements by schema and without.
 * Every case is also parsed streamed, cut at every byte boundary and in pieces of every size
 * (tests/models/reply_check.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/family.h"
#include "models/reply.h"
#include "tests/models/reply_check.h"
#include "tests/support/harness.h"

#define NS "]<]minimax[>["

typedef struct {
    const char *reasoning, *content; /* NULL: none */
    int n_calls;
    const char *name[4], *args[4];
    bool in_reasoning;
} want;

static bool eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static void check(const char *fmt, const char *prompt, const char *text, const char *tools_json,
                  bool calls_off, const want *w, const char *what) {
    const mt_reply_format *f = mt_reply_format_find(fmt);
    EXPECT(f, "no format %s", fmt);
    if (!f) return;
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    mt_reply r;
    mt_reply_parse(f, prompt, text, strlen(text), tools, calls_off, &r);
    EXPECT(eq(r.reasoning, w->reasoning), "%s: reasoning \"%s\", want \"%s\"", what,
           r.reasoning ? r.reasoning : "(null)", w->reasoning ? w->reasoning : "(null)");
    EXPECT(eq(r.content, w->content), "%s: content \"%s\", want \"%s\"", what,
           r.content ? r.content : "(null)", w->content ? w->content : "(null)");
    EXPECT(r.in_reasoning == w->in_reasoning, "%s: in_reasoning %d", what, r.in_reasoning);
    EXPECT(r.n_calls == w->n_calls, "%s: %d calls, want %d", what, r.n_calls, w->n_calls);
    for (int i = 0; i < r.n_calls && i < w->n_calls; i++) {
        EXPECT(!strcmp(r.calls[i].name, w->name[i]), "%s: call %d is %s", what, i, r.calls[i].name);
        EXPECT(!strcmp(r.calls[i].arguments, w->args[i]), "%s: call %d arguments\n  %s\nwant\n  %s",
               what, i, r.calls[i].arguments, w->args[i]);
    }
    mt_reply_free(&r);
    reply_check_stream(f, prompt, text, strlen(text), tools, calls_off, what);
    cJSON_Delete(tools);
}

static const char *const typed_tools =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {\"i\": {\"type\": \"integer\"}, \"n\": {\"type\": \"number\"}, "
    "\"n2\": {\"type\": \"number\"}, \"b\": {\"type\": \"boolean\"}, \"o\": {\"type\": "
    "\"object\"}, \"a\": {\"type\": \"array\"}, \"s\": {\"type\": \"string\"}, \"u\": "
    "{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]}, \"l\": {\"type\": "
    "[\"null\", \"boolean\"]}, \"e\": {\"enum\": [1, 2]}, \"x\": {\"type\": \"integer\"}, \"t\": "
    "{\"type\": \"null\"}, \"big\": {\"type\": \"integer\"}, \"f\": {\"type\": \"number\"}}}}}]";

static int test_values(void) {
    const char *text =
        "</think>\n\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"i\"> 42 "
        "</parameter>\n"
        "<parameter name=\"n\">2.50</parameter><parameter name=\"n2\">3.0</parameter>"
        "<parameter name=\"b\">Yes</parameter><parameter name=\"o\">{\"k\": [1, null]}"
        "</parameter><parameter name=\"a\">[1,\"x\"]</parameter><parameter name=\"s\">\n007\n"
        "</parameter><parameter name=\"u\">12abc</parameter><parameter name=\"l\">off"
        "</parameter><parameter name=\"e\">2</parameter><parameter name=\"x\">None</parameter>"
        "<parameter name=\"z\">{\"q\": 1}</parameter><parameter name=\"t\">5</parameter>"
        "<parameter name=\"big\">-0012345678901234567890</parameter><parameter name=\"f\">1e-5"
        "</parameter>\n</invoke>\n</minimax:tool_call>";
    const want w = {.n_calls = 1,
                    .name = {"f"},
                    .args = {"{\"i\": 42, \"n\": 2.5, \"n2\": 3, \"b\": true, \"o\": {\"k\": [1, "
                             "null]}, \"a\": [1, \"x\"], \"s\": \"007\", \"u\": \"12abc\", \"l\": "
                             "false, \"e\": 2, \"x\": null, \"z\": \"{\\\"q\\\": 1}\", \"t\": 5, "
                             "\"big\": -12345678901234567890, \"f\": 1e-05}"}};
    check("minimax_m2", "]~b]ai\n<think>\n", text, typed_tools, false, &w, "typed by schema");
    /* no tools: every value a string, null words null (vLLM: no properties, type "string") */
    const want w2 = {.n_calls = 1,
                     .name = {"f"},
                     .args = {"{\"i\": \"42\", \"x\": null, \"q\": \"caf\u00e9 \\\"\\n\\\\\"}"}};
    check("minimax_m2", NULL,
          "<minimax:tool_call><invoke name='f'><parameter name=\"i\">42</parameter>"
          "<parameter name=\"x\">nil</parameter><parameter name=\"q\">caf\u00e9 \"\n\\"
          "</parameter></invoke></minimax:tool_call>",
          NULL, false, &w2, "untyped");
    return MT_TEST_OK;
}

static int test_markup(void) {
    const char *m2p = "]~b]user\nhi[e~[\n]~b]ai\n<think>\n";
    check("minimax_m2", m2p, "Let me think.\n</think>\n\nHello", NULL, false,
          &(want){.reasoning = "Let me think.", .content = "Hello"}, "m2 reasoning");
    check("minimax_m2", m2p, "still thinking\n", NULL, false,
          &(want){.reasoning = "still thinking", .in_reasoning = true}, "m2 never closed");
    const char *bad = "r\n</think>\n\nText <minimax:tool_call>\n<invoke name=\"f\">\n<parameter "
                      "name=\"s\">a</parameter>\n</minimax:tool_call>\nafter";
    check("minimax_m2", m2p, bad, NULL, false,
          &(want){.reasoning = "r",
                  .content = "Text <minimax:tool_call>\n<invoke name=\"f\">\n<parameter "
                             "name=\"s\">a</parameter>\n</minimax:tool_call>\nafter"},
          "m2 invoke never closed");
    check("minimax_m2", m2p, "</think>ok<minimax:tool_call>\n<invoke name=\"f\">", NULL, false,
          &(want){.content = "ok<minimax:tool_call>\n<invoke name=\"f\">"},
          "m2 block never closed");
    const char *two = "r</think>\n\nA\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter "
                      "name=\"s\">1</parameter>\n</invoke>\n<invoke name=\"g\">\n</invoke>\n"
                      "</minimax:tool_call>\nB\n<minimax:tool_call><invoke name=\"h\"></invoke>"
                      "</minimax:tool_call>\n";
    check("minimax_m2", m2p, two, NULL, false,
          &(want){.reasoning = "r",
                  .content = "A\n\nB",
                  .n_calls = 3,
                  .name = {"f", "g", "h"},
                  .args = {"{\"s\": \"1\"}", "{}", "{}"}},
          "m2 two blocks");
    check("minimax_m2", m2p, two, NULL, true,
          &(want){.reasoning = "r",
                  .content = "A\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter "
                             "name=\"s\">1</parameter>\n</invoke>\n<invoke name=\"g\">\n</invoke>"
                             "\n</minimax:tool_call>\nB\n<minimax:tool_call><invoke name=\"h\">"
                             "</invoke></minimax:tool_call>"},
          "m2 tool_choice none");
    check("minimax_m2", m2p,
          "r</think>x<minimax:tool_call>junk<invoke name=\"f\"></invoke>"
          "</minimax:tool_call>",
          NULL, false,
          &(want){.reasoning = "r",
                  .content = "x<minimax:tool_call>junk<invoke name=\"f\"></invoke>"
                             "</minimax:tool_call>"},
          "m2 text between invokes");
    check("minimax_m2", "]~b]ai\n", "<think>a</think>b", NULL, false,
          &(want){.reasoning = "a", .content = "b"}, "m2 prompt without <think>");
    check("minimax_m2", "]~b]ai\n", "<thin", NULL, false, &(want){.content = "<thin"},
          "m2 a tag's prefix at the end");

    const char *m3e = "]~b]ai\n<mm:think>", *m3d = "]~b]ai\n</mm:think>", *m3a = "]~b]ai\n";
    check("minimax_m3", m3e, "r</mm:think>c", NULL, false,
          &(want){.reasoning = "r", .content = "c"}, "m3 enabled");
    check("minimax_m3", m3d, "c<mm:think>x", NULL, false, &(want){.content = "c<mm:think>x"},
          "m3 disabled");
    check("minimax_m3", m3a, "<mm:think>r</mm:think>c", NULL, false,
          &(want){.reasoning = "r", .content = "c"}, "m3 adaptive, thinking");
    check("minimax_m3", m3a, "</mm:think>c", NULL, false, &(want){.content = "c"},
          "m3 adaptive, not thinking");
    check("minimax_m3", m3a, "c", NULL, false, &(want){.content = "c"}, "m3 adaptive, no tag");
    check("minimax_m3", m3a, "<mm:think>r", NULL, false,
          &(want){.reasoning = "r", .in_reasoning = true}, "m3 never closed");

    const char *nested_tools =
        "[{\"type\": \"function\", \"function\": {\"name\": \"s\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"p\": {\"type\": \"array\", \"items\": {\"type\": "
        "\"object\", \"properties\": {\"age\": {\"type\": \"number\"}, \"ok\": {\"type\": "
        "\"boolean\"}, \"item\": {\"type\": \"integer\"}}}}, \"e\": {\"type\": \"array\"}, "
        "\"o\": {\"type\": \"object\"}}}}}]";
    const char *nested =
        "</mm:think>" NS "<tool_call>\n" NS "<invoke name=\"s\">" NS "<p>" NS "<item>" NS
        "<age>7.5" NS "</age>" NS "<ok>true" NS "</ok>" NS "</item>" NS "<item>" NS "<item>3" NS
        "</item>" NS "</item>" NS "</p>" NS "<e>" NS "</e>" NS "<o>" NS "</o>" NS "<n>" NS
        "<item>1" NS "</item>" NS "<item>x" NS "</item>" NS "</n>" NS "<m>" NS "<a>1" NS "</a>" NS
        "</m>" NS "</invoke>\n" NS "</tool_call>";
    check("minimax_m3", m3a, nested, nested_tools, false,
          &(want){.n_calls = 1,
                  .name = {"s"},
                  .args = {"{\"p\": [{\"age\": 7.5, \"ok\": true}, {\"item\": 3}], \"e\": [], "
                           "\"o\": {}, \"n\": [\"1\", \"x\"], \"m\": {\"a\": \"1\"}}"}},
          "m3 nested");
    const char *mism = "</mm:think>t" NS "<tool_call>\n" NS "<invoke name=\"s\">" NS "<a>1" NS
                       "</b>" NS "</invoke>\n" NS "</tool_call>";
    check("minimax_m3", m3a, mism, NULL, false, &(want){.content = mism + strlen("</mm:think>")},
          "m3 mismatched close tag");

    /* the family defaults and the names */
    EXPECT(!strcmp(mt_reply_format_names(), "none|minimax_m2|minimax_m3"), "names %s",
           mt_reply_format_names());
    EXPECT(!strcmp(mt_reply_format_name(mt_reply_format_of(&mt_family_m2)), "minimax_m2") &&
               !strcmp(mt_reply_format_name(mt_reply_format_of(&mt_family_m3)), "minimax_m3") &&
               !strcmp(mt_reply_format_name(mt_reply_format_of(&mt_family_text01)), "none"),
           "family defaults");
    EXPECT(!mt_reply_format_active(mt_reply_format_find("none")) && !mt_reply_format_find("x"),
           "none / unknown");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"models_reply_values", test_values},
    {"models_reply_markup", test_markup},
};
MT_TEST_MAIN(cases)
