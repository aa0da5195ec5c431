# GPU parity tests (tests/gpu/gpu_ops.c): every CUDA op against the CPU reference on the same
# inputs, forward, saved buffers and backward, fp32 to 1e-5 relative. Registered in every build so
# `ctest -N` lists them: without -DMT_CUDA=ON ("CUDA backend not built") or without a usable
# device they exit 77 and ctest reports them as skipped. The binary is plain C through the
# backend table, so the same source builds in both configurations; op_gpu_harness runs the
# comparisons with the CPU backend standing in for the device (a check of the test itself).
#
# the cases of tests/gpu/gpu_ops.c (its GPU_CASES list), run as gpu_<op> here and as
# op_cuda_emu_<op> through the emulator below; launch/gpu-check.sh reads this list too
set(mt_gpu_ops view concat embedding matmul rmsnorm silu sigmoid swiglu add mul scale axpby rope qk_norm
  attention lightning moe_route moe_route_sigmoid moe_experts moe_aux cross_entropy linear_cross_entropy
  matmul_bf16 moe_experts_bf16 lightning_bf16 attention_bf16 attention_cudnn moe_split moe_split_bf16
  swiglu_oai moe_experts_oai msa decode cp_attention determinism)
list(TRANSFORM mt_gpu_ops PREPEND gpu_ OUTPUT_VARIABLE mt_gpu_cases)
mt_test_binary(test_gpu_ops gpu/gpu_ops.c gpu/gpu_compare.c gpu/gpu_msa.c gpu/gpu_lce.c gpu/gpu_moe.c gpu/gpu_decode.c gpu/gpu_cp.c)
mt_test_cases(test_gpu_ops ${mt_gpu_cases} op_gpu_harness)
if(MT_CUDA)
  # synchronise after every kernel so a fault names its op; print the device once
  set_tests_properties(${mt_gpu_cases} PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_SYNC=1;MT_CUDA_VERBOSE=1")
endif()

# ---- the same tests with the CUDA kernels on the CPU emulator (tests/cuda_emu) ----
# Every build, no GPU needed: each CUDA source (kernels/cuda/*.cu, train/*.cu, bench/*.cu) is
# compiled as C++ against the emulator's cuda_runtime.h / cublas_v2.h / nccl.h, with
# `kernel<<<grid, block>>>(args)` rewritten to `emu_launcher(kernel, grid, block)(args)`, into
# mt_emu: the whole library with the device emulated (the C modules' objects are mt's, from
# mt_common, but for the three that read MT_WITH_CUDA), so the trainer's GPU path runs end to end
# here (minimax-train-emu). ctest op_cuda_emu_<op> runs case gpu_<op> against it: indexing, node
# semantics, reductions, launch geometry and the cuBLAS mapping are checked; races, timing and
# device math are not (docs/cuda.md).
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(mt_emu_dir ${CMAKE_BINARY_DIR}/cuda-emu)
  # mt_emu_translate(<file.cu> <out var>): the emulator's C++ version of a CUDA source
  function(mt_emu_translate cu out)
    get_filename_component(dir ${cu} DIRECTORY)
    get_filename_component(dir ${dir} NAME)
    get_filename_component(base ${cu} NAME_WE)
    file(READ ${cu} text)
    string(REGEX REPLACE "([A-Za-z_][A-Za-z_0-9]*)<<<([^>]*)>>>" "emu_launcher(\\1, \\2)" text
      "${text}")
    # `__shared__ T name[..];` -> a static registered once with the emulator (cuda_runtime.h);
    # arrays, then the rest (CMake's replace cannot refer to an optional group)
    set(reg "[[maybe_unused]] static const bool emu_shared_\\2 = emu_shared_register(&\\2, sizeof \\2);")
    string(REGEX REPLACE "__shared__ ([A-Za-z_][^;\n]*[ >])([A-Za-z_][A-Za-z_0-9]*)(\\[[^;\n]*\\]);"
      "static \\1\\2\\3; ${reg}" text "${text}")
    string(REGEX REPLACE "__shared__ ([A-Za-z_][^;\n]*[ >])([A-Za-z_][A-Za-z_0-9]*);"
      "static \\1\\2; ${reg}" text "${text}")
    get_filename_component(ext ${cu} EXT)
    if(ext STREQUAL ".cuh") # headers keep their name, under the emulator's include directory
      set(dst ${mt_emu_dir}/kernels/cuda/${base}.cuh)
    else()
      set(dst ${mt_emu_dir}/${dir}_${base}.cpp)
    endif()
    file(WRITE ${dst}.new "#line 1 \"${cu}\"\n${text}")
    configure_file(${dst}.new ${dst} COPYONLY)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${cu})
    set(${out} ${dst} PARENT_SCOPE)
  endfunction()
  file(GLOB mt_emu_cu CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu
    ${CMAKE_SOURCE_DIR}/train/*.cu)
  # the translated headers come first on the include path (quoted includes from the translated
  # sources find them there, by either spelling: "x.cuh" or "kernels/cuda/x.cuh")
  file(GLOB mt_emu_cuh CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cuh)
  foreach(cuh ${mt_emu_cuh})
    mt_emu_translate(${cuh} unused)
  endforeach()
  set(mt_emu_srcs ${MT_LIB_BACKEND_SOURCES} ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu.cpp)
  foreach(cu ${mt_emu_cu})
    mt_emu_translate(${cu} cpp)
    list(APPEND mt_emu_srcs ${cpp})
  endforeach()
  file(GLOB mt_emu_extra CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cuda_emu/*.cpp)
  list(APPEND mt_emu_srcs ${mt_emu_extra})
  list(REMOVE_DUPLICATES mt_emu_srcs)
  mt_emu_translate(${CMAKE_SOURCE_DIR}/bench/gpu_ops.cu bench_cpp)

  add_library(mt_emu STATIC $<TARGET_OBJECTS:mt_common> ${mt_emu_srcs})
  target_link_libraries(mt_emu PUBLIC BLAS::BLAS PkgConfig::CJSON PkgConfig::PCRE2 hdf5::hdf5
    MPI::MPI_C OpenMP::OpenMP_C Threads::Threads m)
  add_executable(test_gpu_ops_emu gpu/gpu_ops.c gpu/gpu_compare.c gpu/gpu_msa.c gpu/gpu_lce.c gpu/gpu_moe.c gpu/gpu_decode.c gpu/gpu_cp.c support/harness.c)
  add_executable(bench_gpu_ops_emu ${bench_cpp})
  add_executable(minimax-train-emu ${CMAKE_SOURCE_DIR}/train/minimax_train_main.c)
  add_executable(minimax-generate-emu ${CMAKE_SOURCE_DIR}/apps/minimax_generate_main.c)
  add_executable(minimax-eval-emu ${CMAKE_SOURCE_DIR}/apps/minimax_eval_main.c)
  add_executable(minimax-chat-emu ${CMAKE_SOURCE_DIR}/apps/minimax_chat_main.c)
  add_executable(minimax-serve-emu ${CMAKE_SOURCE_DIR}/apps/minimax_serve_main.c
    ${MT_SERVE_SOURCES} ${MT_WEBUI_C})
  target_link_libraries(minimax-serve-emu PRIVATE PkgConfig::MHD)
  add_dependencies(minimax-serve-emu mtserve) # its rule makes the chat page's source (MT_WEBUI_C)
  add_executable(bench_gpu_step_emu ${CMAKE_SOURCE_DIR}/bench/gpu_step.c)
  add_executable(test_emu_cublas gpu/emu_cublas.cpp) # the emulated cuBLAS calls themselves
  # lightning under context parallelism on MPI ranks with the CUDA kernels (tests/train/dist.cmake)
  add_executable(test_dist_cp_lightning_emu train/dist_cp_lightning.c support/harness.c)
  foreach(t mt_emu test_gpu_ops_emu bench_gpu_ops_emu minimax-train-emu minimax-generate-emu
      minimax-eval-emu minimax-chat-emu minimax-serve-emu bench_gpu_step_emu test_emu_cublas
      test_dist_cp_lightning_emu)
    target_compile_definitions(${t} PRIVATE MT_WITH_CUDA MT_CUDA_EMU)
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas>)
    target_include_directories(${t} PRIVATE ${mt_emu_dir}/kernels/cuda ${mt_emu_dir}
      ${CMAKE_SOURCE_DIR}/tests/cuda_emu
      ${CMAKE_SOURCE_DIR}/kernels/cuda ${CMAKE_SOURCE_DIR} ${CBLAS_INCLUDE_DIR})
    set_target_properties(${t} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
      CXX_EXTENSIONS OFF)
    if(NOT t STREQUAL mt_emu)
      target_link_libraries(${t} PRIVATE mt_emu)
    endif()
  endforeach()
  foreach(np 2 4)
    mt_test_mpi_cases(test_dist_cp_lightning_emu ${np} op_cuda_emu_dist_cp_lightning_np${np})
    set_tests_properties(op_cuda_emu_dist_cp_lightning_np${np} PROPERTIES
      ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI};MT_TEST_BACKEND=cuda")
  endforeach()
  # the full training step benchmark (bench/gpu_step.c) on a tiny shape, --check: the device's
  # steps against the CPU backend's (fp32 1e-5; bf16 by the bf16 rule): fp32 GEMMs with the
  # fused loss (the trainer's), bf16 GEMMs with the loss from full logits. launch/gpu-check.sh
  # runs the same checks on a GPU (gpu_step_check_* there).
  set(mt_step_tiny --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --experts 4 --ffn 64
    --vocab 256 --seq 48 --block 16 --steps 2 --warmup 1 --check)
  add_test(NAME op_cuda_emu_step COMMAND bench_gpu_step_emu ${mt_step_tiny})
  add_test(NAME op_cuda_emu_step_bf16 COMMAND bench_gpu_step_emu --dtype bf16 --fused-loss 0
    ${mt_step_tiny})
  # head dim 64: lightning's fused kernels and the flash attention kernels in a whole step; with
  # the op-by-op profile that launch/gpu-check.sh prints for its bf16 step
  add_test(NAME op_cuda_emu_step_bf16_d64 COMMAND bench_gpu_step_emu --dtype bf16 --fused-loss 0
    --hidden 64 --heads 4 --kv-heads 2 --head-dim 64 --experts 4 --ffn 64 --vocab 256 --seq 96
    --block 32 --steps 2 --warmup 1 --profile 1 --check)
  # every layer recomputed in the backward (train.gradient_checkpointing), on both backends
  add_test(NAME op_cuda_emu_step_recompute COMMAND bench_gpu_step_emu --dtype bf16 --recompute 1
    ${mt_step_tiny})
  # the AdamW moments in host memory and the update on the host (dist.offload_optimizer)
  add_test(NAME op_cuda_emu_step_offload COMMAND bench_gpu_step_emu --dtype bf16 --offload 1
    ${mt_step_tiny})
  # the same with bf16 gathers: the fp32 master weights on the host too, the device keeping
  # their bf16 rounding (train/zero.h)
  add_test(NAME op_cuda_emu_step_offload_bf16g COMMAND bench_gpu_step_emu --dtype bf16
    --offload 1 --gather-dtype bf16 ${mt_step_tiny})
  # ZeRO's collectives as device copies (--comm self, mt_comm_self_device) instead of NCCL: the
  # single-GPU step where NCCL is missing or fails (launch/gpu-check.sh); bf16 gathers, so the
  # one-rank slots are not aliased to the shards and the all-gathers really copy; then the
  # decode benchmark through those gathers (--decode, launch/gpu-check.sh's RESULT decode)
  add_test(NAME op_cuda_emu_step_comm_self COMMAND bench_gpu_step_emu --dtype bf16 --comm self
    --gather-dtype bf16 ${mt_step_tiny} --decode 3 --decode-batch 2)
  set_tests_properties(op_cuda_emu_step_comm_self PROPERTIES
    PASS_REGULAR_EXPRESSION "RESULT decode B=1: .*RESULT decode B=2: .*RESULT check bf16: pass")
  set_tests_properties(op_cuda_emu_step op_cuda_emu_step_bf16 op_cuda_emu_step_bf16_d64
    op_cuda_emu_step_recompute op_cuda_emu_step_offload op_cuda_emu_step_offload_bf16g
    op_cuda_emu_step_comm_self PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV}" TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME op_cuda_emu_cublas_grouped COMMAND test_emu_cublas)
  # GEMMs queued on two created streams at once that touch the same output: stopped as a race
  add_test(NAME op_cuda_emu_cublas_race COMMAND sh -c "\"$0\" race 2>&1; true"
    $<TARGET_FILE:test_emu_cublas>)
  set_tests_properties(op_cuda_emu_cublas_race PROPERTIES PASS_REGULAR_EXPRESSION
    "shared inputs on two streams: no race.*GEMM queued on one created stream reads bytes .* that a GEMM still queued on another writes: a race on a GPU")
  add_test(NAME op_cuda_emu_bench COMMAND bench_gpu_ops_emu all 1 64)
  # the MSA benchmark (launch/gpu-check.sh's bench_msa) at T = 256, block 16: topk 16 covers
  # every block
  add_test(NAME op_cuda_emu_bench_msa COMMAND bench_gpu_ops_emu msa 1 128)
  set_tests_properties(op_cuda_emu_bench op_cuda_emu_bench_msa PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV}" TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  foreach(op ${mt_gpu_ops})
    add_test(NAME op_cuda_emu_${op} COMMAND test_gpu_ops_emu gpu_${op})
    set_tests_properties(op_cuda_emu_${op} PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
      SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  # cuDNN's version guards (kernels/cuda/attention_cudnn.cu) under a faked version: 9.14 builds
  # the dense backwards with cudnn-frontend's padding-mask workaround, 9.10.1 is refused
  foreach(ver 91400 91001)
    add_test(NAME op_cuda_emu_attention_cudnn_v${ver} COMMAND test_gpu_ops_emu gpu_attention_cudnn)
    set_tests_properties(op_cuda_emu_attention_cudnn_v${ver} PROPERTIES
      ENVIRONMENT "${MT_TEST_ENV};MT_EMU_CUDNN_VERSION=${ver}" SKIP_RETURN_CODE 77 TIMEOUT 300
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  # Label `heavy`: the emulator's longest runs (minutes under ASan on 2 cores), left out of CI's
  # sanitizer pass (.ci/run: ctest -LE heavy) and run in its normal pass; their code runs under
  # the sanitizers in the smaller op_cuda_emu_* cases (every kernel, every op, the step).
  set_tests_properties(op_cuda_emu_bench op_cuda_emu_determinism PROPERTIES LABELS heavy)
  # lightning's bf16 case through the GEMM form (MT_LIGHTNING_FUSED=0) instead of the fused
  # kernels that D = 64 and 128 take by default (kernels/cuda/lightning_fused.cu)
  add_test(NAME op_cuda_emu_lightning_bf16_gemm COMMAND test_gpu_ops_emu gpu_lightning_bf16)
  set_tests_properties(op_cuda_emu_lightning_bf16_gemm PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_LIGHTNING_FUSED=0" SKIP_RETURN_CODE 77 TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # the flash backward's dq summed by atomics inside the kv kernel (MT_ATTENTION_DETERMINISTIC=0)
  # instead of the fixed-order dq kernel (kernels/cuda/attention_flash.cu); a bad value is refused
  add_test(NAME op_cuda_emu_attention_bf16_atomic COMMAND test_gpu_ops_emu gpu_attention_bf16)
  set_tests_properties(op_cuda_emu_attention_bf16_atomic PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_ATTENTION_DETERMINISTIC=0" SKIP_RETURN_CODE 77 TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME op_cuda_emu_attention_deterministic_bad COMMAND test_gpu_ops_emu
    gpu_attention_bf16)
  set_tests_properties(op_cuda_emu_attention_deterministic_bad PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_ATTENTION_DETERMINISTIC=yes"
    PASS_REGULAR_EXPRESSION "MT_ATTENTION_DETERMINISTIC=yes: expected 0 \\(dq by atomics\\) or 1"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # the bf16 experts' GEMMs with one GEMM lane (the default stream) instead of the default four
  # concurrent ones (kernels/cuda/moe_experts.cu); a malformed lane count is refused by name
  add_test(NAME op_cuda_emu_moe_experts_bf16_lanes1 COMMAND test_gpu_ops_emu gpu_moe_experts_bf16)
  set_tests_properties(op_cuda_emu_moe_experts_bf16_lanes1 PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_GEMM_LANES=1" SKIP_RETURN_CODE 77 TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # an expert id outside [0, E) ends the run naming the first bad position (a death test: its
  # case is named death_*, so launch/gpu-check.sh, which runs every gpu_* case of test_gpu_ops
  # as a step that must pass, does not count its intended death as a failure)
  add_test(NAME op_cuda_emu_moe_bad_id COMMAND test_gpu_ops_emu death_moe_bad_id)
  set_tests_properties(op_cuda_emu_moe_bad_id PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
    PASS_REGULAR_EXPRESSION "moe_experts: idx\\[5,1\\] = 6 is outside \\[0,6\\)"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # the MSA selection on one thread block (MT_MSA_SELECT_BLOCKS=1): the block loops over every
  # query tile, reusing its scratch row of block scores
  add_test(NAME op_cuda_emu_msa_select_blocks1 COMMAND test_gpu_ops_emu gpu_msa)
  set_tests_properties(op_cuda_emu_msa_select_blocks1 PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_MSA_SELECT_BLOCKS=1;MT_GPU_COMPARE_ONLY=select$"
    SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # the MSA ops with queries apart from keys alone (q_slot: a context-parallel rank's rows
  # against the row's gathered keys; the "msa slots" shapes of tests/gpu/gpu_msa.c)
  add_test(NAME op_cuda_emu_msa_slots COMMAND test_gpu_ops_emu gpu_msa)
  set_tests_properties(op_cuda_emu_msa_slots PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_GPU_COMPARE_ONLY=^msa slots C"
    SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME op_cuda_emu_msa_select_blocks_bad COMMAND test_gpu_ops_emu gpu_msa)
  set_tests_properties(op_cuda_emu_msa_select_blocks_bad PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_MSA_SELECT_BLOCKS=0"
    PASS_REGULAR_EXPRESSION "MT_MSA_SELECT_BLOCKS=0: expected a whole number from 1 to 1024"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # the MSA ops' row and selection checks on the device (the error flag) name the bad position
  # (death tests, named death_* as above)
  add_test(NAME op_cuda_emu_msa_bad_pos COMMAND test_gpu_ops_emu death_msa_bad_pos)
  set_tests_properties(op_cuda_emu_msa_bad_pos PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
    PASS_REGULAR_EXPRESSION "msa_select \\(cuda\\): pos\\[0,6\\] breaks the row rule"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME op_cuda_emu_msa_bad_idx COMMAND test_gpu_ops_emu death_msa_bad_idx)
  set_tests_properties(op_cuda_emu_msa_bad_idx PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
    PASS_REGULAR_EXPRESSION "msa_attention \\(cuda\\): idx\\[0,1,9,:\\] is not distinct blocks"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME op_cuda_emu_gemm_lanes_bad COMMAND test_gpu_ops_emu gpu_moe_experts_bf16)
  set_tests_properties(op_cuda_emu_gemm_lanes_bad PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_GEMM_LANES=4x" WILL_FAIL FALSE
    PASS_REGULAR_EXPRESSION "MT_CUDA_GEMM_LANES=4x: expected a whole number of lanes from 1 to 16"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # Strict emulation (MT_EMU_STRICT=1, tests/cuda_emu/emu.cpp): the same cases with the
  # block's threads and the grid's blocks in reverse order, the highest thread always running on,
  # shared memory poisoned at each block start and cudaMalloc memory at allocation, and one
  # __syncthreads per barrier. A missing barrier, a read of uninitialised shared or device
  # memory or a divergent barrier changes the values or stops the run here, where the default
  # order can hide it (docs/cuda.md, "What is verified").
  # (gpu_determinism sets the order itself: not repeated here)
  foreach(op ${mt_gpu_ops} lightning_bf16_gemm)
    if(op STREQUAL determinism)
      continue()
    endif()
    string(REGEX REPLACE "_gemm$" "" case ${op})
    add_test(NAME op_cuda_emu_strict_${op} COMMAND test_gpu_ops_emu gpu_${case})
    set(env "${MT_TEST_ENV};MT_EMU_STRICT=1")
    if(op STREQUAL lightning_bf16_gemm)
      set(env "${env};MT_LIGHTNING_FUSED=0")
    endif()
    set_tests_properties(op_cuda_emu_strict_${op} PROPERTIES ENVIRONMENT "${env}"
      SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  add_test(NAME op_cuda_emu_strict_step COMMAND bench_gpu_step_emu ${mt_step_tiny})
  add_test(NAME op_cuda_emu_strict_step_bf16_d64 COMMAND bench_gpu_step_emu --dtype bf16
    --fused-loss 0 --hidden 64 --heads 4 --kv-heads 2 --head-dim 64 --experts 4 --ffn 64
    --vocab 256 --seq 96 --block 32 --steps 2 --warmup 1 --check)
  set_tests_properties(op_cuda_emu_strict_step op_cuda_emu_strict_step_bf16_d64 PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_EMU_STRICT=1" TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

  # no device: the probe must report none and the cases must skip, not fail
  add_test(NAME op_cuda_emu_no_device COMMAND test_gpu_ops_emu gpu_matmul)
  set_tests_properties(op_cuda_emu_no_device PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_EMU_NO_DEVICE=1" SKIP_RETURN_CODE 0 WILL_FAIL FALSE
    PASS_REGULAR_EXPRESSION "SKIP gpu_matmul")
endif()

# Generation on the CUDA backend (tests/gpu/gpu_generate.sh): minimax-generate --backend cuda equals
# the CPU backend token for token; gpu_generate on a GPU (skipped without one), and
# op_cuda_emu_generate with minimax-generate-emu on the emulator.
add_test(NAME gpu_generate COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_generate.sh
  $<TARGET_FILE:minimax-generate> $<TARGET_FILE:minimax-generate>)
set_tests_properties(gpu_generate PROPERTIES ENVIRONMENT "${MT_TEST_ENV}" SKIP_RETURN_CODE 77
  TIMEOUT 300)
if(TARGET minimax-generate-emu)
  add_test(NAME op_cuda_emu_generate COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_generate.sh
    $<TARGET_FILE:minimax-generate> $<TARGET_FILE:minimax-generate-emu>)
  set_tests_properties(op_cuda_emu_generate PROPERTIES ENVIRONMENT "${MT_TEST_ENV}" TIMEOUT 600)
endif()
if(TARGET minimax-eval-emu)
  add_test(NAME op_cuda_emu_eval COMMAND test_eval_minimax_eval eval_minimax_eval_device)
  set_tests_properties(op_cuda_emu_eval PROPERTIES TIMEOUT 600 ENVIRONMENT
    "${MT_TEST_ENV};MT_EVAL_CLI=$<TARGET_FILE:minimax-eval>;MT_EVAL_CLI_DEVICE=$<TARGET_FILE:minimax-eval-emu>;${MT_TEST_ENV_MPIEXEC};MT_NCCL_ALLOW_SHARED_DEVICE=1;${MT_TEST_ENV_MPI}")
  add_test(NAME op_cuda_emu_serve COMMAND test_serve serve_device)
  set_tests_properties(op_cuda_emu_serve PROPERTIES TIMEOUT 600 ENVIRONMENT
    "${MT_TEST_ENV};MT_SERVE_CLI_DEVICE=$<TARGET_FILE:minimax-serve-emu>;MT_GENERATE_CLI=$<TARGET_FILE:minimax-generate>;MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>;MT_FORWARD_CLI=$<TARGET_FILE:minimax-forward>")
  add_test(NAME op_cuda_emu_chat COMMAND test_eval_minimax_chat eval_minimax_chat_device)
  set_tests_properties(op_cuda_emu_chat PROPERTIES TIMEOUT 600 ENVIRONMENT
    "${MT_TEST_ENV};MT_CHAT_CLI=$<TARGET_FILE:minimax-chat>;MT_CHAT_CLI_DEVICE=$<TARGET_FILE:minimax-chat-emu>")
endif()
