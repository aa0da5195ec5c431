# The recipe: the TOML reader (every supported form, overrides, error positions) and the recipe
# keys (defaults, overrides, the one-line errors, the key tables of docs/recipes.md and
# docs/training.md); malformed recipes through minimax-train on 2 ranks:
# data_recipe_trainer_errors (tests/train/run_failures.sh bad-recipe, registered in dist.cmake).
mt_test_binary(test_data_toml train/data_toml.c)
mt_test_cases(test_data_toml data_toml_parse data_toml_errors)
mt_test_binary(test_data_recipe train/data_recipe.c)
mt_test_cases(test_data_recipe data_recipe_load data_recipe_errors data_recipe_chat data_recipe_aux
  data_recipe_docs data_recipe_resume_docs data_recipe_paths data_recipe_objective)
