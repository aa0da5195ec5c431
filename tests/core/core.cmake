# core/file_io.c: a write of the trainer's outputs (mt_file_write_atomic) that fails leaves
# nothing behind.
mt_test_binary(test_data_write core/data_write.c)
mt_test_cases(test_data_write data_write_failure_cleanup)
