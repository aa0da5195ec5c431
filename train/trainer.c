/* trainer.c: the training job. Every rank runs the same code and issues the same collectives:
 *
 *   recipe (checked before anything is allocated) -> config -> parameter layout -> ZeRO-3 shards
 *   (each rank loads or initialises only the range it owns) -> tokenized data (rank 0 builds
 *   the HDF5 cache, the others read it) -> samplers (this rank's share of each global batch;
 *   data.eval_samples held out) -> steps (trainer_step.c): per micro-batch forward (gather
 *   bucket by bucket) and backward (re-gather, reduce-scatter gradients), global grad norm,
 *   clipping, AdamW on the owned shard -> loss.csv, eval.csv (the held-out loss every
 *   train.eval_steps and at the end), checkpoints (training state + HF export) every
 *   save_steps and at the end.
 * --resume DIR continues from a checkpoint (with its own recipe when none is given; the checks:
 * train/trainer_resume.c); --eval-only sets up the same model and data, evaluates once and ends
 * (train/trainer_eval.c).
 * SIGUSR1, SIGTERM or SIGINT on any rank (mpirun forwards SIGUSR1 to every rank; Slurm sends
 * SIGUSR1 before the time limit with --signal=USR1@SECONDS, SIGTERM on scancel) stops the job
 * after the step in progress, with a checkpoint: each step ends with one small all-reduce that
 * asks whether a rank got one.
 *
 * Rank 0 holds output.dir's lock from the start to the exit, and a fresh run refuses to write
 * over another run's results (train/output_dir.h). The watchdog (dist.timeout) ends the job
 * when a collective waits too long; by default its limit follows the slowest step and the
 * slowest checkpoint so far (train/trainer_watch.c).
 *
 * The loss of a step is the token-level mean over every labelled token of the global batch:
 * each micro-batch's cross-entropy is a sum divided by the global count, so neither the number
 * of ranks nor the split into micro-batches changes the update. */
#include "trainer.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/gsm8k.h"
#include "data/synth.h"
#include "core/version.h"
#include "models/safetensors.h"
#include "train/env.h"
#include "train/nonfinite.h"
#include "train/trainer_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* model and shards */

/* dist.backend picks the device: mpi = the CPU backend over MPI, nccl = the CUDA backend over
 * NCCL (one GPU per rank, chosen from the node-local rank). */
static void trainer_setup_device(trainer *t) {
    const mt_recipe *rc = &t->rc;
    t->comm = t->host;
    t->be = mt_backend_cpu();
    if (!strcmp(rc->dist_backend, "nccl")) {
        /* the device watchdog keeps one limit: the automatic one's before anything is timed */
        t->comm = mt_comm_nccl_init(t->host, rc->dist_timeout >= 0 ? rc->dist_timeout
                                                                   : TRAINER_WATCH_UNTIMED_S);
        MT_CHECK(t->comm,
                 "dist.backend = \"nccl\" needs the CUDA build (cmake -DMT_CUDA=ON, see "
                 "docs/cuda.md); this build trains on the CPU with dist.backend = \"mpi\"");
        t->be = mt_backend_cuda();
        MT_CHECK(t->be,
                 "dist.backend = \"nccl\": no usable CUDA device on rank %d "
                 "(MT_CUDA_VERBOSE=1 says why)",
                 t->host->rank);
    }
    mt_backend_validate(t->be);
}

/* The activation arena against a dry run of one micro-step of these shapes (models/plan.c): a
 * step that cannot fit fails now, with every rank, before any memory or weights are taken, not
 * after minutes of loading. */
static void trainer_check_arena(trainer *t) {
    const mt_recipe *rc = &t->rc;
    const int64_t B = rc->train_per_device_train_batch_size, T = rc->data_max_length;
    const int64_t need =
        mt_minimax_plan_activations(&t->cfg, t->model.unit, rc->train_gradient_checkpointing, B, T);
    t->planned_activations = need;
    const double mib = 1.0 / (1 << 20);
    if (need <= rc->dist_arena_mb << 20) {
        LOG0(t,
             "activations: a micro-step of %lld x %lld tokens peaks at %.1f MiB (planned; kernel "
             "scratch on top) of the %lld MiB arena%s\n",
             (long long)B, (long long)T, (double)need * mib, (long long)rc->dist_arena_mb,
             rc->train_gradient_checkpointing ? ", layers recomputed" : "");
        return;
    }
    if (t->comm->rank == 0) {
        const int64_t other = mt_minimax_plan_activations(&t->cfg, t->model.unit,
                                                          !rc->train_gradient_checkpointing, B, T);
        fprintf(stderr,
                "error: dist.arena_mb = %lld is too small: a micro-step of %lld x %lld tokens "
                "(train.per_device_train_batch_size x data.max_length) peaks at %.0f MiB of "
                "activations, plus kernel scratch; raise dist.arena_mb%s (%.0f MiB with it %s)\n",
                (long long)rc->dist_arena_mb, (long long)B, (long long)T, (double)need * mib,
                rc->train_gradient_checkpointing ? ", or shorten the batch"
                                                 : ", or set train.gradient_checkpointing = true",
                (double)other * mib, rc->train_gradient_checkpointing ? "off" : "on");
    }
    mt_comm_finalize(t->host);
    exit(2);
}

/* Processes sharing this node's memory: the launcher's local size (Open MPI, MPICH/Intel MPI,
 * Slurm), else every rank (one node). */
