/* fuzz_jsonl.c: one line of a GSM8K jsonl file through the line parser (data/gsm8k.c), and
 * the annotation stripping of the answer it accepts. */
#include "data/gsm8k.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *q = NULL, *a = NULL, err[1024];
    if (mt_gsm8k_parse_line("fuzz.jsonl", 1, (const char *)data, size, &q, &a, err) != 0) return 0;
    mt_gsm8k_strip_annotations(a);
    free(q);
    free(a);
    return 0;
}
