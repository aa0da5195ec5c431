# The chat templates of the data pipeline (data/chat.h, data/sample.h): where a template comes
# from, exports, the trained-bytes rule, Text-01 against transformers (test_data_chat); the
# released M2 / M3 templates against transformers over GSM8K and multi-turn conversations
# (test_data_chat_ref: tests/fixtures/chat, made by tools/make_chat_fixtures.py; skipped where
# ../shared is absent).
mt_test_binary(test_data_chat data/data_chat.c)
mt_test_cases(test_data_chat data_chat_sources data_chat_rule data_chat_samples data_chat_text01)
mt_test_binary(test_data_chat_ref data/data_chat_ref.c)
mt_test_cases(test_data_chat_ref data_chat_gsm8k_m2 data_chat_gsm8k_m3 data_chat_multiturn)
# End to end: recipes/tiny-m2.toml and tiny-m3.toml on 2 ranks (tests/train/dist_chat.sh): the loss
# falls, the export carries the source template byte for byte.
foreach(fam m2 m3)
  add_test(NAME dist_chat_${fam} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/dist_chat.sh
    $<TARGET_FILE:minimax-train> ${fam})
  set_tests_properties(dist_chat_${fam} PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
    SKIP_RETURN_CODE 77 TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endforeach()
# A tokenizer that cannot encode the template's control tokens as single ids (an added token
# missing, another model's vocabulary) refused naming the token, by minimax-data tokenize, the
# trainer and every tool (tests/data/data_chat_tokens.sh; the model from test_eval_verify).
add_test(NAME data_chat_control_tokens COMMAND bash ${CMAKE_SOURCE_DIR}/tests/data/data_chat_tokens.sh
  $<TARGET_FILE:test_eval_verify> ${CMAKE_BINARY_DIR})
set_tests_properties(data_chat_control_tokens PROPERTIES ENVIRONMENT
  "${MT_TEST_ENV};${MT_TEST_ENV_MPI}" TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# Control tokens spelled in the input encoded as text (data/chat_sanitize.c) and
# continue_final_message (data/chat_prompt.c), against transformers 5.24's
# apply_chat_template(sanitize_control_tokens=True / False) ids with the M2 / M3 templates
# (tests/fixtures/chat/sanitize_expected.json, tools/make_sanitize_fixtures.py; skipped where
# ../shared is absent).
mt_test_binary(test_data_chat_sanitize data/data_chat_sanitize.c)
mt_test_cases(test_data_chat_sanitize data_chat_sanitize data_chat_sanitize_rules)