int trainer_local_ranks(const trainer *t) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
    for (int i = 0; i < 3; i++) {
        const long long v = mt_env_int(vars[i], 1, 1 << 20, 0);
        if (v > 0) return (int)v;
    }
    return t->comm->size;
}

/* What a rank allocates before its first step (sharded state, gather slots, activation arena;
 * with dist.offload_optimizer the moments in host memory) against what its backend has free: a
 * run that cannot fit stops now on every rank, naming the parts and the remedies, instead of in
 * an allocation after loading (or, on the CPU, in the kernel's OOM killer, which says nothing).
 * On the CPU the node's available memory is shared by its ranks. Skipped where unknown. */
static void trainer_check_memory(trainer *t) {
    const mt_recipe *rc = &t->rc;
    const bool cpu = t->be->dev == MT_CPU, offload = rc->dist_offload_optimizer,
               bf16 = strcmp(rc->dist_gather_dtype, "bf16") == 0;
    const mt_zero_sizes z = mt_zero_plan(t->comm->size, t->model.n_buckets, t->model.bucket_numel,
                                         bf16 ? MT_BF16 : MT_F32, offload);
    /* with bf16 gathers the offload takes the fp32 master weights to the host too (zero.h) */
    const char *to_host = bf16 ? "AdamW moments and master weights" : "AdamW moments";
    const double gib = 1.0 / (1 << 30);
    const int local = trainer_local_ranks(t);
    /* On the CPU offloading changes nothing (master, gradient, m and v are all host memory), and
     * the arena's pages cost only once touched: its planned peak counts there, not its size. */
    const int64_t cap = rc->dist_arena_mb << 20, state = cpu ? 16 * z.owned : z.owned_bytes;
    const int64_t arena = cpu && t->planned_activations < cap ? t->planned_activations : cap;
    const int64_t need = state + z.slot_bytes + arena;
    const size_t avail = t->be->mem_available ? t->be->mem_available() : 0;
    const int64_t share = cpu ? (int64_t)(avail / (size_t)local) : (int64_t)avail;
    const size_t host_avail = !cpu && offload ? mt_backend_cpu()->mem_available() : 0;
    const int64_t host_share = (int64_t)(host_avail / (size_t)local);
    const bool short_dev = avail && need > share,
               short_host = host_avail && z.host_bytes > host_share;
    /* every rank learns whether any must stop; rank 0 speaks for all when it is short too
     * (ranks are alike), else each short rank names itself */
    int64_t bad[2] = {short_dev || short_host, t->comm->rank == 0 && (short_dev || short_host)};
    t->host->allreduce_i64(t->host, bad, 2);
    if (!bad[0]) {
        char host_part[96] = "";
        if (offload && !cpu) snprintf(host_part, sizeof(host_part), ", %s in host memory", to_host);
        LOG0(t,
             "planned memory per rank: %.2f GiB of %s memory (state %.2f, gather slots %.2f, "
             "activations %.2f: %s)%s of %.2f GiB available%s\n",
             (double)need * gib, t->be->name, (double)state * gib, (double)z.slot_bytes * gib,
             (double)arena * gib, cpu ? "the planned peak" : "dist.arena_mb", host_part,
             (double)share * gib, cpu && local > 1 ? " to each of the node's ranks" : "");
        return;
    }
    char who[32] = "";
    if (!bad[1]) snprintf(who, sizeof(who), "[rank %d] ", t->comm->rank);
    const bool speak = bad[1] ? t->comm->rank == 0 : short_dev || short_host;
    if (speak && short_dev) {
        /* the remedies that apply, biggest lever first */
        char fix[512];
        snprintf(fix, sizeof(fix),
                 "more %s (the state is 1/N)%s%s%s, or fewer layers "
                 "(model.num_hidden_layers)",
                 cpu ? "nodes" : "GPUs",
                 !cpu && !offload ? (bf16 ? ", dist.offload_optimizer = true (3/8 of the state)"
                                          : ", dist.offload_optimizer = true (half the state)")
                                  : "",
                 strcmp(rc->dist_gather_unit, "layer") == 0 && 4 * z.slot_bytes > need
                     ? ", dist.gather_unit = \"expert\" (smaller slots)"
                     : "",
                 !cpu                                ? ", a smaller dist.arena_mb"
                 : !rc->train_gradient_checkpointing ? ", train.gradient_checkpointing = true"
                                                     : "");
        fprintf(stderr,
                "%serror: a rank needs %.2f GiB of %s memory (sharded state %.2f GiB: %lld "
                "parameters, 1/%d of the model; gather slots %.2f GiB; activations %.2f GiB, %s) "
                "but %.2f GiB are free%s; use %s\n",
                who, (double)need * gib, t->be->name, (double)state * gib, (long long)z.owned,
                t->comm->size, (double)z.slot_bytes * gib, (double)arena * gib,
                cpu ? "the planned peak" : "dist.arena_mb", (double)share * gib,
                cpu && local > 1 ? " (the node's available memory / its ranks)" : "", fix);
    }
    if (speak && short_host)
        fprintf(stderr,
                "%serror: dist.offload_optimizer puts %.2f GiB of %s per rank in host memory, "
                "but the node's available memory is %.2f GiB per rank (%d ranks); use more "
                "nodes, or fewer ranks per node%s\n",
                who, (double)z.host_bytes * gib, to_host, (double)host_share * gib, local,
                bf16 ? ", or dist.gather_dtype = \"fp32\" (the master weights stay on the GPU)"
                     : "");
    mt_comm_finalize(t->host);
    exit(2);
}

