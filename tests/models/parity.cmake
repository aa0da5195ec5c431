# The model against Hugging Face transformers: tiny random checkpoints saved by transformers and
# the outputs it computed for them (tools/make_fixtures.py, tests/fixtures/models, docs/parity.md).
mt_test_binary(test_parity models/parity_model.c models/parity_cli.c models/eval_generate.c)
mt_test_cases(test_parity eval_generate_text01 eval_generate_released8 eval_generate_m2
  eval_generate_m3 parity_tiny_released8 parity_tiny_irregular_gqa parity_tiny_mqa
  parity_tiny_mqa_v5 parity_tiny_mqa_orig parity_tiny_released8_expert_unit
  parity_tiny_irregular_gqa_recompute parity_tiny_released8_expert_unit_recompute
  parity_tiny_irregular_gqa_expert_unit parity_m2_tiny parity_m2_irregular parity_m2_fp8
  parity_m2_irregular_expert_unit parity_m2_irregular_recompute parity_m3_tiny parity_m3_tiny_expert_unit
  parity_m3_tiny_recompute parity_m3_kl parity_m3_decode_switch parity_m3_dense
  parity_m3_dense_expert_unit parity_m3_dense_recompute parity_m3_packed_shared
  parity_m3_packed_shared_expert_unit parity_padding parity_naming parity_cli
  parity_cli_errors parity_window parity_window_recompute parity_jitter_text01 parity_jitter_m2
  parity_jitter_recompute)
add_dependencies(test_parity minimax-forward minimax-generate test_poke)
set_property(TEST parity_cli parity_cli_errors APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_FORWARD=$<TARGET_FILE:minimax-forward>"
  "MT_MINIMAX_GENERATE=$<TARGET_FILE:minimax-generate>")
set_property(TEST parity_cli_errors APPEND PROPERTY ENVIRONMENT "MT_TEST_POKE=$<TARGET_FILE:test_poke>")
