/* data_sampler.c: the sampler on a synthetic tokenized dataset (no tokenizer needed):
 * rank shares, N-independence of global batches, exact resume, packing layout; the held-out
 * split and a sampler over a pool of samples. */
#include "data/sampler.h"

#include <math.h>

#include "tests/support/data_util.h"

#define PAD 7

/* n samples, lengths in [2, max_len], a prompt part labelled -100 and an answer part. */
static void make_data(mt_token_data *d, int64_t n, int64_t max_len, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    *d = (mt_token_data){0};
    d->n_samples = n;
    d->offsets = mt_malloc(sizeof(int64_t) * (size_t)(n + 1), "offsets");
    d->offsets[0] = 0;
    for (int64_t i = 0; i < n; i++)
        d->offsets[i + 1] = d->offsets[i] + 2 + (int64_t)(mt_rng_u64(&r) % (uint64_t)(max_len - 1));
    d->n_tokens = d->offsets[n];
    d->ids = mt_malloc(sizeof(int32_t) * (size_t)d->n_tokens, "ids");
    d->labels = mt_malloc(sizeof(int32_t) * (size_t)d->n_tokens, "labels");
    for (int64_t i = 0; i < n; i++) {
        int64_t o = d->offsets[i], len = d->offsets[i + 1] - o;
        int64_t prompt = (int64_t)(mt_rng_u64(&r) % (uint64_t)len);
        for (int64_t t = 0; t < len; t++) {
            d->ids[o + t] = 100 + (int32_t)(mt_rng_u64(&r) % 1000);
            d->labels[o + t] = t < prompt ? -100 : d->ids[o + t];
        }
    }
}

static mt_sampler_cfg base_cfg(bool pack, bool shuffle) {
    return (mt_sampler_cfg){.seed = 11,
                            .shuffle = shuffle,
                            .pack = pack,
                            .global_batch = 10,
                            .micro_batch = 2,
                            .seq_len = 48,
                            .rank = 0,
                            .world = 1,
                            .pad_id = PAD};
}

