/* weights.h: MiniMax checkpoints (every family: models/family.h) <-> the parameter buckets of
 * mt_minimax.
 *
 * Three tensor layouts (docs/checkpoints.md):
 *   transformers v4.5x: model.layers.i.block_sparse_moe.experts.e.w1/w2/w3.weight and
 *                       model.layers.i.block_sparse_moe.gate.weight (the internal names; M2's
 *                       block_sparse_moe.e_score_correction_bias);
 *   transformers v5:    model.layers.i.mlp.experts.gate_up_proj (E, 2F, C): rows [0, F) = w1,
 *                       [F, 2F) = w3; model.layers.i.mlp.experts.down_proj (E, C, F) = w2;
 *                       model.layers.i.mlp.gate.weight (mlp.e_score_correction_bias);
 *   original release:   the v4.5x names, with an original-schema config.json.
 * The layout is detected from the tensor names (fused names: v5; else per-expert names: v4.5x
 * or original by the config's schema). Every other name is the same in all three. Tensors no
 * parameter uses are what the family says (derived buffers checked, tensors carried into
 * exports, else an error); FP8 weights (an FP8 quantization_config) are dequantised on load. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/minimax.h"
#include "models/safetensors.h"

typedef struct mt_weights_reader mt_weights_reader;

/* Opens the checkpoint in dir for model m (its planned layout; buckets need not be bound) and
 * validates it completely before any data is read: every parameter present with its shape and
 * a float dtype, no unexpected tensor (tensors of layers dropped with
 * mt_minimax_config_keep_layers are skipped; transformers' derived lightning buffers
 * slope_rate/query_decay/key_decay/diagonal_decay are checked against the config's decay and
 * block size, not loaded). Dies naming the tensor and file. */
mt_weights_reader *mt_weights_open(const char *dir, const mt_minimax *m);
/* Same, returning NULL with the message in err. */
mt_weights_reader *mt_weights_try_open(const char *dir, const mt_minimax *m, char *err,
                                       size_t err_len);
mt_naming mt_weights_naming(const mt_weights_reader *r);
/* One line for the log: the layout, the FP8 tensors dequantised on load (an FP8 release's
 * weights, times their weight_scale_inv blocks), the tensors carried into exports. */
void mt_weights_describe(const mt_weights_reader *r, char *buf, size_t n);
/* Elements [lo, hi) of bucket's flat layout (mt_param_info offsets) into dst (hi - lo floats);
 * alignment gaps read as zero. A ZeRO rank loads just its shard this way. */
void mt_weights_read_range(mt_weights_reader *r, int bucket, int64_t lo, int64_t hi, float *dst);
void mt_weights_close(mt_weights_reader *r);

/* Loads every bucket of m into its bound data (mt_minimax_bind_bucket); returns the layout.
 * verify: each file's data is checked against the digest its header records
 * (MT_ST_DIGEST_KEY) in the same pass that reads it; a damaged file ends the process naming
 * it, files recording none (other writers') load with one line on stderr saying so. */
mt_naming mt_weights_load_checked(const char *dir, mt_minimax *m, bool verify);
/* The same, verified. */
mt_naming mt_weights_load(const char *dir, mt_minimax *m);
/* Host buckets for every bucket of m (initialised), bound to it and loaded from dir: what the
 * generation tools decode with. Returns the buffers, for mt_weights_host_free. */
float **mt_weights_load_host(const char *dir, mt_minimax *m);
void mt_weights_host_free(mt_minimax *m, float **data);
/* The same on backend be: the host buckets loaded from dir, then (be not the CPU) copied into
 * be's memory bucket by bucket, each host bucket freed once copied, and the device copies bound
 * instead. Returns the buffers (be's), for mt_weights_backend_free. Both verify. */
float **mt_weights_load_backend(const char *dir, mt_minimax *m, const mt_backend *be);
/* The same, verify as mt_weights_load_checked's (the tools' --no-verify). */
float **mt_weights_load_backend_checked(const char *dir, mt_minimax *m, const mt_backend *be,
                                        bool verify);
void mt_weights_backend_free(mt_minimax *m, const mt_backend *be, float **data);
/* The digests of files first, first + stride, ... of r's checkpoint (dir), for a load that
 * reads parts (each rank its shard): dies naming a damaged file; first 0 also says which files
 * record none. A second read of the bytes, unlike mt_weights_load_checked. */
