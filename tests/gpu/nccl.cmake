# The NCCL communicator (train/comm_nccl.cu, tests/gpu/dist_nccl.c). gpu_nccl_np1: one rank over the
# self communicator on a real GPU (skipped, 77, without -DMT_CUDA=ON or without a device).
# op_cuda_emu_nccl_*: the same code on the CPU emulator (tests/cuda_emu/emu_nccl.cpp: NCCL on
# MPI) with 1-3 MPI ranks; the abort, shared-device and watchdog cases must end the job non-zero
# with their message, within 60 s (a hang is the failure they guard against).
mt_test_binary(test_dist_nccl gpu/dist_nccl.c)
mt_test_cases(test_dist_nccl gpu_nccl_np1)
if(MT_CUDA)
  set_tests_properties(gpu_nccl_np1 PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_SYNC=1;MT_CUDA_VERBOSE=1")
endif()

if(CMAKE_CXX_COMPILER AND TARGET mt_emu)
  add_executable(test_dist_nccl_emu gpu/dist_nccl.c support/harness.c)
  target_compile_definitions(test_dist_nccl_emu PRIVATE MT_WITH_CUDA MT_CUDA_EMU)
  target_include_directories(test_dist_nccl_emu PRIVATE ${CMAKE_SOURCE_DIR} ${CBLAS_INCLUDE_DIR})
  target_link_libraries(test_dist_nccl_emu PRIVATE mt_emu)
  set(mt_nccl_mpiexec ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG})
  set(mt_nccl_mpiflags --oversubscribe --bind-to none)
  foreach(np 1 2 3 4)
    add_test(NAME op_cuda_emu_nccl_np${np} COMMAND ${mt_nccl_mpiexec} ${np} ${mt_nccl_mpiflags}
      $<TARGET_FILE:test_dist_nccl_emu> nccl_mpi)
    set_tests_properties(op_cuda_emu_nccl_np${np} PROPERTIES
      ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}" SKIP_RETURN_CODE 77 TIMEOUT 300
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  # strict emulation (tests/gpu/gpu.cmake): also, every collective on the communication stream must
  # come after that stream waited for the compute stream's earlier work
  add_test(NAME op_cuda_emu_strict_nccl_np2 COMMAND ${mt_nccl_mpiexec} 2 ${mt_nccl_mpiflags}
    $<TARGET_FILE:test_dist_nccl_emu> nccl_mpi)
  set_tests_properties(op_cuda_emu_strict_nccl_np2 PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_EMU_STRICT=1" SKIP_RETURN_CODE 77
    TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME op_cuda_emu_nccl_np1_self COMMAND test_dist_nccl_emu gpu_nccl_np1)
  set_tests_properties(op_cuda_emu_nccl_np1_self PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
    SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # the optimizer offload's copy thread on a rank bound to device 1 of 2 (tests/gpu/dist_nccl.c): the
  # emulator refuses a copy of another device's memory, as the thread made before it bound itself
  add_test(NAME op_cuda_emu_nccl_offload_device COMMAND test_dist_nccl_emu nccl_offload_device)
  set_tests_properties(op_cuda_emu_nccl_offload_device PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_EMU_DEVICES=2;OMPI_COMM_WORLD_LOCAL_RANK=1"
    TIMEOUT 120 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # `sh -c SCRIPT sh PATTERN... -- CMD...`: passes when CMD ends within 60 s with a non-zero
  # exit (not timeout's 124/137) and its output matches every PATTERN (grep -E, per line).
  set(mt_nccl_expect_death [=[
    n=0; while [ "$1" != "--" ]; do n=$((n + 1)); eval "pat$n=\$1"; shift; done; shift
    t0=$(date +%s); out=$(timeout -k 5 60 "$@" 2>&1); rc=$?
    printf '%s\n' "$out"; echo "exit $rc after $(( $(date +%s) - t0 )) s"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || exit 1
    while [ $n -gt 0 ]; do
      eval "p=\$pat$n"; printf '%s\n' "$out" | grep -Eq "$p" || { echo "no match: $p"; exit 1; }
      n=$((n - 1))
    done
  ]=])
  # the watchdog (train/comm_nccl.cu) under the emulator's faults (emu_nccl.cpp): rank 1 hangs
  # in its 5th collective, so both ranks' oldest collective outlives the 2 s timeout; or NCCL
  # reports an asynchronous error on rank 1 from its 5th collective on
  foreach(case abort shared_device watchdog_stall watchdog_async watchdog_a2a)
    set(run nccl_${case})
    if(case STREQUAL abort)
      # rank 1's own message, and its hook aborted NCCL, the world's and a split (the emulator's
      # trace)
      set(pat "rank 1.*deliberate failure on rank 1" "rank 1: communicator aborted"
        "rank 1: split communicator aborted")
      set(env "")
    elseif(case STREQUAL shared_device)
      set(pat "share one GPU")
      set(env "MT_NCCL_ALLOW_SHARED_DEVICE=0")
    elseif(case STREQUAL watchdog_stall)
      set(run nccl_watchdog)
      set(pat "nccl watchdog: collective [0-9]+ .* has not completed after [0-9]+ s \\(dist.timeout automatic: 2 s in this test\\)"
        "communicator aborted")
      set(env "MT_EMU_NCCL_STALL=1:5")
    elseif(case STREQUAL watchdog_a2a)
      # rank 1 hangs in its 3rd all-to-all
      set(run nccl_watchdog_a2a)
      set(pat "nccl watchdog: collective [0-9]+ \\(an all-to-all of [0-9]+ elements sent by this rank\\) has not completed after [0-9]+ s"
        "communicator aborted")
      set(env "MT_EMU_NCCL_STALL=1:3")
    else()
      set(run nccl_watchdog)
      set(pat "rank 1.*nccl watchdog: asynchronous NCCL error" "rank 1: communicator aborted")
      set(env "MT_EMU_NCCL_ASYNC_ERROR=1:5")
    endif()
    add_test(NAME op_cuda_emu_nccl_${case} COMMAND sh -c "${mt_nccl_expect_death}" sh ${pat} --
      ${mt_nccl_mpiexec} 2 ${mt_nccl_mpiflags} $<TARGET_FILE:test_dist_nccl_emu> ${run})
    set_tests_properties(op_cuda_emu_nccl_${case} PROPERTIES
      ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};${env}" TIMEOUT 120
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
endif()
