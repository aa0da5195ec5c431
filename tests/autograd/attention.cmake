# Softmax-attention layer: partial NeoX RoPE, causal GQA attention (forward, backward, decode).
mt_test_binary(test_grad_attention autograd/grad_attention.c)
mt_test_cases(test_grad_attention grad_rope grad_attention grad_attention_qk_norm op_attention_forward op_rope_forward
  op_attention_decode op_attention_bf16)
