# The HDF5 token cache (data/token_cache.c) as a unit: its layout and round trip, the key and
# what changes it, damaged files refused in one line, reuse and rebuild.
mt_test_binary(test_data_token_cache data/data_token_cache.c)
mt_test_cases(test_data_token_cache data_token_cache_roundtrip data_token_cache_key
  data_token_cache_damaged data_token_cache_open)
