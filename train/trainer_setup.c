/* trainer_setup.c: everything a run sets up before its first step, and takes down after its
 * last, on every rank alike:
 *
 *   the device (dist.backend) -> the model's config -> the memory checks (the activation
 *   arena's plan, each rank's sharded state against its free memory) -> the ZeRO-3 shards
 *   (each rank loads or initialises only the range it owns, model.path checked against its
 *   digests) -> expert parallelism -> the tokenized data (rank 0 builds the HDF5 cache, the
 *   others read it) -> the samplers (this rank's share of each global batch; data.eval_samples
 *   held out) -> the learning-rate schedule and the step's numbers.
 *
 * A run that cannot fit stops now on every rank with exit 2, naming the parts and the remedies,
 * instead of in an allocation after minutes of loading. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/synth.h"
#include "models/safetensors.h"
#include "train/env.h"
#include "train/trainer_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* model and shards */

/* dist.backend picks the device: mpi = the CPU backend over MPI, nccl = the CUDA backend over
 * NCCL (one GPU per rank, chosen from the node-local rank). */
static void trainer_setup_device(trainer_device *d, const mt_recipe *rc) {
    d->comm = d->host;
    d->be = mt_backend_cpu();
    if (!strcmp(rc->dist_backend, "nccl")) {
        /* the device watchdog keeps one limit: the automatic one's before anything is timed */
        d->comm = mt_comm_nccl_init(d->host, rc->dist_timeout >= 0 ? rc->dist_timeout
                                                                   : TRAINER_WATCH_UNTIMED_S);
        MT_CHECK(d->comm,
                 "dist.backend = \"nccl\" needs the CUDA build (cmake -DMT_CUDA=ON, see "
                 "docs/cuda.md); this build trains on the CPU with dist.backend = \"mpi\"");
        d->be = mt_backend_cuda();
        MT_CHECK(d->be,
                 "dist.backend = \"nccl\": no usable CUDA device on rank %d "
                 "(MT_CUDA_VERBOSE=1 says why)",
                 d->host->rank);
    }
    mt_backend_validate(d->be);
}

/* The activation arena against a dry run of one micro-step of these shapes (models/plan.c): a
 * step that cannot fit fails now, with every rank, before any memory or weights are taken, not
 * after minutes of loading. */
