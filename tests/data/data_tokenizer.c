// data_tokenizer.c: data/tokenizer.c against HF `tokenizers` outputs recorded by
// tools/make_tokenizer_fixtures.py (tests/fixtures/tokenizer/): ids and byte offsets of
// adversarial and random strings for two trained tokenizers and patched variants, HF decode()
// outputs, the GSM8K digest (ids of all 7,473 chat-rendered training samples), round trips and
// load/encode errors.
#include "tests/support/harness.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/file_io.h"
#include "data/gsm8k.h"
#include "data/sample.h"
#include "data/tokenizer.h"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[got] = 0;
    if (len) *len = got;
    return b;
}

static void fixture_path(char *out, size_t n, const char *file) {
    const char *src = getenv("MT_SOURCE_DIR");
    snprintf(out, n, "%s/tests/fixtures/tokenizer/%s", src ? src : ".", file);
}

static cJSON *load_cases(void) {
    char path[1024];
    fixture_path(path, sizeof(path), "cases.json");
    char *text = read_all(path, NULL);
    if (!text) {
        EXPECT(0, "cannot read %s", path);
        return NULL;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    EXPECT(root, "%s is not valid JSON", path);
    return root;
}

// Applies a variant patch (same rules as patched() in tools/make_tokenizer_fixtures.py).
static void apply_patch(cJSON *root, const cJSON *patch) {
    cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    for (const cJSON *p = patch ? patch->child : NULL; p; p = p->next) {
        if (strcmp(p->string, "legacy_merges") == 0) {
            cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
            cJSON *legacy = cJSON_CreateArray();
            for (const cJSON *m = merges->child; m; m = m->next) {
                size_t la = strlen(m->child->valuestring), lb = strlen(m->child->next->valuestring);
                char *s = malloc(la + lb + 2);
                memcpy(s, m->child->valuestring, la);
                s[la] = ' ';
                memcpy(s + la + 1, m->child->next->valuestring, lb + 1);
                cJSON_AddItemToArray(legacy, cJSON_CreateString(s));
                free(s);
            }
            cJSON_ReplaceItemInObjectCaseSensitive(model, "merges", legacy);
        } else if (strcmp(p->string, "added_tokens_append") == 0) {
            cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
            for (const cJSON *a = p->child; a; a = a->next)
                cJSON_AddItemToArray(added, cJSON_Duplicate(a, true));
        } else if (strncmp(p->string, "model.", 6) == 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(model, p->string + 6);
            cJSON_AddItemToObject(model, p->string + 6, cJSON_Duplicate(p, true));
        } else {
            cJSON_DeleteItemFromObjectCaseSensitive(root, p->string);
            cJSON_AddItemToObject(root, p->string, cJSON_Duplicate(p, true));
        }
    }
}

static mt_tokenizer *load_variant(const char *base, const cJSON *patch, const char *name) {
    char path[1024], err[1024];
    fixture_path(path, sizeof(path), base);
    if (!patch || !patch->child) {
        mt_tokenizer *tok = mt_tokenizer_try_load(path, err, sizeof(err));
        EXPECT(tok, "%s: %s", name, err);
        return tok;
    }
    char *text = read_all(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) {
        EXPECT(0, "cannot read %s", path);
        return NULL;
    }
    apply_patch(root, patch);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    mt_tokenizer *tok = mt_tokenizer_load_json(json, strlen(json), name, err, sizeof(err));
    free(json);
    EXPECT(tok, "%s: %s", name, err);
    return tok;
}

static void print_escaped(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n')
            printf("\\n");
        else if (c < 0x20)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

// ---- data_tokenizer_fixture ----

static int test_fixture(void) {
    cJSON *root = load_cases();
    if (!root) return MT_TEST_OK;
    const cJSON *strings = cJSON_GetObjectItemCaseSensitive(root, "strings");
    int n_strings = cJSON_GetArraySize(strings);
    const cJSON **str = malloc((size_t)n_strings * sizeof(cJSON *));
    int k = 0;
    for (const cJSON *s = strings->child; s; s = s->next) str[k++] = s;

    mt_token_buf buf = {0};
    const cJSON *variants = cJSON_GetObjectItemCaseSensitive(root, "variants");
    int64_t total_cases = 0, total_tokens = 0;
    for (const cJSON *v = variants->child; v; v = v->next) {
        const char *name = cJSON_GetObjectItemCaseSensitive(v, "name")->valuestring;
        const char *base = cJSON_GetObjectItemCaseSensitive(v, "base")->valuestring;
        mt_tokenizer *tok = load_variant(base, cJSON_GetObjectItemCaseSensitive(v, "patch"), name);
        if (!tok) continue;
        int bad = 0, n_cases = 0;
        for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "cases")->child; c; c = c->next) {
            int i = c->child->valueint;
            const cJSON *ids = c->child->next, *offs = ids->next;
            const char *s = str[i]->valuestring;
            mt_token_buf_clear(&buf);
            int64_t n = mt_tokenizer_encode(tok, s, strlen(s), &buf);
            bool ok = n == cJSON_GetArraySize(ids) && n == buf.n;
            int j = 0;
            for (const cJSON *x = ids->child; ok && x; x = x->next, j++)
                ok = buf.ids[j] == x->valueint;
            j = 0;
            for (const cJSON *x = offs->child; ok && x; x = x->next, j++)
                ok = buf.offsets[j] == (int64_t)x->valuedouble;
            n_cases++;
            total_tokens += n > 0 ? n : 0;
            if (ok) continue;
            if (++bad <= 3) {
                printf("FAIL %s string %d \"", name, i);
                print_escaped(s);
                printf("\"\n  want:");
                const cJSON *x = ids->child, *o = offs->child;
                for (; x; x = x->next, o = o->next->next)
                    printf(" %d[%d,%d)", x->valueint, o->valueint, o->next->valueint);
                printf("\n  got: ");
                for (int64_t t = 0; t < buf.n; t++)
                    printf(" %d[%lld,%lld)", buf.ids[t], (long long)buf.offsets[2 * t],
                           (long long)buf.offsets[2 * t + 1]);
                printf("\n");
            }
        }
        EXPECT(bad == 0, "variant %s: %d of %d strings differ from HF", name, bad, n_cases);
        printf("variant %-36s %3d strings, mismatches %d\n", name, n_cases, bad);
        total_cases += n_cases;
        mt_tokenizer_free(tok);
    }
    printf("fixture: %lld strings x variants, %lld tokens compared (ids and byte offsets)\n",
           (long long)total_cases, (long long)total_tokens);

    // HF decode() outputs, with and without skip_special_tokens.
    int bad_dec = 0, n_dec = 0;
    const char *cur_base = NULL;
    mt_tokenizer *tok = NULL;
    for (const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "decode")->child; d; d = d->next) {
        const char *base = cJSON_GetObjectItemCaseSensitive(d, "base")->valuestring;
        if (!cur_base || strcmp(base, cur_base) != 0) {
            mt_tokenizer_free(tok);
            tok = load_variant(base, NULL, base);
            cur_base = base;
        }
        if (!tok) break;
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(d, "ids");
        int32_t idv[64];
        int n = 0;
        for (const cJSON *x = ids->child; x && n < 64; x = x->next) idv[n++] = x->valueint;
        bool skip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "skip_special"));
        char *got = mt_tokenizer_decode(tok, idv, n, skip);
        const char *want = cJSON_GetObjectItemCaseSensitive(d, "text")->valuestring;
        n_dec++;
        if (strcmp(got, want) != 0 && ++bad_dec <= 3) {
            printf("FAIL decode (%s, skip_special=%d): want \"", base, skip);
            print_escaped(want);
            printf("\" got \"");
            print_escaped(got);
            printf("\"\n");
        }
        free(got);
    }
    mt_tokenizer_free(tok);
    EXPECT(bad_dec == 0, "decode: %d of %d differ from HF", bad_dec, n_dec);
    printf("decode: %d cases, mismatches %d\n", n_dec, bad_dec);

    // Vocab size and token <-> id lookups.
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    for (const cJSON *m = meta->child; m; m = m->next) {
        mt_tokenizer *t = load_variant(m->string, NULL, m->string);
        if (!t) continue;
        int want = cJSON_GetObjectItemCaseSensitive(m, "vocab_size")->valueint;
        EXPECT(mt_tokenizer_vocab_size(t) == want, "%s: vocab size %d, HF %d", m->string,
               mt_tokenizer_vocab_size(t), want);
        for (const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "token_to_id")->child; p;
             p = p->next) {
            int32_t id = mt_tokenizer_token_to_id(t, p->string);
            int32_t hf = cJSON_IsNull(p) ? -1 : p->valueint;
            EXPECT(id == hf, "%s: token_to_id(%s) = %d, HF %d", m->string, p->string, id, hf);
            if (hf >= 0) {
                const char *back = mt_tokenizer_id_to_token(t, hf);
                EXPECT(back && strcmp(back, p->string) == 0, "%s: id_to_token(%d) = %s", m->string,
                       hf, back ? back : "(null)");
            }
        }
        EXPECT(mt_tokenizer_is_special(t, mt_tokenizer_token_to_id(t, "<end_of_sentence>")) &&
                   !mt_tokenizer_is_special(t, mt_tokenizer_token_to_id(t, "Ġthe")),
               "%s: special flags", m->string);
        mt_tokenizer_free(t);
    }
    mt_token_buf_free(&buf);
    free(str);
    cJSON_Delete(root);
    return MT_TEST_OK;
}

