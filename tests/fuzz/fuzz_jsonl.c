/* fuzz_jsonl.c: one line of a GSM8K jsonl file through the line parser (data/gsm8k.c), and
 * the annotation stripping of the answer it accepts; then the input as a whole data file
 * (data/dataset.c: jsonl or a JSON array) in every format, bad records skipped. */
#include "data/dataset.h"
#include "data/gsm8k.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *q = NULL, *a = NULL, err[1024];
    if (mt_gsm8k_parse_line("fuzz.jsonl", 1, (const char *)data, size, &q, &a, err) == 0) {
        mt_gsm8k_strip_annotations(a);
        free(q);
        free(a);
    }
    for (int f = 0; f < MT_FORMAT_COUNT; f++) {
        mt_conv_set s;
        if (mt_conv_parse("fuzz.jsonl", (const char *)data, size, (mt_data_format)f, true, &s,
                          err) == 0) {
            mt_conv_set_strip_annotations(&s);
            mt_conv_set_free(&s);
        }
    }
    return 0;
}
