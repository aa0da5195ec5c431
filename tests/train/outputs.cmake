# What a run writes into output.dir, as units (no MPI ranks): the logger's files
# (train/logger.c: loss.csv, eval.csv, metrics.jsonl, their resume) and the directory's rules
# (train/output_dir.c, output_rewind.c: the lock, another run's results, --overwrite, --resume
# and --rewind, inputs inside the outputs, the clean-up on an error).
mt_test_binary(test_data_logger train/data_logger.c)
mt_test_cases(test_data_logger data_logger_loss_csv data_logger_metrics data_logger_eval
  data_logger_resume data_logger_eval_only data_logger_close data_logger_write_failure)
mt_test_binary(test_data_output_dir train/data_output_dir.c)
mt_test_cases(test_data_output_dir data_output_dir_lock data_output_dir_results
  data_output_dir_overwrite data_output_dir_resume data_output_dir_rewind data_output_dir_inputs
  data_output_dir_helpers data_output_dir_cleanup)
# output.report_to = ["tensorboard"]: the event files (train/tboard.c) read back by the tests'
# own reader (tests/support/tfevents.c); data_tboard_match (tests/train/dist.cmake) on a run's
mt_test_binary(test_data_tboard train/data_tboard.c support/tfevents.c)
mt_test_cases(test_data_tboard data_tboard_crc data_tboard_logger data_tboard_damaged)
