/* recipe_internal.h: what train/recipe.c shares with train/recipe_validate.c (the checks of the
 * values) and train/recipe_aux.c (the model's auxiliary loss terms by name: [model.aux_coef],
 * [model.aux_detach]). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/config.h"
#include "train/recipe.h"

/* The checks of r's values (train/recipe_validate.c): ranges, combinations, the input files and
 * the output directory, the model config and the tokenizer against the batch; false with one
 * line in err naming the key where doc sets it. */
bool mt_recipe_validate(const mt_recipe *r, const mt_toml_doc *doc, char *err, size_t errlen);

/* "file:line:col" of an entry, or "--set key". */
void mt_recipe_entry_where(const mt_toml_entry *e, char *buf, size_t len);

/* Whether key is a model.aux_coef.<name> or model.aux_detach.<name> entry. */
bool mt_recipe_aux_key(const char *key);
/* The entries of [model.aux_coef] (numbers) and [model.aux_detach] (booleans) into
 * r->model_aux, sorted by name; false with one line in err for a bad one. */
bool mt_recipe_aux_collect(mt_recipe *r, const mt_toml_doc *doc, char *err, size_t errlen);
/* Each name against the terms models of cfg have (models/minimax.h,
 * mt_minimax_aux_settable); false with one line naming the key. */
bool mt_recipe_aux_check(const mt_recipe *r, const mt_toml_doc *doc, const mt_minimax_config *cfg,
                         char *err, size_t errlen);
/* The entries as [model] lines ("aux_coef.<name> = <value>"), appended to buf. */
void mt_recipe_aux_format(const mt_recipe *r, char *buf, size_t len);
/* FNV-1a of "model.aux_coef.<name>=<value>" ... continued from h. */
uint64_t mt_recipe_aux_hash(const mt_recipe *r, uint64_t h);
/* The entries whose values differ between was and now (set in one and not the other included),
 * appended to out as the resume diff does ("; " after the first of count so far); returns the
 * new count. */
int mt_recipe_aux_diff(const mt_recipe *was, const mt_recipe *now, char *out, size_t n, int count);
/* Keys that moved (model-level settings the [train] table held; the model's list) read under
 * their new names in doc, or dropped where they hold the default every earlier recipe.toml wrote.
 * false with one line in err when the recipe also sets the new key. */
bool mt_recipe_moved_keys_apply(mt_toml_doc *doc, char *err, size_t errlen);
