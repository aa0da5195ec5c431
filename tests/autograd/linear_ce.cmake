# The fused lm_head + cross-entropy: finite differences and equality with the unfused ops.
mt_test_binary(test_grad_linear_ce autograd/grad_linear_ce.c)
mt_test_cases(test_grad_linear_ce grad_linear_cross_entropy op_linear_cross_entropy_matches
  grad_linear_cross_entropy_parts op_linear_cross_entropy_parts_match)
