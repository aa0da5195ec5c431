/* sampler.c: seeded epoch order, rank shares, padded or packed micro-batches, cursor. */
#include "data/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t sample_len(const mt_sampler *s, int64_t i) {
    return s->data->offsets[i + 1] - s->data->offsets[i];
}

/* Mixing: the pool grouped by source, each source's positions per epoch and their pattern. */
static void mix_init(mt_sampler *s) {
    const int S = s->cfg.n_sources;
    const int64_t n = s->n_pool;
    MT_CHECK(S >= 1 && s->data->source, "sampler: mixing needs n_sources >= 1 and data sources");
    s->src_first = mt_calloc((size_t)S + 1, sizeof(int64_t), "sampler sources");
    s->src_count = mt_calloc((size_t)S, sizeof(int64_t), "sampler source counts");
    int64_t *grouped = mt_malloc(sizeof(int64_t) * (size_t)n, "sampler grouped pool");
    double total = 0;
    for (int k = 0; k < S; k++) {
        MT_CHECK(s->cfg.weights[k] > 0 && isfinite(s->cfg.weights[k]),
                 "sampler: weight %d is %g (must be > 0)", k, s->cfg.weights[k]);
        total += s->cfg.weights[k];
    }
    for (int64_t i = 0; i < n; i++) {
        const int32_t src = s->data->source[s->pool[i]];
        MT_CHECK(src >= 0 && src < S, "sampler: sample %lld is from source %d of %d",
                 (long long)s->pool[i], src, S);
        s->src_first[src + 1]++;
    }
    int64_t largest = 0;
    for (int k = 0; k < S; k++) {
        MT_CHECK(s->src_first[k + 1] > 0, "sampler: data file %d has no sample to train on", k);
        if (s->src_first[k + 1] > largest) largest = s->src_first[k + 1];
        s->src_first[k + 1] += s->src_first[k];
    }
    int64_t *at = mt_malloc(sizeof(int64_t) * (size_t)S, "sampler source fill");
    memcpy(at, s->src_first, sizeof(int64_t) * (size_t)S);
    for (int64_t i = 0; i < n; i++) grouped[at[s->data->source[s->pool[i]]]++] = s->pool[i];
    memcpy(s->pool, grouped, sizeof(int64_t) * (size_t)n);
    free(grouped);
    /* counts: floor of each share, then one more for the largest remainders (ties: lower k) */
    int64_t given = 0;
    double *rem = mt_malloc(sizeof(double) * (size_t)S, "sampler remainders");
    for (int k = 0; k < S; k++) {
        const double share = (double)n * s->cfg.weights[k] / total;
        s->src_count[k] = (int64_t)floor(share);
        rem[k] = share - (double)s->src_count[k];
        given += s->src_count[k];
    }
    for (; given < n; given++) {
        int best = 0;
        for (int k = 1; k < S; k++)
            if (rem[k] > rem[best]) best = k;
        s->src_count[best]++;
        rem[best] = -1;
    }
    free(rem);
    /* the pattern: position j to the source furthest behind count_k * (j + 1) / n */
    s->slot_source = mt_malloc(sizeof(int32_t) * (size_t)n, "sampler slots");
    memset(at, 0, sizeof(int64_t) * (size_t)S);
    for (int64_t j = 0; j < n; j++) {
        int best = -1;
        double best_gap = 0;
        for (int k = 0; k < S; k++) {
            const double gap =
                (double)s->src_count[k] * (double)(j + 1) / (double)n - (double)at[k];
            if (at[k] < s->src_count[k] && (best < 0 || gap > best_gap)) best = k, best_gap = gap;
        }
        s->slot_source[j] = (int32_t)best;
        at[best]++;
    }
    free(at);
    s->src_perm = mt_malloc(sizeof(int64_t) * (size_t)largest, "sampler source permutation");
}

