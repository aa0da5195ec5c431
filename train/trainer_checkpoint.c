/* trainer_checkpoint.c: the trainer's checkpoints (<output.dir>/checkpoint-<step>/ = a Hugging
 * Face model directory, with its generation_config.json, + the training state,
 * train/checkpoint.h, + the resolved recipe) and what their manifest records for a resume to
 * check (train/trainer_resume.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "data/tokenizer.h"
#include "core/file_io.h"
#include "models/safetensors.h"
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
/* what the state records */

/* The recipe hash a checkpoint records: the numerics keys, with the batch layout (rows per
 * device, accumulation steps) left out; the global batch they give is compared instead, so
 * that a run resumes on another number of ranks with the same global batch. */
static uint64_t trainer_recipe_hash(const mt_recipe *rc) {
    mt_recipe r = *rc;
    r.train_per_device_train_batch_size = 1;
    r.train_gradient_accumulation_steps = 1;
    return mt_recipe_hash(&r);
}

static void trainer_input_add(mt_train_state *st, const char *what, const char *path,
                              uint64_t digest) {
    MT_CHECK(st->n_inputs < MT_CHECKPOINT_INPUTS, "more than %d inputs", MT_CHECKPOINT_INPUTS);
    mt_input_digest *in = &st->inputs[st->n_inputs++];
    snprintf(in->what, sizeof(in->what), "%s", what);
    snprintf(in->path, sizeof(in->path), "%s", path);
    in->digest = digest;
}

void trainer_state_init(mt_train_state *st, const mt_comm *comm, const mt_recipe *rc,
                        const char *config_path, const mt_token_cache_cfg *cc) {
    st->format = MT_CHECKPOINT_FORMAT;
    st->recipe_hash = trainer_recipe_hash(rc);
    st->world_size = comm->size;
    st->micro_batch = rc->train_per_device_train_batch_size;
    st->accumulation = rc->train_gradient_accumulation_steps;
    /* the ranks of a context-parallel group share their rows */
    const int C = rc->dist_context_parallel > 1 ? rc->dist_context_parallel : 1;
    st->global_batch = st->micro_batch * st->accumulation * (st->world_size / C);
    if (comm->rank != 0) return; /* rank 0 writes the manifest and checks a resume */
    /* The digests of the token cache's key: the data file's and tokenizer.json's bytes, the
     * chat template, the options and the tokenizer code's format (data/token_cache.h) */
    char err[MT_ERR_LEN], tok_json[MT_PATH_MAX + 32];
    uint64_t config_digest;
    MT_CHECK(mt_file_hash(config_path, &config_digest, err) == 0, "%s", err);
    mt_cache_key key;
    mt_chat_template *tmpl = mt_token_cache_template(cc, err);
    MT_CHECK(tmpl && mt_token_cache_key(cc, tmpl, &key, err) == 0, "%s", err);
    snprintf(tok_json, sizeof(tok_json), "%s/tokenizer.json", cc->tokenizer_dir);
    trainer_input_add(st, "the model config", config_path, config_digest);
    trainer_input_add(st, "the data file", cc->data_path, key.data_hash);
    trainer_input_add(st, "the tokenizer", tok_json, key.tokenizer_hash);
    trainer_input_add(st, "the chat template of", mt_chat_template_origin(tmpl), key.template_hash);
    mt_chat_template_free(tmpl);
    trainer_input_add(st, "the tokenization (its options and the code's format version)",
                      "data/token_cache.h", key.options_hash);
}

/* ------------------------------------------------------------------------------------------ */
/* saving */

/* output.save_total_limit: rank 0 keeps the checkpoint just saved and the newest limit - 1
 * other checkpoint-<step> directories of output.dir (by step), and removes the rest. */
static void trainer_prune_checkpoints(const mt_recipe *rc, const mt_comm *comm, int saved_step) {
    const int limit = rc->output_save_total_limit;
    if (limit <= 0 || comm->rank != 0) return;
    static long steps[MT_OUTDIR_MAX_CHECKPOINTS];
    const int n = mt_outdir_checkpoints(rc->output_dir, steps, MT_OUTDIR_MAX_CHECKPOINTS);
    int others = 0;
    for (int i = 0; i < n; i++) others += steps[i] != saved_step;
    /* oldest first: all but the newest limit - 1 of the others go */
    for (int i = 0, removed = 0; i < n && removed < others - (limit - 1); i++) {
        if (steps[i] == saved_step) continue;
        char dir[MT_PATH_MAX + 64];
        snprintf(dir, sizeof(dir), "%s/checkpoint-%ld", rc->output_dir, steps[i]);
        if (!mt_remove_tree(dir)) fprintf(stderr, "warning: could not remove %s\n", dir);
        LOG0(comm, "removed %s (output.save_total_limit = %d)\n", dir, limit);
        removed++;
    }
}

