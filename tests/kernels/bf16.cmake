# The bf16 GEMM mode's CPU reference (mt_ctx.compute_dtype = MT_BF16): the fp32 -> bf16
# rounding against an independent one, matmul against pre-rounded fp32 operands, moe_experts
# against a double reference, lightning's block form against fp32 (the rounding) and against the
# naive form on exactly representable inputs (the function). The device side is in gpu.cmake (gpu_*_bf16, op_cuda_emu_*_bf16).
mt_test_binary(test_op_bf16 kernels/op_bf16.c)
mt_test_cases(test_op_bf16 op_bf16_round op_matmul_bf16 op_moe_experts_bf16 op_lightning_bf16)
