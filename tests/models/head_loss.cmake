# The head objectives (models/head.c, issue 38 item 3): reward pairs against TRL's formula and
# finite differences, the loss denominators over micro-batches, the head metrics.
mt_test_binary(test_head_loss models/head_loss.c models/head_model.c)
mt_test_cases(test_head_loss grad_head_reward parity_head_reward parity_head_loss_split
  op_head_stats op_head_reward_refusals)
