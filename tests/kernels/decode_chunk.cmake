# The backend's chunk ops of the cached forward's extension against the one-token decode steps
# (tests/kernels/op_decode_chunk.c).
mt_test_binary(test_decode_chunk kernels/op_decode_chunk.c)
mt_test_cases(test_decode_chunk op_attention_chunk op_lightning_chunk
  op_msa_chunk)
