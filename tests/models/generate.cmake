# Generation's next-token rule (models/generate.h; tests/models/eval_sample.c). The generation
# tests on model fixtures (eval_generate_*) live in the parity binary (tests/models/parity.cmake).
mt_test_binary(test_eval_sample models/eval_sample.c)
mt_test_cases(test_eval_sample eval_sample_greedy eval_sample_chi2 eval_sample_sets
  eval_sample_uniform)
