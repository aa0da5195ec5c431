# The head columns of the token cache (data/token_cache.c): /head_i32, /head_f32 and the objective
# attribute written and read back, refused when inconsistent, absent from an SFT cache.
mt_test_binary(test_data_token_cache_head data/data_token_cache_head.c)
mt_test_cases(test_data_token_cache_head data_token_cache_head)
