# minimax-info --predict-step (apps/info_predict.c): the GEMM FLOPs of a tiny step against hand
# computation and 6 x weights x tokens, the roofline and link arithmetic on hand examples, and
# the refusals without a GPU whose peaks it knows.
mt_test_binary(test_info_predict apps/info_predict.c)
mt_test_cases(test_info_predict op_predict_step_gemm_flops op_predict_step_roofline
  op_predict_step_cli)
add_dependencies(test_info_predict minimax-info)
set_property(TEST op_predict_step_cli APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_INFO=$<TARGET_FILE:minimax-info>")
