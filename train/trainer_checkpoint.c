/* trainer_checkpoint.c: the trainer's checkpoints (<output.dir>/checkpoint-<step>/ = a Hugging
 * Face model directory + the training state, train/checkpoint.h) and resuming from one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/nonfinite.h"
#include "train/output_dir.h"
#include "train/trainer_internal.h"

static void copy_file_atomic(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    if (!in) return; /* optional files (special_tokens_map.json) */
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = mt_malloc((size_t)n + 1, src);
    size_t got = fread(buf, 1, (size_t)n, in);
    fclose(in);
    MT_CHECK(got == (size_t)n, "cannot read %s", src);
    mt_file_write_atomic(dst, buf, (size_t)n);
    free(buf);
}

/* ------------------------------------------------------------------------------------------ */
/* saving */

/* output.save_total_limit: rank 0 keeps the checkpoint just saved and the newest limit - 1
 * other checkpoint-<step> directories of output.dir (by step), and removes the rest. */
static void trainer_prune_checkpoints(trainer *t, int saved_step) {
    const int limit = t->rc.output_save_total_limit;
    if (limit <= 0 || t->comm->rank != 0) return;
    static long steps[MT_OUTDIR_MAX_CHECKPOINTS];
    const int n = mt_outdir_checkpoints(t->rc.output_dir, steps, MT_OUTDIR_MAX_CHECKPOINTS);
    int others = 0;
    for (int i = 0; i < n; i++) others += steps[i] != saved_step;
    /* oldest first: all but the newest limit - 1 of the others go */
    for (int i = 0, removed = 0; i < n && removed < others - (limit - 1); i++) {
        if (steps[i] == saved_step) continue;
        char dir[MT_PATH_MAX + 64];
        snprintf(dir, sizeof(dir), "%s/checkpoint-%ld", t->rc.output_dir, steps[i]);
        if (!mt_remove_tree(dir)) fprintf(stderr, "warning: could not remove %s\n", dir);
        LOG0(t, "removed %s (output.save_total_limit = %d)\n", dir, limit);
        removed++;
    }
}

/* The HF export: full buckets, gathered one at a time, written by rank 0. */
static void trainer_export(trainer *t, const char *dir) {
    mt_weights_writer *w = NULL;
    if (t->comm->rank == 0) {
        mt_dtype dt = !strcmp(t->rc.output_export_dtype, "bf16") ? MT_BF16 : MT_F32;
        w = mt_weights_writer_open(dir, &t->model, t->naming, dt, t->rc.output_shard_bytes);
    }
    for (int b = 0; b < t->model.n_buckets; b++) {
        const float *full = mt_zero_gather_master(&t->zero, b); /* fp32, whatever gathers */
        if (w && t->be->dev != MT_CPU) {
            if (!t->export_stage)
                t->export_stage =
                    mt_malloc(sizeof(float) * (size_t)t->zero.slot_numel, "export staging");
            t->be->to_host(t->export_stage, full, sizeof(float) * (size_t)t->model.bucket_numel[b]);
            full = t->export_stage;
        }
        if (w) mt_weights_writer_add_bucket(w, b, full);
        mt_zero_release(&t->zero, b);
    }
    if (!w) return;
    mt_weights_writer_close(w);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};
    for (int i = 0; i < 3; i++) {
        char src[MT_PATH_MAX + 64], dst[MT_PATH_MAX + 128];
        snprintf(src, sizeof(src), "%s/%s", t->tokenizer_dir, files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
        copy_file_atomic(src, dst);
    }
    char recipe_text[16384];
    mt_recipe_format(&t->rc, recipe_text, sizeof(recipe_text));
    char path[MT_PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/recipe.toml", dir);
    mt_file_write_atomic(path, recipe_text, strlen(recipe_text));
}

void trainer_save(trainer *t, int step) {
    char dir[MT_PATH_MAX + 64], tmp[MT_PATH_MAX + 80];
    snprintf(dir, sizeof(dir), "%s/checkpoint-%d", t->rc.output_dir, step);
    snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
    const double t0 = mt_time_now();
    /* a rank that fails while the checkpoint is written removes it, whichever file failed */
    mt_cleanup_add(tmp);
    if (t->comm->rank == 0) {
        mt_remove_tree(tmp); /* a crashed earlier attempt */
        char err[MT_ERR_LEN + MT_PATH_MAX];
        MT_CHECK(mt_dir_make(tmp, err, sizeof(err)), "%s", err);
    }
    t->comm->barrier(t->comm);
    if (t->rc.output_export) trainer_export(t, tmp);
    /* the training state: each rank its own file, then the manifest */
    t->state.step = step;
    mt_sampler_cursor cur = mt_sampler_get_cursor(&t->sampler);
    memcpy(t->state.cursor, &cur, sizeof(cur));
    mt_checkpoint_save(tmp, &t->zero, &t->state);
    /* only now does the checkpoint exist under its name; an older one is never touched */
    if (t->comm->rank == 0) {
        MT_CHECK(mt_remove_tree(dir), "cannot remove %s: %s", dir, strerror(errno));
        MT_CHECK(rename(tmp, dir) == 0, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
        LOG0(t, "saved %s (%.1f s)\n", dir, mt_time_now() - t0);
        /* before the barrier: the others wait for it under the checkpoint's watchdog limit */
        trainer_prune_checkpoints(t, step);
    }
    t->comm->barrier(t->comm);
    mt_cleanup_remove(tmp);
}

/* ------------------------------------------------------------------------------------------ */
/* resuming */

void trainer_resume(trainer *t, const char *dir) {
    mt_train_state st;
    MT_CHECK(mt_checkpoint_load(dir, &t->zero, &st), "--resume %s: no state.h5 there", dir);
    char why[1024];
    MT_CHECK(mt_sharded_check_finite(&t->sharded, why, sizeof(why)), "--resume %s: %s", dir, why);
    MT_CHECK(st.recipe_hash == mt_recipe_hash(&t->rc),
             "--resume %s: the recipe differs from the one that wrote the checkpoint in a key "
             "that changes the numerics (compare %s/recipe.toml with this recipe)",
             dir, dir);
    t->state = st;
    mt_sampler_cursor cur;
    memcpy(&cur, st.cursor, sizeof(cur));
    mt_sampler_set_cursor(&t->sampler, cur);
    LOG0(t, "resumed from %s at step %lld (written by %d ranks, now %d)\n", dir, (long long)st.step,
         st.world_size, t->comm->size);
}