static void trainer_check_arena(const trainer_device *d, trainer_model *m, const mt_recipe *rc) {
    /* reward pairs: a sampler row is two rows (chosen, rejected) */
    const int64_t B = rc->train_per_device_train_batch_size *
                      (mt_objective_parse(rc->train_objective) == MT_OBJECTIVE_REWARD ? 2 : 1),
                  /* context parallelism: a rank's rows hold T / C tokens; the gathered keys
                   * and values of the attention are its kernel's scratch */
        T = rc->data_max_length / (rc->dist_context_parallel > 1 ? rc->dist_context_parallel : 1);
    mt_minimax_config cfg = m->cfg; /* the planning forward pools a head model's rows */
    if (cfg.head != MT_HEAD_CAUSAL_LM && cfg.pad_token_id < 0) cfg.pad_token_id = 0;
    const int64_t need =
        mt_minimax_plan_activations(&cfg, m->model.unit, rc->train_gradient_checkpointing, B, T);
    m->planned_activations = need;
    const double mib = 1.0 / (1 << 20);
    if (need <= rc->dist_arena_mb << 20) {
        LOG0(d->comm,
             "activations: a micro-step of %lld x %lld tokens peaks at %.1f MiB (planned; kernel "
             "scratch on top) of the %lld MiB arena%s\n",
             (long long)B, (long long)T, (double)need * mib, (long long)rc->dist_arena_mb,
             rc->train_gradient_checkpointing ? ", layers recomputed" : "");
        return;
    }
    if (d->comm->rank == 0) {
        const int64_t other = mt_minimax_plan_activations(&cfg, m->model.unit,
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
    mt_comm_finalize(d->host);
    exit(2);
}

/* What a rank allocates before its first step (sharded state, gather slots, activation arena;
 * with dist.offload_optimizer the moments in host memory) against what its backend has free: a
 * run that cannot fit stops now on every rank, naming the parts and the remedies, instead of in
 * an allocation after loading (or, on the CPU, in the kernel's OOM killer, which says nothing).
 * On the CPU the node's available memory is shared by its ranks. Skipped where unknown. */
static void trainer_check_memory(const trainer_device *d, const trainer_model *m,
                                 const mt_recipe *rc) {
    const bool cpu = d->be->dev == MT_CPU, offload = rc->dist_offload_optimizer,
               bf16 = strcmp(rc->dist_gather_dtype, "bf16") == 0;
    const mt_zero_sizes z = mt_zero_plan(d->comm->size, m->model.n_buckets, m->model.bucket_numel,
                                         bf16 ? MT_BF16 : MT_F32, offload);
    /* with bf16 gathers the offload takes the fp32 master weights to the host too (zero.h) */
    const char *to_host = bf16 ? "AdamW moments and master weights" : "AdamW moments";
    const double gib = 1.0 / (1 << 30);
    const int local = mt_env_local_ranks(d->comm->size);
    /* On the CPU offloading changes nothing (master, gradient, m and v are all host memory), and
     * the arena's pages cost only once touched: its planned peak counts there, not its size. */
    const int64_t cap = rc->dist_arena_mb << 20, state = cpu ? 16 * z.owned : z.owned_bytes;
    const int64_t arena = cpu && m->planned_activations < cap ? m->planned_activations : cap;
    const int64_t need = state + z.slot_bytes + arena;
    const size_t avail = d->be->mem_available ? d->be->mem_available() : 0;
    const int64_t share = cpu ? (int64_t)(avail / (size_t)local) : (int64_t)avail;
    const size_t host_avail = !cpu && offload ? mt_backend_cpu()->mem_available() : 0;
    const int64_t host_share = (int64_t)(host_avail / (size_t)local);
    const bool short_dev = avail && need > share,
               short_host = host_avail && z.host_bytes > host_share;
    /* every rank learns whether any must stop; rank 0 speaks for all when it is short too
     * (ranks are alike), else each short rank names itself */
    int64_t bad[2] = {short_dev || short_host, d->comm->rank == 0 && (short_dev || short_host)};
    d->host->allreduce_i64(d->host, bad, 2);
    if (!bad[0]) {
        char host_part[96] = "";
        if (offload && !cpu) snprintf(host_part, sizeof(host_part), ", %s in host memory", to_host);
        LOG0(d->comm,
             "planned memory per rank: %.2f GiB of %s memory (state %.2f, gather slots %.2f, "
             "activations %.2f: %s)%s of %.2f GiB available%s\n",
             (double)need * gib, d->be->name, (double)state * gib, (double)z.slot_bytes * gib,
             (double)arena * gib, cpu ? "the planned peak" : "dist.arena_mb", host_part,
             (double)share * gib, cpu && local > 1 ? " to each of the node's ranks" : "");
        return;
    }
    char who[32] = "";
    if (!bad[1]) snprintf(who, sizeof(who), "[rank %d] ", d->comm->rank);
    const bool speak = bad[1] ? d->comm->rank == 0 : short_dev || short_host;
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
                who, (double)need * gib, d->be->name, (double)state * gib, (long long)z.owned,
                d->comm->size, (double)z.slot_bytes * gib, (double)arena * gib,
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
    mt_comm_finalize(d->host);
    exit(2);
}

/* model.path's safetensors files against the digests their headers record (this trainer's
 * exports carry one): each rank checks every N-th file, so a damaged export is refused, named,
 * before anything trains on it; files without a digest (other writers') are taken as they are. */
static void trainer_verify_weights(const trainer_device *d, const mt_recipe *rc) {
    char err[MT_PATH_MAX + 256];
    mt_safetensors *st = mt_safetensors_try_open(rc->model_path, err, sizeof(err));
    if (!st) return;                                     /* mt_weights_open says what is wrong */
    int64_t counts[2] = {0, mt_safetensors_n_files(st)}; /* checked, files */
    for (int f = d->comm->rank; f < counts[1]; f += d->comm->size) {
        bool checked = false;
        MT_CHECK(mt_safetensors_verify(st, f, &checked, err, sizeof(err)), "model.path: %s", err);
        counts[0] += checked;
    }
    mt_safetensors_close(st);
    d->host->allreduce_i64(d->host, counts, 1);
    LOG0(d->comm, "model.path: %lld of %lld safetensors files checked against their digests\n",
         (long long)counts[0], (long long)counts[1]);
}

/* dist.context_parallel (train/context_parallel.h): a layout that cannot run stops every rank
 * with one line naming the key. */
static void trainer_setup_cp(const trainer_device *d, trainer_model *m, const mt_recipe *rc) {
    const int C = rc->dist_context_parallel;
    char why[256];
    if (mt_context_parallel_refused(C, d->comm, &m->model, why, sizeof(why))) {
        if (d->comm->rank == 0) fprintf(stderr, "error: %s\n", why);
        mt_comm_finalize(d->host);
        exit(2);
    }
    mt_context_parallel_init(&m->cp, C, d->comm, d->host); /* installed with the context */
    if (C > 1)
        LOG0(d->comm,
             "context parallelism: %d groups of %d ranks; each rank holds 2 of the %d chunks of "
             "every row (%d tokens of %d)\n",
             d->comm->size / C, C, 2 * C, rc->data_max_length / C, rc->data_max_length);
}

/* dist.expert_parallel on the model and the zero (train/expert_parallel.h): a layout that cannot
 * run stops every rank with one line naming the keys. */
static void trainer_setup_ep(const trainer_device *d, trainer_model *m, const mt_recipe *rc) {
    const int P = rc->dist_expert_parallel;
    char why[256];
    if (mt_expert_parallel_refused(P, d->comm, &m->model, &m->zero, why, sizeof(why))) {
        if (d->comm->rank == 0) fprintf(stderr, "error: %s\n", why);
        mt_comm_finalize(d->host);
        exit(2);
    }
    mt_expert_parallel_init(&m->ep, P, d->comm, d->host, &m->model, &m->zero);
    if (P > 1)
        LOG0(d->comm,
             "expert parallelism: %d groups of %d ranks; each rank computes 1/%d of every MoE "
             "layer's experts, its tokens' rows exchanged by all-to-all\n",
             d->comm->size / P, P, P);
}

void trainer_setup_model(trainer_device *d, trainer_model *m, const mt_recipe *rc) {
    char *path = m->config_path;
    if (rc->model_path[0])
        snprintf(path, sizeof(m->config_path), "%s/config.json", rc->model_path);
    else
        snprintf(path, sizeof(m->config_path), "%s", rc->model_config);
    mt_minimax_config_load(path, &m->cfg);
    MT_CHECK(strcmp(rc->output_export_dtype, "fp8") || m->cfg.fp8,
             "output.export_dtype = \"fp8\": %s has no fp8 quantization_config; the FP8 export "
             "mirrors an FP8 source's layout (model.path of an FP8 release): use \"bf16\"",
             path);
    if (rc->model_num_hidden_layers > 0) {
        MT_CHECK(rc->model_num_hidden_layers <= m->cfg.num_hidden_layers,
                 "model.num_hidden_layers = %d but %s has %d layers", rc->model_num_hidden_layers,
                 path, m->cfg.num_hidden_layers);
        mt_minimax_config_keep_layers(&m->cfg, rc->model_num_hidden_layers);
    }
    char why[1024];
    MT_CHECK(mt_recipe_head_apply(rc, &m->cfg, path, why, sizeof(why)), "%s", why);
    /* a head model without config.json's pad_token_id gets the data's padding token, after the
     * weights (trainer_setup_data): set before, a random initialisation would zero that row,
     * the end-of-turn token's, which the text holds too */
    m->head_pad_unset = m->cfg.head != MT_HEAD_CAUSAL_LM && m->cfg.pad_token_id < 0;
    if (m->cfg.head != MT_HEAD_CAUSAL_LM)
        LOG0(d->comm, "model: a %s head with %d label%s (train.objective = %s)\n",
             mt_head_name(m->cfg.head), m->cfg.num_labels, m->cfg.num_labels == 1 ? "" : "s",
             rc->train_objective);
    if (rc->train_router_aux_loss_coef >= 0) {
        m->cfg.router_aux_loss_coef = (float)rc->train_router_aux_loss_coef;
        m->cfg.output_router_logits = rc->train_router_aux_loss_coef > 0;
    }
    mt_minimax_init_unit(&m->model, &m->cfg,
                         strcmp(rc->dist_gather_unit, "expert") == 0 ? MT_GATHER_EXPERT
                                                                     : MT_GATHER_LAYER);
    m->model.gradient_checkpointing = rc->train_gradient_checkpointing;
    m->model.head_seed = (uint64_t)rc->model_init_seed; /* a head new to a causal-LM checkpoint */
    /* the recipe's model.aux_coef / model.aux_detach, checked against the config on load */
    for (int i = 0; i < rc->model_n_aux; i++) {
        const mt_recipe_aux *a = &rc->model_aux[i];
        MT_CHECK(!a->has_coef || mt_minimax_set_aux_coef(&m->model, a->name, (float)a->coef),
                 "model.aux_coef.%s: the model has no such term", a->name);
        MT_CHECK(!a->has_detach || mt_minimax_set_aux_detach(&m->model, a->name, a->detach),
                 "model.aux_detach.%s: the model has no such term", a->name);
    }
    m->n_aux = mt_minimax_aux_terms(&m->model, true, m->aux_terms);
    trainer_check_arena(d, m, rc);
    trainer_setup_device(d, rc);
    trainer_check_memory(d, m, rc);
    mt_zero_init_gather(&m->zero, d->comm, d->be, m->model.n_buckets, m->model.bucket_numel,
                        strcmp(rc->dist_gather_dtype, "bf16") == 0 ? MT_BF16 : MT_F32,
                        rc->dist_offload_optimizer);
    trainer_setup_ep(d, m, rc);
    if (rc->dist_node_params) /* where possible (zero.h): after the expert parallelism */
        mt_zero_share_node(&m->zero);
    trainer_setup_cp(d, m, rc);
    if (rc->model_path[0]) trainer_verify_weights(d, rc);
    /* each rank reads or draws only what it owns, through a bounded host buffer */
    mt_weights_reader *reader =
        rc->model_path[0] ? mt_weights_open(rc->model_path, &m->model) : NULL;
    m->naming = reader ? mt_weights_naming(reader) : MT_NAMING_HF_V4;
    if (reader) {
        char what[512];
        mt_weights_describe(reader, what, sizeof(what));
        LOG0(d->comm, "weights: %s (%s)\n", rc->model_path, what);
    }
    mt_sharded_load(&m->zero, &m->model, reader, (uint64_t)rc->model_init_seed);
    if (reader) mt_weights_close(reader);

    mt_ctx_init(&m->ctx, d->be, (size_t)rc->dist_arena_mb << 20, MT_MINIMAX_TAPE_NODES);
    /* bf16: GEMM operands rounded to bf16, fp32 accumulation (autograd/tensor.h, docs/cuda.md) */
    m->ctx.compute_dtype = !strcmp(rc->model_dtype, "bf16") ? MT_BF16 : MT_F32;
    m->ctx.cp = m->cp.C > 1 ? &m->cp.cp : NULL; /* dist.context_parallel: the ops' group */
    mt_sharded_init(&m->sharded, &m->model, &m->zero, &m->ctx);
    m->sharded.prefetch = rc->dist_prefetch;
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

/* Where the data comes from and where its caches go, as the recipe says. cc and ec point into
 * the buffers beside them: filled in place, never copied. */
typedef struct {
    char data_path[MT_PATH_MAX * 2]; /* data.path, the synthetic file's, or "data.paths" */
    char cache_dir[MT_PATH_MAX + 64], cache_path[MT_PATH_MAX * 2], eval_cache[MT_PATH_MAX * 2];
    const char *paths[MT_DATA_FILES];
    bool synthetic;            /* data.path = "synthetic": written into the cache directory first */
    bool eval_file;            /* data.eval_path */
    bool train;                /* the training data is read (not --eval-only with data.eval_path) */
    mt_token_cache_cfg cc, ec; /* the training data's token cache, data.eval_path's */
    mt_head_data_opts head;    /* a head objective's data (cc.head) */
    const char *labels[MT_DATA_FILES];
} trainer_sources;

static void trainer_sources_resolve(const mt_recipe *rc, const mt_minimax_config *cfg,
                                    const char *tokenizer_dir, trainer_sources *src) {
    char *data_path = src->data_path, *cache_dir = src->cache_dir;
    snprintf(cache_dir, sizeof(src->cache_dir), "%s",
             rc->data_cache_dir[0] ? rc->data_cache_dir : rc->output_dir);
    if (!rc->data_cache_dir[0])
        strncat(cache_dir, "/cache", sizeof(src->cache_dir) - strlen(cache_dir) - 1);
    snprintf(src->cache_path, sizeof(src->cache_path), "%s/tokens.h5", cache_dir);
    /* data.path's default; data.paths replaces it */
    src->synthetic = rc->data_n_paths == 0 && !strcmp(rc->data_path, "synthetic");
    if (src->synthetic)
        snprintf(data_path, sizeof(src->data_path), "%s/synthetic-%s-%lld-%d.jsonl", cache_dir,
                 rc->data_synthetic_kind, (long long)rc->data_seed, rc->data_synthetic_samples);
    else
        snprintf(data_path, sizeof(src->data_path), "%s", rc->data_path);

    mt_token_cache_cfg *cc = &src->cc;
    *cc = (mt_token_cache_cfg){
        .data_path = data_path, .tokenizer_dir = tokenizer_dir, .cache_path = src->cache_path};
    for (int i = 0; i < rc->data_n_paths; i++) src->paths[i] = rc->data_paths[i];
    if (rc->data_n_paths > 0) { /* data.paths: several files, mixed by data.weights */
        cc->data_paths = src->paths;
        cc->n_data_paths = rc->data_n_paths;
        cc->weights = rc->data_n_weights > 0 ? rc->data_weights : NULL;
        snprintf(data_path, sizeof(src->data_path), "data.paths");
    }
    cc->format = (mt_data_format)mt_data_format_parse(rc->data_format);
    mt_sample_opts_default(&cc->sample);
    cc->chat_template = rc->data_chat_template[0] ? rc->data_chat_template : NULL;
    cc->template_kwargs = rc->data_template_kwargs[0] ? rc->data_template_kwargs : NULL;
    cc->sample.last_assistant_only = !strcmp(rc->data_train_on, "last_assistant");
    cc->sample.history =
        (mt_reasoning_history)mt_reasoning_history_parse(rc->data_reasoning_history);
    cc->sample.sanitize = rc->data_sanitize_control_tokens;
    cc->sample.system = rc->data_system_prompt[0] ? rc->data_system_prompt : NULL;
    cc->sample.strip_annotations = rc->data_strip_annotations;
    cc->sample.max_length = rc->data_max_length;
    cc->sample.policy = !strcmp(rc->data_truncation, "drop") ? MT_TRUNC_DROP : MT_TRUNC_TRUNCATE;
    const int objective = mt_objective_parse(rc->train_objective);
    if (objective > MT_OBJECTIVE_SFT) { /* its records, its targets (data/head_data.h) */
        for (int i = 0; i < rc->model_n_labels; i++) src->labels[i] = rc->model_labels[i];
        src->head = (mt_head_data_opts){.objective = (mt_objective)objective,
                                        .num_labels = cfg->num_labels,
                                        .label_names = src->labels,
                                        .n_label_names = rc->model_n_labels};
        cc->head = &src->head;
    }
    /* data.eval_path: its own cache, built the same way */
    snprintf(src->eval_cache, sizeof(src->eval_cache), "%s/eval-tokens.h5", cache_dir);
    src->ec = *cc;
    src->ec.data_path = rc->data_eval_path;
    src->ec.n_data_paths = 0;
    src->ec.weights = NULL;
    src->ec.cache_path = src->eval_cache;
    src->eval_file = rc->data_eval_path[0] != 0;
}

/* The token caches of src into data: rank 0 writes the synthetic data (when asked) and builds or
 * reuses them, and records the inputs' digests into st, while the others wait; then they read
 * them. Data with no usable sample stops the run, naming why. */
static void trainer_data_load(const mt_recipe *rc, const trainer_device *d, const trainer_model *m,
                              const trainer_watchdog *w, const trainer_sources *src,
                              trainer_data *data, mt_train_state *st) {
    const char *data_path = src->data_path;
    const bool eval_file = src->eval_file;
    char err[MT_ERR_LEN + MT_PATH_MAX], heartbeat[MT_PATH_MAX * 2];
    /* in output.dir, which every rank writes its checkpoint files into and this run alone
     * holds (a cache directory may be shared by runs building at the same time) */
    snprintf(heartbeat, sizeof(heartbeat), "%s/.minimax-train.heartbeat", rc->output_dir);
    if (d->comm->rank == 0) {
        MT_CHECK(mt_dir_make(src->cache_dir, err, sizeof(err)), "data.cache_dir %s", err);
        mt_comm_mpi_heartbeat_start(d->host, heartbeat);
        if (src->train && src->synthetic && access(data_path, R_OK) != 0) {
            const char *kind = rc->data_synthetic_kind;
            const uint64_t seed = (uint64_t)rc->data_seed;
            const int n = rc->data_synthetic_samples;
            MT_CHECK((!strcmp(kind, "agentic") ? mt_synth_write_chat_jsonl(data_path, seed, n, err)
                      : !strcmp(kind, "pairs")
                          ? mt_synth_write_pairs_jsonl(data_path, seed, n, err)
                          : mt_synth_write_jsonl(data_path, seed, n, err)) == 0,
                     "%s", err);
        }
        if (src->train) trainer_cache_build(&src->cc, &data->data);
        if (eval_file) trainer_cache_build(&src->ec, &data->eval_data);
    }
    /* rank 0 hashes the inputs, still alone (what a checkpoint records: none without training) */
    if (src->train) trainer_state_init(st, d->comm, rc, m->config_path, &src->cc);
    /* the others wait while rank 0 alone builds the cache, which takes as long as the data
     * needs: they watch its heartbeat file instead of the time (comm.h) */
    mt_comm_mpi_barrier_heartbeat(d->host, heartbeat, trainer_watch_silence(w),
                                  "builds the token cache");
    if (d->comm->rank != 0) {
        if (src->train) trainer_cache_read(src->cache_path, &data->data);
        if (eval_file) trainer_cache_read(src->eval_cache, &data->eval_data);
    }
    MT_CHECK(!eval_file || data->eval_data.n_samples > 0, "data.eval_path %s: no usable samples",
             rc->data_eval_path);
    if (!src->train) return;
    MT_CHECK(data->data.n_samples > 0 || data->data.n_dropped == 0,
             "%s: no usable samples: all %lld samples (of %lld records) are longer than "
             "data.max_length = %d tokens, and data.truncation = \"drop\" drops them; raise "
             "data.max_length or set data.truncation = \"truncate\"",
             data_path, (long long)data->data.n_dropped, (long long)data->data.n_lines,
             rc->data_max_length);
    MT_CHECK(data->data.n_samples > 0, "%s: no usable samples", data_path);
}

/* The token rows are padded with: the end-of-turn token (the template's eos_token, else the
 * model config's eos_token_id; its label is -100 there), checked against the vocabulary, as is
 * every special token of the template of cc. */
static int32_t trainer_data_pad_id(const mt_recipe *rc, const trainer_device *d,
                                   const trainer_model *m, const char *tokenizer_dir,
                                   const mt_token_cache_cfg *cc) {
    char err[MT_ERR_LEN + MT_PATH_MAX], tok_path[MT_PATH_MAX + 32];
    snprintf(tok_path, sizeof(tok_path), "%s/tokenizer.json", tokenizer_dir);
    mt_tokenizer *tok = mt_tokenizer_load(tok_path);
    mt_chat_template *tmpl = mt_token_cache_template(cc, err);
    MT_CHECK(tmpl, "%s", err);
    /* also when the token cache was reused: a cache built before this check existed */
    MT_CHECK(mt_chat_template_tokens_fit(tmpl, tok, tokenizer_dir, err, sizeof(err)), "%s", err);
    const char *eot = mt_chat_template_eot(tmpl);
    const int32_t eos = eot ? mt_tokenizer_token_to_id(tok, eot) : m->cfg.eos_token_id;
    MT_CHECK(eos >= 0 && eos < m->cfg.vocab_size,
             "%s: the end-of-turn token %s (id %d) is not in the model's vocabulary (%d)",
             eot ? tok_path : "config.json", eot ? eot : "eos_token_id", eos, m->cfg.vocab_size);
    LOG0(d->comm, "data: chat template %s (data.reasoning_history = %s)\n",
         mt_chat_template_origin(tmpl), rc->data_reasoning_history);
    mt_chat_template_free(tmpl);
    mt_tokenizer_free(tok);
    return eos;
}

/* The samplers: the training one (this rank's share of each global batch, padded with pad_id)
 * and, with data.eval_samples held out (or data.eval_path's samples, eval_file), the eval one;
 * data_path names the data in a refusal. */
static void trainer_setup_samplers(const mt_recipe *rc, const trainer_device *d, trainer_data *data,
                                   int32_t pad_id, bool eval_file, bool train,
                                   const char *data_path) {
    /* data.eval_samples: held out of training, drawn with data.seed; with data.eval_path, drawn
     * from that file instead (0: all of it), the training data left whole */
    const bool pairs = data->pairs.n_samples > 0 || data->eval_pairs.n_samples > 0;
    const mt_token_data *td = pairs ? &data->pairs : &data->data;
    const mt_token_data *ed = eval_file ? (pairs ? &data->eval_pairs : &data->eval_data) : td;
    const int64_t n_all = td->n_samples, n_src = ed->n_samples;
    int64_t n_eval = rc->data_eval_samples;
    if (eval_file && (n_eval == 0 || n_eval >= n_src)) n_eval = n_src;
    MT_CHECK(eval_file || n_eval < n_all,
             "data.eval_samples = %lld leaves no sample to train on: %s has %lld usable samples",
             (long long)n_eval, data_path, (long long)n_all);
    const int64_t n_hold = eval_file ? 0 : n_eval; /* taken out of the training data */
    int64_t *train_ids = mt_malloc(sizeof(int64_t) * (size_t)(n_all + 1), "training samples");
    int64_t *eval_ids = mt_malloc(sizeof(int64_t) * (size_t)(n_src + 1), "eval samples");
    /* from an eval file only the drawn samples are used (all when n_eval = n_src) */
    mt_sampler_split(n_src, n_eval, (uint64_t)rc->data_seed, eval_file ? NULL : train_ids,
                     eval_ids);

    int64_t B = rc->train_per_device_train_batch_size;
    const int C = rc->dist_context_parallel > 1 ? rc->dist_context_parallel : 1;
    mt_sampler_cfg sc = {
        .seed = (uint64_t)rc->data_seed,
        .shuffle = rc->data_shuffle,
        .pack = rc->data_packing,
        .global_batch = B * rc->train_gradient_accumulation_steps * (d->comm->size / C),
        .micro_batch = B,
        .seq_len = (pairs ? 2 : 1) * (int64_t)rc->data_max_length, /* a pair: both rows */
        .rank = d->comm->rank / C, /* a context-parallel group's ranks share their samples */
        .world = d->comm->size / C,
        .pad_id = pad_id,
        .pool = n_hold > 0 ? train_ids : NULL,
        .n_pool = n_all - n_hold,
        .n_sources = rc->data_n_paths,
        .weights = rc->data_n_weights > 0 ? rc->data_weights : NULL,
    };
    if (train) mt_sampler_init(&data->sampler, &sc, td);
    sc.weights = NULL; /* the eval sampler: every eval sample once */
    for (int k = 0; data->sampler.src_count && k < rc->data_n_paths; k++)
        LOG0(d->comm,
             "data: mixing: %s: %lld of the %lld samples of an epoch (%.1f %%, weight %g)\n",
             rc->data_paths[k], (long long)data->sampler.src_count[k],
             (long long)data->sampler.n_pool,
             100.0 * (double)data->sampler.src_count[k] / (double)data->sampler.n_pool,
             rc->data_weights[k]);
    data->evaluates = n_eval > 0;
    if (data->evaluates) { /* one epoch in index order per evaluation */
        sc.shuffle = false;
        sc.pool = eval_ids;
        sc.n_pool = n_eval;
        mt_sampler_init(&data->eval_sampler, &sc, ed);
        int64_t train_targets = 0;
        /* the loss's terms: labelled tokens (SFT), or a head objective's (trainer_head.c) */
        const bool head = ed->objective != MT_OBJECTIVE_SFT; /* td is empty in --eval-only */
        for (int64_t i = 0; i < n_eval; i++)
            data->eval_targets += head ? trainer_head_item_terms(ed, eval_ids[i])
                                       : data->eval_sampler.targets[eval_ids[i]];
        for (int64_t i = 0; i < n_all - n_hold && train; i++) {
            const int64_t k = n_hold > 0 ? train_ids[i] : i;
            train_targets += head ? trainer_head_item_terms(td, k) : data->sampler.targets[k];
        }
        LOG0(d->comm, "data: %lld %s %s for the eval loss (%lld %s), %lld to train on (%lld %s)\n",
             (long long)n_eval, pairs ? "pairs" : "samples",
             eval_file ? "of data.eval_path" : "held out", (long long)data->eval_targets,
             head ? "loss terms" : "labelled tokens", (long long)(n_all - n_hold),
             (long long)train_targets, head ? "loss terms" : "labelled tokens");
    }
    free(train_ids);
    free(eval_ids);
}

void trainer_setup_data(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                        const trainer_watchdog *w, bool eval_only, trainer_data *data,
                        mt_train_state *st) {
    snprintf(data->tokenizer_dir, sizeof(data->tokenizer_dir), "%s",
             rc->data_tokenizer_dir[0] ? rc->data_tokenizer_dir : rc->model_path);
    trainer_sources src;
    trainer_sources_resolve(rc, &m->cfg, data->tokenizer_dir, &src);
    /* --eval-only with data.eval_path: the training data is neither tokenized nor read */
    src.train = !eval_only || !src.eval_file;
    trainer_data_load(rc, d, m, w, &src, data, st);
    int32_t pad_id = trainer_data_pad_id(rc, d, m, data->tokenizer_dir, &src.cc);
    if (m->cfg.head != MT_HEAD_CAUSAL_LM) {
        /* the head pools at the rightmost token that is not config.json's pad_token_id: rows
         * are padded with it, or (none there) with the end-of-turn token, which becomes the
         * config's, as TRL sets model.config.pad_token_id */
        if (!m->head_pad_unset) pad_id = m->cfg.pad_token_id;
        m->cfg.pad_token_id = m->model.cfg.pad_token_id = pad_id;
        trainer_head_pairs_view(&data->data, &data->pairs);
        trainer_head_pairs_view(&data->eval_data, &data->eval_pairs);
    }
    trainer_setup_samplers(rc, d, data, pad_id, src.eval_file, src.train, src.data_path);
}

/* ------------------------------------------------------------------------------------------ */
/* the schedule */

void trainer_setup_schedule(mt_recipe *rc, const mt_comm *comm, const mt_sampler *s,
                            trainer_step_cfg *sc) {
    const long long per_epoch = (long long)mt_sampler_steps_per_epoch(s);
    if (rc->train_num_train_epochs > 0) {
        rc->train_max_steps = mt_lr_epoch_steps(rc->train_num_train_epochs, per_epoch);
        MT_CHECK(rc->train_max_steps > 0, "train.num_train_epochs = %g gives no step",
                 rc->train_num_train_epochs);
        LOG0(comm,
             "train: %g epochs of %lld steps = %d steps (train.num_train_epochs; "
             "train.max_steps not used)\n",
             rc->train_num_train_epochs, per_epoch, rc->train_max_steps);
    }
    const mt_lr_kind kind = (mt_lr_kind)mt_lr_kind_parse(rc->train_lr_scheduler_type);
    const int steps = rc->train_max_steps,
              warmup = mt_lr_warmup_steps(rc->train_warmup_steps, rc->train_warmup_ratio, steps),
              decay = kind == MT_LR_WSD ? (int)ceil(steps * rc->train_wsd_decay_ratio) : 0;
    MT_CHECK(kind != MT_LR_WSD || warmup + decay <= steps,
             "train.lr_scheduler_type wsd: %d warmup + %d decay steps (train.wsd_decay_ratio = "
             "%g) are more than the %d steps",
             warmup, decay, rc->train_wsd_decay_ratio, steps);
    *sc = (trainer_step_cfg){.beta1 = rc->train_adam_beta1,
                             .beta2 = rc->train_adam_beta2,
                             .eps = rc->train_adam_epsilon,
                             .weight_decay = rc->train_weight_decay,
                             .max_grad_norm = rc->train_max_grad_norm,
                             .skip_nonfinite = rc->train_skip_nonfinite_steps,
                             .jitter_seed = (uint64_t)rc->train_seed,
                             .lr = {.kind = kind,
                                    .base_lr = rc->train_learning_rate,
                                    .warmup_steps = warmup,
                                    .max_steps = steps,
                                    .min_lr_ratio = rc->train_min_lr_ratio,
                                    .decay_steps = decay}};
    /* the decay phase is wsd's alone, the floor (min_lr_ratio) cosine_with_min_lr's and wsd's */
    char decay_s[64] = "", floor_s[48] = "";
    if (kind == MT_LR_WSD)
        snprintf(decay_s, sizeof(decay_s), ", %d decay (train.wsd_decay_ratio %g)", decay,
                 rc->train_wsd_decay_ratio);
    if (kind == MT_LR_WSD || kind == MT_LR_COSINE_MIN_LR)
        snprintf(floor_s, sizeof(floor_s), ", min_lr_ratio %g", rc->train_min_lr_ratio);
    LOG0(comm, "train: %s schedule over %d steps: %d warmup%s%s\n", rc->train_lr_scheduler_type,
         steps, warmup, decay_s, floor_s);
}

/* ------------------------------------------------------------------------------------------ */
/* teardown */

void trainer_data_free(trainer_data *data) {
    mt_sampler_free(&data->sampler);
    if (data->evaluates) mt_sampler_free(&data->eval_sampler);
    trainer_head_pairs_free(&data->eval_pairs);
    trainer_head_pairs_free(&data->pairs);
    mt_token_data_free(&data->eval_data);
    mt_token_data_free(&data->data);
}

void trainer_model_free(trainer_model *m) {
    mt_ctx_free(&m->ctx);
    mt_context_parallel_free(&m->cp);
    mt_expert_parallel_free(&m->ep, &m->model);
    mt_zero_free(&m->zero);
    mt_minimax_free(&m->model);
}

void trainer_device_free(trainer_device *d) {
    if (d->comm != d->host) mt_comm_nccl_free(d->comm);
}
