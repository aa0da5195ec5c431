# MoE ops: router, experts (sparse dispatch), load-balancing aux loss.
mt_test_binary(test_grad_moe autograd/grad_moe.c)
mt_test_cases(test_grad_moe grad_moe_route grad_moe_route_sigmoid grad_moe_experts grad_moe_aux
  op_moe_dense_vs_sparse op_moe_m2_shape op_moe_aux_hf_formula op_moe_route_ties)
mt_test_binary(test_grad_moe_split autograd/grad_moe_split.c)
mt_test_cases(test_grad_moe_split grad_moe_split op_moe_split_vs_fused)
# The clamped SwiGLU of MiniMax-M3 in swiglu, moe_experts and moe_expert_ffn.
mt_test_binary(test_grad_act autograd/grad_act.c)
mt_test_cases(test_grad_act grad_swiglu_oai op_swiglu_oai grad_moe_experts_oai op_moe_experts_oai)
