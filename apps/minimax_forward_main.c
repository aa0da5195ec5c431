/* minimax-forward: run a MiniMax checkpoint of any family (models/family.h: the family from its
 * config.json's model_type) on token ids and write what it computes, so
 * anyone can check the model against any reference (docs/parity.md).
 *
 *   minimax-forward --model DIR --ids IDS.json [--labels LABELS.json] [--grad]
 *                   --out OUT.safetensors [--arena-mb N]
 *
 * IDS.json and LABELS.json: lists of equal-length lists of token ids (labels: -100 = ignored).
 * Labels follow transformers (unshifted: position t is trained to predict labels[t+1]); they
 * are shifted here, like ForCausalLMLoss. OUT gets, all fp32:
 *   logits (B,T,V); loss () with labels, as transformers defines it, with or without --grad:
 *   the cross-entropy, plus router_aux_loss_coef * aux_loss when the config has
 *   output_router_logits; each auxiliary term the model computes under its own name, a scalar
 *   as it enters the training loss before its coefficient (models/minimax.h): aux_loss () when
 *   the config has output_router_logits, and with --grad index_kl () for a model with MSA
 *   layers (the indexer KL summed over them, a training-only term: not in `loss`);
 *   with --grad: grad.<name> of the training loss (loss + each training-only term times its
 *   coefficient: what minimax-train differentiates) for every checkpoint tensor of a
 *   parameter, named and shaped as in the model directory's layout (v5 fused experts stay
 *   fused); buffers (M2's e_score_correction_bias) have none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cli_flags.h"
#include "models/config.h"
#include "apps/ids_json.h"
#include "models/minimax.h"
#include "models/safetensors.h"
#include "models/weights.h"
#include "core/version.h"

/* --help: on stdout, exit 0; a bad command line: on stderr, exit 2 */
static void usage(int status) {
    fprintf(status ? stderr : stdout,
            "usage: minimax-forward --model DIR --ids IDS.json [--labels LABELS.json] "
            "[--grad] --out OUT.safetensors [--arena-mb N] [--no-verify]\n"
            "       minimax-forward --help | --version\n"
            "  writes the logits (and with --labels transformers' loss and each auxiliary\n"
            "  loss term by name, with --grad the training loss's gradient of every\n"
            "  checkpoint tensor) to OUT.safetensors, all fp32 (docs/parity.md)\n"
            "  --no-verify: skip the check of the weights against the digests their files\n"
            "    record (docs/checkpoints.md)\n");
    exit(status);
}

/* Activation memory for one forward + backward, generously: every op output and its gradient
 * of one layer, the MoE's permuted rows, the lightning states, the logits three times. */
static size_t fwd_arena_bytes(const mt_minimax_config *cfg, int64_t B, int64_t T) {
    const int64_t N = B * T, C = cfg->hidden_size,
                  HD = (int64_t)cfg->num_attention_heads * cfg->head_dim;
    const int64_t K = cfg->num_experts_per_tok, F = cfg->intermediate_size, V = cfg->vocab_size;
    const int64_t D = cfg->head_dim, H = cfg->num_attention_heads;
    int64_t per_layer = N * (16 * C + 12 * HD + 4 * cfg->num_local_experts) +
                        N * K * (6 * C + 8 * F) + 4 * B * H * D * D + 2 * B * H * T;
    int64_t floats = 2 * (per_layer * cfg->num_hidden_layers + 4 * N * V + 4 * N * C);
    return (size_t)floats * sizeof(float) + ((size_t)64 << 20);
}

/* The loss gradient of every checkpoint tensor, gathered from the parameters that make it up
 * (several for a fused v5 expert tensor, in offset order). */
