# The synthetic preference pairs for the reward-model recipe (data/synth_pairs.c), and
# `minimax-data synth --kind pairs` writing the same bytes.
mt_test_binary(test_data_synth_pairs data/data_synth_pairs.c)
mt_test_cases(test_data_synth_pairs data_synth_pairs)
add_dependencies(test_data_synth_pairs minimax-data)
set_property(TEST data_synth_pairs APPEND PROPERTY ENVIRONMENT "MT_DATA_CLI=$<TARGET_FILE:minimax-data>")