/* model.path's safetensors files against the digests their headers record (this trainer's
 * exports carry one): each rank checks every N-th file, so a damaged export is refused, named,
 * before anything trains on it; files without a digest (other writers') are taken as they are. */
static void trainer_verify_weights(trainer *t) {
    char err[MT_PATH_MAX + 256];
    mt_safetensors *st = mt_safetensors_try_open(t->rc.model_path, err, sizeof(err));
    if (!st) return;                                     /* mt_weights_open says what is wrong */
    int64_t counts[2] = {0, mt_safetensors_n_files(st)}; /* checked, files */
    for (int f = t->comm->rank; f < counts[1]; f += t->comm->size) {
        bool checked = false;
        MT_CHECK(mt_safetensors_verify(st, f, &checked, err, sizeof(err)), "model.path: %s", err);
        counts[0] += checked;
    }
    mt_safetensors_close(st);
    t->host->allreduce_i64(t->host, counts, 1);
    LOG0(t, "model.path: %lld of %lld safetensors files checked against their digests\n",
         (long long)counts[0], (long long)counts[1]);
}

static void trainer_setup_model(trainer *t) {
    const mt_recipe *rc = &t->rc;
    char *path = t->config_path;
    if (rc->model_path[0])
        snprintf(path, sizeof(t->config_path), "%s/config.json", rc->model_path);
    else
        snprintf(path, sizeof(t->config_path), "%s", rc->model_config);
    mt_minimax_config_load(path, &t->cfg);
    if (rc->model_num_hidden_layers > 0) {
        MT_CHECK(rc->model_num_hidden_layers <= t->cfg.num_hidden_layers,
                 "model.num_hidden_layers = %d but %s has %d layers", rc->model_num_hidden_layers,
                 path, t->cfg.num_hidden_layers);
        mt_minimax_config_keep_layers(&t->cfg, rc->model_num_hidden_layers);
    }
    if (rc->train_router_aux_loss_coef >= 0) {
        t->cfg.router_aux_loss_coef = (float)rc->train_router_aux_loss_coef;
        t->cfg.output_router_logits = rc->train_router_aux_loss_coef > 0;
    }
    mt_minimax_init_unit(&t->model, &t->cfg,
                         strcmp(rc->dist_gather_unit, "expert") == 0 ? MT_GATHER_EXPERT
                                                                     : MT_GATHER_LAYER);
    t->model.gradient_checkpointing = rc->train_gradient_checkpointing;
    /* the recipe's model.aux_coef / model.aux_detach, checked against the config on load */
    for (int i = 0; i < rc->model_n_aux; i++) {
        const mt_recipe_aux *a = &rc->model_aux[i];
        MT_CHECK(!a->has_coef || mt_minimax_set_aux_coef(&t->model, a->name, (float)a->coef),
                 "model.aux_coef.%s: the model has no such term", a->name);
        MT_CHECK(!a->has_detach || mt_minimax_set_aux_detach(&t->model, a->name, a->detach),
                 "model.aux_detach.%s: the model has no such term", a->name);
    }
    t->n_aux = mt_minimax_aux_terms(&t->model, true, t->aux_terms);
    trainer_check_arena(t);
    trainer_setup_device(t);
    trainer_check_memory(t);
    mt_zero_init_gather(&t->zero, t->comm, t->be, t->model.n_buckets, t->model.bucket_numel,
                        strcmp(rc->dist_gather_dtype, "bf16") == 0 ? MT_BF16 : MT_F32,
                        rc->dist_offload_optimizer);
    trainer_ep_init(t);
    if (rc->model_path[0]) trainer_verify_weights(t);
    /* each rank reads or draws only what it owns, through a bounded host buffer */
    mt_weights_reader *reader =
        rc->model_path[0] ? mt_weights_open(rc->model_path, &t->model) : NULL;
    t->naming = reader ? mt_weights_naming(reader) : MT_NAMING_HF_V4;
    if (reader) {
        char what[512];
        mt_weights_describe(reader, what, sizeof(what));
        LOG0(t, "weights: %s (%s)\n", rc->model_path, what);
    }
    mt_sharded_load(&t->zero, &t->model, reader, (uint64_t)rc->model_init_seed);
    if (reader) mt_weights_close(reader);

    mt_ctx_init(&t->ctx, t->be, (size_t)rc->dist_arena_mb << 20, MT_MINIMAX_TAPE_NODES);
    /* bf16: GEMM operands rounded to bf16, fp32 accumulation (autograd/tensor.h, docs/cuda.md) */
    t->ctx.compute_dtype = !strcmp(rc->model_dtype, "bf16") ? MT_BF16 : MT_F32;
    mt_sharded_init(&t->sharded, &t->model, &t->zero, &t->ctx);
    t->sharded.prefetch = rc->dist_prefetch;
}

/* ------------------------------------------------------------------------------------------ */
/* data */

