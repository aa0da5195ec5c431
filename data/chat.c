/* chat.c: where a model's chat template comes from and the variables it is rendered with
 * (data/chat.h). The conversations themselves and the trained bytes: data/chat_conv.c. */
#include "data/chat.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "data/chat_internal.h"
#include "core/file_io.h"

#define TEMPLATE_MAX_BYTES ((size_t)4 << 20)

static const char *const special_names[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                            "pad_token", "cls_token", "mask_token"};

static char *dup_n(const char *s, size_t n) {
    char *d = mt_malloc(n + 1, "chat template text");
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* Adds template `text` under `name` (origin names it in errors). */
static int add_template(mt_chat_template *t, const char *name, const char *text, const char *origin,
                        char *err, size_t errlen) {
    if (t->n == MT_CHAT_MAX_TEMPLATES) {
        snprintf(err, errlen, "%s: more than %d chat templates", origin, MT_CHAT_MAX_TEMPLATES);
        return -1;
    }
    /* a released template transformers renders for part lists only: the replacement of the
     * list in data/chat_template.h, which renders string contents too */
    const char *fixed = mt_chat_template_fixed(text);
    if (fixed) text = fixed;
    t->replaced |= fixed != NULL;
    jinja_template *jt = jinja_template_load(origin, text, strlen(text), err, errlen);
    if (!jt) return -1;
    const int k = t->n++;
    t->names[k] = dup_n(name, strlen(name));
    t->texts[k] = dup_n(text, strlen(text));
    t->tmpl[k] = jt;
    t->hash = mt_hash64(name, strlen(name) + 1, t->hash);
    t->hash = mt_hash64(text, strlen(text) + 1, t->hash);
    return 0;
}

static int add_template_file(mt_chat_template *t, const char *name, const char *path, char *err,
                             size_t errlen) {
    size_t len;
    char *text = mt_file_read_max(path, &len, TEMPLATE_MAX_BYTES, err, errlen);
    if (!text) return -1;
    if (memchr(text, 0, len)) {
        snprintf(err, errlen, "%s: contains a NUL byte", path);
        free(text);
        return -1;
    }
    int rc = add_template(t, name, text, path, err, errlen);
    free(text);
    return rc;
}

/* chat_template.jinja and additional_chat_templates/NAME.jinja of dir: 1 when there were
 * some, 0 when none, -1 on an error. */
static int add_dir_files(mt_chat_template *t, const char *dir, char *err, size_t errlen) {
    char path[4400];
    int found = 0;
    snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (add_template_file(t, "default", path, err, errlen) != 0) return -1;
        snprintf(t->origin, sizeof(t->origin), "%s", path);
        found = 1;
    }
    snprintf(path, sizeof(path), "%s/additional_chat_templates", dir);
    DIR *d = opendir(path);
    if (!d) return found;
    /* in name order, so that the hash does not depend on the directory's order */
    char names[MT_CHAT_MAX_TEMPLATES][256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t k = strlen(e->d_name);
        if (k <= 6 || strcmp(e->d_name + k - 6, ".jinja") || k - 6 >= sizeof(names[0])) continue;
        if (n == MT_CHAT_MAX_TEMPLATES) break;
        memcpy(names[n], e->d_name, k - 6);
        names[n++][k - 6] = 0;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n; i++) {
        char file[9000];
        snprintf(file, sizeof(file), "%s/%s.jinja", path, names[i]);
        if (add_template_file(t, names[i], file, err, errlen) != 0) return -1;
        if (!found) snprintf(t->origin, sizeof(t->origin), "%s", path);
        found = 1;
    }
    return found;
}

/* A special token's text from tokenizer_config.json: a string or an AddedToken dict. */
static const char *token_text(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "content") : NULL;
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

/* A control token (text from tokenizer_config.json's key) the tokenizer must encode as one id;
 * each text once. */