void mt_sampler_init(mt_sampler *s, const mt_sampler_cfg *cfg, const mt_token_data *data) {
    *s = (mt_sampler){0};
    MT_CHECK(cfg->world >= 1 && cfg->rank >= 0 && cfg->rank < cfg->world,
             "sampler: rank %d of world %d", cfg->rank, cfg->world);
    MT_CHECK(cfg->global_batch >= 1 && cfg->micro_batch >= 1 && cfg->seq_len >= 2,
             "sampler: global_batch %lld, micro_batch %lld, seq_len %lld must be positive "
             "(seq_len >= 2)",
             (long long)cfg->global_batch, (long long)cfg->micro_batch, (long long)cfg->seq_len);
    const int64_t n_all = data->n_samples, n = cfg->pool ? cfg->n_pool : n_all;
    MT_CHECK(n >= 1, "sampler: the dataset has no samples%s", cfg->pool ? " in the pool" : "");
    s->cfg = *cfg;
    s->data = data;
    s->n_pool = n;
    s->pool = mt_malloc(sizeof(int64_t) * (size_t)n, "sampler pool");
    for (int64_t i = 0; i < n; i++) {
        s->pool[i] = cfg->pool ? cfg->pool[i] : i;
        MT_CHECK(s->pool[i] >= 0 && s->pool[i] < n_all && (i == 0 || s->pool[i] > s->pool[i - 1]),
                 "sampler: pool entry %lld (%lld) is not an ascending sample of %lld", (long long)i,
                 (long long)s->pool[i], (long long)n_all);
    }
    s->cfg.pool = NULL; /* the copy above is the sampler's */
    s->targets = mt_malloc(sizeof(int64_t) * (size_t)n_all, "sampler targets");
    for (int64_t i = 0; i < n_all; i++) {
        int64_t len = sample_len(s, i), off = data->offsets[i];
        MT_CHECK(len <= cfg->seq_len,
                 "sampler: sample %lld has %lld tokens, more than seq_len %lld (build the cache "
                 "with max_length <= seq_len)",
                 (long long)i, (long long)len, (long long)cfg->seq_len);
        int64_t t = 0;
        for (int64_t k = 1; k < len; k++) t += data->labels[off + k] != -100;
        s->targets[i] = t;
    }
    if (cfg->weights) mix_init(s);
    s->cfg.weights = NULL; /* the counts above hold the mixture; src_count != NULL: mixing */
    s->order = mt_malloc(sizeof(int64_t) * (size_t)n, "sampler order");
    s->order_epoch = -1;
    int64_t g = cfg->global_batch < n ? cfg->global_batch : n;
    s->row_first = mt_malloc(sizeof(int64_t) * (size_t)(g + 1), "sampler rows");
    s->row_items = mt_malloc(sizeof(int64_t) * (size_t)g, "sampler row items");
    s->scratch = mt_malloc(sizeof(int64_t) * (size_t)(3 * g + 1), "sampler scratch");
    s->owner = mt_malloc(sizeof(int64_t) * (size_t)(g + 2 * cfg->world), "sampler rank shares");
}

void mt_sampler_free(mt_sampler *s) {
    free(s->src_first);
    free(s->src_count);
    free(s->slot_source);
    free(s->src_perm);
    free(s->pool);
    free(s->targets);
    free(s->order);
    free(s->row_first);
    free(s->row_items);
    free(s->scratch);
    free(s->owner);
    *s = (mt_sampler){0};
}

mt_sampler_cursor mt_sampler_get_cursor(const mt_sampler *s) { return s->cur; }

void mt_sampler_set_cursor(mt_sampler *s, mt_sampler_cursor c) {
    MT_CHECK(c.epoch >= 0 && c.position >= 0 && c.position <= s->n_pool,
             "sampler: cursor (epoch %lld, position %lld) is outside a dataset of %lld samples",
             (long long)c.epoch, (long long)c.position, (long long)s->n_pool);
    s->cur = c;
}

int64_t mt_sampler_steps_per_epoch(const mt_sampler *s) {
    return (s->n_pool + s->cfg.global_batch - 1) / s->cfg.global_batch;
}

/* Fisher-Yates over a[0..n) driven by splitmix64 from state st. */
static void shuffle(int64_t *a, int64_t n, uint64_t st) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix64(&st) % (uint64_t)(i + 1));
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Mixing: the order of an epoch, each source's stream dealt into its positions. */
static void mix_order(mt_sampler *s, int64_t epoch) {
    for (int k = 0; k < s->cfg.n_sources; k++) {
        const int64_t *src = s->pool + s->src_first[k];
        const int64_t n_k = s->src_first[k + 1] - s->src_first[k], c = s->src_count[k];
        int64_t pass = -1, j = 0;
        for (int64_t item = epoch * c; item < (epoch + 1) * c; item++) {
            if (item / n_k != pass) { /* the next pass over the source */
                pass = item / n_k;
                memcpy(s->src_perm, src, sizeof(int64_t) * (size_t)n_k);
                if (s->cfg.shuffle) {
                    uint64_t st = s->cfg.seed ^ 0x6a09e667f3bcc909ull;
                    st = splitmix64(&st) ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull);
                    st = splitmix64(&st) ^ ((uint64_t)pass * 0xd6e8feb86659fd93ull);
                    shuffle(s->src_perm, n_k, st);
                }
            }
            while (s->slot_source[j] != k) j++;
            s->order[j++] = s->src_perm[item % n_k];
        }
    }
}