/* Rank 0: reuses or builds the token cache of cc into out and says which. */
static void trainer_cache_build(const mt_token_cache_cfg *cc, mt_token_data *out) {
    char err[MT_ERR_LEN];
    bool reused = false;
    double t0 = mt_time_now();
    MT_CHECK(mt_token_cache_open(cc, out, &reused, err) == 0, "%s", err);
    printf("data: %s: %lld samples, %lld tokens, %lld targets, %lld truncated, %lld dropped "
           "(%s %s, %.1f s)\n",
           cc->data_path, (long long)out->n_samples, (long long)out->n_tokens,
           (long long)out->n_targets, (long long)out->n_truncated, (long long)out->n_dropped,
           reused ? "cache reused:" : "cache built:", cc->cache_path, mt_time_now() - t0);
}

/* The other ranks, after rank 0 built it: reads the cache. */
static void trainer_cache_read(const char *cache_path, mt_token_data *out) {
    char why[MT_ERR_LEN];
    MT_CHECK(mt_token_cache_read(cache_path, NULL, out, why) == 0,
             "cannot read the token cache %s: %s", cache_path, why);
}

static void trainer_setup_data(trainer *t) {
    const mt_recipe *rc = &t->rc;
    snprintf(t->tokenizer_dir, sizeof(t->tokenizer_dir), "%s",
             rc->data_tokenizer_dir[0] ? rc->data_tokenizer_dir : rc->model_path);
    char data_path[MT_PATH_MAX * 2], cache_dir[MT_PATH_MAX + 64], cache_path[MT_PATH_MAX * 2];
    snprintf(cache_dir, sizeof(cache_dir), "%s",
             rc->data_cache_dir[0] ? rc->data_cache_dir : rc->output_dir);
    if (!rc->data_cache_dir[0])
        strncat(cache_dir, "/cache", sizeof(cache_dir) - strlen(cache_dir) - 1);
    snprintf(cache_path, sizeof(cache_path), "%s/tokens.h5", cache_dir);
    /* data.path's default; data.paths replaces it */
    bool synthetic = rc->data_n_paths == 0 && !strcmp(rc->data_path, "synthetic");
    if (synthetic)
        snprintf(data_path, sizeof(data_path), "%s/synthetic-%s-%lld-%d.jsonl", cache_dir,
                 rc->data_synthetic_kind, (long long)rc->data_seed, rc->data_synthetic_samples);
    else
        snprintf(data_path, sizeof(data_path), "%s", rc->data_path);

    mt_token_cache_cfg cc = {
        .data_path = data_path, .tokenizer_dir = t->tokenizer_dir, .cache_path = cache_path};
    const char *paths[MT_DATA_FILES];
    for (int i = 0; i < rc->data_n_paths; i++) paths[i] = rc->data_paths[i];
    if (rc->data_n_paths > 0) { /* data.paths: several files, mixed by data.weights */
        cc.data_paths = paths;
        cc.n_data_paths = rc->data_n_paths;
        cc.weights = rc->data_n_weights > 0 ? rc->data_weights : NULL;
        snprintf(data_path, sizeof(data_path), "data.paths");
    }
    cc.format = (mt_data_format)mt_data_format_parse(rc->data_format);
    mt_sample_opts_default(&cc.sample);
    cc.chat_template = rc->data_chat_template[0] ? rc->data_chat_template : NULL;
    cc.template_kwargs = rc->data_template_kwargs[0] ? rc->data_template_kwargs : NULL;
    cc.sample.last_assistant_only = !strcmp(rc->data_train_on, "last_assistant");
    cc.sample.history =
        (mt_reasoning_history)mt_reasoning_history_parse(rc->data_reasoning_history);
    cc.sample.system = rc->data_system_prompt[0] ? rc->data_system_prompt : NULL;
    cc.sample.strip_annotations = rc->data_strip_annotations;
    cc.sample.max_length = rc->data_max_length;
    cc.sample.policy = !strcmp(rc->data_truncation, "drop") ? MT_TRUNC_DROP : MT_TRUNC_TRUNCATE;
    /* data.eval_path: its own cache, built the same way */
    char eval_cache[MT_PATH_MAX * 2];
    snprintf(eval_cache, sizeof(eval_cache), "%s/eval-tokens.h5", cache_dir);
    mt_token_cache_cfg ec = cc;
    ec.data_path = rc->data_eval_path;
    ec.n_data_paths = 0;
    ec.weights = NULL;
    ec.cache_path = eval_cache;
    const bool eval_file = rc->data_eval_path[0] != 0;
    char err[MT_ERR_LEN + MT_PATH_MAX], heartbeat[MT_PATH_MAX * 2];
    /* in output.dir, which every rank writes its checkpoint files into and this run alone
     * holds (a cache directory may be shared by runs building at the same time) */
    snprintf(heartbeat, sizeof(heartbeat), "%s/.minimax-train.heartbeat", rc->output_dir);
    if (t->comm->rank == 0) {
        MT_CHECK(mt_dir_make(cache_dir, err, sizeof(err)), "data.cache_dir %s", err);
        mt_comm_mpi_heartbeat_start(t->host, heartbeat);
        if (synthetic && access(data_path, R_OK) != 0) {
            const bool agentic = !strcmp(rc->data_synthetic_kind, "agentic");
            const uint64_t seed = (uint64_t)rc->data_seed;
            const int n = rc->data_synthetic_samples;
            MT_CHECK((agentic ? mt_synth_write_chat_jsonl(data_path, seed, n, err)
                              : mt_synth_write_jsonl(data_path, seed, n, err)) == 0,
                     "%s", err);
        }
        trainer_cache_build(&cc, &t->data);
        if (eval_file) trainer_cache_build(&ec, &t->eval_data);
    }
    trainer_state_init(t, t->config_path, &cc); /* rank 0 hashes the inputs, still alone */
    /* the others wait while rank 0 alone builds the cache, which takes as long as the data
     * needs: they watch its heartbeat file instead of the time (comm.h) */
    mt_comm_mpi_barrier_heartbeat(t->host, heartbeat, trainer_watch_silence(t),
                                  "builds the token cache");
    if (t->comm->rank != 0) {
        trainer_cache_read(cache_path, &t->data);
        if (eval_file) trainer_cache_read(eval_cache, &t->eval_data);
    }
    MT_CHECK(t->data.n_samples > 0 || t->data.n_dropped == 0,
             "%s: no usable samples: all %lld samples (of %lld records) are longer than "
             "data.max_length = %d tokens, and data.truncation = \"drop\" drops them; raise "
             "data.max_length or set data.truncation = \"truncate\"",
             data_path, (long long)t->data.n_dropped, (long long)t->data.n_lines,
             rc->data_max_length);
    MT_CHECK(t->data.n_samples > 0, "%s: no usable samples", data_path);
    MT_CHECK(!eval_file || t->eval_data.n_samples > 0, "data.eval_path %s: no usable samples",
             rc->data_eval_path);

    /* rows are padded with the end-of-turn token (the template's eos_token, else the model
     * config's eos_token_id; its label is -100 there) */
    char tok_path[MT_PATH_MAX + 32];
    snprintf(tok_path, sizeof(tok_path), "%s/tokenizer.json", t->tokenizer_dir);
    mt_tokenizer *tok = mt_tokenizer_load(tok_path);
    mt_chat_template *tmpl = mt_token_cache_template(&cc, err);
    MT_CHECK(tmpl, "%s", err);
    /* also when the token cache was reused: a cache built before this check existed */
    MT_CHECK(mt_chat_template_tokens_fit(tmpl, tok, t->tokenizer_dir, err, sizeof(err)), "%s", err);
    const char *eot = mt_chat_template_eot(tmpl);
    const int32_t eos = eot ? mt_tokenizer_token_to_id(tok, eot) : t->cfg.eos_token_id;
    MT_CHECK(eos >= 0 && eos < t->cfg.vocab_size,
             "%s: the end-of-turn token %s (id %d) is not in the model's vocabulary (%d)",
             eot ? tok_path : "config.json", eot ? eot : "eos_token_id", eos, t->cfg.vocab_size);
    LOG0(t, "data: chat template %s (data.reasoning_history = %s)\n", mt_chat_template_origin(tmpl),
         rc->data_reasoning_history);
    mt_chat_template_free(tmpl);
    mt_tokenizer_free(tok);

    /* data.eval_samples: held out of training, drawn with data.seed; with data.eval_path, drawn
     * from that file instead (0: all of it), the training data left whole */
    const mt_token_data *ed = eval_file ? &t->eval_data : &t->data;
    const int64_t n_all = t->data.n_samples, n_src = ed->n_samples;
    int64_t n_eval = rc->data_eval_samples;
    if (eval_file && (n_eval == 0 || n_eval >= n_src)) n_eval = n_src;
    MT_CHECK(eval_file || n_eval < n_all,
             "data.eval_samples = %lld leaves no sample to train on: %s has %lld usable samples",
             (long long)n_eval, data_path, (long long)n_all);
    const int64_t n_hold = eval_file ? 0 : n_eval; /* taken out of the training data */
    int64_t *train_ids = mt_malloc(sizeof(int64_t) * (size_t)n_all, "training samples");
    int64_t *eval_ids = mt_malloc(sizeof(int64_t) * (size_t)(n_src + 1), "eval samples");
    /* from an eval file only the drawn samples are used (all when n_eval = n_src) */
    mt_sampler_split(n_src, n_eval, (uint64_t)rc->data_seed, eval_file ? NULL : train_ids,
                     eval_ids);

    int64_t B = rc->train_per_device_train_batch_size;
    mt_sampler_cfg sc = {
        .seed = (uint64_t)rc->data_seed,
        .shuffle = rc->data_shuffle,
        .pack = rc->data_packing,
        .global_batch = B * rc->train_gradient_accumulation_steps * t->comm->size,
        .micro_batch = B,
        .seq_len = rc->data_max_length,
        .rank = t->comm->rank,
        .world = t->comm->size,
        .pad_id = eos,
        .pool = n_hold > 0 ? train_ids : NULL,
        .n_pool = n_all - n_hold,
        .n_sources = rc->data_n_paths,
        .weights = rc->data_n_weights > 0 ? rc->data_weights : NULL,
    };
    mt_sampler_init(&t->sampler, &sc, &t->data);
    sc.weights = NULL; /* the eval sampler: every eval sample once */
    for (int k = 0; t->sampler.src_count && k < rc->data_n_paths; k++)
        LOG0(t, "data: mixing: %s: %lld of the %lld samples of an epoch (%.1f %%, weight %g)\n",
             rc->data_paths[k], (long long)t->sampler.src_count[k], (long long)t->sampler.n_pool,
             100.0 * (double)t->sampler.src_count[k] / (double)t->sampler.n_pool,
             rc->data_weights[k]);
    t->evaluates = n_eval > 0;
    if (t->evaluates) { /* one epoch in index order per evaluation */
        sc.shuffle = false;
        sc.pool = eval_ids;
        sc.n_pool = n_eval;
        mt_sampler_init(&t->eval_sampler, &sc, ed);
        int64_t train_targets = 0;
        for (int64_t i = 0; i < n_eval; i++)
            t->eval_targets += t->eval_sampler.targets[eval_ids[i]];
        for (int64_t i = 0; i < n_all - n_hold; i++)
            train_targets += t->sampler.targets[n_hold > 0 ? train_ids[i] : i];
        LOG0(t,
             "data: %lld samples %s for the eval loss (%lld labelled tokens), %lld to train on "
             "(%lld labelled tokens)\n",
             (long long)n_eval, eval_file ? "of data.eval_path" : "held out",
             (long long)t->eval_targets, (long long)(n_all - n_hold), (long long)train_targets);
    }
    free(train_ids);
    free(eval_ids);
    size_t n = (size_t)(B * rc->data_max_length);
    t->batch_ids = mt_malloc(n * sizeof(int32_t), "batch ids");
    t->batch_labels = mt_malloc(n * sizeof(int32_t), "batch labels");
    t->batch_pos = mt_malloc(n * sizeof(int32_t), "batch positions");
    t->batch_seg = mt_malloc(n * sizeof(int32_t), "batch segments");
    t->batch_real = mt_malloc((size_t)B * sizeof(int64_t), "batch row lengths");
    t->dev_batch = t->be->alloc(4 * n * sizeof(int32_t));
    MT_CHECK(t->dev_batch, "out of %s memory for the batch (%zu bytes)", t->be->name,
             4 * n * sizeof(int32_t));
}

