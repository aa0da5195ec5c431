# Context parallelism on real MPI ranks (issue 39): the attention op over the world as one
# context group against the one-rank full-sequence attention (tests/train/dist_cp_attention.c).
mt_test_binary(test_dist_cp_attention train/dist_cp_attention.c)
mt_test_mpi_cases(test_dist_cp_attention 2 dist_cp_attention_np2)
mt_test_mpi_cases(test_dist_cp_attention 4 dist_cp_attention_np4)
