/* model_io.h: helpers shared by the test_model_io sources (model_io.c, model_io_files.c). */
#pragma once
#include <stddef.h>

#include "models/config.h"

/* A temporary directory for the running case, removed by tmp_cleanup (and at exit). */
const char *tmp_dir(void);
void tmp_cleanup(void);
/* tmp_dir()/name (a few rotating buffers). */
const char *tmp_path(const char *name);
void write_bytes(const char *path, const void *data, size_t n);
void write_text(const char *path, const char *text);
/* The JSON object base with key set to the JSON text raw (removed when raw is NULL). */
void write_json_with(const char *path, const char *base, const char *key, const char *raw);
/* Parses a config that must be valid (a failed check otherwise). */
mt_minimax_config parse_ok(const char *path);
/* Writes base with key set to raw (removed when NULL) as tmp_path(name) and expects the config
 * to be rejected with a message naming needle and the file. */
void expect_reject(const char *name, const char *base, const char *key, const char *raw,
                   const char *needle);
/* A 4-layer tiny config in the transformers schema (3 lightning layers, then softmax). */
extern const char *TINY_HF;

int test_safetensors_digest(void);
int test_safetensors_roundtrip(void);
int test_safetensors_errors(void);
int test_weights_layouts(void);
int test_weights_gather_units(void);
int test_weights_export_m2(void);
int test_config_m2(void);
int test_config_m3(void);
int test_config_window_jitter(void);
int test_weights_export_m3(void);
int test_weights_export_m3_text(void);
int test_weights_fp8_errors(void);
