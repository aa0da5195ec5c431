# The docs' marked command blocks against the code (tests/apps/docs_commands.sh, docs/design.md
# "Docs that run"): paths, flags against each program's --help, recipe keys, and the runnable
# blocks run on the tiny models; _selftest: a stale path, flag or key and a failing block fail.
add_test(NAME eval_docs_commands
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/apps/docs_commands.sh ${CMAKE_BINARY_DIR})
add_test(NAME eval_docs_commands_selftest
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/apps/docs_commands.sh ${CMAKE_BINARY_DIR} --self-test)
set_tests_properties(eval_docs_commands eval_docs_commands_selftest PROPERTIES
  ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}" TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
