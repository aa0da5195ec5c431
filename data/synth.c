/* synth.c: templated GSM8K-style problems with exact integer arithmetic. */
#include "data/synth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "data/chat_template.h"

/* splitmix64: the stream of problem (seed, index) */
typedef struct {
    uint64_t s;
} synth_rng;

static uint64_t rng_next(synth_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform integer in [lo, hi] */
static long rng_int(synth_rng *r, long lo, long hi) {
    return lo + (long)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static void sb_printf(mt_strbuf *b, const char *fmt, ...) MT_PRINTF(2, 3);
static void sb_printf(mt_strbuf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    MT_CHECK(n >= 0 && n < (int)sizeof(tmp), "synth: a sentence exceeds %zu bytes", sizeof(tmp));
    mt_strbuf_append(b, tmp, (size_t)n);
}

typedef struct {
    const char *name, *he, *He, *His;
} person;

static const person people[] = {
    {"Natalia", "she", "She", "Her"}, {"Weng", "she", "She", "Her"},
    {"Betty", "she", "She", "Her"},   {"Julie", "she", "She", "Her"},
    {"James", "he", "He", "His"},     {"Albert", "he", "He", "His"},
    {"Ken", "he", "He", "His"},       {"Alexis", "she", "She", "Her"},
    {"Tina", "she", "She", "Her"},    {"Marco", "he", "He", "His"},
    {"Priya", "she", "She", "Her"},   {"Omar", "he", "He", "His"},
    {"Lena", "she", "She", "Her"},    {"Hiro", "he", "He", "His"},
    {"Sofia", "she", "She", "Her"},   {"Diego", "he", "He", "His"},
};
static const char *plurals[] = {"notebooks", "pencils", "apples",  "oranges", "cupcakes",
                                "tickets",   "books",   "candles", "plants",  "marbles"};
static const char *singulars[] = {"bike", "phone", "guitar", "jacket",     "tent",
                                  "lamp", "scarf", "kettle", "board game", "backpack"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const person *pick_person(synth_rng *r) { return &people[rng_int(r, 0, COUNT(people) - 1)]; }
static const person *pick_other(synth_rng *r, const person *p) {
    const person *o;
    do o = pick_person(r);
    while (o == p);
    return o;
}
static const char *pick(synth_rng *r, const char **list, int n) {
    return list[rng_int(r, 0, n - 1)];
}

/* Each generator writes one problem; q and a are empty on entry. */
static void gen_shopping(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    const person *p = pick_person(r);
    const char *x = pick(r, plurals, COUNT(plurals)), *y;
    do y = pick(r, plurals, COUNT(plurals));
    while (y == x);
    long na = rng_int(r, 2, 12), pa = rng_int(r, 2, 25), nb = rng_int(r, 2, 12),
         pb = rng_int(r, 2, 25);
    long ca = na * pa, cb = nb * pb, t = ca + cb;
    sb_printf(q,
              "%s buys %ld %s for $%ld each and %ld %s for $%ld each. How much money does %s "
              "spend in all?",
              p->name, na, x, pa, nb, y, pb, p->he);
    sb_printf(a, "The %s cost %ld * %ld = $<<%ld*%ld=%ld>>%ld.\n", x, na, pa, na, pa, ca, ca);
    sb_printf(a, "The %s cost %ld * %ld = $<<%ld*%ld=%ld>>%ld.\n", y, nb, pb, nb, pb, cb, cb);
    sb_printf(a, "%s spends %ld + %ld = $<<%ld+%ld=%ld>>%ld in all.\n#### %ld", p->name, ca, cb, ca,
              cb, t, t, t);
}

static void gen_half(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    const person *p = pick_person(r), *o = pick_other(r, p);
    const char *x = pick(r, plurals, COUNT(plurals));
    long n = 2 * rng_int(r, 5, 60), b = rng_int(r, 3, 40);
    long h = n / 2, k = n - h, t = k + b;
    sb_printf(q,
              "%s has %ld %s. %s gives half of them to %s and then buys %ld more. How many %s "
              "does %s have now?",
              p->name, n, x, p->He, o->name, b, x, p->name);
    sb_printf(a, "%s gives away %ld / 2 = <<%ld/2=%ld>>%ld %s.\n", p->name, n, n, h, h, x);
    sb_printf(a, "%s has %ld - %ld = <<%ld-%ld=%ld>>%ld %s left.\n", p->He, n, h, n, h, k, k, x);
    sb_printf(a, "After buying more, %s has %ld + %ld = <<%ld+%ld=%ld>>%ld %s.\n#### %ld", p->he, k,
              b, k, b, t, t, x, t);
}

static void gen_reading(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    const person *p = pick_person(r);
    long pa = rng_int(r, 5, 40), da = rng_int(r, 2, 9), pb = rng_int(r, 5, 40),
         db = rng_int(r, 2, 9);
    long ra = pa * da, rb = pb * db, t = ra + rb;
    sb_printf(q,
              "%s reads %ld pages a day for %ld days, and then %ld pages a day for %ld more "
              "days. How many pages does %s read altogether?",
              p->name, pa, da, pb, db, p->he);
    sb_printf(a, "In the first %ld days %s reads %ld * %ld = <<%ld*%ld=%ld>>%ld pages.\n", da,
              p->he, pa, da, pa, da, ra, ra);
    sb_printf(a, "In the next %ld days %s reads %ld * %ld = <<%ld*%ld=%ld>>%ld pages.\n", db, p->he,
              pb, db, pb, db, rb, rb);
    sb_printf(a, "Altogether %s reads %ld + %ld = <<%ld+%ld=%ld>>%ld pages.\n#### %ld", p->he, ra,
              rb, ra, rb, t, t, t);
}

static void gen_wages(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    const person *p = pick_person(r);
    const char *x = pick(r, singulars, COUNT(singulars));
    long w = rng_int(r, 8, 30), h = rng_int(r, 5, 40), k = rng_int(r, 2, 6);
    long e = w * h, tot = e * k, s = rng_int(r, 1, tot - 1), left = tot - s;
    sb_printf(q,
              "%s earns $%ld an hour and works %ld hours a week. After %ld weeks, %s spends $%ld "
              "on a %s. How much money does %s have left?",
              p->name, w, h, k, p->he, s, x, p->he);
    sb_printf(a, "Each week %s earns %ld * %ld = $<<%ld*%ld=%ld>>%ld.\n", p->he, w, h, w, h, e, e);
    sb_printf(a, "In %ld weeks %s earns %ld * %ld = $<<%ld*%ld=%ld>>%ld.\n", k, p->he, e, k, e, k,
              tot, tot);
    sb_printf(a, "After buying the %s, %s has %ld - %ld = $<<%ld-%ld=%ld>>%ld left.\n#### %ld", x,
              p->he, tot, s, tot, s, left, left, left);
}

static void gen_groups(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    long c = rng_int(r, 2, 9), s = rng_int(r, 15, 35), g = rng_int(r, 2, 8);
    long tot = c * s;
    long k = tot % g + g * rng_int(r, tot % g == 0 ? 1 : 0, 2); /* present is a multiple of g */
    long present = tot - k, groups = present / g;
    sb_printf(q,
              "A school has %ld classes with %ld students in each class. One day %ld students "
              "are absent. The students who are present are split into groups of %ld. How many "
              "groups are there?",
              c, s, k, g);
    sb_printf(a, "There are %ld * %ld = <<%ld*%ld=%ld>>%ld students in the school.\n", c, s, c, s,
              tot, tot);
    sb_printf(a, "%ld - %ld = <<%ld-%ld=%ld>>%ld students are present.\n", tot, k, tot, k, present,
              present);
    sb_printf(a, "They make %ld / %ld = <<%ld/%ld=%ld>>%ld groups.\n#### %ld", present, g, present,
              g, groups, groups, groups);
}

static void gen_discount(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    static const long rates[] = {10, 20, 25, 50};
    const person *p = pick_person(r);
    const char *x = pick(r, singulars, COUNT(singulars));
    long price = 20 * rng_int(r, 1, 15), rate = rates[rng_int(r, 0, 3)], n = rng_int(r, 2, 9);
    long d = price * rate / 100, each = price - d,
         t = n * each; /* 20 * rate is a multiple of 100 */
    sb_printf(q,
              "A %s costs $%ld. This week it is %ld%% off. %s buys %ld of them. How much does "
              "%s pay?",
              x, price, rate, p->name, n, p->he);
    sb_printf(a, "The discount is %ld * %ld / 100 = $<<%ld*%ld/100=%ld>>%ld.\n", price, rate, price,
              rate, d, d);
    sb_printf(a, "Each %s costs %ld - %ld = $<<%ld-%ld=%ld>>%ld.\n", x, price, d, price, d, each,
              each);
    sb_printf(a, "%s pays %ld * %ld = $<<%ld*%ld=%ld>>%ld.\n#### %ld", p->name, n, each, n, each, t,
              t, t);
}

static void gen_ages(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    const person *p = pick_person(r), *o = pick_other(r, p);
    long age = rng_int(r, 3, 15), k = rng_int(r, 2, 5), y = rng_int(r, 2, 20);
    long oa = age * k, later = oa + y;
    sb_printf(q,
              "%s is %ld years old. %s is %ld times as old as %s. How old will %s be in %ld "
              "years?",
              p->name, age, o->name, k, p->name, o->name, y);
    sb_printf(a, "%s is %ld * %ld = <<%ld*%ld=%ld>>%ld years old.\n", o->name, age, k, age, k, oa,
              oa);
    sb_printf(a, "In %ld years %s will be %ld + %ld = <<%ld+%ld=%ld>>%ld years old.\n#### %ld", y,
              o->he, oa, y, oa, y, later, later, later);
}

static void gen_cookies(synth_rng *r, mt_strbuf *q, mt_strbuf *a) {
    const person *p = pick_person(r);
    long trays = rng_int(r, 2, 6), per = rng_int(r, 6, 24), f = rng_int(r, 2, 6);
    long tot = trays * per;
    long eaten = tot % f + f * rng_int(r, tot % f == 0 ? 1 : 0, 2); /* the rest splits evenly */
    long rest = tot - eaten, each = rest / f;
    sb_printf(q,
              "%s bakes %ld trays of cookies with %ld cookies on each tray. %s family eats %ld "
              "cookies, and %s shares the rest equally among %ld friends. How many cookies does "
              "each friend get?",
              p->name, trays, per, p->His, eaten, p->he, f);
    sb_printf(a, "%s bakes %ld * %ld = <<%ld*%ld=%ld>>%ld cookies.\n", p->name, trays, per, trays,
              per, tot, tot);
    sb_printf(a, "After the family eats some, %ld - %ld = <<%ld-%ld=%ld>>%ld cookies are left.\n",
              tot, eaten, tot, eaten, rest, rest);
    sb_printf(a, "Each friend gets %ld / %ld = <<%ld/%ld=%ld>>%ld cookies.\n#### %ld", rest, f,
              rest, f, each, each, each);
}

void mt_synth_problem(uint64_t seed, int64_t index, mt_strbuf *question, mt_strbuf *answer) {
    static void (*const gens[])(synth_rng *, mt_strbuf *, mt_strbuf *) = {
        gen_shopping, gen_half,     gen_reading, gen_wages,
        gen_groups,   gen_discount, gen_ages,    gen_cookies};
    synth_rng r = {seed};
    r.s = rng_next(&r) ^ (uint64_t)index * 0xd1b54a32d192ed03ull;
    rng_next(&r);
    question->len = answer->len = 0;
    mt_strbuf_append(question, "", 0);
    mt_strbuf_append(answer, "", 0);
    gens[rng_int(&r, 0, COUNT(gens) - 1)](&r, question, answer);
}

int mt_synth_write_file(const char *path, const char *text, size_t len, char *err) {
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, MT_ERR_LEN, "%.300s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    bool ok = fwrite(text, 1, len, f) == len;
    ok = fflush(f) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, MT_ERR_LEN, "%.300s: cannot write: %s", ok ? path : tmp, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

int mt_synth_write_records(const char *path, int64_t n,
                           struct cJSON *(*record)(mt_synth_state *st, int64_t i), uint64_t seed,
                           char *err) {
    mt_synth_state st = {.seed = seed};
    mt_strbuf out = {0};
    for (int64_t i = 0; i < n; i++) {
        cJSON *rec = record(&st, i);
        char *line = cJSON_PrintUnformatted(rec);
        MT_CHECK(line, "synth: out of memory printing record %lld", (long long)i);
        mt_strbuf_append(&out, line, strlen(line));
        mt_strbuf_append(&out, "\n", 1);
        free(line);
        cJSON_Delete(rec);
    }
    int rc = mt_synth_write_file(path, out.p ? out.p : "", out.len, err);
    mt_strbuf_free(&st.q);
    mt_strbuf_free(&st.a);
    mt_strbuf_free(&st.b);
    mt_strbuf_free(&out);
    return rc;
}

/* {"question", "answer"}: problem i */
static cJSON *synth_problem_record(mt_synth_state *st, int64_t i) {
    mt_synth_problem(st->seed, i, &st->q, &st->a);
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "question", st->q.p);
    cJSON_AddStringToObject(obj, "answer", st->a.p);
    return obj;
}

int mt_synth_write_jsonl(const char *path, uint64_t seed, int64_t n, char *err) {
    return mt_synth_write_records(path, n, synth_problem_record, seed, err);
}