static void trainer_report_memory(trainer *t) {
    double mib = 1.0 / (1 << 20);
    double owned = (double)mt_zero_owned_bytes(&t->zero),
           slots = (double)mt_zero_slot_bytes(&t->zero);
    int64_t total = 0;
    for (int b = 0; b < t->model.n_buckets; b++) total += t->model.bucket_numel[b];
    char offload[128] = "";
    if (t->zero.offload)
        snprintf(offload, sizeof(offload), " (moments%s offloaded: %.2f MiB of host memory)",
                 t->zero.master_on_host ? " and master weights" : "",
                 (double)mt_zero_host_bytes(&t->zero) * mib);
    /* called after the first step: the counters hold its collectives (a resume gathers none) */
    printf("memory[rank %d, %s]: owned params+grads%s %.2f MiB%s (%lld of %lld parameters), "
           "gathered buffers peak %.2f MiB, activation arena %.0f MiB (peak use %.2f MiB, "
           "%.2f MiB without kernel scratch%s); step collectives: %lld all-gathers, %lld "
           "reduce-scatters\n",
           t->comm->rank, t->be->name, t->zero.offload ? "" : "+moments", owned * mib, offload,
           (long long)t->zero.total_shard, (long long)total, slots * mib,
           (double)t->ctx.arena.cap * mib, (double)t->ctx.arena.peak * mib,
           (double)t->ctx.arena.peak_live * mib,
           t->model.gradient_checkpointing ? ", layers recomputed" : "", (long long)t->zero.gathers,
           (long long)t->zero.reduce_scatters);
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */
/* stop signals: finish the step, checkpoint, exit MT_EXIT_STOPPED */

static volatile sig_atomic_t trainer_stop_signal = 0;

/* The first signal asks for the stop; a second SIGTERM or SIGINT ends the process at once, as
 * by default (launchers escalate that way, and a rank stuck in a collective must still go). */
static void trainer_on_stop_signal(int sig) {
    if (trainer_stop_signal && (sig == SIGTERM || sig == SIGINT)) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    trainer_stop_signal = sig;
}

/* SIGUSR1/SIGTERM/SIGINT: stop after the step (trainer_on_stop_signal); SIGXFSZ: ignored. */
static void trainer_set_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = trainer_on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    MT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0 && sigaction(SIGTERM, &sa, NULL) == 0 &&
                 sigaction(SIGINT, &sa, NULL) == 0,
             "cannot install the SIGUSR1/SIGTERM/SIGINT handlers: %s", strerror(errno));
    /* A file size limit (ulimit -f, set by some batch systems) then fails the write with EFBIG,
     * which the writers report naming the file, instead of killing the rank with no word */
    signal(SIGXFSZ, SIG_IGN);
}

