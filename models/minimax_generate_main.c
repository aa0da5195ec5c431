/* minimax-generate: greedy decoding with a MiniMax checkpoint of any family (models/family.h;
 * models/generate.h).
 *
 *   minimax-generate --model DIR --ids IDS.json --max-new-tokens N [--arena-mb M]
 *
 * IDS.json: a list of equal-length lists of prompt token ids. Prints the generated ids as a
 * JSON list of lists, one row per line. With an eos_token_id in the config a row stops at eos
 * (and is padded with eos while the others go on), like transformers' generate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/config.h"
#include "models/generate.h"
#include "models/ids_json.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "kernels/version.h"

/* --help: on stdout, exit 0; a bad command line: on stderr, exit 2 */
static void usage(int status) {
    fprintf(status ? stderr : stdout,
            "usage: minimax-generate --model DIR --ids IDS.json --max-new-tokens N "
            "[--arena-mb M]\n"
            "       minimax-generate --help | --version\n"
            "  greedy decoding: IDS.json is a list of equal-length lists of prompt token ids;\n"
            "  prints the generated ids as a JSON list of lists, one row per line\n");
    exit(status);
}

/* One no-grad prompt forward: a few live activations of the widest layer plus the logits. */
static size_t gen_arena_bytes(const mt_minimax_config *cfg, int64_t B, int64_t T) {
    const int64_t N = B * T, C = cfg->hidden_size,
                  HD = (int64_t)cfg->num_attention_heads * cfg->head_dim;
    const int64_t K = cfg->num_experts_per_tok, F = cfg->intermediate_size;
    int64_t per_layer = N * (12 * C + 10 * HD + 4 * cfg->num_local_experts) +
                        N * K * (4 * C + 6 * F) + 2 * B * cfg->num_attention_heads * T +
                        (int64_t)B * cfg->num_attention_heads * cfg->head_dim * cfg->head_dim;
    int64_t floats = per_layer * cfg->num_hidden_layers + 2 * N * cfg->vocab_size;
    return (size_t)floats * sizeof(float) + ((size_t)64 << 20);
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *ids_path = NULL;
    long n_new = -1, arena_mb = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_dir = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids_path = argv[++i];
        else if (!strcmp(argv[i], "--max-new-tokens") && i + 1 < argc)
            n_new = atol(argv[++i]);
        else if (!strcmp(argv[i], "--arena-mb") && i + 1 < argc)
            arena_mb = atol(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            usage(0);
        else if (!strcmp(argv[i], "--version")) {
            mt_version_print(stdout, "minimax-generate");
            return 0;
        } else
            usage(2);
    }
    if (!model_dir || !ids_path || n_new < 0 || n_new > 1000000) usage(2);

    mt_minimax_config cfg;
    mt_minimax_config_load(model_dir, &cfg);
    int B, T; /* checked against the vocabulary before any weight is read */
    int32_t *ids = mt_ids_json_load(ids_path, &B, &T);
    mt_ids_check_range(ids, B, T, cfg.vocab_size, 0, "token id", ids_path);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **data = mt_calloc((size_t)m.n_buckets, sizeof(float *), "buckets");
    for (int b = 0; b < m.n_buckets; b++) {
        data[b] = mt_calloc((size_t)m.bucket_numel[b], sizeof(float), "bucket");
        mt_minimax_bind_bucket(&m, b, data[b], NULL);
    }
    mt_weights_load(model_dir, &m);
    int32_t *out = mt_malloc((size_t)B * (size_t)(n_new > 0 ? n_new : 1) * sizeof(int32_t), "out");

    mt_ctx c;
    size_t arena = arena_mb > 0 ? (size_t)arena_mb << 20 : gen_arena_bytes(&cfg, B, T);
    mt_ctx_init(&c, mt_backend_cpu(), arena, 64 * (cfg.num_hidden_layers + 4));
    int steps = 0;
    mt_minimax_generate(&m, &c, ids, B, T, (int)n_new, cfg.eos_token_id, out, &steps);

    printf("[\n");
    for (int b = 0; b < B; b++) {
        printf("  [");
        for (int s = 0; s < steps; s++) printf(s ? ", %d" : "%d", out[(size_t)b * n_new + s]);
        printf(b + 1 < B ? "],\n" : "]\n");
    }
    printf("]\n");

    mt_ctx_free(&c);
    for (int b = 0; b < m.n_buckets; b++) free(data[b]);
    free(data);
    free(ids);
    free(out);
    mt_minimax_free(&m);
    return 0;
}