// ---- data_tokenizer_gsm8k ----

static uint64_t fnv_u32(const int32_t *v, int64_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint32_t)v[i]) * 0x100000001B3ull;
    return h;
}

static uint64_t fnv_bytes(const char *s, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001B3ull;
    return h;
}

static int test_gsm8k(void) {
    const char *shared = getenv("MT_SHARED_DIR");
    char path[1024], dpath[1024];
    snprintf(path, sizeof(path), "%s/data/gsm8k/train.jsonl", shared ? shared : "../shared");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("skipped: %s not found\n", path);
        return MT_TEST_SKIP;
    }
    fixture_path(dpath, sizeof(dpath), "gsm8k_digest.txt");
    FILE *df = fopen(dpath, "r");
    EXPECT(df, "cannot read %s", dpath);
    if (!df) return fclose(f), MT_TEST_OK;
    mt_tokenizer *ta = load_variant("tokenizer.json", NULL, "A");
    mt_tokenizer *tb = load_variant("tokenizer_split.json", NULL, "B");
    if (!ta || !tb) return fclose(f), fclose(df), MT_TEST_OK;

    const char *pre_user = "<beginning_of_sentence>user name=user\n";
    const char *mid = "<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n";
    const char *post = "<end_of_sentence>\n";
    mt_token_buf buf = {0};
    char *line = NULL, *text = NULL;
    size_t line_cap = 0, text_cap = 0;
    int64_t n_samples = 0, bad_text = 0, bad_a = 0, bad_b = 0, tokens_a = 0;
    double secs_a = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
        if (!cJSON_IsString(q) || !cJSON_IsString(a)) {
            EXPECT(0, "%s:%lld: no question/answer", path, (long long)n_samples + 1);
            cJSON_Delete(j);
            continue;
        }
        size_t need = strlen(pre_user) + strlen(q->valuestring) + strlen(mid) +
                      strlen(a->valuestring) + strlen(post) + 1;
        if (need > text_cap) text_cap = 2 * need, text = realloc(text, text_cap);
        size_t len = (size_t)snprintf(text, text_cap, "%s%s%s%s%s", pre_user, q->valuestring, mid,
                                      a->valuestring, post);
        cJSON_Delete(j);
        long long na, nb;
        unsigned long long ha, hb, ht;
        if (fscanf(df, "%lld %llx %lld %llx %llx", &na, &ha, &nb, &hb, &ht) != 5) {
            EXPECT(0, "digest has fewer lines than %s", path);
            break;
        }
        n_samples++;
        if (fnv_bytes(text, len) != ht) bad_text++;
        mt_token_buf_clear(&buf);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int64_t n = mt_tokenizer_encode(ta, text, len, &buf);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs_a += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        tokens_a += n;
        if (n != na || fnv_u32(buf.ids, buf.n) != ha) {
            if (++bad_a <= 3)
                printf("FAIL sample %lld (A): %lld tokens, HF %lld\n", (long long)n_samples,
                       (long long)n, na);
        }
        // Offsets must tile the text (no added-token whitespace stripping in this tokenizer).
        for (int64_t t = 0; t < buf.n; t++) {
            int64_t want_start = t ? buf.offsets[2 * t - 1] : 0;
            if (buf.offsets[2 * t] > want_start || buf.offsets[2 * t + 1] <= buf.offsets[2 * t]) {
                EXPECT(0, "sample %lld: token %lld offsets [%lld,%lld) do not follow %lld",
                       (long long)n_samples, (long long)t, (long long)buf.offsets[2 * t],
                       (long long)buf.offsets[2 * t + 1], (long long)want_start);
                break;
            }
        }
        mt_token_buf_clear(&buf);
        n = mt_tokenizer_encode(tb, text, len, &buf);
        if (n != nb || fnv_u32(buf.ids, buf.n) != hb) {
            if (++bad_b <= 3)
                printf("FAIL sample %lld (B): %lld tokens, HF %lld\n", (long long)n_samples,
                       (long long)n, nb);
        }
    }
    printf("gsm8k: %lld samples; rendered-text mismatches %lld; token mismatches: tokenizer.json "
           "%lld, tokenizer_split.json %lld\n",
           (long long)n_samples, (long long)bad_text, (long long)bad_a, (long long)bad_b);
    printf("gsm8k: tokenizer.json %lld tokens in %.3f s (%.2f M tokens/s, one core)\n",
           (long long)tokens_a, secs_a, 1e-6 * (double)tokens_a / secs_a);
    EXPECT(n_samples == 7473, "expected 7473 samples, read %lld", (long long)n_samples);
    EXPECT(bad_text == 0 && bad_a == 0 && bad_b == 0, "GSM8K mismatches");
    free(line);
    free(text);
    fclose(f);
    fclose(df);
    mt_token_buf_free(&buf);
    mt_tokenizer_free(ta);
    mt_tokenizer_free(tb);
    return MT_TEST_OK;
}