/* The source model's generation_config.json (model.path), parsed; NULL when it has none. */
static cJSON *trainer_source_generation(const mt_recipe *rc) {
    if (!rc->model_path[0]) return NULL;
    char path[MT_PATH_MAX + 64], err[MT_ERR_LEN + MT_PATH_MAX];
    snprintf(path, sizeof(path), "%s/generation_config.json", rc->model_path);
    if (access(path, R_OK) != 0) return NULL;
    size_t len;
    char *text = mt_file_read_max(path, &len, (size_t)1 << 20, err, sizeof(err));
    MT_CHECK(text, "%s", err);
    cJSON *o = cJSON_Parse(text);
    free(text);
    MT_CHECK(cJSON_IsObject(o), "%s: not a JSON object", path);
    return o;
}

static bool trainer_has_id(const cJSON *v, int id) {
    if (cJSON_IsNumber(v)) return v->valueint == id;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (cJSON_IsNumber(e) && e->valueint == id) return true;
    return false;
}

/* dir/generation_config.json: the source's (model.path's generation_config.json: the
 * release's sampling defaults and ids) where it has one, less _from_model_config; the end of
 * turn eot's id (the template's eos_token in tokenizer_dir's tokenizer.json; NULL: the
 * config's eos_token_id) as eos_token_id, added to the source's when that differs; pad_token_id
 * the config's pad token, else that eos. */
static void trainer_generation_config(const mt_recipe *rc, const mt_minimax_config *cfg,
                                      const char *tokenizer_dir, const char *eot, const char *dir) {
    char tok_path[MT_PATH_MAX + 32], path[MT_PATH_MAX + 64];
    snprintf(tok_path, sizeof(tok_path), "%s/tokenizer.json", tokenizer_dir);
    mt_tokenizer *tok = mt_tokenizer_load(tok_path);
    const int eos = eot ? mt_tokenizer_token_to_id(tok, eot) : cfg->eos_token_id;
    mt_tokenizer_free(tok);
    /* the release's values (sampling defaults, ids) where its directory has them */
    cJSON *o = trainer_source_generation(rc);
    if (!o) o = cJSON_CreateObject();
    cJSON_DeleteItemFromObjectCaseSensitive(o, "_from_model_config");
    if (!cJSON_HasObjectItem(o, "bos_token_id") && cfg->bos_token_id >= 0)
        cJSON_AddNumberToObject(o, "bos_token_id", cfg->bos_token_id);
    cJSON *src_eos = cJSON_GetObjectItemCaseSensitive(o, "eos_token_id");
    if (eos >= 0 && !src_eos) {
        cJSON_AddNumberToObject(o, "eos_token_id", eos);
    } else if (eos >= 0 && !trainer_has_id(src_eos, eos)) {
        /* the template's end of turn, which the fine-tune learnt to end its replies with */
        cJSON *list = cJSON_IsArray(src_eos) ? cJSON_Duplicate(src_eos, true) : cJSON_CreateArray();
        if (cJSON_IsNumber(src_eos))
            cJSON_AddItemToArray(list, cJSON_CreateNumber(src_eos->valueint));
        cJSON_AddItemToArray(list, cJSON_CreateNumber(eos));
        cJSON_ReplaceItemInObjectCaseSensitive(o, "eos_token_id", list);
    }
    /* pad: the config's pad token, else the end of turn (transformers' generate pads with eos) */
    const int pad = cfg->pad_token_id >= 0 ? cfg->pad_token_id : eos;
    if (!cJSON_HasObjectItem(o, "pad_token_id") && pad >= 0)
        cJSON_AddNumberToObject(o, "pad_token_id", pad);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    MT_CHECK(text, "cannot format generation_config.json");
    snprintf(path, sizeof(path), "%s/generation_config.json", dir);
    const size_t n = strlen(text);
    text[n] = '\n';
    mt_file_write_atomic(path, text, n + 1);
    cJSON_free(text);
}

