# The op profile (MT_PROFILE=1): its counts and formulas, and numerics untouched by it.
mt_test_binary(test_op_profile autograd/profile.c)
mt_test_cases(test_op_profile op_profile_counts op_profile_numerics op_profile_attention_pairs)
