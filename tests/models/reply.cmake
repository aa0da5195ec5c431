# The reply parsers (models/reply.h): reasoning, content and tool calls out of a reply, as vLLM's
# minimax_m2 parsers split them; hand-made replies (tests/models/reply.c), and the round trip of
# every assistant message of tests/fixtures/chat/multiturn.jsonl through the M2 / M3 templates
# (tests/models/reply_roundtrip.c; skipped where ../shared is absent). Every text is also parsed
# streamed, cut at every byte boundary.
mt_test_binary(test_reply models/reply.c models/reply_check.c)
mt_test_cases(test_reply models_reply_values models_reply_markup)
mt_test_binary(test_reply_roundtrip models/reply_roundtrip.c models/reply_check.c)
mt_test_cases(test_reply_roundtrip data_reply_roundtrip_m2 data_reply_roundtrip_m3)