/* Whether a rank got a stop signal: asked by every rank after every step, so all stop after
 * the same one. */
static bool trainer_stop_requested(trainer *t) {
    int64_t got = trainer_stop_signal != 0;
    t->host->allreduce_i64(t->host, &got, 1);
    return got > 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: minimax-train RECIPE.toml [--set table.key=value]... [--resume DIR "
            "[--rewind]] [--overwrite] [--eval-only]\n"
            "       minimax-train --resume DIR [--rewind] [--set table.key=value]...\n"
            "       minimax-train --help | --version\n"
            "  runs under mpirun: mpirun -np N minimax-train RECIPE.toml\n"
            "  recipe keys: docs/recipes.md\n"
            "  --resume DIR: continue from the checkpoint DIR (<output.dir>/checkpoint-<step>);\n"
            "    without RECIPE.toml with the checkpoint's own recipe (DIR/recipe.toml) and\n"
            "    output.dir the directory DIR is in; a key that changes the numerics must\n"
            "    keep the checkpoint's value (docs/training.md, \"Resume\"); another output.dir\n"
            "    must hold no other run's results (or take --overwrite)\n"
            "  --rewind: with --resume DIR from a checkpoint older than its run's newest: move\n"
            "    the later checkpoints, log rows and eval-generate files aside, into\n"
            "    <output.dir>/rewound-<time>/, and continue from DIR (refused without it)\n"
            "  --overwrite: remove another run's results from output.dir first\n"
            "  --eval-only: no training: the eval loss of the model as the recipe builds it\n"
            "    (model.path, e.g. --set model.path=EXPORT_DIR, or model.config's random\n"
            "    init) over the eval set (data.eval_samples or data.eval_path), and its accuracy\n"
            "    by generation (eval.generate_data), into output.dir's eval.csv and\n"
            "    metrics.jsonl; no step, checkpoint or export\n"
            "  SIGUSR1, SIGTERM or SIGINT to a rank (kill -USR1 on mpirun): stop after the "
            "current step with a checkpoint, exit 75\n");
}