// ---- data_tokenizer_roundtrip ----

static int utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static void check_roundtrip(mt_tokenizer *tok, const char *name, const char *s, size_t len,
                            mt_token_buf *buf, int *bad) {
    mt_token_buf_clear(buf);
    int64_t n = mt_tokenizer_encode(tok, s, len, buf);
    char *back = n >= 0 ? mt_tokenizer_decode(tok, buf->ids, buf->n, false) : NULL;
    if (!back || strlen(back) != len || memcmp(back, s, len) != 0) {
        if (++*bad <= 3) {
            printf("FAIL roundtrip %s: \"", name);
            print_escaped(s);
            printf("\" -> \"");
            print_escaped(back ? back : "(encode failed)");
            printf("\"\n");
        }
    }
    free(back);
}

static int test_roundtrip(void) {
    cJSON *root = load_cases();
    if (!root) return MT_TEST_OK;
    const char *bases[2] = {"tokenizer.json", "tokenizer_split.json"};
    mt_token_buf buf = {0};
    mt_rng rng;
    mt_rng_seed(&rng, 7);
    char *s = malloc(4 * 400 + 1);
    for (int b = 0; b < 2; b++) {
        mt_tokenizer *tok = load_variant(bases[b], NULL, bases[b]);
        if (!tok) continue;
        int bad = 0, n = 0;
        const cJSON *strings = cJSON_GetObjectItemCaseSensitive(root, "strings");
        for (const cJSON *x = strings->child; x; x = x->next, n++)
            check_roundtrip(tok, bases[b], x->valuestring, strlen(x->valuestring), &buf, &bad);
        // Random code points from all planes (no surrogates, no NUL), biased to ASCII.
        for (int r = 0; r < 300; r++, n++) {
            size_t len = 0;
            int chars = 1 + (int)(mt_rng_u64(&rng) % 400);
            for (int c = 0; c < chars; c++) {
                uint64_t u = mt_rng_u64(&rng);
                uint32_t cp = u % 4 == 0   ? 1 + (uint32_t)(u >> 8) % 0x10FFFF
                              : u % 4 == 1 ? 0x80 + (uint32_t)(u >> 8) % 0x780
                                           : 1 + (uint32_t)(u >> 8) % 0x7F;
                if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x20;
                len += (size_t)utf8_put(s + len, cp);
            }
            s[len] = 0;
            check_roundtrip(tok, bases[b], s, len, &buf, &bad);
        }
        EXPECT(bad == 0, "%s: %d of %d round trips differ", bases[b], bad, n);
        printf("roundtrip %s: %d strings, failures %d\n", bases[b], n, bad);
        mt_tokenizer_free(tok);
    }
    free(s);
    mt_token_buf_free(&buf);
    cJSON_Delete(root);
    return MT_TEST_OK;
}

