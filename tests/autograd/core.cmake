# The autograd core: tape, views, arena and backend table.
mt_test_binary(test_grad_core autograd/grad_core.c)
mt_test_cases(test_grad_core grad_view op_tape_accumulate grad_checkpoint op_node_hook)
