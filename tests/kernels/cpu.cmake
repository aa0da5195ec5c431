# The CPU kernels' own math: expf and the sigmoid against double libm (kernels/cpu/cpu_math.h).
mt_test_binary(test_op_cpu_math kernels/op_cpu_math.c)
mt_test_cases(test_op_cpu_math op_cpu_expf op_cpu_sigmoid op_cpu_exp)
# The inference GEMM of a few rows (kernels/cpu/gemm_rows.c): accuracy and row invariance.
mt_test_binary(test_op_gemm_rows kernels/op_gemm_rows.c)
mt_test_cases(test_op_gemm_rows op_gemm_rows)
# The tile products in registers (kernels/cpu/gemm_small.c): accuracy, layouts, row invariance.
mt_test_binary(test_op_gemm_small kernels/op_gemm_small.c)
mt_test_cases(test_op_gemm_small op_gemm_small)