// ---- data_tokenizer_cache_threads ----
// The word cache (cleared when full) and concurrent callers (which run without it) must give
// the same tokens as a fresh computation.

typedef struct {
    mt_tokenizer *tok;
    char **words;
    int n;
    int32_t *ids; // n x 8 results, -1 padded
    int mismatches;
    const int32_t *want;
} cache_job;

static void encode_words(mt_tokenizer *tok, char **words, int n, int32_t *ids) {
    mt_token_buf buf = {0};
    for (int i = 0; i < n; i++) {
        mt_token_buf_clear(&buf);
        mt_tokenizer_encode(tok, words[i], strlen(words[i]), &buf);
        for (int j = 0; j < 8; j++) ids[8 * i + j] = j < buf.n ? buf.ids[j] : -1;
    }
    mt_token_buf_free(&buf);
}

static void *cache_thread(void *arg) {
    cache_job *job = arg;
    encode_words(job->tok, job->words, job->n, job->ids);
    for (int i = 0; i < 8 * job->n; i++) job->mismatches += job->ids[i] != job->want[i];
    return NULL;
}

static int test_cache_threads(void) {
    mt_tokenizer *tok = load_variant("tokenizer.json", NULL, "A");
    if (!tok) return MT_TEST_OK;
    // 150k distinct words overflow the cache (64k words), so it is cleared several times.
    const int n = 150000;
    char **words = malloc((size_t)n * sizeof(char *));
    mt_rng rng;
    mt_rng_seed(&rng, 11);
    for (int i = 0; i < n; i++) {
        words[i] = malloc(16);
        int len = snprintf(words[i], 16, " %c%d", 'a' + (int)(mt_rng_u64(&rng) % 26), i);
        for (int k = 1; k < len; k++)
            if (mt_rng_u64(&rng) % 3 == 0) words[i][k] = (char)('a' + mt_rng_u64(&rng) % 26);
    }
    int32_t *first = malloc((size_t)n * 8 * sizeof(int32_t));
    int32_t *second = malloc((size_t)n * 8 * sizeof(int32_t));
    encode_words(tok, words, n, first);
    encode_words(tok, words, n, second); // now partly from the cache
    mt_tokenizer *fresh = load_variant("tokenizer.json", NULL, "A fresh");
    int32_t *single = malloc(8 * sizeof(int32_t));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bool differ = memcmp(first + 8 * i, second + 8 * i, 8 * sizeof(int32_t)) != 0;
        // Spot check against another tokenizer, which sees each of these words once.
        if (!differ && i % 97 == 0) {
            encode_words(fresh, words + i, 1, single);
            differ = memcmp(first + 8 * i, single, 8 * sizeof(int32_t)) != 0;
        }
        bad += differ;
    }
    mt_tokenizer_free(fresh);
    free(single);
    EXPECT(bad == 0, "%d of %d words differ between cached and fresh encodes", bad, n);

    // Four threads on one tokenizer: one holds the cache lock at a time, the others encode
    // without it; all must agree with the serial result.
    pthread_t th[4];
    cache_job jobs[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (cache_job){.tok = tok, .words = words, .n = 20000, .want = first};
        jobs[t].ids = malloc((size_t)jobs[t].n * 8 * sizeof(int32_t));
        pthread_create(&th[t], NULL, cache_thread, &jobs[t]);
    }
    int bad_threads = 0;
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        bad_threads += jobs[t].mismatches;
        free(jobs[t].ids);
    }
    EXPECT(bad_threads == 0, "%d token mismatches across threads", bad_threads);
    printf("cache: %d words encoded twice (cache cleared when full), mismatches %d; 4 threads: "
           "mismatches %d\n",
           n, bad, bad_threads);
    for (int i = 0; i < n; i++) free(words[i]);
    free(words);
    free(first);
    free(second);
    mt_tokenizer_free(tok);
    return MT_TEST_OK;
}

