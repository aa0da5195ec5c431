# minimax-serve over loopback with a C client (tests/support/serve_http.h): endpoints against
# minimax-generate / minimax-chat / minimax-forward, errors and the key, 32 concurrent clients,
# a client killed mid-stream, the drain on SIGTERM; prompts prefilled in chunks
# (serve_chunked_prefill); --chat-template and --template-kwargs, a
# request the template refuses (serve_template).
mt_test_binary(test_serve serve/serve.c)
target_link_libraries(test_serve PRIVATE Threads::Threads)
mt_test_cases(test_serve serve_endpoints serve_chunked_prefill serve_errors serve_concurrent
  serve_disconnect serve_sigterm serve_template)
add_dependencies(test_serve minimax-serve minimax-generate minimax-chat minimax-forward)
set_property(TEST serve_endpoints serve_chunked_prefill serve_errors serve_concurrent
  serve_disconnect serve_sigterm serve_template
  APPEND PROPERTY ENVIRONMENT "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>"
  "MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>" "MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>"
  "MT_FORWARD_CLI=$<TARGET_FILE:minimax-forward>")
set_tests_properties(serve_endpoints serve_chunked_prefill serve_errors serve_concurrent
  serve_disconnect serve_sigterm serve_template PROPERTIES TIMEOUT 180)
# --backend cuda against the CPU tools: gpu_serve (this build's minimax-serve on a GPU; skipped
# without one) and op_cuda_emu_serve (minimax-serve-emu on the CUDA emulator, tests/gpu/gpu.cmake)
add_test(NAME gpu_serve COMMAND test_serve serve_device)
set_tests_properties(gpu_serve PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT
  "${MT_TEST_ENV};MT_SERVE_CLI_DEVICE=$<TARGET_FILE:minimax-serve>;MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>;MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>;MT_FORWARD_CLI=$<TARGET_FILE:minimax-forward>")
# Hostile input and slow clients (tests/serve/serve_limits.c): NUL characters, duplicate keys, empty
# stop strings, infinite sampling numbers (serve_input); junk in number flags (serve_flags); 1,100
# slow connections while another address is answered within 2 s, the header, body and idle
# timeouts (serve_slow_clients).
mt_test_binary(test_serve_limits serve/serve_limits.c)
target_link_libraries(test_serve_limits PRIVATE Threads::Threads)
mt_test_cases(test_serve_limits serve_input serve_flags serve_slow_clients)
add_dependencies(test_serve_limits minimax-serve)
set_property(TEST serve_input serve_flags serve_slow_clients APPEND PROPERTY ENVIRONMENT
  "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>")
set_tests_properties(serve_input serve_flags serve_slow_clients PROPERTIES TIMEOUT 180)
# Head-of-line blocking (tests/serve/serve_schedule.c): a 4-token request beside a call of 32 prompts x
# 2,000 ids is answered within a bounded number of decode steps and prefills (/health's
# counters, not time); --prefill-tokens junk refused.
mt_test_binary(test_serve_schedule serve/serve_schedule.c)
target_link_libraries(test_serve_schedule PRIVATE Threads::Threads)
mt_test_cases(test_serve_schedule serve_schedule)
add_dependencies(test_serve_schedule minimax-serve)
set_property(TEST serve_schedule APPEND PROPERTY ENVIRONMENT
  "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>")
set_tests_properties(serve_schedule PROPERTIES TIMEOUT 300)
# The request parser (serve/openai.c) as a unit, without a model or a socket
# (tests/serve/serve_openai_request.c): bodies into engine requests, malformed ones refused with
# their status, param, code and message.
mt_test_binary(test_serve_openai_request serve/serve_openai_request.c)
target_link_libraries(test_serve_openai_request PRIVATE mtserve)
mt_test_cases(test_serve_openai_request serve_openai_request_completion serve_openai_request_chat
  serve_openai_request_errors serve_openai_request_error_json)
# Chat replies split into reasoning_content, content and tool_calls (serve/openai_reply.c) as a
# unit: completion ids of the M2 / M3 test tokenizers through the response and the stream's
# events (tests/serve/serve_openai_reply.c).
mt_test_binary(test_serve_openai_reply serve/serve_openai_reply.c)
target_link_libraries(test_serve_openai_reply PRIVATE mtserve)
mt_test_cases(test_serve_openai_reply serve_openai_reply_m2 serve_openai_reply_m3)
# Split chat replies over loopback (tests/serve/serve_reply.c): a tiny M2 and a tiny M3 trained by
# the test (minimax-train, one record with reasoning and a tool call) answer with
# reasoning_content and tool_calls, finish_reason "tool_calls", streamed and not; --reasoning-parser
# none and an unknown name. Skipped where ../shared is absent.
mt_test_binary(test_serve_reply serve/serve_reply.c)
mt_test_cases(test_serve_reply serve_reply_m2 serve_reply_m3)
add_dependencies(test_serve_reply minimax-serve minimax-train)
set_property(TEST serve_reply_m2 serve_reply_m3 APPEND PROPERTY ENVIRONMENT
  "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>" "MT_TRAIN_CLI=$<TARGET_FILE:minimax-train>"
  "${MT_TEST_ENV_MPI}")
# The request side over loopback with tiny M2 / M3 models and the released templates
# (tests/serve/serve_chat_request.c; skipped where ../shared is absent): /tokenize against
# transformers' sanitize_control_tokens ids, a chat request with tools against minimax-data
# render, every unimplemented field's 400 (or its no-op value accepted), chat logprobs and
# include_usage in streams, streamed completions with echo and logprobs.
mt_test_binary(test_serve_chat_request serve/serve_chat_request.c)
target_link_libraries(test_serve_chat_request PRIVATE Threads::Threads)
set(MT_SERVE_CHAT_CASES serve_tokenize_m2 serve_tokenize_m3 serve_chat_tools_m2
  serve_chat_tools_m3 serve_fields serve_logprobs_stream)
mt_test_cases(test_serve_chat_request ${MT_SERVE_CHAT_CASES})
add_dependencies(test_serve_chat_request minimax-serve minimax-data)
set_property(TEST ${MT_SERVE_CHAT_CASES} APPEND PROPERTY ENVIRONMENT
  "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>" "MT_DATA_CLI=$<TARGET_FILE:minimax-data>")
set_tests_properties(${MT_SERVE_CHAT_CASES} PROPERTIES TIMEOUT 180)
# The chat page (serve/webui/index.html) in headless Chromium over the DevTools protocol
# (tests/serve/serve_webui.c, tests/support/cdp.h): served with its CSP, 404 with --no-webui; the
# page asks for the API key once, streams replies equal to the API's greedy ones, keeps the
# conversation, shows the server's errors. Its screenshot and DOM: build/tests/serve_webui.png,
# serve_webui.dom.html. Skipped without a browser (launch/install-deps.sh installs chromium).
mt_test_binary(test_serve_webui serve/serve_webui.c)
target_link_libraries(test_serve_webui PRIVATE Threads::Threads)
mt_test_cases(test_serve_webui serve_webui)
add_dependencies(test_serve_webui minimax-serve)
set_property(TEST serve_webui APPEND PROPERTY ENVIRONMENT
  "MT_SERVE_CLI=$<TARGET_FILE:minimax-serve>" "MT_WEBUI_OUT=${CMAKE_CURRENT_BINARY_DIR}")
set_tests_properties(serve_webui PROPERTIES TIMEOUT 300)
