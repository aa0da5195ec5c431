# Model input/output: config.json schemas, safetensors, checkpoint layouts, parameter layout,
# minimax-info counts (models/config.c, safetensors.c, weights.c, layout.c).
mt_test_binary(test_model_io models/model_io.c models/model_io_files.c models/model_io_m2.c models/model_io_m3.c
  models/model_io_window.c)
mt_test_cases(test_model_io op_config_schemas op_layout_decay op_layout_buckets
  op_safetensors_digest op_safetensors_roundtrip op_safetensors_errors op_weights_layouts op_weights_gather_units
  op_weights_export_m2 op_config_m2 op_weights_fp8_errors op_info_counts op_info_counts_m2
  op_info_counts_m3 op_config_m3 op_config_window_jitter op_weights_export_m3 op_weights_export_m3_text op_plan_activations)
add_dependencies(test_model_io minimax-info)
set_property(TEST op_info_counts op_info_counts_m2 op_info_counts_m3 APPEND PROPERTY ENVIRONMENT
  "MT_MINIMAX_INFO=$<TARGET_FILE:minimax-info>")
# Plan values no released family uses yet, against equivalent plans (tests/models/model_plan.c).
mt_test_binary(test_model_plan models/model_plan.c)
mt_test_cases(test_model_plan op_mlp_dense op_plan_gemma_norm op_plan_qk_norm_head)
