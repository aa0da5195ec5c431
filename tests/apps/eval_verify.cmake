# The digests of an export's safetensors files checked by every tool that loads it
# (tests/apps/eval_verify.sh): a damaged byte refused naming the file, --no-verify, files of other
# writers loaded with one line saying they are unverified, minimax-eval --weights gathered
# (2 ranks); test_eval_verify bench: the load-time cost (docs/checkpoints.md, not a test).
mt_test_binary(test_eval_verify apps/eval_verify.c)
add_test(NAME eval_verify_digest COMMAND bash ${CMAKE_SOURCE_DIR}/tests/apps/eval_verify.sh
  $<TARGET_FILE:test_eval_verify> ${CMAKE_BINARY_DIR})
add_dependencies(test_eval_verify minimax-forward minimax-generate minimax-eval minimax-chat
  minimax-serve)
set_tests_properties(eval_verify_digest PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
  TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# A config.json that disagrees with the weights or holds a zero size, named as the config key
# (tests/apps/eval_config.sh): max_position_embeddings 0, a layer count other than the tensors'.
add_test(NAME eval_config_refusals COMMAND bash ${CMAKE_SOURCE_DIR}/tests/apps/eval_config.sh
  $<TARGET_FILE:test_eval_verify> ${CMAKE_BINARY_DIR})
set_tests_properties(eval_config_refusals PROPERTIES ENVIRONMENT "${MT_TEST_ENV}" TIMEOUT 300
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