/* The order of an epoch: the pool in index order, or shuffled by splitmix64(seed, epoch). */
static void make_order(mt_sampler *s, int64_t epoch) {
    s->order_epoch = epoch;
    if (s->src_count) {
        mix_order(s, epoch);
        return;
    }
    memcpy(s->order, s->pool, sizeof(int64_t) * (size_t)s->n_pool);
    if (s->cfg.shuffle) {
        uint64_t st = s->cfg.seed;
        st = splitmix64(&st) ^ ((uint64_t)epoch * 0xd6e8feb86659fd93ull);
        shuffle(s->order, s->n_pool, st);
    }
}

void mt_sampler_split(int64_t n, int64_t n_eval, uint64_t seed, int64_t *train, int64_t *eval) {
    MT_CHECK(n_eval >= 0 && n_eval <= n, "sampler: %lld held-out samples of %lld",
             (long long)n_eval, (long long)n);
    int64_t *perm = mt_malloc(sizeof(int64_t) * (size_t)n, "sampler split");
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    /* its own starting state (the seed mixed with a constant), not an epoch order's */
    uint64_t st = seed ^ 0x5be0cd19137e2179ull;
    st = splitmix64(&st);
    shuffle(perm, n, st);
    char *held = mt_calloc((size_t)n, 1, "sampler split marks");
    for (int64_t i = 0; i < n_eval; i++) held[perm[i]] = 1;
    int64_t a = 0, b = 0;
    for (int64_t i = 0; i < n; i++) {
        if (held[i])
            eval[b++] = i;
        else if (train)
            train[a++] = i;
    }
    free(held);
    free(perm);
}

