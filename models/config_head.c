/* config_head.c: the head of a model (models/config.h, mt_head_kind): read from and written to
 * config.json as transformers does (architectures, id2label / label2id, problem_type; num_labels
 * is the size of id2label, or the key num_labels, or 2). */
#include <stdio.h>
#include <string.h>

#include "models/config_internal.h"

static const char *const head_names[] = {"causal_lm", "sequence_classification",
                                         "token_classification", "question_answering"};
/* the architecture suffix of each kind */
static const char *const head_suffix[] = {"ForCausalLM", "ForSequenceClassification",
                                          "ForTokenClassification", "ForQuestionAnswering"};
static const char *const problem_names[] = {NULL, "regression", "single_label_classification",
                                            "multi_label_classification"};

const char *mt_head_name(mt_head_kind head) {
    return head >= 0 && head <= MT_HEAD_QUESTION_ANSWERING ? head_names[head] : "?";
}

bool mt_head_parse(const char *name, mt_head_kind *head) {
    for (int k = 0; k <= MT_HEAD_QUESTION_ANSWERING; k++)
        if (strcmp(name, head_names[k]) == 0) {
            *head = (mt_head_kind)k;
            return true;
        }
    return false;
}

const char *mt_problem_type_name(mt_problem_type p) {
    return p >= 0 && p <= MT_PROBLEM_MULTI_LABEL ? problem_names[p] : NULL;
}

void mt_minimax_config_set_head(mt_minimax_config *cfg, mt_head_kind head, int num_labels,
                                mt_problem_type problem_type) {
    MT_CHECK(head >= MT_HEAD_CAUSAL_LM && head <= MT_HEAD_QUESTION_ANSWERING, "config: head %d",
             (int)head);
    if (head == MT_HEAD_QUESTION_ANSWERING) num_labels = 2;
    MT_CHECK(head == MT_HEAD_CAUSAL_LM || num_labels >= 1, "config: num_labels %d must be >= 1",
             num_labels);
    MT_CHECK(!(problem_type == MT_PROBLEM_SINGLE_LABEL && num_labels == 1),
             "config: problem_type single_label_classification needs num_labels > 1");
    MT_CHECK(head == MT_HEAD_CAUSAL_LM || !cfg->vl_config[0],
             "config: a head on a vision-language config is not supported");
    if (cfg->num_labels != num_labels) cfg->id2label[0] = 0;
    cfg->head = head;
    cfg->num_labels = head == MT_HEAD_CAUSAL_LM ? 0 : num_labels;
    cfg->problem_type = head == MT_HEAD_SEQUENCE_CLASSIFICATION ? problem_type : MT_PROBLEM_AUTO;
}

bool mt_cfg_head_arch(const char *arch, char *base, size_t n, mt_head_kind *head) {
    const size_t len = strlen(arch);
    *head = MT_HEAD_CAUSAL_LM;
    snprintf(base, n, "%s", arch);
    for (int k = 1; k <= MT_HEAD_QUESTION_ANSWERING; k++) {
        const size_t sl = strlen(head_suffix[k]);
        if (len > sl && strcmp(arch + len - sl, head_suffix[k]) == 0) {
            snprintf(base, n, "%.*s%s", (int)(len - sl), arch, head_suffix[0]);
            *head = (mt_head_kind)k;
            return true;
        }
    }
    return false;
}

