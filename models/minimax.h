/* minimax.h: a MiniMax decoder on the autograd ops, assembled per layer from the plan of its
 * family (models/family.h: MiniMax-Text-01, MiniMax-M2; docs/models.md).
 *
 * Parameters live in buckets, the unit a sharded optimizer gathers: bucket 0 = embedding, then
 * per decoder layer one bucket (every expert included; gather unit "layer") or one bucket for
 * the norms, attention and router followed by one per expert (gather unit "expert"), and last
 * the final norm + lm_head. With gather unit "expert" the embedding and lm_head are split by
 * vocabulary rows into S parts of about an expert's size (vocab_parts), each a bucket and a
 * parameter of its own: embedding parts 0..S-1 first, then the layers, then the final norm with
 * lm_head part 0, then lm_head parts 1..S-1. Bucket numbers follow the order the forward uses
 * them. A parameter is a
 * slice of its bucket at a fixed offset, so whoever owns the memory (a single process, or ZeRO-3
 * gather slots) binds a bucket's data and gradient buffers with mt_minimax_bind_bucket and the
 * parameter tensors follow. Internal parameter names are the transformers v4.5x names;
 * models/weights.c maps other layouts onto them. */
#pragma once
#include "autograd/ops.h"
#include "models/config.h"

/* How a parameter is initialised at random (transformers' _init_weights): N(0,
 * initializer_range), ones (RMSNorm weights), zeros (the routers' correction bias; Gemma norm
 * weights). */
typedef enum { MT_INIT_NORMAL = 0, MT_INIT_ONES, MT_INIT_ZEROS } mt_param_init;

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[MT_MAX_DIMS];
    int64_t numel;
    int bucket;
    int64_t offset; /* elements from the start of the bucket */
    /* where it lies in the checkpoint tensor of its name: 0 and shape[0], except for a
     * vocabulary part (rows [src_offset / C, ...) of src_shape0 rows) */
    int64_t src_offset, src_shape0;
    mt_param_init init;
    /* A buffer (the routers' e_score_correction_bias): loaded, kept in its bucket, sharded,
     * gathered and exported like a parameter, but never given a gradient (bound without one),
     * skipped by the optimizer (train/sharded.c), not counted as a trained parameter. */
    bool buffer;
} mt_param_info;

/* What a sharded optimizer gathers at a time (dist.gather_unit): a whole decoder layer with its
 * experts (fewest collectives; the MoE runs as one fused op), or a layer's attention part and
 * then each expert alone (slots the size of one expert: what the full Text-01 needs). */
typedef enum { MT_GATHER_LAYER, MT_GATHER_EXPERT } mt_gather_unit;

typedef struct mt_minimax {
    mt_minimax_config cfg;
    mt_layer_plan *plan; /* (L) each layer's blocks, from the config's family */
    mt_gather_unit unit;
    int n_params;
    mt_param_info *info;     /* (n_params) */
    mt_tensor *params;       /* (n_params), data/grad set by mt_minimax_bind_bucket */
    int n_buckets;           /* L + 2 (layer unit) or L (E + 1) + 2 S (expert unit) */
    int vocab_parts;         /* S: parts of embed_tokens and lm_head (1 with unit layer) */
    int64_t vocab_part_rows; /* rows of each part but the last (V - (S - 1) of them) */
    int64_t *bucket_numel;
    int *layer_bucket; /* (L) each layer's first bucket */
    int *bucket_layer; /* (n_buckets) the layer whose first bucket it is, or -1 */
    float *decay;      /* (L, H) lightning decay lambda per layer and head */
    /* The parameters as fields of their blocks, bound by the layout (pointers into params):
     * each layer's (models/block.h), the vocabulary parts' (S each), the final norm */
    struct mt_layer_params *layers; /* (L) */
    mt_tensor **embed, **lm_head;   /* (S) */
    mt_tensor *final_norm;
    /* A head model (cfg.head, models/head.c): no lm_head (lm_parts 0, one final bucket: the
     * final norm and the head's weight (num_labels, C) and bias (num_labels, or NULL)); a causal
     * LM: lm_parts = vocab_parts, head_w and head_b NULL. */
    int lm_parts;
    mt_tensor *head_w, *head_b;
    /* The seed of a head initialised on load from a causal-LM checkpoint (models/weights.h,
     * mt_weights_open: lm_head dropped, the head N(0, initializer_range), bias 0). Default 0;
     * a trainer sets its seed. */
    uint64_t head_seed;
    int *bucket_param; /* (n_buckets + 1): bucket b's parameters are [bucket_param[b], [b + 1]) */
    /* Activation checkpointing (train.gradient_checkpointing): with gradients on, each decoder
     * layer is a recomputed segment (mt_checkpoint): only its input, output and router logits
     * stay in the arena, and the backward runs its forward again, bucket hooks included. The
     * same gradients bit for bit. Off after init. */
    bool gradient_checkpointing;
    /* MSA layers (MiniMax-M3, models/block_msa.c): the indexer's sparse-KL loss, the auxiliary
     * term index_kl, enters the loss as index_kl_coef * (the sum over the MSA layers; 0: not
     * computed); index_detach: the indexer reads a detached copy of the layer's normalised
     * input, so the KL trains the indexer's own tensors only (MiniMax's training contract).
     * Defaults 1 and true; set after init through mt_minimax_set_aux_coef / _detach. */
    float index_kl_coef;
    bool index_detach;
    /* Expert parallelism (dist.expert_parallel, train/expert_parallel.h), NULL or size 1: none.
     * With unit expert, each rank of a group of ep->size computes only its own experts' rows,
     * which the other ranks send it (mt_ep_exchange); every rank still enters every expert's
     * bucket in order (the gathers bring an expert only to its owners). Set after init. */
    const mt_exchange *ep;
} mt_minimax;

