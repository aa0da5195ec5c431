# minimax-info's expert-parallel sizing (apps/info_ep.c) against hand computation, and its
# command line (P = 1 prints the ZeRO-3 numbers again).
mt_test_binary(test_info_ep apps/info_ep.c)
mt_test_cases(test_info_ep op_info_ep_formula op_info_ep_cli)
add_dependencies(test_info_ep minimax-info)
set_property(TEST op_info_ep_cli APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_INFO=$<TARGET_FILE:minimax-info>")