static void add_control(mt_chat_template *t, const char *text, const char *key) {
    if (!text || !text[0] || t->n_controls == MT_CHAT_MAX_CONTROLS) return;
    for (int i = 0; i < t->n_controls; i++)
        if (!strcmp(t->controls[i], text)) return;
    t->controls[t->n_controls] = dup_n(text, strlen(text));
    t->control_keys[t->n_controls++] = key;
}

static bool in_templates(const mt_chat_template *t, const char *text) {
    for (int i = 0; i < t->n; i++)
        if (strstr(t->texts[i], text)) return true;
    return false;
}

/* The tokens of tokenizer_config.json's list `key` (an object of AddedToken dicts, or a list)
 * that the templates' text contains. */
static void read_listed(mt_chat_template *t, const cJSON *cfg, const char *key) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(cfg, key), *e;
    if (!cJSON_IsObject(list) && !cJSON_IsArray(list)) return;
    cJSON_ArrayForEach(e, list) {
        const char *text = token_text(e);
        if (text && in_templates(t, text)) add_control(t, text, key);
    }
}

/* The control tokens of tokenizer_config.json: bos_token and eos_token (the end-of-turn and
 * padding token), and the added tokens that the templates' text contains: the role and markup
 * tokens they emit (Text-01's "]~b]"). */
static void read_controls(mt_chat_template *t, const cJSON *cfg) {
    add_control(t, token_text(cJSON_GetObjectItemCaseSensitive(cfg, "bos_token")), "bos_token");
    add_control(t, token_text(cJSON_GetObjectItemCaseSensitive(cfg, "eos_token")), "eos_token");
    read_listed(t, cfg, "added_tokens_decoder");
    read_listed(t, cfg, "additional_special_tokens");
    const cJSON *listed = cJSON_GetObjectItemCaseSensitive(cfg, "chat_control_tokens"), *e;
    if (!cJSON_IsArray(listed)) return;
    t->listed_controls =
        mt_calloc((size_t)cJSON_GetArraySize(listed) + 1, sizeof(char *), "chat_control_tokens");
    t->n_listed_controls = 0;
    cJSON_ArrayForEach(e, listed) if (cJSON_IsString(e))
        t->listed_controls[t->n_listed_controls++] = dup_n(e->valuestring, strlen(e->valuestring));
}

/* tokenizer_config.json: the special tokens, and the templates unless files gave them. */
static int read_config(mt_chat_template *t, const char *dir, bool want_templates, char *err,
                       size_t errlen) {
    char path[4400];
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    size_t len;
    char *text = mt_file_read_max(path, &len, (size_t)64 << 20, err, errlen);
    if (!text) return -1;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(cfg)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        cJSON_Delete(cfg);
        return -1;
    }
    char key_path[256];
    if (mt_json_duplicate_key(cfg, NULL, key_path, sizeof(key_path))) {
        snprintf(err, errlen, "%s: key \"%s\" appears twice (readers disagree on which one counts)",
                 path, key_path);
        cJSON_Delete(cfg);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < sizeof(special_names) / sizeof(special_names[0]); i++) {
        const char *v = token_text(cJSON_GetObjectItemCaseSensitive(cfg, special_names[i]));
        if (v) jinja_dict_set_str(t->heap, t->base_vars, special_names[i], jinja_cstr(t->heap, v));
        if (v && !strcmp(special_names[i], "eos_token")) t->eot = dup_n(v, strlen(v));
    }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (want_templates && cJSON_IsString(ct)) {
        rc = add_template(t, "default", ct->valuestring, path, err, errlen);
    } else if (want_templates && cJSON_IsArray(ct)) {
        t->config_list = true;
        const cJSON *e;
        int k = 0;
        cJSON_ArrayForEach(e, ct) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *tx = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (!cJSON_IsString(nm) || !cJSON_IsString(tx)) {
                snprintf(err, errlen,
                         "%s: chat_template[%d] is not a {\"name\", \"template\"} entry", path, k);
                rc = -1;
                break;
            }
            char origin[4500];
            snprintf(origin, sizeof(origin), "%s (chat_template \"%s\")", path, nm->valuestring);
            if ((rc = add_template(t, nm->valuestring, tx->valuestring, origin, err, errlen)) != 0)
                break;
            k++;
        }
    } else if (want_templates) {
        snprintf(err, errlen,
                 "%s: no chat_template (and no chat_template.jinja beside it): set "
                 "data.chat_template to the model's template file",
                 path);
        rc = -1;
    }
    if (rc == 0 && want_templates) snprintf(t->origin, sizeof(t->origin), "%s", path);
    if (rc == 0) read_controls(t, cfg);
    cJSON_Delete(cfg);
    return rc;
}