/* Plans the parameter layout from the config (no parameter memory is allocated); unit layer. */
void mt_minimax_init(mt_minimax *m, const mt_minimax_config *cfg);
void mt_minimax_init_unit(mt_minimax *m, const mt_minimax_config *cfg, mt_gather_unit unit);
/* Layer l's bucket (its norms and attention, and with unit layer its experts); expert e of
 * layer l's bucket (the layer's bucket with unit layer); the final bucket (norm + lm_head, or
 * its part 0; part k is final + k). */
int mt_minimax_layer_bucket(const mt_minimax *m, int l);
int mt_minimax_expert_bucket(const mt_minimax *m, int l, int e);
int mt_minimax_final_bucket(const mt_minimax *m);
/* The last bucket layer l uses (its last expert's with unit expert, else its own). */
int mt_minimax_layer_last_bucket(const mt_minimax *m, int l);
/* The layer whose mt_minimax_layer_bucket this is, or -1 (embedding, experts, final). */
int mt_minimax_bucket_layer(const mt_minimax *m, int bucket);
void mt_minimax_free(mt_minimax *m);
/* Points the bucket's parameters at data (bucket_numel floats) and grad (same size, or NULL
 * for no gradients). */
void mt_minimax_bind_bucket(mt_minimax *m, int bucket, float *data, float *grad);
/* The part [*a, *b) of parameter p that lies in elements [lo, hi) of `bucket` (bucket
 * coordinates); false when they do not meet. Range readers and writers walk parameters so. */
bool mt_minimax_param_overlap(const mt_minimax *m, int p, int bucket, int64_t lo, int64_t hi,
                              int64_t *a, int64_t *b);
/* Index of the parameter with this internal name, or -1. */
int mt_minimax_find_param(const mt_minimax *m, const char *name);

