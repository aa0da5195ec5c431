# Every binary built from a *_main.c (MT_CLI_EXES, CMakeLists.txt) answers --help and --version
# (tests/apps/cli_help.sh), with the commit and build type this build was configured with.
set(mt_cli_files "")
foreach(exe ${MT_CLI_EXES})
  list(APPEND mt_cli_files $<TARGET_FILE:${exe}>)
endforeach()
add_test(NAME op_cli_help COMMAND bash ${CMAKE_SOURCE_DIR}/tests/apps/cli_help.sh ${mt_cli_files})
set_tests_properties(op_cli_help PROPERTIES TIMEOUT 60 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_WANT_COMMIT=${MT_GIT_COMMIT};MT_WANT_BUILD=${MT_BUILD_DESC}")
