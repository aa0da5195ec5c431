/* trainer_resume.c: what `--resume DIR` checks and loads (docs/training.md, "Resume"):
 *
 *   with no RECIPE.toml, the checkpoint's own recipe (DIR/recipe.toml, its digest in the
 *   manifest), --set overrides on top, output.dir the checkpoint's parent; then, before any
 *   model is built, the recipe's numerics keys against the checkpoint's, key by key; then, with
 *   the model and the data set up, the recipe hash, the global batch, the inputs' digests, and
 *   the state itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"
#include "train/nonfinite.h"
#include "train/trainer_internal.h"

void trainer_resume_steps_refusal(const char *dir, long max_steps, long step, char *why, size_t n) {
    snprintf(why, n,
             "--resume %s: train.max_steps = %ld is at or below the checkpoint's step %ld, so "
             "there is nothing to train: set train.max_steps above %ld (--set train.max_steps=N)",
             dir, max_steps, step, step);
}

bool trainer_resume_recipe_load(mt_recipe *rc, const char *dir, const char *const *sets, int n_sets,
                                char *err, size_t n) {
    char path[MT_PATH_MAX + 32], parent[MT_PATH_MAX];
    snprintf(path, sizeof(path), "%s/recipe.toml", dir);
    if (access(path, R_OK) != 0) {
        snprintf(err, n,
                 "--resume %s: %s is missing, so the checkpoint's recipe is unknown (a checkpoint "
                 "written with output.export = false before checkpoints carried their recipe, or "
                 "not a checkpoint directory): give the run's recipe, minimax-train RECIPE.toml "
                 "--resume %s",
                 dir, path, dir);
        return false;
    }
    /* output.dir: the run the checkpoint is in, wherever it was when it was written; --set
     * output.dir, after it, still wins */
    mt_outdir_parent(dir, parent, sizeof(parent));
    char *dir_set = mt_malloc(2 * sizeof(parent) + 32, "output.dir override");
    char *o = dir_set + sprintf(dir_set, "output.dir=\"");
    for (const char *c = parent; *c; c++) {
        if (*c == '"' || *c == '\\') *o++ = '\\';
        *o++ = *c;
    }
    strcpy(o, "\"");
    const char **all = mt_calloc((size_t)n_sets + 1, sizeof(char *), "overrides");
    all[0] = dir_set;
    for (int i = 0; i < n_sets; i++) all[i + 1] = sets[i];
    const bool ok = mt_recipe_load_resolved(rc, path, all, n_sets + 1, err, n);
    free(all);
    free(dir_set);
    return ok;
}

static void layout_describe(char *buf, size_t n, int64_t world, int64_t micro, int64_t accum) {
    snprintf(buf, n, "%lld rank%s x %lld row%s per device x %lld accumulation step%s",
             (long long)world, world == 1 ? "" : "s", (long long)micro, micro == 1 ? "" : "s",
             (long long)accum, accum == 1 ? "" : "s");
}

/* The checkpoint dir's recipe.toml (st: its manifest) against this run's recipe rc, key by key:
 * 0 when every key that changes the numerics is equal, 1 with the refusal in why (the keys
 * named, or a recipe.toml changed since), -1 when it has no recipe.toml that reads (written
 * before its recipe was kept, or its files moved): the recipe hash decides. */
