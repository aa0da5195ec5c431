/* recipe_aux.c: the model's auxiliary loss terms in a recipe, by the names the model gives them
 * (models/minimax.h): [model.aux_coef] name = weight, [model.aux_detach] name = true/false.
 * The recipe names no term itself: the model says which names it has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/minimax.h"
#include "train/recipe_internal.h"

#define COEF_PREFIX   "model.aux_coef."
#define DETACH_PREFIX "model.aux_detach."

/* Keys of earlier recipes' [train] table that are now the model's term settings (the model's
 * list, mt_minimax_aux_aliases): read under the new name (a value other than the setting's
 * default then), or dropped (that default, which the model's own equals), so that a checkpoint
 * written before resumes. */
bool mt_recipe_moved_keys_apply(mt_toml_doc *doc, char *err, size_t errlen) {
    int n_alias;
    const mt_minimax_aux_alias *alias = mt_minimax_aux_aliases(&n_alias);
    for (int i = 0; i < doc->n; i++) {
        mt_toml_entry *e = &doc->entries[i];
        int k = 0;
        while (k < n_alias && !(!strncmp(e->key, "train.", 6) && !strcmp(e->key + 6, alias[k].key)))
            k++;
        if (k == n_alias) continue;
        char now[128];
        snprintf(now, sizeof(now), "%s%s", alias[k].detach ? DETACH_PREFIX : COEF_PREFIX,
                 alias[k].term);
        const mt_toml_value *v = &e->value;
        const double x = v->type == MT_TOML_BOOL    ? (double)v->b
                         : v->type == MT_TOML_INT   ? (double)v->i
                         : v->type == MT_TOML_FLOAT ? v->f
                                                    : NAN;
        if (mt_toml_find(doc, now)) {
            char where[MT_PATH_MAX + 64];
            mt_recipe_entry_where(e, where, sizeof(where));
            snprintf(err, errlen, "%s: %s is now %s, which the recipe sets too: keep one", where,
                     e->key, now);
            return false;
        }
        free(e->key);
        if (x == alias[k].def) { /* the old default: nothing to carry */
            memmove(e, e + 1, (size_t)(doc->n - i - 1) * sizeof(*e));
            doc->n--;
            i--;
            continue;
        }
        e->key = strdup(now);
        MT_CHECK(e->key, "out of memory copying a recipe key");
    }
    return true;
}

static bool has_prefix(const char *s, const char *prefix) {
    return !strncmp(s, prefix, strlen(prefix));
}

bool mt_recipe_aux_key(const char *key) {
    return has_prefix(key, COEF_PREFIX) || has_prefix(key, DETACH_PREFIX);
}

/* r's entry for name, added in name order when absent; NULL when the table is full. */
static mt_recipe_aux *aux_entry(mt_recipe *r, const char *name) {
    int i = 0;
    while (i < r->model_n_aux && strcmp(r->model_aux[i].name, name) < 0) i++;
    if (i < r->model_n_aux && !strcmp(r->model_aux[i].name, name)) return &r->model_aux[i];
    if (r->model_n_aux == MT_RECIPE_AUX) return NULL;
    memmove(&r->model_aux[i + 1], &r->model_aux[i],
            (size_t)(r->model_n_aux - i) * sizeof(r->model_aux[0]));
    r->model_n_aux++;
    memset(&r->model_aux[i], 0, sizeof(r->model_aux[i]));
    snprintf(r->model_aux[i].name, sizeof(r->model_aux[i].name), "%s", name);
    return &r->model_aux[i];
}

bool mt_recipe_aux_collect(mt_recipe *r, const mt_toml_doc *doc, char *err, size_t errlen) {
    for (int i = 0; i < doc->n; i++) {
        const mt_toml_entry *e = &doc->entries[i];
        if (!mt_recipe_aux_key(e->key)) continue;
        const bool detach = has_prefix(e->key, DETACH_PREFIX);
        const char *name = e->key + strlen(detach ? DETACH_PREFIX : COEF_PREFIX);
        char where[MT_PATH_MAX + 64];
        mt_recipe_entry_where(e, where, sizeof(where));
        const mt_toml_type t = e->value.type;
        const char *why = NULL;
        if (!name[0] || strchr(name, '.'))
            why = "the name the model gives a term, one word, is expected";
        else if (strlen(name) >= sizeof(r->model_aux[0].name))
            why = "the name is too long";
        else if (detach && t != MT_TOML_BOOL)
            why = "must be true or false";
        else if (!detach && !((t == MT_TOML_FLOAT && isfinite(e->value.f)) || t == MT_TOML_INT))
            why = "must be a finite number (the term's weight in the loss; 0: not computed)";
        mt_recipe_aux *a = why ? NULL : aux_entry(r, name);
        if (!why && !a) {
            snprintf(err, errlen, "%s: %s: more than %d terms named", where, e->key, MT_RECIPE_AUX);
            return false;
        }
        if (why) {
            snprintf(err, errlen, "%s: %s: %s", where, e->key, why);
            return false;
        }
        if (detach) {
            a->has_detach = true;
            a->detach = e->value.b;
        } else {
            a->has_coef = true;
            a->coef = t == MT_TOML_INT ? (double)e->value.i : e->value.f;
        }
    }
    return true;
}

