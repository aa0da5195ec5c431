# Non-finite numbers and sizes end to end on real ranks (tests/train/dist_nonfinite.sh): a NaN in a
# model's weights or in a training state is refused naming the tensor, a diverging step names
# the first op that computed a non-finite value, bad sizes and vocabularies stop before any output.
mt_test_binary(test_dist_nonfinite train/dist_nonfinite.c)
mt_test_mpi_cases(test_dist_nonfinite 1 dist_nonfinite_np1)
mt_test_mpi_cases(test_dist_nonfinite 2 dist_nonfinite_np2 dist_nonfinite_m2_np2)
mt_test_mpi_cases(test_dist_nonfinite 3 dist_nonfinite_np3)
add_test(NAME dist_train_nonfinite_weights COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/dist_nonfinite.sh
  $<TARGET_FILE:minimax-train> $<TARGET_FILE:test_poke>)
set_tests_properties(dist_train_nonfinite_weights PROPERTIES
  ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}" TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
if(CMAKE_CXX_COMPILER) # minimax-train-emu (tests/gpu/gpu.cmake)
  add_test(NAME dist_train_emu_cuda_nonfinite COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/dist_nonfinite.sh
    $<TARGET_FILE:minimax-train> $<TARGET_FILE:test_poke> $<TARGET_FILE:minimax-train-emu>)
  set_tests_properties(dist_train_emu_cuda_nonfinite PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1" TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