static int trainer_resume_compare_keys(const mt_recipe *rc, const char *dir,
                                       const mt_train_state *st, char *why, size_t n) {
    mt_recipe *was = mt_malloc(sizeof(mt_recipe), "the checkpoint's recipe");
    char path[MT_PATH_MAX + 32], err[MT_ERR_LEN + MT_PATH_MAX], keys[8192], free_keys[4096];
    snprintf(path, sizeof(path), "%s/recipe.toml", dir);
    uint64_t digest = 0;
    int verdict = -1;
    if (access(path, R_OK) != 0) {
        /* a checkpoint from before its recipe was kept */
    } else if (mt_file_hash(path, &digest, err) != 0) {
        snprintf(why, n, "--resume %s: %s", dir, err);
        verdict = 1;
    } else if (st->recipe_digest && digest != st->recipe_digest) {
        snprintf(why, n,
                 "--resume %s: %s has changed since the checkpoint was written (FNV-1a digest "
                 "%016llx then, %016llx now): it is the recipe the checkpoint resumes with and "
                 "is compared with; restore it",
                 dir, path, (unsigned long long)st->recipe_digest, (unsigned long long)digest);
        verdict = 1;
    } else if (mt_recipe_load_resolved(was, path, NULL, 0, err, sizeof(err))) {
        /* format 1 compares the layout keys themselves: it records no global batch */
        const int count = mt_recipe_resume_diff(was, rc, st->format == 1, keys, sizeof(keys));
        mt_recipe_resume_free_keys(free_keys, sizeof(free_keys));
        if (count)
            snprintf(why, n,
                     "--resume %s: %s (%s the numerics; keys that may change on resume: %s)", dir,
                     keys, count == 1 ? "this key changes" : "these keys change", free_keys);
        verdict = count > 0;
    }
    free(was);
    return verdict;
}

/* The refusal of a directory without a manifest: a checkpoint saved without its optimizer state
 * (an export and recipe.toml, output.save_optimizer_state = false) says so. */
static void trainer_resume_no_state(const char *dir, char *why, size_t n) {
    char recipe[MT_PATH_MAX + 32], config[MT_PATH_MAX + 32];
    snprintf(recipe, sizeof(recipe), "%s/recipe.toml", dir);
    snprintf(config, sizeof(config), "%s/config.json", dir);
    if (access(recipe, R_OK) == 0 && access(config, R_OK) == 0)
        snprintf(why, n,
                 "--resume %s: the checkpoint holds no optimizer state (saved with "
                 "output.save_optimizer_state = false), so it cannot be resumed; train from its "
                 "weights with model.path = \"%s\" instead",
                 dir, dir);
    else
        snprintf(why, n,
                 "--resume %s: no state.h5 there (not a checkpoint directory, or one whose "
                 "write did not finish)",
                 dir);
}

void trainer_resume_check_recipe(const mt_recipe *rc, const mt_comm *comm, const char *dir,
                                 char *why, size_t n) {
    if (comm->rank != 0 || why[0]) return;
    mt_train_state *st = mt_malloc(sizeof(mt_train_state), "the checkpoint's manifest");
    if (!mt_checkpoint_read_state(dir, st))
        trainer_resume_no_state(dir, why, n);
    else
        trainer_resume_compare_keys(rc, dir, st, why, n);
    free(st);
}

/* Rank 0: why the checkpoint whose manifest st is must not be resumed by this run (its recipe
 * rc, its state now; empty: it may). The recipe (its keys compared one by one where the
 * checkpoint's recipe.toml reads, so that a checkpoint whose recipe hash an earlier build
 * computed over other key names resumes; else its hash), the global batch, and the inputs'
 * digests. */