bool mt_recipe_aux_check(const mt_recipe *r, const mt_toml_doc *doc, const mt_minimax_config *cfg,
                         char *err, size_t errlen) {
    for (int i = 0; i < r->model_n_aux; i++)
        for (int d = 0; d < 2; d++) {
            const mt_recipe_aux *a = &r->model_aux[i];
            if (!(d ? a->has_detach : a->has_coef)) continue;
            char key[128], why[512], where[MT_PATH_MAX + 64] = "recipe";
            snprintf(key, sizeof(key), "%s%s", d ? DETACH_PREFIX : COEF_PREFIX, a->name);
            if (mt_minimax_aux_settable(cfg, a->name, d, why, sizeof(why))) continue;
            const mt_toml_entry *e = mt_toml_find(doc, key);
            if (e) mt_recipe_entry_where(e, where, sizeof(where));
            snprintf(err, errlen, "%s: %s: %s", where, key, why);
            return false;
        }
    return true;
}

/* The value of entry a's coefficient (detach false) or detachment as TOML text into buf, or ""
 * when unset. */
static void aux_value_text(const mt_recipe_aux *a, bool detach, char *buf, size_t n) {
    buf[0] = 0;
    if (!(detach ? a->has_detach : a->has_coef)) return;
    mt_toml_value v = {.type = detach ? MT_TOML_BOOL : MT_TOML_FLOAT, .b = a->detach, .f = a->coef};
    mt_toml_value_format(&v, buf, n);
}

void mt_recipe_aux_format(const mt_recipe *r, char *buf, size_t len) {
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < r->model_n_aux; i++) {
            char v[64];
            aux_value_text(&r->model_aux[i], d, v, sizeof(v));
            if (v[0])
                snprintf(buf + strlen(buf), len - strlen(buf), "%s.%s = %s\n",
                         d ? "aux_detach" : "aux_coef", r->model_aux[i].name, v);
        }
}

uint64_t mt_recipe_aux_hash(const mt_recipe *r, uint64_t h) {
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < r->model_n_aux; i++) {
            char v[64], text[160];
            aux_value_text(&r->model_aux[i], d, v, sizeof(v));
            if (!v[0]) continue;
            snprintf(text, sizeof(text), "%s%s=%s", d ? DETACH_PREFIX : COEF_PREFIX,
                     r->model_aux[i].name, v);
            for (const char *c = text; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
        }
    return h;
}

/* Entry `name` of r, or a cleared one (nothing set). */
static mt_recipe_aux aux_find(const mt_recipe *r, const char *name) {
    for (int i = 0; i < r->model_n_aux; i++)
        if (!strcmp(r->model_aux[i].name, name)) return r->model_aux[i];
    return (mt_recipe_aux){0};
}

/* One name of was or now: its coefficient and detachment compared. */
static int aux_diff_one(const mt_recipe *was, const mt_recipe *now, const char *name, char *out,
                        size_t n, int count) {
    const mt_recipe_aux a = aux_find(was, name), b = aux_find(now, name);
    for (int d = 0; d < 2; d++) {
        char va[64], vb[64];
        aux_value_text(&a, d, va, sizeof(va));
        aux_value_text(&b, d, vb, sizeof(vb));
        if (!strcmp(va, vb)) continue;
        const size_t at = strlen(out);
        snprintf(out + at, n - at, "%s%s%s = %s differs from the checkpoint's %s",
                 count ? "; " : "", d ? DETACH_PREFIX : COEF_PREFIX, name, vb[0] ? vb : "(unset)",
                 va[0] ? va : "(unset)");
        count++;
    }
    return count;
}

int mt_recipe_aux_diff(const mt_recipe *was, const mt_recipe *now, char *out, size_t n, int count) {
    for (int i = 0; i < now->model_n_aux; i++)
        count = aux_diff_one(was, now, now->model_aux[i].name, out, n, count);
    for (int i = 0; i < was->model_n_aux; i++) /* the names this run leaves unset */
        if (!aux_find(now, was->model_aux[i].name).name[0])
            count = aux_diff_one(was, now, was->model_aux[i].name, out, n, count);
    return count;
}
