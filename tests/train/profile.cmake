# The op profile's table file, and the trainer with MT_PROFILE=1 on the tiny models of three
# families (tests/train/run_profile.sh): the same loss.csv as without, a well-formed profile.tsv.
mt_test_binary(test_data_profile train/data_profile.c)
mt_test_cases(test_data_profile data_profile_tsv)
mt_test_run(op_profile_train run_profile train)
