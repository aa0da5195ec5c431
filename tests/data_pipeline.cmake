# The data pipeline: GSM8K reader, synthetic problems, token cache, sampler, CLI.
# data_gsm8k_full needs ../shared/data/gsm8k/train.jsonl and is skipped (77) without it.
mt_test_binary(test_data_pipeline data_pipeline.c)
mt_test_cases(test_data_pipeline data_gsm8k_reader data_synth data_cache
  data_cache_write_error)
mt_test_binary(test_data_sampler data_sampler.c)
mt_test_cases(test_data_sampler data_sampler data_sampler_split data_mix)
mt_test_binary(test_data_cli data_cli.c)
mt_test_cases(test_data_cli data_cli data_cli_encode data_cli_render data_generate_prompt
  data_gsm8k_full)
add_dependencies(test_data_cli minimax-data minimax-generate)
set_property(TEST data_cli data_cli_encode data_cli_render APPEND PROPERTY ENVIRONMENT "MT_DATA_CLI=$<TARGET_FILE:minimax-data>")
set_property(TEST data_generate_prompt APPEND PROPERTY ENVIRONMENT "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>")
mt_test_binary(test_data_formats data_formats.c)
mt_test_cases(test_data_formats data_formats data_formats_errors data_cache_files)
# recipes, data files and the trainer's environment refused in one line naming the cause
# (tests/data_pipeline_refusals.sh)
add_test(NAME data_pipeline_refusals COMMAND bash ${CMAKE_SOURCE_DIR}/tests/data_pipeline_refusals.sh
  ${CMAKE_BINARY_DIR})
set_tests_properties(data_pipeline_refusals PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
  TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
