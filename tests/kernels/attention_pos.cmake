# Context parallelism's position kernels (cpu_attention_pos_*) against the full-sequence
# attention kernels: identity positions bit for bit, the causal layout's ranks by rows
# (tests/kernels/op_attention_pos.c).
mt_test_binary(test_attention_pos kernels/op_attention_pos.c)
mt_test_cases(test_attention_pos op_attention_pos op_attention_pos_layout
  op_attention_pos_refusals)
