# The programs' command lines, end to end (apps/*_main.c).
# minimax-data (and minimax-generate's prompt): data_gsm8k_full needs
# ../shared/data/gsm8k/train.jsonl and is skipped (77) without it.
mt_test_binary(test_data_cli apps/data_cli.c)
mt_test_cases(test_data_cli data_cli data_cli_encode data_cli_render data_generate_prompt
  data_gsm8k_full)
add_dependencies(test_data_cli minimax-data minimax-generate)
set_property(TEST data_cli data_cli_encode data_cli_render APPEND PROPERTY ENVIRONMENT "MT_DATA_CLI=$<TARGET_FILE:minimax-data>")
set_property(TEST data_generate_prompt APPEND PROPERTY ENVIRONMENT "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>")
# minimax-eval end to end under mpirun (1 and 2 ranks) and its bad inputs; its n-shot prompt
# against transformers' renderings (_shots); --chat-template and --template-kwargs (_template).
mt_test_binary(test_eval_minimax_eval apps/eval_minimax_eval.c)
mt_test_cases(test_eval_minimax_eval eval_minimax_eval eval_minimax_eval_shots
  eval_minimax_eval_template)
add_dependencies(test_eval_minimax_eval minimax-eval)
# it runs mpirun: Open MPI's own leaks stay out of the sanitizer build's verdict (MT_TEST_ENV_MPI)
set_property(TEST eval_minimax_eval eval_minimax_eval_shots eval_minimax_eval_template
  APPEND PROPERTY ENVIRONMENT
  "MT_EVAL_CLI=$<TARGET_FILE:minimax-eval>" ${MT_TEST_ENV_MPIEXEC} ${MT_TEST_ENV_MPI})
# --backend cuda against the CPU backend: gpu_eval (this build's minimax-eval on a GPU; skipped
# without one) and op_cuda_emu_eval (minimax-eval-emu on the CUDA emulator, tests/gpu/gpu.cmake)
add_test(NAME gpu_eval COMMAND test_eval_minimax_eval eval_minimax_eval_device)
set_tests_properties(gpu_eval PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT
  "${MT_TEST_ENV};MT_EVAL_CLI=$<TARGET_FILE:minimax-eval>;MT_EVAL_CLI_DEVICE=$<TARGET_FILE:minimax-eval>;${MT_TEST_ENV_MPIEXEC};MT_NCCL_ALLOW_SHARED_DEVICE=1;${MT_TEST_ENV_MPI}")
# minimax-chat end to end, turns piped on stdin: prompts, replies against minimax-generate,
# /reset, --system, the stream, sampling; its bad inputs (_errors).
mt_test_binary(test_eval_minimax_chat apps/eval_minimax_chat.c)
mt_test_cases(test_eval_minimax_chat eval_minimax_chat eval_minimax_chat_errors)
add_dependencies(test_eval_minimax_chat minimax-chat minimax-generate)
set_property(TEST eval_minimax_chat eval_minimax_chat_errors APPEND PROPERTY ENVIRONMENT
  "MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>" "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>")
# The chat template of minimax-generate --prompt and minimax-chat: --chat-template and
# --template-kwargs, another template in tokenizer_config.json, the bad values (_flags);
# MiniMax-M2's and M3's released templates from ../shared/templates (_released: else 77).
mt_test_binary(test_eval_chat_template apps/eval_chat_template.c)
mt_test_cases(test_eval_chat_template eval_chat_template_flags eval_chat_template_released
  eval_chat_reasoning)
add_dependencies(test_eval_chat_template minimax-chat minimax-generate minimax-eval)
set_property(TEST eval_chat_template_flags eval_chat_template_released eval_chat_reasoning
  APPEND PROPERTY ENVIRONMENT "MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>"
  "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>" "MT_EVAL_CLI=$<TARGET_FILE:minimax-eval>"
  ${MT_TEST_ENV_MPI})
# --backend cuda against the CPU backend: gpu_chat here (skipped without a GPU), op_cuda_emu_chat
# with minimax-chat-emu (tests/gpu/gpu.cmake)
add_test(NAME gpu_chat COMMAND test_eval_minimax_chat eval_minimax_chat_device)
set_tests_properties(gpu_chat PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT
  "${MT_TEST_ENV};MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>;MT_CHAT_CLI_DEVICE=$<TARGET_FILE:minimax-chat>")
# The tools other than the trainer and the server refuse in one line, before any work
# (tests/apps/eval_cli_guards.c): the strict flag parser as a unit (data_cli_flags), junk flag values
# in every tool, outputs over inputs or the model and unwritable outputs, prompts past the
# context, gold answers the scorer cannot read, --labels with every label -100.
mt_test_binary(test_eval_cli_guards apps/eval_cli_guards.c)
mt_test_cases(test_eval_cli_guards data_cli_flags eval_cli_flags eval_cli_outputs
  eval_cli_context eval_gsm8k_gold eval_forward_labels)
add_dependencies(test_eval_cli_guards minimax-eval minimax-generate minimax-chat minimax-forward
  minimax-info minimax-data)
set_property(TEST eval_cli_flags eval_cli_outputs eval_cli_context eval_gsm8k_gold
  eval_forward_labels APPEND PROPERTY ENVIRONMENT
  "MT_EVAL_CLI=$<TARGET_FILE:minimax-eval>" "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>"
  "MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>" "MT_FORWARD_CLI=$<TARGET_FILE:minimax-forward>"
  "MT_INFO_CLI=$<TARGET_FILE:minimax-info>" "MT_DATA_CLI=$<TARGET_FILE:minimax-data>"
  ${MT_TEST_ENV_MPIEXEC} ${MT_TEST_ENV_MPI})
