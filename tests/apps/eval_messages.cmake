# Evaluation on the user's own chat data (eval/messages_eval.h): the metrics (_match), the prompts
# against transformers' renderings (_prompt), and a tiny fine-tune evaluated by the trainer
# (eval.generate_task = "messages") and by minimax-eval --task messages (_task, about 30 s).
mt_test_binary(test_eval_messages apps/eval_messages.c)
mt_test_cases(test_eval_messages eval_messages_match eval_messages_prompt eval_messages_task)
add_dependencies(test_eval_messages minimax-eval minimax-train)
set_property(TEST eval_messages_task APPEND PROPERTY ENVIRONMENT
  "MT_EVAL_CLI=$<TARGET_FILE:minimax-eval>" "MT_TRAIN_CLI=$<TARGET_FILE:minimax-train>"
  ${MT_TEST_ENV_MPI})
