# The training step's GPU path beyond the ops (included after tests/gpu/gpu.cmake, which makes the
# emulator library mt_emu and minimax-train-emu):
# - tests/gpu/gpu_optim.c: the sharded optimizer's device kernels against the CPU ones: gpu_optim on
#   a GPU (skipped without one), op_cuda_emu_optim through the CUDA emulator;
# - dist_train_emu_cuda_np2 + dist_emu_cuda_match: the whole trainer on the CUDA backend with
#   NCCL (both emulated) against the CPU trainer, 2 ranks, and its resume from a checkpoint;
#   dist_emu_cuda_bf16: the same in bf16 GEMM mode, under the bf16 rule (device error <= 2x the
#   CPU bf16 reference's error against fp32);
# - dist_eval_generate_emu (emulated) and gpu_eval_generate (a CUDA build on a GPU): the
#   trainer's accuracy by generation decoded through the gathers on the device = the CPU
#   replica's results.
mt_test_binary(test_gpu_optim gpu/gpu_optim.c)
if(MT_CUDA) # the same on a real GPU (skipped without one): a CUDA build's own minimax-train
  add_test(NAME gpu_eval_generate COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_emu.sh
    $<TARGET_FILE:minimax-train> generate-emu $<TARGET_FILE:minimax-train> device)
  set_tests_properties(gpu_eval_generate PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1"
    SKIP_RETURN_CODE 77 TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
mt_test_cases(test_gpu_optim gpu_optim)
if(TARGET mt_emu)
  add_executable(test_gpu_optim_emu gpu/gpu_optim.c support/harness.c)
  target_compile_definitions(test_gpu_optim_emu PRIVATE MT_WITH_CUDA MT_CUDA_EMU)
  target_include_directories(test_gpu_optim_emu PRIVATE ${CMAKE_SOURCE_DIR} ${CBLAS_INCLUDE_DIR})
  target_link_libraries(test_gpu_optim_emu PRIVATE mt_emu)
  add_test(NAME op_cuda_emu_optim COMMAND test_gpu_optim_emu gpu_optim)
  set_tests_properties(op_cuda_emu_optim PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
    SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # strict emulation (tests/gpu/gpu.cmake): the block sums of the gradient statistics
  add_test(NAME op_cuda_emu_strict_optim COMMAND test_gpu_optim_emu gpu_optim)
  set_tests_properties(op_cuda_emu_strict_optim PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_EMU_STRICT=1" SKIP_RETURN_CODE 77 TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

  add_test(NAME dist_train_emu_cuda_np2 COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_emu.sh
    $<TARGET_FILE:minimax-train> emu-cuda $<TARGET_FILE:minimax-train-emu> 2)
  set_tests_properties(dist_train_emu_cuda_np2 PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1"
    TIMEOUT 900 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} FIXTURES_SETUP dist_emu_cuda)
  mt_test_cases(test_dist_compare dist_emu_cuda_match dist_emu_cuda_bf16)
  # expert parallelism on the emulated device (NCCL all-to-alls) against the CPU trainer
  add_test(NAME dist_train_ep_emu COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_emu.sh
    $<TARGET_FILE:minimax-train> ep-emu $<TARGET_FILE:minimax-train-emu>)
  set_tests_properties(dist_train_ep_emu PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1"
    TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} FIXTURES_SETUP dist_ep_emu)
  mt_test_cases(test_dist_compare dist_ep_emu_match)
  # context parallelism on the emulated device (NCCL K/V and state exchanges) against the CPU
  add_test(NAME dist_train_cp_emu COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_emu.sh
    $<TARGET_FILE:minimax-train> cp-emu $<TARGET_FILE:minimax-train-emu>)
  set_tests_properties(dist_train_cp_emu PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1"
    TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} FIXTURES_SETUP dist_cp_emu)
  mt_test_cases(test_dist_compare dist_cp_emu_match)
  set_tests_properties(dist_cp_emu_match PROPERTIES FIXTURES_REQUIRED dist_cp_emu)
  # label heavy (2.6 minutes of the sanitizer pass): under the sanitizers through
  # op_cuda_emu_cp_attention, op_cuda_emu_dist_cp_lightning_np2/4 and op_cuda_emu_msa_slots
  set_tests_properties(dist_train_cp_emu dist_cp_emu_match PROPERTIES LABELS heavy)
  # accuracy by generation decoded through the gathers on the emulated device
  # (tests/train/run_emu.sh generate-emu): the CPU replica's results
  add_test(NAME dist_eval_generate_emu COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_emu.sh
    $<TARGET_FILE:minimax-train> generate-emu $<TARGET_FILE:minimax-train-emu>)
  set_tests_properties(dist_eval_generate_emu PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1"
    TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # a reward model (train.objective = "reward") on the emulated device against the CPU trainer
  add_test(NAME dist_train_rm_emu COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/run_head.sh
    $<TARGET_FILE:minimax-train> reward-emu $<TARGET_FILE:minimax-train-emu>)
  set_tests_properties(dist_train_rm_emu PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_NCCL_ALLOW_SHARED_DEVICE=1"
    TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} FIXTURES_SETUP dist_rm_emu)
  mt_test_cases(test_dist_compare dist_rm_emu_match)
  set_tests_properties(dist_rm_emu_match PROPERTIES FIXTURES_REQUIRED dist_rm_emu)
  set_tests_properties(dist_ep_emu_match PROPERTIES FIXTURES_REQUIRED dist_ep_emu)
  set_tests_properties(dist_emu_cuda_match dist_emu_cuda_bf16 PROPERTIES
    FIXTURES_REQUIRED dist_emu_cuda)
  # 17 emulated training runs: under the sanitizers only through op_cuda_emu_step* and
  # op_cuda_emu_nccl* (tests/gpu/gpu.cmake, label heavy)
  set_tests_properties(dist_train_emu_cuda_np2 dist_emu_cuda_match dist_emu_cuda_bf16 PROPERTIES
    LABELS heavy)
endif()
