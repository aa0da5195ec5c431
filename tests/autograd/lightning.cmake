# Lightning attention (spec section 4): gradients of both forms, block vs naive, packed
# segments, decode steps, and the spec 4.3 recurrence.
mt_test_binary(test_grad_lightning autograd/grad_lightning.c)
mt_test_cases(test_grad_lightning grad_lightning_naive grad_lightning_block
  op_lightning_block_vs_naive op_lightning_segments op_lightning_decode op_lightning_recurrence)
