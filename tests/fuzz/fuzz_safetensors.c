/* fuzz_safetensors.c: a .safetensors file through the reader's header validation
 * (models/safetensors.c); every tensor it accepts in a float dtype is then read whole. */
#include "fuzz_util.h"
#include "models/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    mt_safetensors *st =
        mt_safetensors_try_open(fuzz_file(data, size, ".safetensors"), err, sizeof(err));
    if (!st) return 0;
    for (int i = 0; i < mt_safetensors_count(st); i++) {
        const mt_st_tensor *t = mt_safetensors_tensor(st, i);
        if (t->dtype == MT_ST_OTHER || t->numel > (1 << 20)) continue;
        float *dst = mt_malloc(sizeof(float) * (size_t)(t->numel + 1), "fuzz tensor");
        mt_safetensors_read(st, t, 0, t->numel, dst);
        free(dst);
    }
    mt_safetensors_close(st);
    return 0;
}