static int key_descending(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Deals the global batch to the ranks by tokens, the same on every rank: rank q gets
 * step_count / N samples, one more for q < step_count % N (the counts of a round robin), and
 * the samples go longest first (ties: earlier position) to the rank with the fewest tokens so
 * far among those with room (ties: lower rank). The step waits for the rank with the most
 * tokens: on the bench batches a round robin left it 10.6 % above the mean. owner[j]: the
 * rank of position j. */
static void assign_ranks(mt_sampler *s) {
    const int64_t n = s->step_count, N = s->cfg.world, T = s->cfg.seq_len;
    int64_t *owner = s->owner, *load = s->owner + n, *count = s->owner + n + N;
    int64_t *key = s->scratch; /* (n) (T - len) * n + j: descending length, ascending j */
    for (int64_t j = 0; j < n; j++)
        key[j] = (T - sample_len(s, s->order[s->step_first + j])) * n + j;
    qsort(key, (size_t)n, sizeof(int64_t), key_descending);
    for (int64_t q = 0; q < N; q++) load[q] = count[q] = 0;
    for (int64_t i = n - 1; i >= 0; i--) { /* ascending keys: longest first */
        const int64_t j = key[i] % n;
        int64_t best = -1;
        for (int64_t q = 0; q < N; q++)
            if (count[q] < n / N + (q < n % N) && (best < 0 || load[q] < load[best])) best = q;
        owner[j] = best;
        load[best] += sample_len(s, s->order[s->step_first + j]);
        count[best]++;
    }
}

/* Packs the share of rank q into rows. With out_first/out_items the rows are written there
 * (row_first has n_rows + 1 entries); returns the number of rows. */
static int64_t plan_rank(mt_sampler *s, int q, int64_t *out_first, int64_t *out_items) {
    int64_t T = s->cfg.seq_len;
    int64_t *used = s->scratch;                      /* (rows) tokens used per row */
    int64_t *row_of = s->scratch + s->step_count;    /* (share) row of each share sample */
    int64_t *share = s->scratch + 2 * s->step_count; /* (share) */
    int64_t n_share = 0, n_rows = 0;
    for (int64_t j = 0; j < s->step_count; j++)
        if (s->owner[j] == q) share[n_share++] = s->order[s->step_first + j];
    for (int64_t k = 0; k < n_share; k++) {
        int64_t len = sample_len(s, share[k]), r = 0;
        if (s->cfg.pack)
            while (r < n_rows && used[r] + len > T) r++;
        else
            r = n_rows;
        if (r == n_rows) used[n_rows++] = 0;
        used[r] += len;
        row_of[k] = r;
    }
    if (out_first) { /* counting sort of the share by row, stable */
        for (int64_t r = 0; r <= n_rows; r++) out_first[r] = 0;
        for (int64_t k = 0; k < n_share; k++) out_first[row_of[k] + 1]++;
        for (int64_t r = 0; r < n_rows; r++) out_first[r + 1] += out_first[r];
        for (int64_t r = 0; r < n_rows; r++) used[r] = out_first[r];
        for (int64_t k = 0; k < n_share; k++) out_items[used[row_of[k]]++] = share[k];
    }
    return n_rows;
}

int64_t mt_sampler_next(mt_sampler *s) {
    int64_t n = s->n_pool;
    if (s->cur.position >= n) {
        s->cur.epoch++;
        s->cur.position = 0;
    }
    if (s->order_epoch != s->cur.epoch) make_order(s, s->cur.epoch);
    s->step_epoch = s->cur.epoch;
    s->step_first = s->cur.position;
    s->step_count =
        n - s->step_first < s->cfg.global_batch ? n - s->step_first : s->cfg.global_batch;
    int64_t B = s->cfg.micro_batch, max_micro = 1;
    assign_ranks(s);
    for (int q = 0; q < s->cfg.world; q++) {
        int64_t rows = q == s->cfg.rank ? plan_rank(s, q, s->row_first, s->row_items)
                                        : plan_rank(s, q, NULL, NULL);
        if (q == s->cfg.rank) s->n_rows = rows;
        int64_t m = (rows + B - 1) / B;
        if (m > max_micro) max_micro = m;
    }
    s->n_micro = max_micro;
    s->global_targets = s->local_targets = s->global_tokens = 0;
    for (int64_t j = 0; j < s->step_count; j++) {
        int64_t t = s->targets[s->order[s->step_first + j]];
        s->global_targets += t;
        s->global_tokens += sample_len(s, s->order[s->step_first + j]);
        if (s->owner[j] == s->cfg.rank) s->local_targets += t;
    }
    s->cur.position += s->step_count;
    return s->n_micro;
}

int64_t mt_sampler_row_len(const mt_sampler *s, int64_t m, int64_t b) {
    MT_CHECK(m >= 0 && m < s->n_micro && b >= 0 && b < s->cfg.micro_batch,
             "sampler: row %lld of micro-batch %lld (%lld micro-batches of %lld rows)",
             (long long)b, (long long)m, (long long)s->n_micro, (long long)s->cfg.micro_batch);
    const int64_t row = m * s->cfg.micro_batch + b;
    if (row >= s->n_rows) return 0;
    int64_t len = 0;
    for (int64_t k = s->row_first[row]; k < s->row_first[row + 1]; k++)
        len += sample_len(s, s->row_items[k]);
    return len;
}

int64_t mt_sampler_micro_len(const mt_sampler *s, int64_t m) {
    int64_t longest = 0;
    for (int64_t b = 0; b < s->cfg.micro_batch; b++) {
        const int64_t len = mt_sampler_row_len(s, m, b);
        if (len > longest) longest = len;
    }
    return longest;
}

void mt_sampler_fill(const mt_sampler *s, int64_t m, int64_t row_len, int32_t *ids, int32_t *labels,
                     int32_t *pos, int32_t *seg) {
    MT_CHECK(row_len >= mt_sampler_micro_len(s, m) && row_len <= s->cfg.seq_len,
             "sampler: rows of %lld tokens for micro-batch %lld, whose longest row has %lld "
             "(seq_len %lld)",
             (long long)row_len, (long long)m, (long long)mt_sampler_micro_len(s, m),
             (long long)s->cfg.seq_len);
    int64_t B = s->cfg.micro_batch, T = row_len;
    const mt_token_data *d = s->data;
    for (int64_t b = 0; b < B; b++) {
        int64_t row = m * B + b, base = b * T, col = 0, k0 = 0, k1 = 0;
        if (row < s->n_rows) {
            k0 = s->row_first[row];
            k1 = s->row_first[row + 1];
        }
        for (int64_t k = k0; k < k1; k++) {
            int64_t i = s->row_items[k], off = d->offsets[i], len = sample_len(s, i);
            for (int64_t t = 0; t < len; t++) {
                ids[base + col + t] = d->ids[off + t];
                labels[base + col + t] = t + 1 < len ? d->labels[off + t + 1] : -100;
                pos[base + col + t] = (int32_t)t;
                seg[base + col + t] = (int32_t)(k - k0);
            }
            col += len;
        }
        for (int64_t t = col; t < T; t++) { /* padding: one more segment */
            ids[base + t] = s->cfg.pad_id;
            labels[base + t] = -100;
            pos[base + t] = (int32_t)(t - col);
            seg[base + t] = (int32_t)(k1 - k0);
        }
    }
}