static int add_kwargs(mt_chat_template *t, const char *json, char *err, size_t errlen) {
    jinja_value kw;
    char why[256];
    if (jinja_json_parse(t->heap, json, strlen(json), &kw, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "data.template_kwargs: %s", why);
        return -1;
    }
    if (kw.type != JINJA_DICT) {
        snprintf(err, errlen, "data.template_kwargs: a table of template variables is expected");
        return -1;
    }
    static const char *const reserved[] = {"messages", "tools", "documents",
                                           "add_generation_prompt"};
    for (int64_t i = 0; i < kw.u.dict->n; i++) {
        jinja_value k = kw.u.dict->keys[i];
        for (size_t r = 0; r < sizeof(reserved) / sizeof(reserved[0]); r++)
            if (k.type == JINJA_STR && k.u.s.len == strlen(reserved[r]) &&
                !memcmp(k.u.s.p, reserved[r], k.u.s.len)) {
                snprintf(err, errlen,
                         "data.template_kwargs.%s: set by the pipeline, not a template argument",
                         reserved[r]);
                return -1;
            }
        jinja_dict_set(t->heap, t->base_vars, k, kw.u.dict->vals[i]);
    }
    t->kwargs = kw;
    t->hash = mt_hash64(json, strlen(json) + 1, t->hash);
    return 0;
}

mt_chat_template *mt_chat_template_open(const mt_chat_source *src, char *err, size_t errlen) {
    mt_chat_template *t = calloc(1, sizeof(*t));
    MT_CHECK(t, "out of memory for a chat template");
    t->heap = jinja_heap_new(0);
    t->base_vars = jinja_dict_new(t->heap);
    t->kwargs.type = JINJA_UNDEFINED;
    t->n_listed_controls = -1;
    t->hash = MT_HASH64_INIT;
    int rc = 0, files = 0;
    if (src->dir) t->dir = dup_n(src->dir, strlen(src->dir));
    if (src->file) {
        rc = add_template_file(t, "default", src->file, err, errlen);
        snprintf(t->origin, sizeof(t->origin), "%s", src->file);
        t->from = MT_CHAT_FROM_FILE;
    } else if (src->dir) {
        files = rc = add_dir_files(t, src->dir, err, errlen);
        t->from = files > 0 ? MT_CHAT_FROM_DIR_FILES : MT_CHAT_FROM_CONFIG;
    } else {
        snprintf(err, errlen,
                 "no chat template: neither a tokenizer directory nor a template file");
        rc = -1;
    }
    if (rc >= 0 && src->dir) rc = read_config(t, src->dir, !src->file && !files, err, errlen);
    if (rc >= 0 && src->kwargs_json && src->kwargs_json[0])
        rc = add_kwargs(t, src->kwargs_json, err, errlen);
    if (rc >= 0) {
        t->def = t->tool_use = -1;
        for (int i = 0; i < t->n; i++) {
            if (!strcmp(t->names[i], "default")) t->def = i;
            if (!strcmp(t->names[i], "tool_use")) t->tool_use = i;
        }
        if (t->def < 0 && t->n > 1) t->def = -2; /* several, none default: per conversation */
        if (t->n == 1) t->def = 0;
        /* the special tokens and kwargs are part of what the renders depend on */
        jinja_buf b = {0};
        char why[128];
        jinja_json_opts o = {.indent = -1};
        if (jinja_json_dump(t->base_vars, &o, &b, why, sizeof(why)) == 0)
            t->hash = mt_hash64(b.p, b.len, t->hash);
        jinja_buf_free(&b);
        return t;
    }
    mt_chat_template_free(t);
    return NULL;
}

