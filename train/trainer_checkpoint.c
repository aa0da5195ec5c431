/* trainer_checkpoint.c: the trainer's checkpoints (<output.dir>/checkpoint-<step>/ = a Hugging
 * Face model directory + the training state, train/checkpoint.h) and resuming from one. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/nonfinite.h"
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

static void remove_tree(const char *path) {
    char cmd[MT_PATH_MAX * 2 + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

static int trainer_step_newer(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* output.save_total_limit: rank 0 keeps the checkpoint just saved and the newest limit - 1
 * other checkpoint-<step> directories of output.dir (by step), and removes the rest. */
static void trainer_prune_checkpoints(trainer *t, int saved_step) {
    const int limit = t->rc.output_save_total_limit;
    if (limit <= 0 || t->comm->rank != 0) return;
    DIR *d = opendir(t->rc.output_dir);
    if (!d) return;
    int steps[4096], n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;) {
        int s = 0, len = 0;
        if (sscanf(e->d_name, "checkpoint-%d%n", &s, &len) == 1 && e->d_name[len] == '\0' &&
            s != saved_step)
            steps[n++] = s;
    }
    closedir(d);
    /* newest first; keep limit - 1 besides the one just saved */
    qsort(steps, (size_t)n, sizeof(int), trainer_step_newer);
    for (int i = limit - 1; i < n; i++) {
        char dir[MT_PATH_MAX + 64];
        snprintf(dir, sizeof(dir), "%s/checkpoint-%d", t->rc.output_dir, steps[i]);
        remove_tree(dir);
        LOG0(t, "removed %s (output.save_total_limit = %d)\n", dir, limit);
    }
}

void trainer_save(trainer *t, int step) {
    char dir[MT_PATH_MAX + 64], tmp[MT_PATH_MAX + 80];
    snprintf(dir, sizeof(dir), "%s/checkpoint-%d", t->rc.output_dir, step);
    snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
    double t0 = mt_time_now();
    if (t->comm->rank == 0) {
        remove_tree(tmp); /* a crashed earlier attempt */
        trainer_mkdir_p(tmp);
    }
    t->comm->barrier(t->comm);
    /* the HF export: full buckets, gathered one at a time, written by rank 0 */
    mt_weights_writer *w = NULL;
    if (t->rc.output_export && t->comm->rank == 0) {
        mt_dtype dt = !strcmp(t->rc.output_export_dtype, "bf16") ? MT_BF16 : MT_F32;
        w = mt_weights_writer_open(tmp, &t->model, t->naming, dt, t->rc.output_shard_bytes);
    }
    if (t->rc.output_export)
        for (int b = 0; b < t->model.n_buckets; b++) {
            const float *full = mt_zero_gather_master(&t->zero, b); /* fp32, whatever gathers */
            if (w && t->be->dev != MT_CPU) {
                if (!t->export_stage)
                    t->export_stage =
                        mt_malloc(sizeof(float) * (size_t)t->zero.slot_numel, "export staging");
                t->be->to_host(t->export_stage, full,
                               sizeof(float) * (size_t)t->model.bucket_numel[b]);
                full = t->export_stage;
            }
            if (w) mt_weights_writer_add_bucket(w, b, full);
            mt_zero_release(&t->zero, b);
        }
    if (w) {
        mt_weights_writer_close(w);
        const char *files[] = {"tokenizer.json", "tokenizer_config.json",
                               "special_tokens_map.json"};
        for (int i = 0; i < 3; i++) {
            char src[MT_PATH_MAX + 64], dst[MT_PATH_MAX + 128];
            snprintf(src, sizeof(src), "%s/%s", t->tokenizer_dir, files[i]);
            snprintf(dst, sizeof(dst), "%s/%s", tmp, files[i]);
            copy_file_atomic(src, dst);
        }
        char recipe_text[16384];
        mt_recipe_format(&t->rc, recipe_text, sizeof(recipe_text));
        char path[MT_PATH_MAX + 128];
        snprintf(path, sizeof(path), "%s/recipe.toml", tmp);
        mt_file_write_atomic(path, recipe_text, strlen(recipe_text));
    }
    /* the training state, written collectively */
    t->state.step = step;
    mt_sampler_cursor cur = mt_sampler_get_cursor(&t->sampler);
    memcpy(t->state.cursor, &cur, sizeof(cur));
    mt_checkpoint_save(tmp, &t->zero, &t->state);
    /* only now does the checkpoint exist under its name; an older one is never touched */
    if (t->comm->rank == 0) {
        remove_tree(dir);
        MT_CHECK(rename(tmp, dir) == 0, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    }
    t->comm->barrier(t->comm);
    LOG0(t, "saved %s (%.1f s)\n", dir, mt_time_now() - t0);
    trainer_prune_checkpoints(t, step);
}

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
