/* rope.cu: partial NeoX rotary embedding (spec section 5.1), forward and backward.
 * Node (autograd/op_attention.c): in[0] x (B,T,H,D), in[1] pos (B,T) I32; ip[0] rotary_dim,
 * fp[0] theta. Each head's first rotary_dim dims are rotated as rotate_half pairs
 * (j, j + rotary_dim/2), the rest pass through.
 * The angles follow the CPU reference (kernels/cpu/rope.c), which follows HF in fp32: the
 * host computes inv_freq with the CPU's own function and passes it by value; each thread forms
 * the fp32 angle (float)pos * inv_freq and rounds the double cos/sin of it to fp32. */
#include "cuda_ops.cuh"
extern "C" {
#include "../cpu/attention.h"
}

typedef struct {
    float inv_freq[CPU_ROPE_MAX_ROTARY / 2];
} rope_freqs;

/* One thread per element (n, h, d) of (N,H,D), N = B*T. */
__global__ void rope_fwd_kernel(float *y, const float *x, const int32_t *pos, int64_t N, int H,
                                int D, int rot, const rope_freqs f) {
    const int half = rot / 2;
    CUDA_FOR(i, N * H * D) {
        int d = (int)(i % D);
        int64_t n = i / ((int64_t)H * D);
        const float *xh = x + (i - d);
        if (d >= rot) {
            y[i] = x[i];
            continue;
        }
        int j = d < half ? d : d - half;
        float angle = (float)pos[n] * f.inv_freq[j];
        float c = (float)cos((double)angle), s = (float)sin((double)angle);
        float x1 = xh[j], x2 = xh[j + half];
        /* HF order: (x * cos) + (rotate_half(x) * sin), each product rounded in fp32 (the
         * _rn intrinsics keep nvcc from contracting them into an fma) */
        y[i] = d < half ? __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s))
                        : __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
}

/* dx += R(pos)^T dy: the transpose of [[c, -s], [s, c]]; passthrough dims add dy. */
__global__ void rope_bwd_kernel(float *dx, const float *dy, const int32_t *pos, int64_t N, int H,
                                int D, int rot, const rope_freqs f) {
    const int half = rot / 2;
    CUDA_FOR(i, N * H * D) {
        int d = (int)(i % D);
        int64_t n = i / ((int64_t)H * D);
        const float *dyh = dy + (i - d);
        if (d >= rot) {
            dx[i] += dy[i];
            continue;
        }
        int j = d < half ? d : d - half;
        float angle = (float)pos[n] * f.inv_freq[j];
        float c = (float)cos((double)angle), s = (float)sin((double)angle);
        float g1 = dyh[j], g2 = dyh[j + half];
        dx[i] += d < half ? g1 * c + g2 * s : g2 * c - g1 * s;
    }
}

static void rope_setup(const mt_node *n, rope_freqs *f, int64_t *N, int *H, int *D, int *rot) {
    const mt_tensor *x = n->in[0];
    *N = x->shape[0] * x->shape[1];
    *H = (int)x->shape[2];
    *D = (int)x->shape[3];
    *rot = (int)n->ip[0];
    MT_CHECK(*rot > 0 && *rot % 2 == 0 && *rot <= *D && *rot <= CPU_ROPE_MAX_ROTARY,
             "rope: rotary_dim %d must be even, in (0, D=%d] and <= %d", *rot, *D,
             CPU_ROPE_MAX_ROTARY);
    cpu_rope_inv_freq(f->inv_freq, *rot, n->fp[0]);
}

void cuda_rope_fwd_node(const mt_node *n) {
    rope_freqs f;
    int64_t N;
    int H, D, rot;
    rope_setup(n, &f, &N, &H, &D, &rot);
    int64_t count = N * H * D;
    if (count == 0) return;
    rope_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_i32(n->in[1]), N, H, D, rot, f);
    CUDA_LAUNCH_CHECK("rope forward");
}

void cuda_rope_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    if (!x->grad) return;
    rope_freqs f;
    int64_t N;
    int H, D, rot;
    rope_setup(n, &f, &N, &H, &D, &rot);
    int64_t count = N * H * D;
    if (count == 0) return;
    rope_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(x), cuda_grad(n->out), cuda_i32(n->in[1]), N, H, D, rot, f);
    CUDA_LAUNCH_CHECK("rope backward");
}
