/* fuzz_jsonl.c: the input as a whole data file (data/dataset.c: jsonl or a JSON array) in
 * every format, bad records skipped, each record through the format's reader and the
 * conversation normalisation of data/chat.h; then the GSM8K annotation stripper over the
 * input as a C string. */
#include "data/dataset.h"
#include "data/gsm8k.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1024];
    for (int f = 0; f < MT_FORMAT_COUNT; f++) {
        mt_conv_set s;
        if (mt_conv_parse("fuzz.jsonl", (const char *)data, size, (mt_data_format)f, true, &s,
                          err) == 0)
            mt_conv_set_free(&s);
    }
    char *text = fuzz_cstr(data, size);
    const size_t n = mt_gsm8k_strip_annotations(text);
    MT_CHECK(n == strlen(text), "strip_annotations: length %zu, the text has %zu", n, strlen(text));
    free(text);
    return 0;
}
