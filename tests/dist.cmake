# Trainer: recipe reader, communicator, ZeRO-3, resume.
mt_test_binary(test_dist_toml dist_toml.c)
mt_test_cases(test_dist_toml dist_toml_parse dist_toml_errors)
mt_test_binary(test_dist_recipe dist_recipe.c)
mt_test_cases(test_dist_recipe dist_recipe_load dist_recipe_errors)
mt_test_binary(test_dist_comm dist_comm.c)
mt_test_mpi_cases(test_dist_comm 2 dist_comm_np2)
mt_test_mpi_cases(test_dist_comm 3 dist_comm_np3)
