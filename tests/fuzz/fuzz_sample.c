/* fuzz_sample.c: "question\nanswer" through the sample builder (data/sample.c: the
 * MiniMax-Text-01 chat template of the fuzz tokenizer's directory rendered by the Jinja engine,
 * the tokenizer, the assistant-only label mask, annotation stripping, truncation to 64 tokens). */
#include "data/sample.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mt_tokenizer *tok;
    static mt_chat_template *tmpl;
    static mt_sample_builder b;
    char err[MT_ERR_LEN];
    if (!tok) {
        tok = mt_tokenizer_load(MT_FUZZ_TOKENIZER);
        char dir[4096]; /* the directory of tokenizer.json: its tokenizer_config.json */
        snprintf(dir, sizeof(dir), "%s", MT_FUZZ_TOKENIZER);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        tmpl = mt_chat_template_open(&(mt_chat_source){.dir = slash ? dir : "."}, err, sizeof(err));
        MT_CHECK(tmpl, "fuzz: %s", err);
        mt_sample_opts o;
        mt_sample_opts_default(&o);
        o.strip_annotations = true;
        o.max_length = 64;
        o.policy = MT_TRUNC_TRUNCATE;
        mt_sample_builder_init(&b, tok, tmpl, &o);
    }
    char *q = fuzz_cstr(data, size), *a = strchr(q, '\n');
    if (a) *a++ = 0;
    mt_sample_build(&b, q, a ? a : "", err);
    free(q);
    return 0;
}
