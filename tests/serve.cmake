# minimax-serve over loopback with a C client (tests/serve_http.h): endpoints against
# minimax-generate / minimax-chat / minimax-forward, errors and the key, 32 concurrent clients,
# a client killed mid-stream, the drain on SIGTERM; --chat-template and --template-kwargs, a
# request the template refuses (serve_template).
mt_test_binary(test_serve serve.c)
target_link_libraries(test_serve PRIVATE Threads::Threads)
mt_test_cases(test_serve serve_endpoints serve_errors serve_concurrent serve_disconnect
  serve_sigterm serve_template)
add_dependencies(test_serve minimax-serve minimax-generate minimax-chat minimax-forward)
set_property(TEST serve_endpoints serve_errors serve_concurrent serve_disconnect serve_sigterm
  serve_template
  APPEND PROPERTY ENVIRONMENT "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>"
  "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>" "MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>"
  "MT_FORWARD_CLI=$<TARGET_FILE:minimax-forward>")
set_tests_properties(serve_endpoints serve_errors serve_concurrent serve_disconnect serve_sigterm
  serve_template PROPERTIES TIMEOUT 180)
# --backend cuda against the CPU tools: gpu_serve (this build's minimax-serve on a GPU; skipped
# without one) and op_cuda_emu_serve (minimax-serve-emu on the CUDA emulator, tests/gpu.cmake)
add_test(NAME gpu_serve COMMAND test_serve serve_device)
set_tests_properties(gpu_serve PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT
  "${MT_TEST_ENV};MT_SERVE_CLI_DEVICE=$<TARGET_FILE:minimax-serve>;MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>;MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>;MT_FORWARD_CLI=$<TARGET_FILE:minimax-forward>")
