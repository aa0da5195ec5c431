/* fuzz_tokenizer_json.c: a tokenizer.json through the tokenizer loader (data/tokenizer.c:
 * model, merges, added tokens, pre-tokenizer and normalizer settings); a tokenizer it accepts
 * then encodes and decodes a fixed text. */
#include "data/tokenizer.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    mt_tokenizer *t =
        mt_tokenizer_load_json((const char *)data, size, "fuzz.json", err, sizeof(err));
    if (!t) return 0;
    static const char text[] = "A farmer has 12 cows <|im_start|> ééé 日本 \xf0\x9f\x99\x82 1234";
    mt_token_buf b = {0};
    const int64_t n = mt_tokenizer_encode(t, text, sizeof(text) - 1, &b);
    if (n > 0) free(mt_tokenizer_decode(t, b.ids, n, false));
    mt_token_buf_free(&b);
    mt_tokenizer_free(t);
    return 0;
}