typedef struct {
    mt_tensor *ids;           /* (B,T) I32 */
    mt_tensor *labels;        /* (B,T) I32 targets already aligned with positions (labels[t] is the
                                 token position t must predict), -100 ignored; NULL: no loss */
    mt_tensor *pos;           /* (B,T) I32 positions, or NULL for 0..T-1 */
    mt_tensor *seg;           /* (B,T) I32 segment ids of packed samples, or NULL */
    const int64_t *valid_len; /* (B) host: real tokens at the start of each row, padding after
                                 (its own segment); the router aux loss leaves padding out, as
                                 transformers does with an attention_mask. NULL: no padding.
                                 Under context parallelism (mt_ctx.cp) the rows hold a rank's
                                 chunks and valid_len counts the whole samples' tokens */
    float loss_denom; /* <= 0: mean over this batch's labelled tokens; > 0: sum / loss_denom */
    /* The auxiliary terms summed over tokens (the MSA layers' indexer KL, over the real tokens'
     * queries: valid_len) are divided by aux_denom when > 0 (the global count of real tokens,
     * so that ranks agree), else by this batch's real tokens. */
    float aux_denom;
    bool fused_loss; /* with labels: lm_head + cross-entropy as one chunked op over the
                        labelled rows (mt_linear_cross_entropy); no (B,T,V) logits exist and
                        out->logits is NULL. Training sets it; parity checks compare both. */
    /* The router jitter (config router_jitter_noise, transformers' training-mode noise): on
     * only when the trainer sets it (evaluation and generation leave it off). Its draws are a
     * function of jitter_seed, the layer and the element (mt_block_moe_jitter), so a recomputed
     * layer draws the same noise. */
    bool jitter;
    uint64_t jitter_seed;
    /* A head model's targets (models/head.c), host arrays; all NULL: no loss. labels above is
     * for the causal LM only. Sequence classification: head_class (B) class ids (-100 ignored)
     * for single-label, or head_target (B * num_labels) floats for regression / multi-label
     * (config problem_type, or inferred as transformers does: num_labels 1 regression, class
     * ids single-label, floats multi-label). Token classification: head_class (B*T), -100
     * ignored. Question answering: start_pos and end_pos (B), clamped to [0, T] and T ignored
     * (transformers' span loss). */
    const int32_t *head_class;
    const float *head_target;
    const int32_t *start_pos, *end_pos;
    /* Reward pairs (TRL's RewardTrainer; sequence classification with num_labels 1): rows 2p
     * and 2p + 1 are pair p's chosen and rejected, the loss -log sigmoid(r_2p - r_2p+1 -
     * margin_p) over the pairs; pair_margin (B/2) or NULL (no margin). head_class and
     * head_target are then NULL. */
    bool head_pairs;
    const float *pair_margin;
    /* The last head_pad_rows rows are padding (a rank's short share of the global batch):
     * left out of the head's loss and metrics (all of them: the loss is 0, its backward still
     * runs every bucket). 0: every row counts. */
    int64_t head_pad_rows;
    /* A head loss is a mean over its terms (rows, elements, labelled tokens, pairs; QA: each
     * of start and end) when loss_denom <= 0, else their sum / loss_denom: the trainer passes
     * the global batch's count so that micro-batches and ranks add up to the global mean. */
} mt_minimax_batch;

/* An auxiliary loss term of a forward: what a family adds to the cross-entropy. The family
 * and the model's blocks decide which exist (mt_minimax_aux_terms): aux_loss, transformers'
 * router load-balancing loss, where the config has output_router_logits (its coefficient the
 * config's router_aux_loss_coef); index_kl, the MSA indexer's KL summed over the MSA layers,
 * with gradients on and its coefficient not 0 (training only: transformers has no such term). */
#define MT_AUX_MAX 4
typedef struct {
    const char *name; /* the term's tensor and log column name ("aux_loss", "index_kl") */
    mt_tensor *value; /* scalar, as it enters the loss before coef; NULL: none (counts as 0) */
    float coef;       /* its weight in out->loss */
    int denominator;  /* the logged value is value / denominator (the layers it sums; or 1) */
    /* true: the value is this forward's own mean (transformers computes the router loss per
     * forward), so a step of several forwards averages it; false: the value is this forward's
     * part of the step's (its divisor is the global batch's, aux_denom), the parts add up */
    bool per_forward;
    bool training_only; /* transformers' loss leaves it out (minimax-forward's `loss` too) */
} mt_minimax_aux;

typedef struct {
    /* (B,T,V); NULL with batch->fused_loss. A head model: sequence classification (B, num_labels)
     * at each row's pooled token; token classification (B,T,num_labels); question answering the
     * start logits (B,T) (end_logits the end's). ce_loss is then the head's loss as transformers
     * computes it (its `loss`: no router aux term), loss adds the aux terms as for the LM. */
    mt_tensor *logits;
    mt_tensor *end_logits;
    int64_t *pooled;    /* sequence classification: (B) host, each row's pooled position */
    mt_tensor *loss;    /* scalar CE + sum of coef * value over aux (with labels), or NULL */
    mt_tensor *ce_loss; /* scalar */
    mt_minimax_aux aux[MT_AUX_MAX]; /* in the order of mt_minimax_aux_terms */
    int n_aux;
} mt_minimax_out;

