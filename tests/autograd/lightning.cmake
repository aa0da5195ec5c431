# Lightning attention (spec section 4): gradients of both forms, block vs naive, packed
# segments, decode steps, and the spec 4.3 recurrence.
mt_test_binary(test_grad_lightning autograd/grad_lightning.c)
mt_test_cases(test_grad_lightning grad_lightning_naive grad_lightning_block
  op_lightning_block_vs_naive op_lightning_segments op_lightning_decode op_lightning_recurrence)
# Context parallelism (issue 39): the block form from an initial state, and mt_cp_lightning's
# gradient on one process (the other rank simulated); dist_cp_lightning_* on MPI ranks.
mt_test_binary(test_grad_cp_lightning autograd/grad_cp_lightning.c)
mt_test_cases(test_grad_cp_lightning op_lightning_state_in grad_cp_lightning)