/* The samples of this rank's current step, sorted, into out; returns how many. */
static int64_t step_samples(const mt_sampler *s, int64_t *out) {
    int64_t n = s->row_first[s->n_rows];
    for (int64_t i = 0; i < n; i++) out[i] = s->row_items[i];
    for (int64_t i = 1; i < n; i++) /* insertion sort: small */
        for (int64_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* Decodes one filled row back into samples and checks the layout against the dataset:
 * contiguous segments 0, 1, ..., positions restarting at 0, ids equal to the sample's tokens,
 * labels shifted inside the sample (-100 at its last token), and padding as one last segment.
 * Returns the number of labelled positions. */
static int64_t check_row(const mt_token_data *d, const int64_t *items, int64_t n_items,
                         const int32_t *ids, const int32_t *lab, const int32_t *pos,
                         const int32_t *seg, int64_t T, bool pack) {
    int64_t col = 0, n_lab = 0;
    EXPECT(pack || n_items <= 1, "padded mode: %lld samples in one row", (long long)n_items);
    for (int64_t k = 0; k < n_items; k++) {
        int64_t i = items[k], o = d->offsets[i], len = d->offsets[i + 1] - o;
        for (int64_t t = 0; t < len; t++) {
            int64_t c = col + t;
            int32_t want_lab = t + 1 < len ? d->labels[o + t + 1] : -100;
            EXPECT(ids[c] == d->ids[o + t] && lab[c] == want_lab && pos[c] == t && seg[c] == k,
                   "sample %lld token %lld at column %lld: id %d lab %d pos %d seg %d",
                   (long long)i, (long long)t, (long long)c, ids[c], lab[c], pos[c], seg[c]);
            if (t + 1 == len) EXPECT(lab[c] == -100, "prediction across a sample boundary");
            n_lab += lab[c] != -100;
        }
        col += len;
    }
    EXPECT(col <= T, "row overflows: %lld > %lld", (long long)col, (long long)T);
    for (int64_t c = col; c < T; c++)
        EXPECT(ids[c] == PAD && lab[c] == -100 && pos[c] == c - col && seg[c] == n_items,
               "padding at column %lld: id %d lab %d pos %d seg %d", (long long)c, ids[c], lab[c],
               pos[c], seg[c]);
    return n_lab;
}

/* One epoch on every rank of a world of N: shares disjoint and covering, equal micro-batch
 * counts, layouts correct, labelled counts adding up to global_targets. Writes each step's
 * sorted union into unions (steps x n). */
static void run_epoch(const mt_token_data *d, bool pack, bool shuffle, int N, int64_t *unions,
                      int64_t *n_union) {
    int64_t n = d->n_samples;
    int *seen = mt_calloc((size_t)n, sizeof(int), "seen");
    mt_sampler s[8];
    for (int r = 0; r < N; r++) {
        mt_sampler_cfg c = base_cfg(pack, shuffle);
        c.rank = r;
        c.world = N;
        mt_sampler_init(&s[r], &c, d);
    }
    int64_t steps = mt_sampler_steps_per_epoch(&s[0]), T = s[0].cfg.seq_len,
            B = s[0].cfg.micro_batch;
    int32_t *buf = mt_malloc(sizeof(int32_t) * (size_t)(4 * B * T), "micro-batch");
    int64_t *tmp = mt_malloc(sizeof(int64_t) * (size_t)n, "tmp");
    for (int64_t st = 0; st < steps; st++) {
        int64_t nu = 0, labelled = 0, micro0 = -1;
        for (int r = 0; r < N; r++) {
            int64_t m = mt_sampler_next(&s[r]);
            EXPECT(micro0 < 0 || m == micro0, "rank %d runs %lld micro-batches, rank 0 %lld", r,
                   (long long)m, (long long)micro0);
            micro0 = m;
            EXPECT(s[r].step_epoch == 0, "epoch %lld inside the first epoch",
                   (long long)s[r].step_epoch);
            int64_t k = step_samples(&s[r], tmp);
            for (int64_t i = 0; i < k; i++) {
                seen[tmp[i]]++;
                unions[st * n + nu++] = tmp[i];
            }
            for (int64_t mb = 0; mb < m; mb++) {
                int32_t *ids = buf, *lab = buf + B * T, *pos = buf + 2 * B * T,
                        *seg = buf + 3 * B * T;
                mt_sampler_fill(&s[r], mb, s[r].cfg.seq_len, ids, lab, pos, seg);
                for (int64_t b = 0; b < B; b++) {
                    int64_t row = mb * B + b;
                    const int64_t *items = s[r].row_items;
                    int64_t k0 = row < s[r].n_rows ? s[r].row_first[row] : 0;
                    int64_t k1 = row < s[r].n_rows ? s[r].row_first[row + 1] : 0;
                    labelled += check_row(d, items + k0, k1 - k0, ids + b * T, lab + b * T,
                                          pos + b * T, seg + b * T, T, pack);
                    int64_t real = 0; /* the filled row's tokens before its padding segment */
                    while (real < T && seg[b * T + real] < k1 - k0) real++;
                    EXPECT(mt_sampler_row_len(&s[r], mb, b) == real,
                           "row %lld: row_len %lld, the filled row has %lld tokens", (long long)row,
                           (long long)mt_sampler_row_len(&s[r], mb, b), (long long)real);
                }
            }
            EXPECT(s[r].global_targets == s[0].global_targets, "global_targets differ by rank");
        }
        EXPECT(labelled == s[0].global_targets, "step %lld: %lld labelled positions, %lld claimed",
               (long long)st, (long long)labelled, (long long)s[0].global_targets);
        for (int64_t i = 1; i < nu; i++) /* sort the union */
            for (int64_t j = i; j > 0 && unions[st * n + j - 1] > unions[st * n + j]; j--) {
                int64_t t = unions[st * n + j];
                unions[st * n + j] = unions[st * n + j - 1];
                unions[st * n + j - 1] = t;
            }
        n_union[st] = nu;
    }
    for (int64_t i = 0; i < n; i++)
        EXPECT(seen[i] == 1, "N=%d: sample %lld seen %d times in an epoch", N, (long long)i,
               seen[i]);
    for (int r = 0; r < N; r++) mt_sampler_free(&s[r]);
    free(buf);
    free(tmp);
    free(seen);
}

/* Hash of the next `steps` steps' micro-batches of a sampler. */
static uint64_t run_hash(mt_sampler *s, int64_t steps) {
    int64_t BT = s->cfg.micro_batch * s->cfg.seq_len;
    int32_t *buf = mt_malloc(sizeof(int32_t) * (size_t)(4 * BT), "micro-batch");
    uint64_t h = MT_HASH64_INIT;
    for (int64_t st = 0; st < steps; st++) {
        int64_t m = mt_sampler_next(s);
        h = mt_hash64(&m, sizeof(m), h);
        for (int64_t mb = 0; mb < m; mb++) {
            mt_sampler_fill(s, mb, s->cfg.seq_len, buf, buf + BT, buf + 2 * BT, buf + 3 * BT);
            h = mt_hash64(buf, sizeof(int32_t) * (size_t)(4 * BT), h);
        }
    }
    free(buf);
    return h;
}

static int test_data_sampler(void) {
    mt_token_data d;
    make_data(&d, 57, 30, 3); /* 57 samples: the last global batch of 10 is short */
    int64_t n = d.n_samples, steps = (n + 9) / 10;
    int64_t *u1 = mt_malloc(sizeof(int64_t) * (size_t)(steps * n), "u1");
    int64_t *uN = mt_malloc(sizeof(int64_t) * (size_t)(steps * n), "uN");
    int64_t n1[16], nN[16];
    for (int pack = 0; pack <= 1; pack++)
        for (int shuffle = 0; shuffle <= 1; shuffle++) {
            run_epoch(&d, pack, shuffle, 1, u1, n1);
            for (int N = 2; N <= 4; N++) {
                run_epoch(&d, pack, shuffle, N, uN, nN);
                for (int64_t st = 0; st < steps; st++)
                    EXPECT(n1[st] == nN[st] &&
                               !memcmp(u1 + st * n, uN + st * n, sizeof(int64_t) * (size_t)n1[st]),
                           "pack %d shuffle %d: step %lld of N=%d is another set than N=1", pack,
                           shuffle, (long long)st, N);
            }
            if (!shuffle) /* unshuffled: step k holds samples 10k .. 10k+9 */
                for (int64_t st = 0; st < steps; st++)
                    for (int64_t i = 0; i < n1[st]; i++)
                        EXPECT(u1[st * n + i] == st * 10 + i, "unshuffled order broken");
        }

    /* seeds and epochs: the same seed repeats, another seed or epoch reorders */
    mt_sampler a, b;
    mt_sampler_cfg c = base_cfg(true, true);
    mt_sampler_init(&a, &c, &d);
    mt_sampler_init(&b, &c, &d);
    uint64_t h_a0 = run_hash(&a, steps), h_b0 = run_hash(&b, steps);
    EXPECT(h_a0 == h_b0, "same seed, different batches");
    mt_sampler_free(&b);
    c.seed = 12;
    mt_sampler_init(&b, &c, &d);
    EXPECT(run_hash(&b, steps) != h_a0, "seeds 11 and 12 give the same epoch");
    mt_sampler_free(&a);
    mt_sampler_free(&b);

    /* resume: a cursor saved after k steps continues the exact sequence (across epochs) */
    for (int pack = 0; pack <= 1; pack++) {
        c = base_cfg(pack, true);
        c.world = 2;
        c.rank = 1;
        mt_sampler_init(&a, &c, &d);
        run_hash(&a, 8); /* into epoch 1 (6 steps per epoch) */
        mt_sampler_cursor cur = mt_sampler_get_cursor(&a);
        EXPECT(cur.epoch == 1 && cur.position == 20, "cursor after 8 steps: (%lld, %lld)",
               (long long)cur.epoch, (long long)cur.position);
        uint64_t h_a = run_hash(&a, 9); /* on into epoch 2 */
        mt_sampler_cursor end_a = mt_sampler_get_cursor(&a);
        mt_sampler_init(&b, &c, &d);
        mt_sampler_set_cursor(&b, cur);
        uint64_t h_b = run_hash(&b, 9);
        mt_sampler_cursor end_b = mt_sampler_get_cursor(&b);
        EXPECT(h_a == h_b && end_a.epoch == end_b.epoch && end_a.position == end_b.position,
               "pack %d: resumed run differs (epoch %lld/%lld)", pack, (long long)end_a.epoch,
               (long long)end_b.epoch);
        EXPECT(end_a.epoch == 2, "17 steps should reach epoch 2, at %lld", (long long)end_a.epoch);
        mt_sampler_free(&a);
        mt_sampler_free(&b);
    }

    /* epoch orders differ under shuffle */
    c = base_cfg(false, true);
    c.global_batch = n;
    mt_sampler_init(&a, &c, &d);
    mt_sampler_next(&a);
    int64_t *o0 = mt_malloc(sizeof(int64_t) * (size_t)n, "order0");
    memcpy(o0, a.row_items, sizeof(int64_t) * (size_t)n);
    mt_sampler_next(&a);
    EXPECT(memcmp(o0, a.row_items, sizeof(int64_t) * (size_t)n) != 0,
           "epochs 0 and 1 have the same order");
    mt_sampler_free(&a);
    free(o0);

    /* packing packs: fewer rows than samples at this length mix */
    c = base_cfg(true, false);
    c.global_batch = n;
    mt_sampler_init(&a, &c, &d);
    mt_sampler_next(&a);
    EXPECT(a.n_rows < n / 2 + 1, "packed %lld samples into %lld rows", (long long)n,
           (long long)a.n_rows);
    printf("sampler: %lld samples packed into %lld rows of %lld\n", (long long)n,
           (long long)a.n_rows, (long long)c.seq_len);
    mt_sampler_free(&a);

    free(u1);
    free(uN);
    mt_token_data_free(&d);
    return MT_TEST_OK;
}

/* The held-out split (mt_sampler_split) and a sampler over a pool of samples. */
static int test_data_sampler_split(void) {
    mt_token_data d;
    make_data(&d, 57, 30, 3);
    const int64_t n = d.n_samples, n_eval = 12;
    int64_t train[57], eval[57], train2[57], eval2[57];
    mt_sampler_split(n, n_eval, 5, train, eval);
    char seen[57] = {0};
    for (int64_t i = 0; i < n - n_eval; i++) {
        EXPECT(i == 0 || train[i] > train[i - 1], "train indices not ascending at %lld",
               (long long)i);
        seen[train[i]]++;
    }
    for (int64_t i = 0; i < n_eval; i++) {
        EXPECT(i == 0 || eval[i] > eval[i - 1], "eval indices not ascending at %lld", (long long)i);
        seen[eval[i]]++;
    }
    for (int64_t i = 0; i < n; i++)
        EXPECT(seen[i] == 1, "sample %lld in %d parts", (long long)i, seen[i]);
    /* drawn, not the last n_eval: spread over the file */
    EXPECT(eval[0] < n - n_eval, "the held-out samples are the file's last ones");
    mt_sampler_split(n, n_eval, 5, train2, eval2);
    EXPECT(!memcmp(eval, eval2, sizeof(int64_t) * (size_t)n_eval), "same seed, another split");
    mt_sampler_split(n, n_eval, 6, train2, eval2);
    EXPECT(memcmp(eval, eval2, sizeof(int64_t) * (size_t)n_eval) != 0, "seeds 5 and 6 split alike");
    mt_sampler_split(n, n, 5, NULL, eval2); /* all of them, no training part */
    for (int64_t i = 0; i < n; i++)
        EXPECT(eval2[i] == i, "all held out: eval[%lld] = %lld", (long long)i, (long long)eval2[i]);
    mt_sampler_split(n, 0, 5, train2, eval2);
    for (int64_t i = 0; i < n; i++)
        EXPECT(train2[i] == i, "no held-out samples: train[%lld] = %lld", (long long)i,
               (long long)train2[i]);

    /* a pool of every sample is the sampler without one */
    mt_sampler a, b;
    mt_sampler_cfg c = base_cfg(true, true);
    mt_sampler_init(&a, &c, &d);
    c.pool = train2;
    c.n_pool = n;
    mt_sampler_init(&b, &c, &d);
    EXPECT(run_hash(&a, 13) == run_hash(&b, 13), "a full pool changes the batches");
    mt_sampler_free(&a);
    mt_sampler_free(&b);

    /* an epoch over a pool visits exactly its samples, once each; unshuffled in pool order */
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        c = base_cfg(false, shuffle);
        c.global_batch = 7;
        c.pool = eval;
        c.n_pool = n_eval;
        mt_sampler_init(&a, &c, &d);
        EXPECT(mt_sampler_steps_per_epoch(&a) == 2, "12 pool samples in batches of 7: %lld steps",
               (long long)mt_sampler_steps_per_epoch(&a));
        int64_t got[57], k = 0;
        for (int st = 0; st < 2; st++) {
            mt_sampler_next(&a);
            for (int64_t r = 0; r < a.n_rows; r++) got[k++] = a.row_items[a.row_first[r]];
        }
        EXPECT(k == n_eval, "shuffle %d: %lld samples in the pool's epoch", shuffle, (long long)k);
        char in_pool[57] = {0};
        for (int64_t i = 0; i < n_eval; i++) in_pool[eval[i]] = 1;
        for (int64_t i = 0; i < k; i++) {
            EXPECT(in_pool[got[i]] == 1, "shuffle %d: sample %lld visited %s", shuffle,
                   (long long)got[i], in_pool[got[i]] ? "twice" : "outside the pool");
            in_pool[got[i]]++;
            if (!shuffle)
                EXPECT(got[i] == eval[i], "unshuffled pool order broken at %lld", (long long)i);
        }
        mt_sampler_free(&a);
    }
    mt_token_data_free(&d);
    return MT_TEST_OK;
}

/* ---------------- data_mix ---------------- */

/* Sources drawn over `want` samples by ranks 0..world-1 from the cursor cur on: counts per
 * source into cnt (3), the last step's sample of rank 0 into *last. */
static int64_t mix_draw(const mt_token_data *d, mt_sampler_cfg c, int world, mt_sampler_cursor cur,
                        int64_t want, int64_t cnt[3]) {
    MT_CHECK(world >= 1 && world <= 4 && want > 0, "mix_draw: %d ranks, %lld samples", world,
             (long long)want);
    mt_sampler s[4];
    int64_t drawn = 0;
    for (int r = 0; r < world; r++) {
        c.rank = r;
        c.world = world;
        mt_sampler_init(&s[r], &c, d);
        mt_sampler_set_cursor(&s[r], cur);
    }
    cnt[0] = cnt[1] = cnt[2] = 0;
    while (drawn < want)
        for (int r = 0; r < world; r++) {
            mt_sampler_next(&s[r]);
            const int64_t n = s[r].row_first[s[r].n_rows];
            for (int64_t i = 0; i < n; i++) cnt[d->source[s[r].row_items[i]]]++;
            drawn += n;
        }
    int64_t first = s[0].row_items[0];
    for (int r = 0; r < world; r++) mt_sampler_free(&s[r]);
    return first;
}

/* Mixing weights 2:1:1 over GSM8K train's 7,473 samples and the 3 + 3 of the messages and alpaca
 * fixtures (the sizes of the recipe of dist_train_mixed): the
 * share of each file over 1000 drawn samples on 2 ranks, at the start and across an epoch
 * boundary, shuffled or not; an epoch has n_pool positions; the small files repeat; the order
 * depends on the seed and continues exactly from a cursor. */
static int test_data_mix(void) {
    mt_token_data d;
    const int64_t sizes[3] = {7473, 3, 3}, n = sizes[0] + sizes[1] + sizes[2];
    make_data(&d, n, 12, 5);
    d.source = mt_malloc(sizeof(int32_t) * (size_t)n, "sources");
    for (int64_t i = 0; i < n; i++)
        d.source[i] = i < sizes[0] ? 0 : i < sizes[0] + sizes[1] ? 1 : 2;
    const double w[3] = {2, 1, 1};
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        mt_sampler_cfg c = base_cfg(true, shuffle);
        c.global_batch = 8;
        c.n_sources = 3;
        c.weights = w;
        const mt_sampler_cursor starts[2] = {{0, 0}, {2, n - 496}}; /* 496 before, 504 after */
        for (int k = 0; k < 2; k++) {
            int64_t cnt[3];
            mix_draw(&d, c, 2, starts[k], 1000, cnt);
            const int64_t total = cnt[0] + cnt[1] + cnt[2];
            for (int f = 0; f < 3; f++) {
                const double share = (double)cnt[f] / (double)total, want = w[f] / 4;
                EXPECT(fabs(share - want) <= 0.03,
                       "shuffle %d, from epoch %lld: file %d has %.1f %% of %lld samples, weight "
                       "%.1f %%",
                       shuffle, (long long)starts[k].epoch, f, 100 * share, (long long)total,
                       100 * want);
            }
            if (shuffle && k == 0)
                printf("mix 2:1:1 on 2 ranks, 1000 samples: %lld / %lld / %lld\n",
                       (long long)cnt[0], (long long)cnt[1], (long long)cnt[2]);
        }
        /* one whole epoch: n positions, each file's count; the small files repeat evenly */
        mt_sampler a;
        mt_sampler_init(&a, &c, &d);
        EXPECT(mt_sampler_steps_per_epoch(&a) == (n + 7) / 8, "steps per epoch");
        int64_t *seen = mt_calloc((size_t)n, sizeof(int64_t), "seen");
        int64_t got = 0, cnt[3] = {0};
        while (got < n) {
            mt_sampler_next(&a);
            for (int64_t i = 0; i < a.row_first[a.n_rows]; i++, got++) {
                seen[a.row_items[i]]++;
                cnt[d.source[a.row_items[i]]]++;
            }
        }
        EXPECT(got == n && cnt[0] == 3739 && cnt[1] == 1870 && cnt[2] == 1870,
               "an epoch of %lld: %lld / %lld / %lld", (long long)got, (long long)cnt[0],
               (long long)cnt[1], (long long)cnt[2]);
        int64_t lo = n, hi = 0;
        for (int64_t i = sizes[0]; i < sizes[0] + sizes[1]; i++) {
            lo = seen[i] < lo ? seen[i] : lo;
            hi = seen[i] > hi ? seen[i] : hi;
        }
        EXPECT(hi - lo <= 1 && lo >= 623, "file 1 samples repeat %lld to %lld times", (long long)lo,
               (long long)hi);
        free(seen);
        mt_sampler_free(&a);
    }
    /* the seed changes the order; the same cursor gives the same draw */
    mt_sampler_cfg c = base_cfg(true, true);
    c.n_sources = 3;
    c.weights = w;
    int64_t cnt[3];
    const mt_sampler_cursor at = {1, 40};
    const int64_t f1 = mix_draw(&d, c, 1, at, 8, cnt), f2 = mix_draw(&d, c, 1, at, 8, cnt);
    c.seed = 12;
    const int64_t f3 = mix_draw(&d, c, 1, at, 8, cnt);
    EXPECT(f1 == f2 && f1 != f3, "draw from a cursor: %lld %lld, another seed %lld", (long long)f1,
           (long long)f2, (long long)f3);
    mt_token_data_free(&d);
    return MT_TEST_OK;
}

