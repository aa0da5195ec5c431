# Learning-rate schedules against transformers (tests/fixtures/schedule, tools/make_schedule_fixtures.py).
mt_test_binary(test_op_schedule train/op_schedule.c)
mt_test_cases(test_op_schedule op_lr_schedules)
