# MiniMax-M3 block-sparse attention (MSA): selection, sparse attention, the indexer's KL loss,
# decode steps (forward, backward, references).
mt_test_binary(test_op_msa kernels/op_msa.c)
mt_test_cases(test_op_msa grad_msa_attention grad_msa_kl op_msa_dense_equal op_msa_naive
  op_msa_packed op_msa_decode op_msa_checks)
# against transformers (tools/make_msa_fixtures.py) and the fp64 KL reference
# (tools/msa_kl_reference.py), fixtures in tests/fixtures/msa
mt_test_binary(test_op_msa_ref kernels/op_msa_ref.c)
mt_test_cases(test_op_msa_ref op_msa_select_hf op_msa_kl_ref)