/* The dealing by tokens: each rank gets a round robin's count of samples, and over an epoch the
 * step's busiest rank carries fewer tokens above the mean than a round robin's would. */
static int test_data_sampler_balance(void) {
    mt_token_data d;
    make_data(&d, 400, 48, 5);
    for (int N = 2; N <= 4; N += 2) {
        mt_sampler s[4];
        for (int r = 0; r < N; r++) {
            mt_sampler_cfg c = base_cfg(false, true);
            c.global_batch = 16;
            c.rank = r;
            c.world = N;
            mt_sampler_init(&s[r], &c, &d);
        }
        double excess_dealt = 0, excess_robin = 0;
        for (int64_t st = mt_sampler_steps_per_epoch(&s[0]); st > 0; st--) {
            int64_t load[4] = {0}, robin[4] = {0}, total = 0, n = 0;
            for (int r = 0; r < N; r++) {
                mt_sampler_next(&s[r]);
                n = s[r].step_count;
                const int64_t k = s[r].row_first[s[r].n_rows];
                EXPECT(k == n / N + (r < n % N), "N %d rank %d: %lld samples of %lld", N, r,
                       (long long)k, (long long)n);
                for (int64_t i = 0; i < k; i++) {
                    const int64_t id = s[r].row_items[i];
                    load[r] += d.offsets[id + 1] - d.offsets[id];
                }
            }
            for (int64_t j = 0; j < n; j++) {
                const int64_t id = s[0].order[s[0].step_first + j];
                robin[j % N] += d.offsets[id + 1] - d.offsets[id];
                total += d.offsets[id + 1] - d.offsets[id];
            }
            int64_t max_dealt = 0, max_robin = 0;
            for (int r = 0; r < N; r++) {
                max_dealt = load[r] > max_dealt ? load[r] : max_dealt;
                max_robin = robin[r] > max_robin ? robin[r] : max_robin;
            }
            excess_dealt += (double)max_dealt / ((double)total / N) - 1;
            excess_robin += (double)max_robin / ((double)total / N) - 1;
        }
        const double steps = (double)mt_sampler_steps_per_epoch(&s[0]);
        printf("N %d: the busiest rank above the mean by %.1f %% dealt by tokens, %.1f %% by a "
               "round robin (mean over %g steps)\n",
               N, 100 * excess_dealt / steps, 100 * excess_robin / steps, steps);
        EXPECT(excess_dealt < 0.5 * excess_robin, "N %d: dealing by tokens balances no better", N);
        for (int r = 0; r < N; r++) mt_sampler_free(&s[r]);
    }
    mt_token_data_free(&d);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"data_sampler", test_data_sampler},
                                     {"data_sampler_balance", test_data_sampler_balance},
                                     {"data_sampler_split", test_data_sampler_split},
                                     {"data_mix", test_data_mix}};
MT_TEST_MAIN(cases)
