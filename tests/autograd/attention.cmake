# Softmax-attention layer: partial NeoX RoPE, causal GQA attention (forward, backward, decode).
mt_test_binary(test_grad_attention autograd/grad_attention.c)
mt_test_cases(test_grad_attention grad_rope grad_attention grad_attention_qk_norm op_attention_forward op_rope_forward
  op_attention_decode op_attention_bf16)
# The sliding window (config sliding_window): fp32 and bf16 kernels against a double reference.
mt_test_binary(test_attention_window autograd/grad_attention_window.c)
mt_test_cases(test_attention_window op_attention_window op_attention_window_bf16
  grad_attention_window)
