# minimax-forward's loss as transformers defines it, with and without --grad, and the
# auxiliary terms under their own names (tests/apps/parity_forward_aux.c, docs/parity.md).
mt_test_binary(test_parity_forward_aux apps/parity_forward_aux.c)
mt_test_cases(test_parity_forward_aux parity_forward_loss_m3 parity_forward_loss_text01)
add_dependencies(test_parity_forward_aux minimax-forward)
set_property(TEST parity_forward_loss_m3 parity_forward_loss_text01 APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_FORWARD=$<TARGET_FILE:minimax-forward>")