// ---- data_tokenizer_errors ----

static const char *MINI_TOKENIZER =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],"
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
    "\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,\"decoder\":null,"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"a\",\"continuing_subword_"
    "prefix\":"
    "null,\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
    "\"ignore_merges\":false,\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}";

// Loads MINI_TOKENIZER with `from` replaced by `to`; expects failure mentioning `want`.
static void expect_reject(const char *from, const char *to, const char *want) {
    const char *at = strstr(MINI_TOKENIZER, from);
    EXPECT(at, "test setup: '%s' not in the mini tokenizer", from);
    if (!at) return;
    size_t pre = (size_t)(at - MINI_TOKENIZER);
    char json[4096];
    snprintf(json, sizeof(json), "%.*s%s%s", (int)pre, MINI_TOKENIZER, to, at + strlen(from));
    char err[1024] = "";
    mt_tokenizer *tok = mt_tokenizer_load_json(json, strlen(json), "mini.json", err, sizeof(err));
    EXPECT(!tok, "'%s' was accepted", to);
    EXPECT(strstr(err, want) && strstr(err, "mini.json"), "error for '%s' is \"%s\", want \"%s\"",
           to, err, want);
    if (!tok) printf("rejected as expected: %s\n", err);
    mt_tokenizer_free(tok);
}