static void write_grads(mt_safetensors_writer *w, const mt_minimax *m, mt_naming naming,
                        mt_safetensors *ckpt) {
    const int P = m->n_params;
    bool *done = mt_calloc((size_t)P, sizeof(bool), "grads written");
    const float **parts = mt_calloc((size_t)P, sizeof(float *), "grad parts");
    int64_t *part_numel = mt_calloc((size_t)P, sizeof(int64_t), "grad part sizes");
    char name[200], other[200], gname[220];
    for (int p = 0; p < P; p++) {
        if (done[p] || m->info[p].buffer) continue; /* a buffer (correction bias): no gradient */
        int64_t off;
        mt_weights_source_name(m, p, naming, name, sizeof(name), &off);
        /* the parameters of this tensor, by offset: they tile it exactly */
        int n = 0;
        int64_t next = 0;
        for (bool found = true; found;) {
            found = false;
            for (int q = p; q < P; q++) {
                if (done[q]) continue;
                int64_t qoff;
                mt_weights_source_name(m, q, naming, other, sizeof(other), &qoff);
                if (strcmp(other, name) != 0 || qoff != next) continue;
                parts[n] = m->params[q].grad;
                part_numel[n++] = m->info[q].numel;
                next += m->info[q].numel;
                done[q] = found = true;
            }
        }
        const mt_st_tensor *t = mt_safetensors_find(ckpt, name);
        MT_CHECK(t && t->numel == next,
                 "minimax-forward: checkpoint tensor %s (%lld elements) "
                 "is not covered by its parameters (%lld)",
                 name, t ? (long long)t->numel : -1LL, (long long)next);
        snprintf(gname, sizeof(gname), "grad.%s", name);
        mt_safetensors_writer_add_parts(w, gname, MT_ST_F32, t->ndim, t->shape, n, parts,
                                        part_numel);
    }
    free(done);
    free(parts);
    free(part_numel);
}

/* The loss as transformers defines it: out's training loss where it holds no training-only
 * term, else the cross-entropy plus the other terms with the same ops in the same order (so the
 * same bits as without them), computed outside the tape; NULL without labels. */
