/* model_io_window.c: the config keys sliding_window and router_jitter_noise (models/config.c,
 * docs/models.md): Text-01 reads them into the plan (the window for the softmax layers only, as
 * transformers' MiniMaxModel masks its full_attention layers) and saves them back; values
 * outside their range are refused by key. M2 and M3 refusals: model_io_m2.c, model_io_m3.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"
#include "core/file_io.h"
#include "models/config.h"
#include "model_io.h"

int test_config_window_jitter(void) {
    const char *path = tmp_path("window.json");
    char *base = NULL;
    {
        /* TINY_HF (layers linear x3, full) with a window of 3 and jitter 0.125 */
        write_json_with(path, TINY_HF, "sliding_window", "3");
        size_t n = 0;
        char err[256];
        base = mt_file_read_max(path, &n, 1 << 20, err, sizeof(err));
        MT_CHECK(base, "%s", err);
        write_json_with(path, base, "router_jitter_noise", "0.125");
    }
    mt_minimax_config cfg = parse_ok(path);
    EXPECT(cfg.sliding_window == 3, "sliding_window read as %d", cfg.sliding_window);
    EXPECT(cfg.router_jitter_noise == 0.125f, "router_jitter_noise read as %g",
           (double)cfg.router_jitter_noise);
    for (int l = 0; l < cfg.num_hidden_layers; l++) {
        mt_layer_plan p;
        mt_config_layer_plan(&cfg, l, &p);
        const int64_t want = cfg.layer_types[l] == MT_LAYER_FULL ? 3 : 0;
        EXPECT(p.window == want, "layer %d: window %lld, want %lld", l, (long long)p.window,
               (long long)want);
        EXPECT(p.jitter == 0.125f, "layer %d: jitter %g", l, (double)p.jitter);
    }
    /* saved back and read again */
    const char *saved = tmp_path("window_saved.json");
    mt_minimax_config_save_json(&cfg, saved, MT_NAMING_HF_V4);
    mt_minimax_config back = parse_ok(saved);
    EXPECT(back.sliding_window == 3 && back.router_jitter_noise == 0.125f,
           "saved config reads back as window %d jitter %g", back.sliding_window,
           (double)back.router_jitter_noise);
    /* null and 0 are the defaults */
    write_json_with(path, TINY_HF, "sliding_window", "null");
    cfg = parse_ok(path);
    EXPECT(cfg.sliding_window == 0 && cfg.router_jitter_noise == 0, "null window: %d, %g",
           cfg.sliding_window, (double)cfg.router_jitter_noise);
    /* out of range, by key */
    expect_reject("w1.json", TINY_HF, "sliding_window", "0", "\"sliding_window\": 0 must be");
    expect_reject("w2.json", TINY_HF, "sliding_window", "-4", "\"sliding_window\": -4 must be");
    expect_reject("w3.json", TINY_HF, "sliding_window", "2.5", "sliding_window");
    expect_reject("w4.json", TINY_HF, "router_jitter_noise", "1.5", "\"router_jitter_noise\": 1.5");
    expect_reject("w5.json", TINY_HF, "router_jitter_noise", "-0.1", "router_jitter_noise");
    free(base);
    return MT_TEST_OK;
}
