/* synth_chat.c: synthetic agentic conversations (data/synth.h): a problem of data/synth.c solved
 * step by step with a calculator tool, with reasoning on every assistant turn. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/gsm8k.h"
#include "data/synth.h"

/* The calculator's schema, in OpenAI's {"type": "function", "function": {...}} shape. */
static cJSON *calculator_tool(void) {
    cJSON *tool = cJSON_CreateObject(), *fn = cJSON_CreateObject(), *params = cJSON_CreateObject(),
          *props = cJSON_CreateObject(), *expr = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON_AddStringToObject(tool, "type", "function");
    cJSON_AddStringToObject(fn, "name", "calculate");
    cJSON_AddStringToObject(fn, "description", "Evaluates an integer arithmetic expression.");
    cJSON_AddStringToObject(params, "type", "object");
    cJSON_AddStringToObject(expr, "type", "string");
    cJSON_AddStringToObject(expr, "description", "e.g. \"12*7\"");
    cJSON_AddItemToObject(props, "expression", expr);
    cJSON_AddItemToObject(params, "properties", props);
    cJSON_AddItemToArray(req, cJSON_CreateString("expression"));
    cJSON_AddItemToObject(params, "required", req);
    cJSON_AddItemToObject(fn, "parameters", params);
    cJSON_AddItemToObject(tool, "function", fn);
    return tool;
}

static cJSON *message(cJSON *list, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(list, m);
    return m;
}

/* One assistant turn calling calculate(expr) (arguments as an object or, every other call, as
 * its JSON text, the two shapes OpenAI-style data has), then the tool's answer. */
static void tool_step(cJSON *msgs, int step, const char *expr, size_t expr_len, const char *value,
                      size_t value_len, const char *why, bool args_as_text) {
    char buf[512], id[32];
    snprintf(id, sizeof(id), "call_%d", step);
    cJSON *a = message(msgs, "assistant", "");
    snprintf(buf, sizeof(buf), "%s I compute %.*s with the calculator.", why, (int)expr_len, expr);
    cJSON_AddStringToObject(a, "reasoning_content", buf);
    cJSON *calls = cJSON_AddArrayToObject(a, "tool_calls"), *call = cJSON_CreateObject(),
          *fn = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "id", id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON_AddStringToObject(fn, "name", "calculate");
    snprintf(buf, sizeof(buf), "%.*s", (int)expr_len, expr);
    if (args_as_text) {
        cJSON *args = cJSON_CreateObject();
        cJSON_AddStringToObject(args, "expression", buf);
        char *text = cJSON_PrintUnformatted(args);
        cJSON_AddStringToObject(fn, "arguments", text);
        free(text);
        cJSON_Delete(args);
    } else {
        cJSON_AddItemToObject(fn, "arguments", cJSON_CreateObject());
        cJSON_AddStringToObject(cJSON_GetObjectItem(fn, "arguments"), "expression", buf);
    }
    cJSON_AddItemToObject(call, "function", fn);
    cJSON_AddItemToArray(calls, call);
    snprintf(buf, sizeof(buf), "{\"result\": %.*s}", (int)value_len, value);
    cJSON *t = message(msgs, "tool", buf);
    cJSON_AddStringToObject(t, "tool_call_id", id);
    cJSON_AddStringToObject(t, "name", "calculate");
}

/* The conversation of problem `index`: its steps are the answer's calculator annotations
 * "<<expr=value>>", each a tool call; the final turn is the answer without annotations. Every
 * other conversation has a system prompt, every third a follow-up question. */
static cJSON *synth_conversation(uint64_t seed, int64_t index, mt_strbuf *q, mt_strbuf *a) {
    mt_synth_problem(seed, index, q, a);
    cJSON *rec = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(rec, "messages");
    if (index % 2 == 0)
        message(msgs, "system", "You are a careful math tutor. Use the calculator for arithmetic.");
    message(msgs, "user", q->p);
    const char *s = a->p;
    int step = 0;
    for (const char *open; (open = strstr(s, "<<")) != NULL; step++) {
        const char *eq = strchr(open, '='), *close = strstr(open, ">>");
        MT_CHECK(eq && close && eq < close, "synth: a malformed annotation in problem %lld",
                 (long long)index);
        tool_step(msgs, step, open + 2, (size_t)(eq - open - 2), eq + 1, (size_t)(close - eq - 1),
                  step == 0 ? "First," : "Next,", step % 2 == 1);
        s = close + 2;
    }
    const char *final = strstr(a->p, "#### ");
    MT_CHECK(final, "synth: problem %lld has no final answer", (long long)index);
    char buf[256];
    snprintf(buf, sizeof(buf), "All %d steps are computed; the answer is %s.", step, final + 5);
    a->len = mt_gsm8k_strip_annotations(a->p);
    cJSON *last = message(msgs, "assistant", a->p);
    cJSON_AddStringToObject(last, "reasoning_content", buf);
    if (index % 3 == 0) {
        message(msgs, "user", "Which step gave the final answer?");
        snprintf(buf, sizeof(buf), "The last of the %d calculations gives %s.", step, final + 5);
        cJSON *m = message(msgs, "assistant", buf);
        cJSON_AddStringToObject(m, "reasoning_content",
                                "The final answer came from the last step.");
    }
    cJSON *tools = cJSON_AddArrayToObject(rec, "tools");
    cJSON_AddItemToArray(tools, calculator_tool());
    return rec;
}

static cJSON *synth_chat_record(mt_synth_state *st, int64_t i) {
    return synth_conversation(st->seed, i, &st->q, &st->a);
}

int mt_synth_write_chat_jsonl(const char *path, uint64_t seed, int64_t n, char *err) {
    return mt_synth_write_records(path, n, synth_chat_record, seed, err);
}
