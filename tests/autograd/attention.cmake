# Softmax-attention layer: partial NeoX RoPE, causal GQA attention (forward, backward, decode).
mt_test_binary(test_grad_attention autograd/grad_attention.c)
mt_test_cases(test_grad_attention grad_rope grad_attention grad_attention_qk_norm op_attention_forward op_rope_forward
  op_attention_decode op_attention_bf16)
# The sliding window (config sliding_window): fp32 and bf16 kernels against a double reference.
mt_test_binary(test_attention_window autograd/grad_attention_window.c)
mt_test_cases(test_attention_window op_attention_window op_attention_window_bf16
  grad_attention_window)
# Context parallelism's attention op (mt_cp_attention) on one process: finite differences with
# no group and with the mirror group (tests/support/cp_mirror.h), mt_attention bit for bit with
# one rank, refusals; on MPI ranks: tests/train/dist_cp_attention.c.
mt_test_binary(test_grad_cp_attention autograd/grad_cp_attention.c)
mt_test_cases(test_grad_cp_attention grad_cp_attention op_cp_attention_one_rank
  op_cp_attention_refusals)