void mt_weights_verify(const mt_weights_reader *r, const char *dir, int first, int stride);
/* Element range [lo, hi) of one bucket (open + read + close). */
mt_naming mt_weights_load_range(const char *dir, const mt_minimax *m, int bucket, int64_t lo,
                                int64_t hi, float *dst);

/* Random initialisation as transformers' _init_weights: N(0, initializer_range) for the
 * embedding, linear, router and expert weights (the pad_token_id row of the embedding zero),
 * RMSNorm weights 1, correction biases 0 (mt_param_info.init). Element j of parameter p depends
 * only on (seed, p, j): the same values whatever the binding or sharding. */
void mt_weights_init_random(mt_minimax *m, uint64_t seed);
void mt_weights_init_random_range(const mt_minimax *m, uint64_t seed, int bucket, int64_t lo,
                                  int64_t hi, float *dst);

/* Checkpoint name of parameter p in a naming, and the element offset of p inside that tensor
 * (non-zero only for the fused v5 expert tensors). */
void mt_weights_source_name(const mt_minimax *m, int p, mt_naming naming, char *name, size_t n,
                            int64_t *offset);

/* Saving: config.json (schema of the naming) + safetensors shards of at most shard_bytes
 * (<= 0: one file), dtype MT_F32 or MT_BF16. Buckets are added one at a time (full bucket
 * data, bucket_numel floats), so a sharded trainer can gather and add them in turn; every
 * bucket must be added once before close. */
typedef struct mt_weights_writer mt_weights_writer;
mt_weights_writer *mt_weights_writer_open(const char *dir, const mt_minimax *m, mt_naming naming,
                                          mt_dtype dtype, int64_t shard_bytes);
void mt_weights_writer_add_bucket(mt_weights_writer *w, int bucket, const float *data);
/* Copies the tensors of the checkpoint in src_dir that the family carries without training
 * them (MT_EXTRA_CARRIED: M2's multi-token-prediction modules, with their FP8 scales) into the
 * export byte for byte. Buffers (the correction bias) are written in fp32 whatever the dtype. */
void mt_weights_writer_carry(mt_weights_writer *w, const char *src_dir);
/* output.export_dtype = "fp8": the export mirrors the FP8 checkpoint in src_dir (its config has
 * an fp8 quantization_config): every tensor in the source's dtype, those the source holds as
 * F8_E4M3 block-quantised (mt_fp8_quantize, the config's weight_block_size) with F32
 * weight_scale_inv, the others F32 or BF16 as there; config.json gets the source's
 * quantization_config and dtype. A tensor the source lacks, or an FP8 one that the export
 * writes in pieces (fused or vocabulary-parallel layouts), ends the process naming it. Call
 * before adding buckets. */
void mt_weights_writer_mirror(mt_weights_writer *w, const char *src_dir);
void mt_weights_writer_close(mt_weights_writer *w);
/* fp32 -> float8_e4m3fn bits, round to nearest even, saturating at +-448 (NaN: 0x7f). */
uint8_t mt_f32_to_f8e4m3(float x);
/* mats matrices rows x cols (row-major, consecutive) into e4m3 q and one fp32 weight_scale_inv
 * per bm x bn block (mats x ceil(rows/bm) x ceil(cols/bn)), as transformers' Fp8Quantize:
 * scale = 448 x (1 / amax) of the block (1 when it is all zero), weight_scale_inv = 1 / scale,
 * q = e4m3(clamp(x * scale, -448, 448)), in fp32 (the same bytes); the loader's value is
 * q x weight_scale_inv. */
void mt_fp8_quantize(const float *x, int64_t mats, int64_t rows, int64_t cols, int bm, int bn,
                     uint8_t *q, float *scale_inv);
/* config.json of the export in dir: "dtype" and "torch_dtype" (transformers v5's name and the
 * one v4 reads) = dtype ("float32", "bfloat16"); with fp8_src_dir, the source config's dtype
 * and its quantization_config instead. */
void mt_weights_config_patch(const char *dir, const char *dtype, const char *fp8_src_dir);

/* All buckets from their bound data. */
void mt_weights_save(const char *dir, const mt_minimax *m, mt_naming naming, mt_dtype dtype,
                     int64_t shard_bytes);