static mt_tensor *fwd_reference_loss(mt_ctx *c, const mt_minimax_out *out) {
    bool extra = false;
    for (int k = 0; k < out->n_aux; k++) extra |= out->aux[k].training_only && out->aux[k].value;
    if (!out->loss || !extra) return out->loss;
    const bool grad = mt_ctx_set_grad(c, false);
    mt_tensor *loss = out->ce_loss;
    for (int k = 0; k < out->n_aux; k++)
        if (!out->aux[k].training_only && out->aux[k].value)
            loss = mt_axpby(c, 1.0f, loss, out->aux[k].coef, out->aux[k].value);
    mt_ctx_set_grad(c, grad);
    return loss;
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *ids_path = NULL, *labels_path = NULL, *out_path = NULL;
    bool want_grad = false, verify = true;
    long long arena_mb = 0;
    char msg[8800];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_dir = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids_path = argv[++i];
        else if (!strcmp(argv[i], "--labels") && i + 1 < argc)
            labels_path = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out_path = argv[++i];
        else if (!strcmp(argv[i], "--arena-mb") && i + 1 < argc) {
            MT_CHECK(mt_flag_int(argv[i], argv[i + 1], 1, 1 << 24, &arena_mb, msg, sizeof(msg)),
                     "minimax-forward: %s", msg);
            i++;
        } else if (!strcmp(argv[i], "--grad"))
            want_grad = true;
        else if (!strcmp(argv[i], "--no-verify"))
            verify = false;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            usage(0);
        else if (!strcmp(argv[i], "--version")) {
            mt_version_print(stdout, "minimax-forward");
            return 0;
        } else
            usage(2);
    }
    if (!model_dir || !ids_path || !out_path) usage(2);
    MT_CHECK(!want_grad || labels_path, "minimax-forward: --grad needs --labels (the gradient "
                                        "is that of the loss)");
    /* OUT overwrites no input, not the model's files, and can be created: refused before the
     * forward rather than after it */
    MT_CHECK(mt_out_not_input("--out", out_path, "--ids", ids_path, msg, sizeof(msg)) &&
                 mt_out_not_input("--out", out_path, "--labels", labels_path, msg, sizeof(msg)) &&
                 mt_out_not_in_dir("--out", out_path, "--model", model_dir, msg, sizeof(msg)) &&
                 mt_out_writable("--out", out_path, msg, sizeof(msg)),
             "minimax-forward: %s", msg);

    mt_minimax_config cfg;
    mt_minimax_config_load(model_dir, &cfg);
    /* the inputs against the model's vocabulary before any weight is read */
    int B, T;
    int32_t *ids = mt_ids_json_load(ids_path, &B, &T);
    mt_ids_check_range(ids, B, T, cfg.vocab_size, 0, "token id", ids_path);
    int32_t *labels = NULL;
    if (labels_path) {
        int LB, LT;
        int32_t *raw = mt_ids_json_load(labels_path, &LB, &LT);
        MT_CHECK(LB == B && LT == T, "%s: labels are %dx%d but ids %s are %dx%d", labels_path, LB,
                 LT, ids_path, B, T);
        mt_ids_check_range(raw, B, T, cfg.vocab_size, MT_IGNORE_INDEX, "label", labels_path);
        /* shift like ForCausalLMLoss: position t predicts labels[t+1]; the last predicts nothing */
        labels = mt_malloc((size_t)B * T * sizeof(int32_t), "labels");
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                labels[(size_t)b * T + t] =
                    t + 1 < T ? raw[(size_t)b * T + t + 1] : MT_IGNORE_INDEX;
        free(raw);
        /* a mean over no token: transformers gives NaN; a 0.0 would pass for a perfect fit */
        int64_t n_targets = 0;
        for (size_t k = 0; k < (size_t)B * T; k++) n_targets += labels[k] != MT_IGNORE_INDEX;
        MT_CHECK(n_targets > 0,
                 "minimax-forward: %s: every label after the shift (position t predicts label "
                 "t+1) is %d: no token to average the loss over (transformers gives NaN); drop "
                 "--labels for the logits alone",
                 labels_path, MT_IGNORE_INDEX);
    }
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **data = mt_calloc((size_t)m.n_buckets, sizeof(float *), "buckets");
    float **grad = mt_calloc((size_t)m.n_buckets, sizeof(float *), "bucket grads");
    for (int b = 0; b < m.n_buckets; b++) {
        data[b] = mt_calloc((size_t)m.bucket_numel[b], sizeof(float), "bucket");
        if (want_grad) grad[b] = mt_calloc((size_t)m.bucket_numel[b], sizeof(float), "grad");
        mt_minimax_bind_bucket(&m, b, data[b], grad[b]);
    }
    mt_naming naming = mt_weights_load_checked(model_dir, &m, verify);

    mt_ctx c;
    size_t arena = arena_mb > 0 ? (size_t)arena_mb << 20 : fwd_arena_bytes(&cfg, B, T);
    mt_ctx_init(&c, mt_backend_cpu(), arena, 64 * (cfg.num_hidden_layers + 4));
    mt_tensor t_ids, t_labels;
    const int64_t shape[2] = {B, T};
    mt_tensor_wrap(&t_ids, MT_I32, 2, shape, ids, NULL, "ids");
    mt_tensor_wrap(&t_labels, MT_I32, 2, shape, labels, NULL, "labels");
    mt_minimax_batch batch = {.ids = &t_ids, .labels = labels ? &t_labels : NULL};
    mt_ctx_set_grad(&c, want_grad);
    mt_minimax_out out;
    mt_minimax_forward(&m, &c, &batch, NULL, &out);
    mt_tensor *loss = fwd_reference_loss(&c, &out);
    if (want_grad) mt_backward(&c, out.loss, NULL);

    /* write into a private directory, then move the single file into place */
    char tmp_dir[4096], tmp_file[4200];
    snprintf(tmp_dir, sizeof(tmp_dir), "%s.tmp%ld", out_path, (long)getpid());
    snprintf(tmp_file, sizeof(tmp_file), "%s/model.safetensors", tmp_dir);
    mt_safetensors_writer *w = mt_safetensors_writer_open(tmp_dir, 0);
    mt_safetensors_writer_add(w, "logits", MT_ST_F32, 3, out.logits->shape, out.logits->data);
    if (loss) mt_safetensors_writer_add(w, "loss", MT_ST_F32, 0, NULL, loss->data);
    for (int k = 0; k < out.n_aux; k++)
        if (out.aux[k].value)
            mt_safetensors_writer_add(w, out.aux[k].name, MT_ST_F32, 0, NULL,
                                      out.aux[k].value->data);
    if (want_grad) {
        mt_safetensors *ckpt = mt_safetensors_open(model_dir);
        write_grads(w, &m, naming, ckpt);
        mt_safetensors_close(ckpt);
    }
    mt_safetensors_writer_close(w);
    MT_CHECK(rename(tmp_file, out_path) == 0, "minimax-forward: cannot move %s to %s", tmp_file,
             out_path);
    rmdir(tmp_dir);
    if (loss) printf("loss %.9g\n", (double)*(const float *)loss->data);
    printf("wrote %s (%s layout)\n", out_path, mt_naming_name(naming));

    mt_ctx_free(&c);
    for (int b = 0; b < m.n_buckets; b++) {
        free(data[b]);
        free(grad[b]);
    }
    free(data);
    free(grad);
    free(ids);
    free(labels);
    mt_minimax_free(&m);
    return 0;
}
