# The cached forward's extension (tests/models/op_cached_extend.c): a prompt prefilled in chunks gives
# the logits of one prefill, for Text-01 (lightning + softmax), M2 and M3 (MSA, sparse); on the
# CPU backend (op_cached_extend_*), on a GPU (gpu_cached_extend_*, skipped without one) and on
# the CUDA emulator (op_cuda_emu_cached_extend_*; mt_emu from tests/gpu/gpu.cmake, included before
# this fragment).
set(mt_cached_extend text01 m2 m3 window)
mt_test_binary(test_cached_extend models/op_cached_extend.c)
foreach(f ${mt_cached_extend})
  mt_test_cases(test_cached_extend op_cached_extend_${f} gpu_cached_extend_${f})
endforeach()
if(TARGET mt_emu)
  add_executable(test_cached_extend_emu models/op_cached_extend.c support/harness.c)
  target_compile_definitions(test_cached_extend_emu PRIVATE MT_WITH_CUDA MT_CUDA_EMU)
  target_include_directories(test_cached_extend_emu PRIVATE ${CMAKE_SOURCE_DIR}
    ${CBLAS_INCLUDE_DIR})
  target_link_libraries(test_cached_extend_emu PRIVATE mt_emu)
  foreach(f ${mt_cached_extend})
    add_test(NAME op_cuda_emu_cached_extend_${f} COMMAND test_cached_extend_emu
      gpu_cached_extend_${f})
    set_tests_properties(op_cuda_emu_cached_extend_${f} PROPERTIES ENVIRONMENT "${MT_TEST_ENV}"
      SKIP_RETURN_CODE 77 TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
endif()