void mt_chat_template_free(mt_chat_template *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) {
        jinja_template_free(t->tmpl[i]);
        free(t->names[i]);
        free(t->texts[i]);
    }
    for (int i = 0; i < t->n_controls; i++) free(t->controls[i]);
    for (int i = 0; i < t->n_listed_controls; i++) free(t->listed_controls[i]);
    free(t->listed_controls);
    free(t->eot);
    free(t->dir);
    jinja_heap_free(t->heap);
    free(t);
}

uint64_t mt_chat_template_hash(const mt_chat_template *t) { return t->hash; }
const char *mt_chat_template_origin(const mt_chat_template *t) { return t->origin; }
const char *mt_chat_template_eot(const mt_chat_template *t) { return t->eot; }
const char *mt_chat_template_text(const mt_chat_template *t) {
    return t->def >= 0 ? t->texts[t->def] : t->texts[0];
}

static void file_add(mt_chat_file *f, int *n, const char *name, char *text, size_t len) {
    snprintf(f[*n].name, sizeof(f[*n].name), "%s", name);
    f[*n].text = text;
    f[(*n)++].len = len;
}

/* tokenizer_config.json with its chat_template written from t's templates (a replaced
 * released template's replacement in its place). */
static char *config_rewrite(const mt_chat_template *t, const char *text, size_t len,
                            const char *path, char *err, size_t errlen) {
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(cfg)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        cJSON_Delete(cfg);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "chat_template");
    if (!t->config_list) {
        cJSON_AddStringToObject(cfg, "chat_template", t->texts[0]);
    } else {
        cJSON *list = cJSON_AddArrayToObject(cfg, "chat_template");
        for (int i = 0; i < t->n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", t->names[i]);
            cJSON_AddStringToObject(e, "template", t->texts[i]);
            cJSON_AddItemToArray(list, e);
        }
    }
    char *out = cJSON_Print(cfg);
    cJSON_Delete(cfg);
    MT_CHECK(out, "out of memory exporting %s", path);
    return out;
}

int mt_chat_template_export(const mt_chat_template *t, mt_chat_file files[MT_CHAT_EXPORT_MAX],
                            char *err, size_t errlen) {
    int n = 0;
    if (t->dir) {
        char path[4400];
        snprintf(path, sizeof(path), "%s/tokenizer_config.json", t->dir);
        size_t len;
        char *text = mt_file_read_max(path, &len, (size_t)64 << 20, err, errlen);
        if (!text) return -1;
        if (t->from == MT_CHAT_FROM_CONFIG && t->replaced) {
            char *c = config_rewrite(t, text, len, path, err, errlen);
            free(text);
            if (!c) return -1;
            text = c;
            len = strlen(c);
        }
        file_add(files, &n, "tokenizer_config.json", text, len);
    }
    if (t->from == MT_CHAT_FROM_CONFIG) return n;
    for (int i = 0; i < t->n; i++) {
        char name[300];
        if (t->from == MT_CHAT_FROM_FILE || !strcmp(t->names[i], "default"))
            snprintf(name, sizeof(name), "chat_template.jinja");
        else
            snprintf(name, sizeof(name), "additional_chat_templates/%.200s.jinja", t->names[i]);
        file_add(files, &n, name, dup_n(t->texts[i], strlen(t->texts[i])), strlen(t->texts[i]));
        if (t->from == MT_CHAT_FROM_FILE) break;
    }
    return n;
}

void mt_chat_files_free(mt_chat_file *files, int n) {
    for (int i = 0; i < n; i++) free(files[i].text);
}

/* The template for a conversation: tool_use when it has tools and there is one. NULL with err
 * when several templates name no default. */