bool mt_cfg_head_read(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    if (cfg->head == MT_HEAD_CAUSAL_LM) return true;
    if (cfg->vl_config[0])
        return mt_cfg_fail(r, "key \"architectures\": a head on a vision-language config is not "
                              "supported");
    const cJSON *ids = mt_cfg_get(root, "id2label");
    int n = 2;
    if (ids && !cJSON_IsNull(ids)) {
        if (!cJSON_IsObject(ids) || cJSON_GetArraySize(ids) < 1)
            return mt_cfg_fail(r, "key \"id2label\": expected an object of labels");
        n = cJSON_GetArraySize(ids);
        for (int i = 0; i < n; i++) {
            char key[16];
            snprintf(key, sizeof(key), "%d", i);
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(ids, key);
            if (!cJSON_IsString(v))
                return mt_cfg_fail(r, "key \"id2label\": no string label for id \"%s\"", key);
        }
        char *text = cJSON_PrintUnformatted(ids);
        const bool fits = text && strlen(text) < sizeof(cfg->id2label);
        if (fits) snprintf(cfg->id2label, sizeof(cfg->id2label), "%s", text);
        cJSON_free(text);
        if (!fits)
            return mt_cfg_fail(r, "key \"id2label\": longer than %zu bytes",
                               sizeof(cfg->id2label) - 1);
        int k = n;
        TRY(mt_cfg_int(r, root, "num_labels", n, &k));
        if (k != n)
            return mt_cfg_fail(r, "key \"num_labels\": %d but id2label has %d labels", k, n);
    } else {
        TRY(mt_cfg_int(r, root, "num_labels", 2, &n));
        if (n < 1) return mt_cfg_fail(r, "key \"num_labels\": %d must be >= 1", n);
    }
    if (cfg->head == MT_HEAD_QUESTION_ANSWERING) n = 2; /* start | end, whatever the labels */
    cfg->num_labels = n;
    cfg->problem_type = MT_PROBLEM_AUTO;
    const cJSON *pt = mt_cfg_get(root, "problem_type");
    if (pt && !cJSON_IsNull(pt)) {
        bool found = false;
        for (int k = 1; k <= MT_PROBLEM_MULTI_LABEL && cJSON_IsString(pt); k++)
            if (strcmp(pt->valuestring, problem_names[k]) == 0) {
                cfg->problem_type = (mt_problem_type)k;
                found = true;
            }
        if (!found)
            return mt_cfg_fail(r,
                               "key \"problem_type\": expected null, \"regression\", "
                               "\"single_label_classification\" or \"multi_label_classification\"");
    }
    if (cfg->problem_type == MT_PROBLEM_SINGLE_LABEL && n == 1)
        return mt_cfg_fail(r, "key \"problem_type\": single_label_classification needs "
                              "num_labels > 1 (transformers refuses it too)");
    return true;
}

void mt_cfg_head_save(const mt_minimax_config *cfg, cJSON *o) {
    if (cfg->head == MT_HEAD_CAUSAL_LM) return;
    cJSON *arch = cJSON_GetObjectItemCaseSensitive(o, "architectures");
    const cJSON *a0 = cJSON_GetArrayItem(arch, 0);
    if (cJSON_IsString(a0)) {
        const char *s = a0->valuestring;
        const size_t len = strlen(s), sl = strlen(head_suffix[0]);
        MT_CHECK(len > sl && strcmp(s + len - sl, head_suffix[0]) == 0,
                 "config: architecture %s has no ForCausalLM to replace", s);
        char name[160];
        snprintf(name, sizeof(name), "%.*s%s", (int)(len - sl), s, head_suffix[cfg->head]);
        cJSON_ReplaceItemInArray(arch, 0, cJSON_CreateString(name));
    }
    cJSON *ids = cfg->id2label[0] ? cJSON_Parse(cfg->id2label) : NULL;
    if (!ids || cJSON_GetArraySize(ids) != cfg->num_labels) {
        cJSON_Delete(ids);
        ids = cJSON_CreateObject();
        for (int i = 0; i < cfg->num_labels; i++) {
            char key[16], label[32];
            snprintf(key, sizeof(key), "%d", i);
            snprintf(label, sizeof(label), "LABEL_%d", i);
            cJSON_AddStringToObject(ids, key, label);
        }
    }
    cJSON *l2i = cJSON_CreateObject();
    for (int i = 0; i < cfg->num_labels; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", i);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ids, key);
        if (cJSON_IsString(v)) cJSON_AddNumberToObject(l2i, v->valuestring, i);
    }
    cJSON_AddItemToObject(o, "id2label", ids);
    cJSON_AddItemToObject(o, "label2id", l2i);
    const char *pt = mt_problem_type_name(cfg->problem_type);
    if (pt) cJSON_AddStringToObject(o, "problem_type", pt);
}
