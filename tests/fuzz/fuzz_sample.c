/* fuzz_sample.c: "question\nanswer" through the GSM8K sample builder (data/gsm8k.c: the chat
 * template, the tokenizer, the assistant-only label mask, annotation stripping, truncation to
 * 64 tokens). */
#include "data/gsm8k.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mt_tokenizer *tok;
    static mt_sample_builder b;
    if (!tok) {
        tok = mt_tokenizer_load(MT_FUZZ_TOKENIZER);
        mt_sample_opts o;
        mt_sample_opts_default(&o);
        o.strip_annotations = true;
        o.max_length = 64;
        o.policy = MT_TRUNC_TRUNCATE;
        mt_sample_builder_init(&b, tok, &o);
    }
    char *q = fuzz_cstr(data, size), *a = strchr(q, '\n'), err[512];
    if (a) *a++ = 0;
    mt_sample_build(&b, q, a ? a : "", err);
    free(q);
    return 0;
}