void trainer_refuse_if(trainer *t, const char *why) {
    int64_t bad = t->comm->rank == 0 && why[0];
    t->host->bcast(t->host, &bad, sizeof(bad), 0);
    if (!bad) return;
    if (t->comm->rank == 0) {
        fflush(stdout);
        fprintf(stderr, "error: %s\n", why);
        mt_outdir_close(&t->outdir);
    }
    mt_comm_finalize(t->host);
    exit(2);
}

/* ------------------------------------------------------------------------------------------ */
/* start */

/* The schedule, the resume, the steps with their evals and checkpoints: the step a stop signal
 * ended the run with, else 0. */
static int trainer_train(trainer *t, const char *resume) {
    const mt_recipe *rc = &t->rc;
    trainer_setup_schedule(t);
    if (resume) trainer_resume(t, resume);
    int first = (int)t->state.step + 1;
    /* counted as transformers and minimax-info count: buffers apart, no alignment gaps */
    int64_t n_params = 0, n_buffers = 0;
    for (int p = 0; p < t->model.n_params; p++)
        *(t->model.info[p].buffer ? &n_buffers : &n_params) += t->model.info[p].numel;
    char buffers[64] = "";
    if (n_buffers)
        snprintf(buffers, sizeof(buffers), " (+%lld buffer elements)", (long long)n_buffers);
    LOG0(t,
         "model: %d layers, %lld parameters%s in %d buckets; %lld steps per epoch; steps %d..%d\n",
         t->cfg.num_hidden_layers, (long long)n_params, buffers, t->model.n_buckets,
         (long long)mt_sampler_steps_per_epoch(&t->sampler), first, rc->train_max_steps);
    if (t->comm->rank == 0) {
        const char *aux_names[MT_AUX_MAX];
        for (int k = 0; k < t->n_aux; k++) aux_names[k] = t->aux_terms[k].name;
        mt_logger_open(&t->log, rc->output_dir, aux_names, t->n_aux, t->evaluates, t->generates,
                       (int)t->state.step);
    }
    trainer_set_signals();
    double t_start = mt_time_now();
    int stopped_after = 0; /* the step a stop signal ended the run with, else 0 */
    if (t->evaluates && rc->train_eval_on_start && t->state.step == 0)
        trainer_eval(t, 0, true, false);
    for (int step = first; step <= rc->train_max_steps; step++) {
        double t0 = mt_time_now();
        step_result r = trainer_run_step(t, step);
        double dt = mt_time_now() - t0;
        trainer_watch_timed(t, false, dt);
        t->state.tokens_seen += r.tokens;
        if (step == first) trainer_report_memory(t);
        if (t->comm->rank == 0) {
            mt_log_row row = {.step = step,
                              .loss = r.loss,
                              .lr = r.lr,
                              .grad_norm = r.grad_norm,
                              .tokens = r.tokens,
                              .tokens_per_s = (double)r.tokens / (dt > 0 ? dt : 1e-9),
                              .elapsed_s = mt_time_now() - t_start,
                              .step_s = dt,
                              .arena_peak_bytes = (int64_t)t->ctx.arena.peak,
                              .state_bytes =
                                  mt_zero_owned_bytes(&t->zero) + mt_zero_slot_bytes(&t->zero)};
            for (int k = 0; k < t->n_aux; k++) row.aux[k] = r.aux[k];
            mt_logger_row(&t->log, &row, rc->train_max_steps);
        }
        const bool last = step == rc->train_max_steps;
        const bool eval_due =
            t->evaluates &&
            (last || (rc->train_eval_steps > 0 && step % rc->train_eval_steps == 0));
        if (eval_due || trainer_generate_due(t, step, last))
            trainer_eval(t, step, eval_due, trainer_generate_due(t, step, last));
        const bool stop = !last && trainer_stop_requested(t);
        if (last || stop || (rc->output_save_steps > 0 && step % rc->output_save_steps == 0)) {
            trainer_watch(t, true);
            const double s0 = mt_time_now();
            trainer_save(t, step);
            trainer_watch_timed(t, true, mt_time_now() - s0);
        }
        if (stop) {
            stopped_after = step;
            break;
        }
    }
    if (t->comm->rank == 0) mt_logger_close(&t->log);
    if (stopped_after)
        LOG0(t,
             "stopped by a signal (SIGUSR1, SIGTERM or SIGINT) after step %d of %d, %.1f s; "
             "continue with --resume %s/checkpoint-%d\n",
             stopped_after, rc->train_max_steps, mt_time_now() - t_start, rc->output_dir,
             stopped_after);
    else
        LOG0(t, "done: %d steps in %.1f s; outputs in %s\n", rc->train_max_steps - first + 1,
             mt_time_now() - t_start, rc->output_dir);
    return stopped_after;
}

