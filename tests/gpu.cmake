# GPU parity tests (tests/gpu_ops.c): every CUDA op against the CPU reference on the same inputs,
# forward, saved buffers and backward, fp32 to 1e-5 relative. Registered in every build so
# `ctest -N` lists them: without -DMT_CUDA=ON ("CUDA backend not built") or without a usable
# device they exit 77 and ctest reports them as skipped. The binary is plain C through the
# backend table, so the same source builds in both configurations; op_gpu_harness runs the
# comparisons with the CPU backend standing in for the device (a check of the test itself).
mt_test_binary(test_gpu_ops gpu_ops.c)
mt_test_cases(test_gpu_ops gpu_view gpu_embedding gpu_matmul gpu_rmsnorm gpu_silu gpu_sigmoid
  gpu_swiglu gpu_add gpu_mul gpu_scale gpu_axpby gpu_rope gpu_attention gpu_lightning
  gpu_moe_route gpu_moe_experts gpu_moe_aux gpu_cross_entropy op_gpu_harness)
if(MT_CUDA)
  # synchronise after every kernel so a fault names its op; print the device once
  set_tests_properties(gpu_view gpu_embedding gpu_matmul gpu_rmsnorm gpu_silu gpu_sigmoid
    gpu_swiglu gpu_add gpu_mul gpu_scale gpu_axpby gpu_rope gpu_attention gpu_lightning
    gpu_moe_route gpu_moe_experts gpu_moe_aux gpu_cross_entropy PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_SYNC=1;MT_CUDA_VERBOSE=1")
endif()

# ---- the same tests with the CUDA kernels on the CPU emulator (kernels/cuda/emu) ----
# Every build, no GPU needed: each kernels/cuda/*.cu is compiled as C++ against the emulator's
# cuda_runtime.h / cublas_v2.h, with `kernel<<<grid, block>>>(args)` rewritten to
# `emu_launcher(kernel, grid, block)(args)`, and linked with its own copy of the C library
# sources (not with mt, which in a CUDA build holds the real kernels). ctest op_cuda_emu_<op>
# runs case gpu_<op> against it: indexing, node semantics, reductions, launch geometry and the
# cuBLAS mapping are checked; races, timing and device math are not (docs/cuda.md).
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(mt_emu_dir ${CMAKE_BINARY_DIR}/cuda-emu)
  file(GLOB mt_emu_cu CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
  set(mt_emu_srcs "")
  foreach(cu ${mt_emu_cu})
    get_filename_component(base ${cu} NAME_WE)
    file(READ ${cu} text)
    string(REGEX REPLACE "([A-Za-z_][A-Za-z_0-9]*)<<<([^>]*)>>>" "emu_launcher(\\1, \\2)" text
      "${text}")
    file(WRITE ${mt_emu_dir}/${base}.cpp.new "#line 1 \"${cu}\"\n${text}")
    configure_file(${mt_emu_dir}/${base}.cpp.new ${mt_emu_dir}/${base}.cpp COPYONLY)
    list(APPEND mt_emu_srcs ${mt_emu_dir}/${base}.cpp)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${cu})
  endforeach()
  file(GLOB mt_emu_c CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/autograd/*.c
    ${CMAKE_SOURCE_DIR}/kernels/*.c ${CMAKE_SOURCE_DIR}/kernels/cpu/*.c)
  # the benchmark too, as a smoke run of its code path
  set(bench_cu ${CMAKE_SOURCE_DIR}/bench/gpu_ops.cu)
  file(READ ${bench_cu} text)
  string(REGEX REPLACE "([A-Za-z_][A-Za-z_0-9]*)<<<([^>]*)>>>" "emu_launcher(\\1, \\2)" text
    "${text}")
  file(WRITE ${mt_emu_dir}/bench_gpu_ops.cpp.new "#line 1 \"${bench_cu}\"\n${text}")
  configure_file(${mt_emu_dir}/bench_gpu_ops.cpp.new ${mt_emu_dir}/bench_gpu_ops.cpp COPYONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${bench_cu})

  add_library(mt_emu_objs OBJECT harness.c ${mt_emu_c} ${mt_emu_srcs}
    ${CMAKE_SOURCE_DIR}/kernels/cuda/emu/emu.cpp)
  add_executable(test_gpu_ops_emu gpu_ops.c $<TARGET_OBJECTS:mt_emu_objs>)
  add_executable(bench_gpu_ops_emu ${mt_emu_dir}/bench_gpu_ops.cpp $<TARGET_OBJECTS:mt_emu_objs>)
  foreach(t mt_emu_objs test_gpu_ops_emu bench_gpu_ops_emu)
    target_compile_definitions(${t} PRIVATE MT_WITH_CUDA)
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas>)
    target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cuda/emu
      ${CMAKE_SOURCE_DIR}/kernels/cuda ${CMAKE_SOURCE_DIR} ${CBLAS_INCLUDE_DIR})
    set_target_properties(${t} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
      CXX_EXTENSIONS OFF)
    target_link_libraries(${t} PRIVATE BLAS::BLAS OpenMP::OpenMP_C m)
  endforeach()
  add_test(NAME op_cuda_emu_bench COMMAND bench_gpu_ops_emu all 1 64)
  set_tests_properties(op_cuda_emu_bench PROPERTIES ENVIRONMENT "${MT_TEST_ENV}" TIMEOUT 300
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  foreach(op view embedding matmul rmsnorm silu sigmoid swiglu add mul scale axpby rope attention
      lightning moe_route moe_experts moe_aux cross_entropy)
    add_test(NAME op_cuda_emu_${op} COMMAND test_gpu_ops_emu gpu_${op})
    set_tests_properties(op_cuda_emu_${op} PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
      SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  # no device: the probe must report none and the cases must skip, not fail
  add_test(NAME op_cuda_emu_no_device COMMAND test_gpu_ops_emu gpu_matmul)
  set_tests_properties(op_cuda_emu_no_device PROPERTIES
    ENVIRONMENT "${MT_TEST_ENV};MT_CUDA_EMU_NO_DEVICE=1" SKIP_RETURN_CODE 0 WILL_FAIL FALSE
    PASS_REGULAR_EXPRESSION "SKIP gpu_matmul")
endif()