// A Split regex that backtracks catastrophically hits PCRE2's match limit (HF tokenizers 0.23.3
// panics on the same input: "Onig: Regex search error: retry-limit-in-match over"): the error
// names the file, the pre-tokenizer, the pattern and where the search started, and a sample
// built with it is an error of its own, not the end of the process.
static void expect_match_limit(char *err, size_t errlen) {
    char path[1024];
    fixture_path(path, sizeof(path), "tokenizer.json");
    char *json = read_all(path, NULL);
    EXPECT(json, "cannot read %s", path);
    if (!json) return;
    const char *bl = "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                     "\"trim_offsets\":true,\"use_regex\":true}";
    char *at = strstr(json, bl);
    EXPECT(at, "test setup: the fixture's pre_tokenizer is not '%s'", bl);
    if (!at) return;
    mt_strbuf j = {0};
    mt_strbuf_append(&j, json, (size_t)(at - json));
    const char *seq = "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
                      "\"Split\",\"pattern\":{\"Regex\":\"(a+)+b\"},\"behavior\":\"Isolated\","
                      "\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                      "\"trim_offsets\":true,\"use_regex\":false}]}";
    mt_strbuf_append(&j, seq, strlen(seq));
    mt_strbuf_append(&j, at + strlen(bl), strlen(at + strlen(bl)));
    free(json);
    mt_tokenizer *tok = mt_tokenizer_load_json(j.p, j.len, "backtrack.json", err, errlen);
    mt_strbuf_free(&j);
    EXPECT(tok, "the backtracking tokenizer loads: %s", err);
    if (!tok) return;
    char text[64] = "aab then ";
    memset(text + strlen(text), 'a', 40); // 2^40 ways to split the run before failing (a 'b'
    strcat(text, "c b");                  // must follow, or PCRE2 gives up at once)
    mt_token_buf buf = {0};
    EXPECT(mt_tokenizer_encode_err(tok, "aab", 3, &buf, err, errlen) > 0, "aab: %s", err);
    mt_token_buf_clear(&buf);
    const int64_t n = mt_tokenizer_encode_err(tok, text, strlen(text), &buf, err, errlen);
    EXPECT(n == -1 && buf.n == 0 &&
               strstr(err, "backtrack.json: pre_tokenizer step 1 of 2 (Split, pattern '(a+)+b')") &&
               strstr(err, "match limit") && strstr(err, "searching from byte 3 of the text"),
           "match limit: %lld tokens, \"%s\"", (long long)n, err);
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    char dir[1024], e2[MT_ERR_LEN] = "";
    fixture_path(dir, sizeof(dir), "");
    mt_chat_template *tmpl = mt_chat_template_open(&(mt_chat_source){.dir = dir}, e2, sizeof(e2));
    EXPECT(tmpl, "the test tokenizer's chat template: %s", e2);
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, tmpl, &o);
    EXPECT(tmpl && mt_sample_build(&b, text, "a", e2) == MT_SAMPLE_ERROR &&
               strstr(e2, "cannot be tokenized: backtrack.json: pre_tokenizer step 1 of 2"),
           "sample: \"%s\"", e2);
    mt_sample_builder_free(&b);
    mt_chat_template_free(tmpl);
    mt_token_buf_free(&buf);
    mt_tokenizer_free(tok);
}

