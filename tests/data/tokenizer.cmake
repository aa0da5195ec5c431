# Tokenizer (data/tokenizer*.c) against HF `tokenizers` references in tests/fixtures/tokenizer
# (tools/make_tokenizer_fixtures.py). data_tokenizer_gsm8k reads ../shared GSM8K (skipped if absent).
mt_test_binary(test_data_tokenizer data/data_tokenizer.c)
mt_test_cases(test_data_tokenizer
  data_tokenizer_fixture data_tokenizer_gsm8k data_tokenizer_roundtrip data_tokenizer_errors
  data_tokenizer_cache_threads)
# Every code point's class in the pre-tokenizer regexes against HF (Unicode 16), in
# tests/fixtures/tokenizer/unicode_digest.txt (tools/make_unicode_digest.py).
mt_test_binary(test_data_tokenizer_unicode data/data_tokenizer_unicode.c)
mt_test_cases(test_data_tokenizer_unicode data_tokenizer_unicode data_tokenizer_unicode_classes)
