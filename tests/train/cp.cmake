# Context parallelism on real MPI ranks (issue 39): the attention op over the world as one
# context group against the one-rank full-sequence attention (tests/train/dist_cp_attention.c).
mt_test_binary(test_dist_cp_attention train/dist_cp_attention.c)
mt_test_mpi_cases(test_dist_cp_attention 2 dist_cp_attention_np2)
mt_test_mpi_cases(test_dist_cp_attention 4 dist_cp_attention_np4)
# Lightning attention under context parallelism (issue 39 item 3): C = 2 and 4 ranks against one
# rank on the whole rows, outputs and gradients, packed segments across chunk borders.
mt_test_binary(test_dist_cp_lightning train/dist_cp_lightning.c)
mt_test_mpi_cases(test_dist_cp_lightning 2 dist_cp_lightning_np2)
mt_test_mpi_cases(test_dist_cp_lightning 4 dist_cp_lightning_np4)
# The whole model under context parallelism (mt_ctx.cp: the ops wired in models/), Text-01 and
# M2 with the router's load-balancing loss, against one rank: loss and every gradient.
mt_test_binary(test_dist_cp_model train/dist_cp_model.c models/head_model.c)
mt_test_mpi_cases(test_dist_cp_model 2 dist_cp_model_np2)
mt_test_mpi_cases(test_dist_cp_model 4 dist_cp_model_np4)
# MSA (M3) under context parallelism (issue 39 item 4): the gathered keys, the same block ids,
# outputs, KL and gradients against one rank, blocks dropped and crossing the chunk borders.
mt_test_binary(test_dist_cp_msa train/dist_cp_msa.c)
mt_test_mpi_cases(test_dist_cp_msa 2 dist_cp_msa_np2)
mt_test_mpi_cases(test_dist_cp_msa 4 dist_cp_msa_np4)