static void trainer_resume_check(const mt_recipe *rc, const mt_train_state *now, const char *dir,
                                 const mt_train_state *st, char *why, size_t n) {
    char was[160], is[160];
    layout_describe(is, sizeof(is), now->world_size, now->micro_batch, now->accumulation);
    /* format 1 hashed the layout keys with the others, so they are equal when it matches */
    const uint64_t hash = st->format == 1 ? mt_recipe_hash(rc) : now->recipe_hash;
    const int keys = trainer_resume_compare_keys(rc, dir, st, why, n);
    if (keys > 0) return;
    if (keys < 0 && st->recipe_hash != hash) {
        snprintf(why, n,
                 "--resume %s: the recipe differs from the one that wrote the checkpoint in a key "
                 "that changes the numerics (its recipe hash %016llx, this run's %016llx; the "
                 "checkpoint has no readable recipe.toml to name the key)",
                 dir, (unsigned long long)st->recipe_hash, (unsigned long long)hash);
        return;
    }
    if (rc->train_max_steps <= st->step) { /* the steps from train.num_train_epochs */
        trainer_resume_steps_refusal(dir, rc->train_max_steps, (long)st->step, why, n);
        return;
    }
    if (st->format == 1) {
        if (st->world_size != now->world_size) {
            layout_describe(was, sizeof(was), st->world_size, now->micro_batch, now->accumulation);
            snprintf(why, n,
                     "--resume %s: a format-1 checkpoint (written before the global batch was "
                     "recorded) resumes only with its batch layout, %s, not %s: the global "
                     "batch would change from %lld to %lld samples",
                     dir, was, is,
                     (long long)(st->world_size * now->micro_batch * now->accumulation),
                     (long long)now->global_batch);
        }
        return;
    }
    layout_describe(was, sizeof(was), st->world_size, st->micro_batch, st->accumulation);
    if (st->global_batch != now->global_batch) {
        snprintf(why, n,
                 "--resume %s: the global batch would change from %lld samples (%s) to %lld (%s), "
                 "and with it what a step means; set train.global_batch_size = %lld to keep it "
                 "(the accumulation steps then follow the rank count)",
                 dir, (long long)st->global_batch, was, (long long)now->global_batch, is,
                 (long long)st->global_batch);
        return;
    }
    for (int i = 0; i < st->n_inputs; i++) {
        const mt_input_digest *a = &st->inputs[i];
        for (int j = 0; j < now->n_inputs; j++) {
            const mt_input_digest *b = &now->inputs[j];
            if (strcmp(a->what, b->what) || a->digest == b->digest) continue;
            snprintf(why, n,
                     "--resume %s: %s %s has changed since the checkpoint was written (FNV-1a "
                     "digest %016llx then, %016llx now%s%s); resume with the inputs it was "
                     "trained on, or start a new run",
                     dir, b->what, b->path, (unsigned long long)a->digest,
                     (unsigned long long)b->digest, strcmp(a->path, b->path) ? "; it was " : "",
                     strcmp(a->path, b->path) ? a->path : "");
            return;
        }
    }
}

void trainer_resume_read(const mt_recipe *rc, const mt_comm *comm, const mt_train_state *now,
                         const char *dir, mt_train_state *st, char *why, size_t n) {
    const bool found = mt_checkpoint_read_state(dir, st);
    if (comm->rank != 0) return;
    if (!found)
        trainer_resume_no_state(dir, why, n);
    else
        trainer_resume_check(rc, now, dir, st, why, n);
}

void trainer_resume_load(const mt_comm *comm, trainer_model *m, mt_sampler *s,
                         mt_train_state *state, const mt_train_state *st, const char *dir) {
    mt_checkpoint_load_shards(dir, &m->zero, st);
    char bad[1024];
    MT_CHECK(mt_sharded_check_finite(&m->sharded, bad, sizeof(bad)), "--resume %s: %s", dir, bad);
    /* the step and the data position continue; the recipe hash, layout and inputs stay this
     * run's (equal to the checkpoint's, or an allowed change of layout) */
    state->step = st->step;
    state->tokens_seen = st->tokens_seen;
    state->rng_state = st->rng_state;
    memcpy(state->cursor, st->cursor, sizeof(st->cursor));
    mt_sampler_cursor cur;
    memcpy(&cur, st->cursor, sizeof(cur));
    mt_sampler_set_cursor(s, cur);
    LOG0(comm, "resumed from %s at step %lld (written by %d ranks, now %d)\n", dir,
         (long long)st->step, st->world_size, comm->size);
    if (st->format == 1)
        LOG0(comm,
             "note: %s/state.h5 is a format-1 checkpoint (before checksums): its values and the "
             "inputs it was trained on could not be checked\n",
             dir);
    char was[160], is[160];
    layout_describe(was, sizeof(was), st->world_size, st->micro_batch, st->accumulation);
    layout_describe(is, sizeof(is), comm->size, state->micro_batch, state->accumulation);
    if (st->format >= 2 && strcmp(was, is))
        LOG0(comm, "resume: the global batch stays %lld samples: %s before, %s now\n",
             (long long)st->global_batch, was, is);
}
