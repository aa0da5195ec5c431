# The heads of models that are not causal LMs (models/head.c) against float64 references:
# transformers' own heads for MiniMax-Text-01 (tools/make_head_fixtures.py, issue 38).
mt_test_binary(test_parity_head models/parity_head.c models/head_model.c)
mt_test_cases(test_parity_head parity_head_text01_seq parity_head_text01_token
  parity_head_text01_qa parity_head_init_from_causal
  parity_head_export parity_head_m2
  parity_head_m3 model_plan_heads
  parity_head_no_pad)
