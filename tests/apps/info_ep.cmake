# minimax-info's expert-parallel sizing (apps/info_ep.c) against hand computation, and its
# command line (P = 1 prints the ZeRO-3 numbers again; --gpu NAME as --fit-gib of the vendor's
# memory; the EP fit with the GPU defaults naming the settings it needs); --context-parallel's
# activations per rank against the dry run at T/C plus hand-computed exchange buffers, its
# refusals, and its fits on the released Text-01 config (apps/info_cp.h).
mt_test_binary(test_info_ep apps/info_ep.c)
mt_test_cases(test_info_ep op_info_ep_formula op_info_ep_cli op_info_gpu op_info_cp_cli
  op_info_cp_fit)
add_dependencies(test_info_ep minimax-info)
set_property(TEST op_info_ep_cli op_info_gpu op_info_cp_cli op_info_cp_fit APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_INFO=$<TARGET_FILE:minimax-info>")
