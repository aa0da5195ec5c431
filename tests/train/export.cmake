# What a run ships (docs/checkpoints.md, "What a run ships"): final/, generation_config.json,
# dtype, checkpoints without optimizer state, the block-FP8 export of an FP8 source
# (tests/train/run_export.sh, tests/train/parity_export.c).
mt_test_binary(test_parity_export train/parity_export.c)
mt_test_cases(test_parity_export data_fp8_e4m3 parity_fp8_quantize parity_export_fp8)
function(mt_test_export name mode)
  add_test(NAME ${name} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_export.sh
    $<TARGET_FILE:minimax-train> ${mode})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
    TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endfunction()
mt_test_export(dist_export_fp8_run fp8)
mt_test_export(data_export_final final)
mt_test_export(data_export_no_state no-state)
mt_test_export(data_export_fp8_refused refused)
set_tests_properties(dist_export_fp8_run PROPERTIES FIXTURES_SETUP export_fp8)
set_tests_properties(parity_export_fp8 PROPERTIES FIXTURES_REQUIRED export_fp8)
