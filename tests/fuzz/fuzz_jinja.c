/* fuzz_jinja.c: template text through the Jinja engine (jinja/): loading, then a render with
 * small limits. The input is the template, optionally followed by a line "#vars" and a JSON
 * object of variables (messages, tools, ...): refusals are fine, crashes, leaks, hangs and
 * unbounded memory are not. */
#include "fuzz_util.h"
#include "jinja/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data, *sep = NULL;
    for (size_t i = 0; i + 6 <= size; i++)
        if (!memcmp(text + i, "\n#vars", 6)) {
            sep = text + i;
            break;
        }
    const size_t tlen = sep ? (size_t)(sep - text) : size;
    char err[512];
    jinja_template *t = jinja_template_load("fuzz.jinja", text, tlen, err, sizeof(err));
    if (!t) return 0;
    jinja_heap *h = jinja_heap_new((size_t)64 << 20);
    jinja_value vars;
    if (!sep || jinja_json_parse(h, sep + 6, size - tlen - 6, &vars, err, sizeof(err)) != 0 ||
        vars.type != JINJA_DICT)
        vars = jinja_dict_new(h);
    jinja_dict_set_str(h, vars, "add_generation_prompt", jinja_bool(true));
    jinja_output out = {0};
    jinja_render_opts o = {.max_output = 1 << 20,
                           .max_memory = (size_t)32 << 20,
                           .max_steps = 100000,
                           .max_depth = 64,
                           .now = 0};
    jinja_render(t, h, vars, &o, &out, err, sizeof(err));
    jinja_output_free(&out);
    jinja_heap_free(h);
    jinja_template_free(t);
    return 0;
}
