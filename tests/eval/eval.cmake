# GSM8K answer extraction (eval/gsm8k_answer.h); the _gold case needs ../shared (else 77).
mt_test_binary(test_data_gsm8k_answer eval/data_gsm8k_answer.c)
mt_test_cases(test_data_gsm8k_answer data_gsm8k_answer data_gsm8k_answer_gold)