/* The metrics of a head model's forward with targets, added into *st (host numbers; c the
 * forward's context): reward pairs: correct = pairs with r_chosen > r_rejected (TRL's
 * accuracy, ties wrong), margin = the sum of r_chosen - r_rejected, count = pairs; single-label
 * classification: correct = labelled rows whose argmax is the label, count = labelled rows;
 * token classification the same over labelled tokens; QA: rows whose start and end argmax both
 * equal the targets, count = rows whose start and end (clamped at 0) are both below T (not
 * ignored); regression / multi-label: nothing (count 0). */
typedef struct {
    double correct, margin, count;
} mt_head_stats;
void mt_minimax_head_stats(const mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                           const mt_minimax_out *out, mt_head_stats *st);

/* The auxiliary terms a forward of m produces with gradients on or off (grad), values NULL, in
 * the order of the forward's out->aux; returns their number (<= MT_AUX_MAX). */
int mt_minimax_aux_terms(const mt_minimax *m, bool grad, mt_minimax_aux *aux);
/* Term `name`'s value in out, or NULL (no such term, or none this forward). */
mt_tensor *mt_minimax_out_aux(const mt_minimax_out *out, const char *name);
/* A caller's setting of term `name` (the recipe's model.aux_coef / model.aux_detach tables):
 * its coefficient (0: not computed), or whether its gradient stays in the tensors that compute
 * it (a detached input). Returns false when the model has no term of that name whose
 * coefficient or detachment can be set (aux_loss's coefficient is the config's). */
bool mt_minimax_set_aux_coef(mt_minimax *m, const char *name, float coef);
bool mt_minimax_set_aux_detach(mt_minimax *m, const char *name, bool detach);
/* Whether models of cfg (its family's plan over all of cfg's layers) have a term `name` whose
 * coefficient (detach false) or detachment (true) can be set; false with the reason in why (n
 * bytes, one line naming the terms that can). */
bool mt_minimax_aux_settable(const mt_minimax_config *cfg, const char *name, bool detach, char *why,
                             size_t n);

/* A term's setting as earlier recipes named it, in their [train] table (key without "train."),
 * with the value every recipe.toml of theirs held unless the recipe set another (true as 1). */
typedef struct {
    const char *key, *term;
    bool detach; /* the setting is the term's detachment, else its coefficient */
    double def;
} mt_minimax_aux_alias;
/* The family-independent list of those former names; *n their number. */
const mt_minimax_aux_alias *mt_minimax_aux_aliases(int *n);

/* Called around each bucket's use: in the forward (enter before the first op of a bucket,
 * leave after its last) and, through the context's tag hook, in the backward. */
typedef struct {
    void (*bucket_enter)(void *user, int bucket);
    void (*bucket_leave)(void *user, int bucket);
    void *user;
} mt_bucket_hooks;

void mt_minimax_forward(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                        const mt_bucket_hooks *hooks, mt_minimax_out *out);
/* Enters and leaves every bucket in the order a forward does (bucket numbers), computing nothing:
 * a rank with no rows to decode keeps in step with the gathers of the others (models/generate.h,
 * mt_gen_sync). */
void mt_minimax_walk_buckets(const mt_minimax *m, const mt_bucket_hooks *hooks);

/* Activation arena bytes of one training micro-step (forward and backward with the fused loss,
 * the router aux loss as the config says, every token labelled) on a B x T batch: the peak of
 * live outputs, saved buffers and gradients (the arena's peak_live), from a dry run of this
 * model code on the plan backend (models/plan.c), exact for these shapes with the experts' rows
 * split evenly. A backend's kernels carve their scratch on top (the chunked loss's logits, bf16
 * operand copies), each only while it runs. */
/* Tape capacity of a training micro-step (the trainer's context; the plan uses the same). */
#define MT_MINIMAX_TAPE_NODES (1 << 16)
int64_t mt_minimax_plan_activations(const mt_minimax_config *cfg, mt_gather_unit unit,
                                    bool recompute, int64_t B, int64_t T);
/* The most tokens (B*T) one forward of this model may take: the op constructors' int-sized
 * arguments (BLAS dimensions, the MoE's N*K slots; with unit layer the fused experts' N*C). */
int64_t mt_minimax_max_tokens(const mt_minimax_config *cfg, mt_gather_unit unit);
