# The datasets of the head objectives (data/head_data.h): reward pairs (TRL's formats),
# sequence classification, token classification (first-token labels), question answering
# (SQuAD), and their errors, on the test tokenizer against transformers' renderings and ids.
mt_test_binary(test_data_head data/data_head.c)
mt_test_cases(test_data_head data_head_reward data_head_classification
  data_head_token_classification data_head_qa data_head_errors)
