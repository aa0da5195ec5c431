# Tools of the tests that damage saved files (the harness library, mt_harness, is made in
# tests/CMakeLists.txt): test_corrupt flips a bit of a checkpoint's HDF5 dataset or safetensors
# data (tests/train/run_resume.sh resume-check), test_poke writes chosen values into them
# (tests/train/dist_nonfinite.sh, parity_cli_errors).
mt_test_binary(test_corrupt support/corrupt.c)
mt_test_binary(test_poke support/poke.c)
