/* fuzz_toml.c: recipe text through the TOML reader (train/toml.c), and what it accepts printed
 * back and applied again as a --set assignment. */
#include "fuzz_util.h"
#include "train/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size), err[512], buf[256];
    mt_toml_doc doc = {0};
    if (mt_toml_parse(&doc, text, "fuzz.toml", err, sizeof(err))) {
        for (int i = 0; i < doc.n; i++) {
            buf[0] = 0; /* the value is appended */
            mt_toml_value_format(&doc.entries[i].value, buf, sizeof(buf));
        }
        mt_toml_set(&doc, text, err, sizeof(err));
    }
    mt_toml_free(&doc);
    free(text);
    return 0;
}
