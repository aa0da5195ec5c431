# launch/gpu-check.sh without a GPU and without its build (tests/gpu/gpu_check.sh): on this build's
# binaries (test_gpu_ops, test_gpu_optim, test_dist_nccl, bench-gpu-step; bench-gpu-ops in CUDA
# builds), every GPU case skipped: at most the four result files in $OUT, one summary line per
# step below in the documented order, MT_GPU_CHECK_ONLY, the budget, a failing case, and a
# SIGTERM mid-run. The steps: the gpu_* cases of tests/gpu/gpu.cmake (included before this file) and
# the script's own (docs/cuda.md, "launch/gpu-check.sh").
set(mt_gpu_check_steps gpu_nccl_np1 gpu_optim gpu_lightning_bf16_gemm gpu_moe_experts_bf16_lanes1
  gpu_generate
  gpu_step_check_fp32)
foreach(s bf16 bf16_d64 bf16_mid recompute offload offload_bf16g)
  list(APPEND mt_gpu_check_steps gpu_step_check_${s} gpu_step_check_${s}_nosync)
endforeach()
list(APPEND mt_gpu_check_steps bench_gpu_ops step_bf16_profile step_fp32
  sanitize_racecheck_gpu_attention_bf16 sanitize_racecheck_gpu_lightning_bf16
  sanitize_memcheck_gpu_attention_bf16 sanitize_memcheck_gpu_lightning_bf16
  sanitize_memcheck_gpu_moe_experts_bf16 bench_msa peer step_bf16_recompute step_bf16_offload)
add_test(NAME gpu_check_standalone COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_check.sh
  ${CMAKE_BINARY_DIR} ${mt_gpu_cases} ${mt_gpu_check_steps})
set_tests_properties(gpu_check_standalone PROPERTIES ENVIRONMENT "${MT_TEST_ENV}" TIMEOUT 120
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# tests/cuda_ref/cblas_ref.c, the standalone build's sgemm without OpenBLAS, against the
# textbook loop, bit for bit (renamed so it stays apart from OpenBLAS's cblas_sgemm)
add_executable(test_cblas_ref gpu/op_cblas_ref.c ${CMAKE_SOURCE_DIR}/tests/cuda_ref/cblas_ref.c)
target_include_directories(test_cblas_ref PRIVATE ${CMAKE_SOURCE_DIR}/tests/cuda_ref)
target_compile_definitions(test_cblas_ref PRIVATE cblas_sgemm=ref_sgemm)
target_link_libraries(test_cblas_ref PRIVATE OpenMP::OpenMP_C m)
add_test(NAME op_cblas_ref COMMAND test_cblas_ref)
set_tests_properties(op_cblas_ref PROPERTIES ENVIRONMENT "${MT_TEST_ENV};OMP_NUM_THREADS=2"
  TIMEOUT 60)
