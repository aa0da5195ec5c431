# The fp32 attention kernels on packed samples with rising ids: each sample runs as a sequence
# of its own, with the bits it gets alone in a row (tests/kernels/op_attention_runs.c).
mt_test_binary(test_attention_runs kernels/op_attention_runs.c)
mt_test_cases(test_attention_runs op_attention_runs)
