# The data pipeline: GSM8K reader, synthetic problems, token cache, sampler, formats (the
# command line of minimax-data: tests/apps/tools.cmake).
mt_test_binary(test_data_pipeline data/data_pipeline.c)
mt_test_cases(test_data_pipeline data_gsm8k_reader data_synth data_cache
  data_cache_write_error)
mt_test_binary(test_data_sampler data/data_sampler.c)
mt_test_cases(test_data_sampler data_sampler data_sampler_balance data_sampler_split data_mix)
mt_test_binary(test_data_formats data/data_formats.c)
mt_test_cases(test_data_formats data_formats data_formats_errors data_cache_files)
# recipes, data files and the trainer's environment refused in one line naming the cause
# (tests/data/data_pipeline_refusals.sh)
add_test(NAME data_pipeline_refusals COMMAND bash ${CMAKE_SOURCE_DIR}/tests/data/data_pipeline_refusals.sh
  ${CMAKE_BINARY_DIR})
set_tests_properties(data_pipeline_refusals PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
  TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
