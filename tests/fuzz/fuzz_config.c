/* fuzz_config.c: a model's config.json through the config reader (models/config.c). */
#include "fuzz_util.h"
#include "models/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mt_minimax_config cfg;
    char err[1024];
    mt_minimax_config_parse(fuzz_file(data, size, ".json"), &cfg, err, sizeof(err));
    return 0;
}
