# minimax-info's expert-parallel sizing (apps/info_ep.c) against hand computation, and its
# command line (P = 1 prints the ZeRO-3 numbers again; --gpu NAME as --fit-gib of the vendor's
# memory; the EP fit with the GPU defaults naming the settings it needs).
mt_test_binary(test_info_ep apps/info_ep.c)
mt_test_cases(test_info_ep op_info_ep_formula op_info_ep_cli op_info_gpu)
add_dependencies(test_info_ep minimax-info)
set_property(TEST op_info_ep_cli op_info_gpu APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_INFO=$<TARGET_FILE:minimax-info>")