const jinja_template *mt_chat_pick(const mt_chat_template *t, const mt_chat_conv *c, char *err,
                                   size_t errlen) {
    if (c->tools.type != JINJA_NONE && c->tools.type != JINJA_UNDEFINED && t->tool_use >= 0)
        return t->tmpl[t->tool_use];
    if (t->def >= 0) return t->tmpl[t->def];
    snprintf(err, errlen, "%s: several chat templates and none is named \"default\"", t->origin);
    return NULL;
}

/* The variables of a render: messages [0, n), tools, documents, add_generation_prompt, the
 * special tokens, the kwargs, the conversation's own. */
jinja_value mt_chat_vars(const mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n,
                         bool agp) {
    jinja_value vars = jinja_dict_new(h), msgs = c->messages;
    if (n >= 0 && n < c->messages.u.list->n) {
        msgs = jinja_list_new(h);
        for (int i = 0; i < n; i++) jinja_list_push(h, msgs, c->messages.u.list->items[i]);
    }
    jinja_dict_set_str(h, vars, "messages", msgs);
    jinja_dict_set_str(h, vars, "tools",
                       c->tools.type == JINJA_UNDEFINED ? jinja_none() : c->tools);
    jinja_dict_set_str(h, vars, "documents",
                       c->documents.type == JINJA_UNDEFINED ? jinja_none() : c->documents);
    jinja_dict_set_str(h, vars, "add_generation_prompt", jinja_bool(agp));
    const jinja_dict *b = t->base_vars.u.dict;
    for (int64_t i = 0; i < b->n; i++) jinja_dict_set(h, vars, b->keys[i], b->vals[i]);
    if (c->vars.type == JINJA_DICT)
        for (int64_t i = 0; i < c->vars.u.dict->n; i++)
            jinja_dict_set(h, vars, c->vars.u.dict->keys[i], c->vars.u.dict->vals[i]);
    return vars;
}

mt_tokenizer *mt_chat_tokenizer_load(const char *dir, char *err, size_t n) {
    char path[4200], msg[MT_ERR_LEN + 4400];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    if (access(path, R_OK) != 0) {
        snprintf(err, n, "%s: cannot read tokenizer.json (--tokenizer TOK)", dir);
        return NULL;
    }
    mt_tokenizer *tok = mt_tokenizer_try_load(path, msg, sizeof(msg));
    if (!tok) snprintf(err, n, "%s", msg);
    return tok;
}

bool mt_chat_tokenizer_fits(const mt_tokenizer *tok, const char *dir, int64_t vocab_size, char *err,
                            size_t n) {
    const int32_t size = mt_tokenizer_vocab_size(tok);
    if (size <= vocab_size) return true;
    snprintf(err, n,
             "%s/tokenizer.json: ids up to %d but the model's vocab_size is %lld (the tokenizer "
             "of another model? --tokenizer TOK)",
             dir, size - 1, (long long)vocab_size);
    return false;
}

bool mt_chat_template_tokens_fit(const mt_chat_template *t, const mt_tokenizer *tok,
                                 const char *dir, char *err, size_t n) {
    mt_token_buf b = {0};
    bool ok = true;
    for (int i = 0; ok && i < t->n_controls; i++) {
        const char *text = t->controls[i];
        char why[MT_ERR_LEN];
        mt_token_buf_clear(&b);
        const int64_t k = mt_tokenizer_encode_err(tok, text, strlen(text), &b, why, sizeof(why));
        if (k == 1) continue;
        ok = false;
        if (k < 0)
            snprintf(err, n, "%s/tokenizer.json: the chat template's control token \"%s\": %s",
                     dir ? dir : ".", text, why);
        else
            snprintf(
                err, n,
                "%s/tokenizer.json: the chat template's control token \"%s\" (%s of "
                "tokenizer_config.json) encodes as %lld tokens, not one: the tokenizer lacks it "
                "as an added token (the tokenizer of another model?)",
                dir ? dir : ".", text, t->control_keys[i], (long long)k);
    }
    mt_token_buf_free(&b);
    return ok;
}
