/* recipe_head.c: train.objective on the model's config: which head the run trains, and its
 * labels (docs/recipes.md, "Objectives"). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "data/head_data.h"
#include "train/recipe.h"

/* the head each objective trains */
static mt_head_kind objective_head(mt_objective o) {
    switch (o) {
    case MT_OBJECTIVE_REWARD:
    case MT_OBJECTIVE_CLASSIFICATION:
        return MT_HEAD_SEQUENCE_CLASSIFICATION;
    case MT_OBJECTIVE_TOKEN_CLASSIFICATION:
        return MT_HEAD_TOKEN_CLASSIFICATION;
    case MT_OBJECTIVE_QUESTION_ANSWERING:
        return MT_HEAD_QUESTION_ANSWERING;
    default:
        return MT_HEAD_CAUSAL_LM;
    }
}

/* model.problem_type: "" (the config's, else inferred) or one of transformers' names */
static bool problem_parse(const char *s, mt_problem_type *p) {
    for (int k = MT_PROBLEM_REGRESSION; k <= MT_PROBLEM_MULTI_LABEL; k++)
        if (!strcmp(s, mt_problem_type_name((mt_problem_type)k))) {
            *p = (mt_problem_type)k;
            return true;
        }
    return false;
}

/* model.labels as config.json's id2label ({"0": name, ...}, compact) */
static bool labels_json(const mt_recipe *r, char *out, size_t n) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < r->model_n_labels; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", i);
        cJSON_AddStringToObject(o, key, r->model_labels[i]);
    }
    char *text = cJSON_PrintUnformatted(o);
    const bool fits = text && strlen(text) < n;
    if (fits) snprintf(out, n, "%s", text);
    cJSON_free(text);
    cJSON_Delete(o);
    return fits;
}

#define WHY(...) (snprintf(why, n, __VA_ARGS__), false)

bool mt_recipe_head_apply(const mt_recipe *r, mt_minimax_config *cfg, const char *config_path,
                          char *why, size_t n) {
    const int o = mt_objective_parse(r->train_objective);
    if (o < 0)
        return WHY("train.objective: \"%s\" is none of %s", r->train_objective,
                   mt_objective_list());
    const mt_head_kind want = objective_head((mt_objective)o);
    mt_problem_type pt = cfg->problem_type;
    if (r->model_problem_type[0] && !problem_parse(r->model_problem_type, &pt))
        return WHY("model.problem_type: \"%s\" is none of regression, "
                   "single_label_classification, multi_label_classification",
                   r->model_problem_type);
    for (int i = 0; i < r->model_n_labels; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(r->model_labels[i], r->model_labels[j]))
                return WHY("model.labels: \"%s\" is there twice", r->model_labels[i]);
    if (r->model_n_labels > 0 && r->model_num_labels > 0 &&
        r->model_n_labels != r->model_num_labels)
        return WHY("model.labels names %d labels but model.num_labels is %d", r->model_n_labels,
                   r->model_num_labels);
    if (want == MT_HEAD_CAUSAL_LM) {
        if (cfg->head != MT_HEAD_CAUSAL_LM)
            return WHY("train.objective = \"sft\" trains the causal LM, but %s is a %s model: "
                       "set train.objective to its head's objective",
                       config_path, mt_head_name(cfg->head));
        if (r->model_num_labels || r->model_problem_type[0] || r->model_n_labels)
            return WHY("model.num_labels, model.problem_type and model.labels are for the head "
                       "objectives (train.objective), not \"sft\"");
        return true;
    }
    int labels = r->model_n_labels ? r->model_n_labels : r->model_num_labels;
    if (o == MT_OBJECTIVE_REWARD) { /* TRL's reward model: one score */
        if (labels > 1)
            return WHY("train.objective = \"reward\" scores with one label; model.num_labels / "
                       "model.labels give %d",
                       labels);
        labels = 1;
    }
    if (want == MT_HEAD_QUESTION_ANSWERING) {
        if (labels)
            return WHY("train.objective = \"question_answering\": its head has start and end "
                       "logits; model.num_labels and model.labels do not apply");
        labels = 2;
    }
    if (cfg->head != MT_HEAD_CAUSAL_LM) { /* a head checkpoint: its head, as it is */
        if (cfg->head != want)
            return WHY("train.objective = \"%s\" trains a %s head, but %s is a %s model",
                       r->train_objective, mt_head_name(want), config_path,
                       mt_head_name(cfg->head));
        if (labels && labels != cfg->num_labels)
            return WHY("model.num_labels / model.labels give %d labels, but %s has %d", labels,
                       config_path, cfg->num_labels);
        labels = cfg->num_labels;
    } else if (!labels) {
        return WHY("train.objective = \"%s\" on the causal LM %s: set model.num_labels or "
                   "model.labels (the head's labels)",
                   r->train_objective, config_path);
    }
    if (pt == MT_PROBLEM_SINGLE_LABEL && labels == 1)
        return WHY("model.problem_type = \"single_label_classification\" needs more than one "
                   "label");
    char id2label[sizeof(cfg->id2label)] = "";
    if (r->model_n_labels && !labels_json(r, id2label, sizeof(id2label)))
        return WHY("model.labels: the names are longer than %zu bytes in all", sizeof(id2label));
    mt_minimax_config_set_head(cfg, want, labels, pt);
    if (id2label[0]) snprintf(cfg->id2label, sizeof(cfg->id2label), "%s", id2label);
    return true;
}