int mt_train_main(int argc, char **argv) {
    trainer *t = mt_calloc(1, sizeof(trainer), "trainer");
    t->host = t->comm = mt_comm_mpi_init(&argc, &argv);
    const char *recipe_path = NULL, *resume = NULL;
    bool overwrite = false, eval_only = false, rewind = false;
    const char **sets = mt_calloc((size_t)argc, sizeof(char *), "overrides");
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            sets[n_sets++] = argv[++i];
        } else if (!strncmp(argv[i], "--set=", 6)) {
            sets[n_sets++] = argv[i] + 6;
        } else if (!strcmp(argv[i], "--resume") && i + 1 < argc) {
            resume = argv[++i];
        } else if (!strcmp(argv[i], "--overwrite")) {
            overwrite = true;
        } else if (!strcmp(argv[i], "--rewind")) {
            rewind = true;
        } else if (!strcmp(argv[i], "--eval-only")) {
            eval_only = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            if (t->comm->rank == 0) usage(stdout);
            mt_comm_finalize(t->host);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            if (t->comm->rank == 0) mt_version_print(stdout, "minimax-train");
            mt_comm_finalize(t->host);
            return 0;
        } else if (argv[i][0] != '-' && !recipe_path) {
            recipe_path = argv[i];
        } else {
            if (t->comm->rank == 0) {
                fprintf(stderr, "minimax-train: unexpected argument '%s'\n", argv[i]);
                usage(stderr);
            }
            mt_comm_finalize(t->host);
            return 2;
        }
    }
    char err[4096] = "";
    if (rewind && !resume)
        snprintf(err, sizeof(err),
                 "--rewind goes with --resume CHECKPOINT (the run's step to "
                 "go back to)");
    else if (resume && eval_only)
        snprintf(err, sizeof(err),
                 "--eval-only evaluates the model of the recipe (model.path: "
                 "give a checkpoint's export there), not a --resume");
    /* every rank reads the same recipe and fails the same way: one message, no model */
    bool ok = !err[0] && (recipe_path || resume);
    if (ok && recipe_path)
        ok = mt_recipe_load(&t->rc, recipe_path, sets, n_sets, err, sizeof(err));
    else if (ok)
        ok = trainer_resume_recipe_load(&t->rc, resume, sets, n_sets, err, sizeof(err));
    if (ok && eval_only && !t->rc.data_eval_samples && !t->rc.data_eval_path[0] &&
        !t->rc.eval_generate_data[0]) {
        snprintf(err, sizeof(err),
                 "--eval-only: no eval set: set data.eval_samples (samples held "
                 "out of the data) or data.eval_path (a file of its own), or eval.generate_data");
        ok = false;
    }
    if (!ok) {
        if (t->comm->rank == 0) {
            if (err[0])
                fprintf(stderr, "error: %s\n", err);
            else
                usage(stderr);
        }
        mt_comm_finalize(t->host);
        return 2;
    }
    free(sets);
    if (!recipe_path)
        LOG0(t, "recipe: %s/recipe.toml, the checkpoint's (output.dir %s)\n", resume,
             t->rc.output_dir);
    const mt_recipe *rc = &t->rc;
    t->outdir.lock_fd = -1;
    trainer_watch_setup(t);
    if (rc->dist_timeout >= 0)
        mt_comm_mpi_watch(t->host, rc->dist_timeout);
    else
        trainer_watch(t, false);
    char why[4096] = "";
    trainer_resolve_batch(t, why, sizeof(why));
    if (resume) trainer_resume_check_recipe(t, resume, why, sizeof(why));
    trainer_generate_read(t, why, sizeof(why));
    trainer_open_output(t, resume, overwrite, rewind, why, sizeof(why));
    trainer_refuse_if(t, why);
    trainer_setup_model(t);
    /* from here a failing rank removes its temporary files (after the communicators' setup,
     * whose abort then follows) */
    mt_cleanup_install(&t->outdir);
    trainer_setup_data(t);
    trainer_generate_setup(t);
    const int stopped_after = eval_only ? (trainer_eval_only(t), 0) : trainer_train(t, resume);
    mt_sampler_free(&t->sampler);
    if (t->evaluates) mt_sampler_free(&t->eval_sampler);
    mt_token_data_free(&t->eval_data);
    trainer_generate_free(t);
    mt_token_data_free(&t->data);
    mt_ctx_free(&t->ctx);
    mt_expert_parallel_free(&t->ep, &t->model);
    mt_zero_free(&t->zero);
    mt_minimax_free(&t->model);
    free(t->batch_ids);
    free(t->batch_labels);
    free(t->batch_pos);
    free(t->batch_seg);
    free(t->batch_real);
    t->be->free(t->dev_batch);
    free(t->export_stage);
    if (t->comm != t->host) mt_comm_nccl_free(t->comm);
    /* a watched barrier: MPI_Finalize waits for every rank too, but unwatched */
    t->host->barrier(t->host);
    if (t->host->rank == 0) mt_outdir_close(&t->outdir);
    mt_comm_finalize(t->host);
    free(t);
    return stopped_after ? MT_EXIT_STOPPED : 0;
}
