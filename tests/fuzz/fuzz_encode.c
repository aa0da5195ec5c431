/* fuzz_encode.c: arbitrary bytes (invalid UTF-8 included) through the tests' real tokenizer,
 * and the ids decoded back. */
#include "data/tokenizer.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mt_tokenizer *tok;
    if (!tok) tok = mt_tokenizer_load(MT_FUZZ_TOKENIZER);
    mt_token_buf b = {0};
    const int64_t n = mt_tokenizer_encode(tok, (const char *)data, size, &b);
    if (n > 0) free(mt_tokenizer_decode(tok, b.ids, n, false));
    mt_token_buf_free(&b);
    return 0;
}