void trainer_export(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                    const char *tokenizer_dir, float **stage, const char *dir) {
    mt_weights_writer *w = NULL;
    if (d->comm->rank == 0) {
        const bool fp8 = !strcmp(rc->output_export_dtype, "fp8");
        mt_dtype dt = !strcmp(rc->output_export_dtype, "fp32") ? MT_F32 : MT_BF16;
        w = mt_weights_writer_open(dir, &m->model, m->naming, dt, rc->output_shard_bytes);
        if (fp8) /* the source's layout: its FP8 tensors block-quantised (trainer_setup checked) */
            mt_weights_writer_mirror(w, rc->model_path);
        if (rc->model_path[0]) /* the tensors the family carries untrained (models/family.h) */
            mt_weights_writer_carry(w, rc->model_path);
    }
    for (int b = 0; b < m->model.n_buckets; b++) {
        const float *full = mt_zero_gather_master(&m->zero, b); /* fp32, whatever gathers */
        if (w && d->be->dev != MT_CPU) {
            if (!*stage)
                *stage = mt_malloc(sizeof(float) * (size_t)m->zero.slot_numel, "export staging");
            d->be->to_host(*stage, full, sizeof(float) * (size_t)m->model.bucket_numel[b]);
            full = *stage;
        }
        if (w) mt_weights_writer_add_bucket(w, b, full);
        mt_zero_release(&m->zero, b);
    }
    if (!w) return;
    mt_weights_writer_close(w);
    const char *files[] = {"tokenizer.json", "special_tokens_map.json"};
    for (int i = 0; i < 2; i++) {
        char src[MT_PATH_MAX + 64], dst[MT_PATH_MAX + 128];
        snprintf(src, sizeof(src), "%s/%s", tokenizer_dir, files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
        copy_file_atomic(src, dst);
    }
    /* tokenizer_config.json and the template files the run trained with (data/chat.h) */
    const mt_chat_source src = {.dir = tokenizer_dir,
                                .file = rc->data_chat_template[0] ? rc->data_chat_template : NULL,
                                .kwargs_json =
                                    rc->data_template_kwargs[0] ? rc->data_template_kwargs : NULL};
    char err[MT_ERR_LEN + MT_PATH_MAX];
    mt_chat_template *tmpl = mt_chat_template_open(&src, err, sizeof(err));
    MT_CHECK(tmpl, "%s", err);
    mt_chat_file out[MT_CHAT_EXPORT_MAX];
    const int n = mt_chat_template_export(tmpl, out, err, sizeof(err));
    MT_CHECK(n >= 0, "%s", err);
    for (int i = 0; i < n; i++) {
        char dst[8192];
        if (strchr(out[i].name, '/')) {
            char why[MT_ERR_LEN + MT_PATH_MAX];
            snprintf(dst, sizeof(dst), "%s/additional_chat_templates", dir);
            MT_CHECK(mt_dir_make(dst, why, sizeof(why)), "%s", why);
        }
        snprintf(dst, sizeof(dst), "%s/%s", dir, out[i].name);
        mt_file_write_atomic(dst, out[i].text, out[i].len);
    }
    mt_chat_files_free(out, n);
    if (m->cfg.head == MT_HEAD_CAUSAL_LM) /* a head model does not generate (transformers too) */
        trainer_generation_config(rc, &m->cfg, tokenizer_dir, mt_chat_template_eot(tmpl), dir);
    mt_chat_template_free(tmpl);
}

/* Rank 0: the resolved recipe into the checkpoint (what `--resume DIR` alone resumes with), its
 * digest into the manifest that follows. */
static void trainer_save_recipe(const mt_recipe *rc, mt_train_state *st, const char *dir) {
    char text[16384], path[MT_PATH_MAX + 128], err[MT_ERR_LEN];
    mt_recipe_format(rc, text, sizeof(text));
    snprintf(path, sizeof(path), "%s/recipe.toml", dir);
    mt_file_write_atomic(path, text, strlen(text));
    MT_CHECK(mt_file_hash(path, &st->recipe_digest, err) == 0, "%s", err);
}

void trainer_checkpoint_save(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                             const trainer_data *data, trainer_out *out, int step) {
    char dir[MT_PATH_MAX + 64], tmp[MT_PATH_MAX + 80];
    snprintf(dir, sizeof(dir), "%s/checkpoint-%d", rc->output_dir, step);
    snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
    const double t0 = mt_time_now();
    /* a rank that fails while the checkpoint is written removes it, whichever file failed */
    mt_cleanup_add(tmp);
    if (d->comm->rank == 0) {
        mt_remove_tree(tmp); /* a crashed earlier attempt */
        char err[MT_ERR_LEN + MT_PATH_MAX];
        MT_CHECK(mt_dir_make(tmp, err, sizeof(err)), "%s", err);
    }
    d->comm->barrier(d->comm);
    if (rc->output_export) trainer_export(rc, d, m, data->tokenizer_dir, &out->export_stage, tmp);
    if (d->comm->rank == 0) trainer_save_recipe(rc, &out->state, tmp);
    /* the training state: each rank its own file, then the manifest */
    out->state.step = step;
    mt_sampler_cursor cur = mt_sampler_get_cursor(&data->sampler);
    memcpy(out->state.cursor, &cur, sizeof(cur));
    if (rc->output_save_optimizer_state) mt_checkpoint_save(tmp, &m->zero, &out->state);
    /* only now does the checkpoint exist under its name; an older one is never touched */
    if (d->comm->rank == 0) {
        MT_CHECK(mt_remove_tree(dir), "cannot remove %s: %s", dir, strerror(errno));
        MT_CHECK(rename(tmp, dir) == 0, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
        LOG0(d->comm, "saved %s (%.1f s)%s\n", dir, mt_time_now() - t0,
             rc->output_save_optimizer_state
                 ? ""
                 : ": the export only, no optimizer state (output.save_optimizer_state = false): "
                   "it cannot be resumed");
        /* before the barrier: the others wait for it under the checkpoint's watchdog limit */
        trainer_prune_checkpoints(rc, d->comm, step);
    }
    d->comm->barrier(d->comm);
    mt_cleanup_remove(tmp);
}
