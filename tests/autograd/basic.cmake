# The basic ops: embedding, matmul, rmsnorm, pointwise ops, cross-entropy.
mt_test_binary(test_grad_basic autograd/grad_basic.c)
mt_test_cases(test_grad_basic
  grad_embedding grad_matmul grad_rmsnorm grad_rmsnorm_gemma grad_silu grad_sigmoid grad_swiglu
  grad_add grad_concat grad_mul grad_scale grad_axpby grad_cross_entropy
  op_embedding_forward op_matmul_forward op_rmsnorm_forward op_cross_entropy_forward)