static int test_errors(void) {
    char err[1024];
    EXPECT(!mt_tokenizer_try_load("/nonexistent/tokenizer.json", err, sizeof(err)) &&
               strstr(err, "/nonexistent/tokenizer.json") && strstr(err, "cannot open"),
           "missing file: \"%s\"", err);
    EXPECT(!mt_tokenizer_try_load("tests", err, sizeof(err)) &&
               strstr(err, "tests: is a directory, not a file"),
           "a directory: \"%s\"", err);
    const char *bad_json = "{\"version\": \"1.0\",\n \"model\": {\"type\": \"BPE\",, }}";
    EXPECT(!mt_tokenizer_load_json(bad_json, strlen(bad_json), "bad.json", err, sizeof(err)) &&
               strstr(err, "bad.json") && strstr(err, "malformed JSON") && strstr(err, "line 2"),
           "malformed JSON: \"%s\"", err);
    mt_tokenizer *ok = mt_tokenizer_load_json(MINI_TOKENIZER, strlen(MINI_TOKENIZER), "mini.json",
                                              err, sizeof(err));
    EXPECT(ok, "mini tokenizer: %s", err);
    expect_reject("\"type\":\"BPE\"", "\"type\":\"WordPiece\"", "WordPiece");
    expect_match_limit(err, sizeof(err));
    // a repeated key: HF takes the last, cJSON's lookups the first
    expect_reject("\"trim_offsets\":true,", "\"trim_offsets\":true,\"use_regex\":false,",
                  "key \"pre_tokenizer.use_regex\" appears twice");
    expect_reject("\"decoder\":null", "\"decoder\":null,\"decoder\":null",
                  "key \"decoder\" appears twice");
    expect_reject("\"type\":\"ByteLevel\"", "\"type\":\"Whitespace\"", "Whitespace");
    expect_reject("\"normalizer\":null", "\"normalizer\":{\"type\":\"NFC\"}", "NFC");
    expect_reject("\"normalizer\":null",
                  "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"}]}",
                  "NFKC");
    expect_reject("\"decoder\":null", "\"decoder\":{\"type\":\"WordPiece\"}", "WordPiece");
    expect_reject("\"post_processor\":null", "\"post_processor\":{\"type\":\"BertProcessing\"}",
                  "BertProcessing");
    expect_reject("\"byte_fallback\":false", "\"byte_fallback\":true", "byte_fallback");
    expect_reject("\"dropout\":null", "\"dropout\":0.1", "dropout");
    expect_reject("\"continuing_subword_prefix\":null", "\"continuing_subword_prefix\":\"##\"",
                  "continuing_subword_prefix");
    expect_reject("\"merges\":[\"a b\"]", "\"merges\":[\"a c\"]", "'c' is not in the vocab");
    expect_reject("\"merges\":[\"a b\"]", "\"merges\":[\"a b c\"]", "merge #1");
    // after a good merge (a leak of its buffer under ASan before; found by fuzz_tokenizer_json)
    expect_reject("\"merges\":[\"a b\"]", "\"merges\":[\"a b\",\"ab\"]", "merge #2");
    expect_reject("\"unk_token\":\"a\"", "\"unk_token\":\"<unk>\"", "unk_token");
    expect_reject("\"unk_token\":\"a\"", "\"unk_token\":null", "byte 0x00");
    expect_reject("\"truncation\":null", "\"truncation\":{\"max_length\":5}", "truncation");
    // an absurd id would size the id tables (found by tests/fuzz/fuzz_tokenizer_json.c: 8 GB)
    expect_reject("\"ab\":2", "\"ab\":2000000000", "model.vocab['ab'] must be an integer id in");
    expect_reject("\"ab\":2", "\"ab\":-1", "model.vocab['ab'] must be an integer id in");
    expect_reject("\"added_tokens\":[]",
                  "\"added_tokens\":[{\"id\":3,\"content\":\"x\",\"single_word\":true}]",
                  "single_word");
    expect_reject("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,",
                  "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"\\\\bx\"},\"behavior\":\"Isolated\",\"invert\":false},"
                  "{\"type\":\"ByteLevel\"}]},\"x\":{",
                  "word boundary");
    // Oniguruma rejects it ("unmatched range specifier"); PCRE2 would take '-' as a literal
    expect_reject("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,",
                  "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"[\\\\p{L}-.]\"},\"behavior\":\"Isolated\",\"invert\":false},"
                  "{\"type\":\"ByteLevel\"}]},\"x\":{",
                  "a class cannot start a range");
    expect_reject("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,",
                  "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},"
                  "{\"type\":\"Split\",\"pattern\":{\"String\":\"x\"},\"behavior\":\"Isolated\","
                  "\"invert\":false}]},\"x\":{",
                  "last step");
    expect_reject("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,",
                  "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"a\"},\"behavior\":\"Sideways\",\"invert\":false},"
                  "{\"type\":\"ByteLevel\"}]},\"x\":{",
                  "Sideways");

    // Invalid UTF-8 input: -1 and nothing appended.
    if (ok) {
        const char *bad[] = {"a\x80",      "\xC0\x80",         "\xED\xA0\x80", "\xF5\x80\x80\x80",
                             "ab\xE4\xB8", "\xF4\x90\x80\x80", "\xFF",         "ok \xC3"};
        mt_token_buf buf = {0};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            int64_t n = mt_tokenizer_encode(ok, bad[i], strlen(bad[i]), &buf);
            EXPECT(n == -1 && buf.n == 0, "invalid UTF-8 case %zu: returned %lld, %lld tokens", i,
                   (long long)n, (long long)buf.n);
        }
        EXPECT(mt_tokenizer_encode(ok, "ab", 2, &buf) == 1 && buf.ids[0] == 2, "valid input");
        mt_token_buf_free(&buf);
        mt_tokenizer_free(ok);
    }

    // mt_tokenizer_load dies with the file name in the message and a non-zero exit.
    int pipefd[2];
    EXPECT(pipe(pipefd) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        mt_tokenizer_load("/nonexistent/dir/tokenizer.json");
        _exit(0);
    }
    close(pipefd[1]);
    char msg[2048] = "";
    size_t used = 0;
    ssize_t got;
    while (used + 1 < sizeof(msg) &&
           (got = read(pipefd[0], msg + used, sizeof(msg) - 1 - used)) > 0)
        used += (size_t)got;
    msg[used] = 0;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
               strstr(msg, "/nonexistent/dir/tokenizer.json"),
           "mt_tokenizer_load on a missing file: status %d, stderr \"%s\"", status, msg);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_tokenizer_fixture", test_fixture},
    {"data_tokenizer_gsm8k", test_gsm8k},
    {"data_tokenizer_roundtrip", test_roundtrip},
    {"data_tokenizer_cache_threads", test_cache_threads},
    {"data_tokenizer_errors", test_errors},
};
MT_TEST_MAIN(cases)
