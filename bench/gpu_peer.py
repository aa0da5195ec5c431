#!/usr/bin/env python3
"""gpu_peer.py: the PyTorch peer of the GPU benchmarks (docs/benchmarks.md, "GPU peer"), run by
launch/gpu-check.sh right after bench-gpu-ops and bench-gpu-step, on the same GPU, with the same
shapes and FLOP conventions, so that the summary can print minimax-train / PyTorch ratios.

    python3 bench/gpu_peer.py [--only attention,lightning,moe,step] [--reps N] [--peak TF]
    python3 bench/gpu_peer.py --device cpu --tiny     # a smoke test of the code paths

What each part times (bf16 operands, fp32 accumulation; CUDA events; median of --reps after a
warm-up; fresh random inputs, never zeros):
  attention  torch.nn.functional.scaled_dot_product_attention, causal, GQA at MiniMax-Text-01's
             shape (B=1, H=64, Hkv=8, D=128), forward + backward at T = 4096 and 8192, twice:
             key "attention" on torch's FlashAttention-2 backend (the peer of the project's
             flash kernels) and key "attention-cudnn" on torch's cuDNN backend (the peer of its
             cuDNN path: the same library, so the ratio is the project's overhead around it);
             either falls back to torch's default choice where this torch lacks that backend
             (the line says which ran). FLOPs as bench-gpu-ops: forward 4*(T^2/2)*D*H, backward
             2.5x.
  lightning  lightning attention written the way a PyTorch user would (intra-block products for
             all blocks in one batched matmul, the D x D state carried across blocks in a Python
             loop, fp32 state), forward + backward through autograd, B*H = 16, D = 128, block
             256, T = 2k, 8k, 32k. FLOPs as bench-gpu-ops: forward 2*block*D + 4*D^2 per
             position and head, backward 2x.
  moe        transformers' MiniMaxSparseMoeBlock (router, top-2 of 32 experts, SwiGLU experts,
             combine), N = 4096 tokens, C = 2048, F = 3072, forward + backward, bf16 parameters.
  step       transformers' MiniMaxForCausalLM at bench-gpu-step's default shape (C 2048, 2 layers:
             lightning then softmax, H 16 x D 128, Hkv 8, rotary 64, 32 experts top-2, F 2048,
             V 200064, block 256, B 1, T 4096): fp32 master weights, torch.autocast bf16, AdamW
             (fused), one full step; tokens/s and MFU with bench-gpu-step's FLOP count.
Each result is one line `PEER <key>: <ms> ms ...`; gpu-check.sh pairs it with the `RESULT <key>:`
line of the same key from the project's benchmarks.
"""

import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F


def timer(device):
    """fn -> median ms over reps after warm-up: CUDA events on a GPU, the wall clock on a CPU."""

    def run(fn, reps, warmup=2):
        for _ in range(warmup):
            fn()
        ts = []
        for _ in range(reps):
            if device == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                torch.cuda.synchronize()
                ts.append(a.elapsed_time(b))
            else:
                t = time.perf_counter()
                fn()
                ts.append(1e3 * (time.perf_counter() - t))
        ts.sort()
        return ts[len(ts) // 2]

    return run


def report(key, ms, flops, peak, extra=""):
    tf = flops / (ms * 1e-3) / 1e12 if ms > 0 else 0.0
    print(f"PEER {key}: {ms:.3f} ms, {tf:.2f} TFLOP/s = {100 * tf / peak:.1f}% of peak{extra}", flush=True)


# ---- softmax attention ----------------------------------------------------------------------


def bench_attention(a, run, dev):
    B, H, Hkv, D = (1, 4, 2, 32) if a.tiny else (1, 64, 8, 128)
    Ts = [128, 256] if a.tiny else [4096, 8192]
    for key, want in (("attention", "FLASH_ATTENTION"), ("attention-cudnn", "CUDNN_ATTENTION")):
        for T in Ts:
            q = torch.randn(B, H, T, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(B, Hkv, T, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(B, Hkv, T, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
            do = torch.randn(B, H, T, D, device=dev, dtype=torch.bfloat16)

            def step():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                o.backward(do)

            backend, ctx = "default", None
            if dev == "cuda":
                try:  # the wanted backend when this torch has it for these shapes
                    from torch.nn.attention import SDPBackend, sdpa_kernel

                    with sdpa_kernel([getattr(SDPBackend, want)]):
                        step()
                    backend, ctx = want.split("_")[0].lower(), getattr(SDPBackend, want)
                except (RuntimeError, AttributeError, ImportError):
                    backend = "default"
            if ctx is not None:
                from torch.nn.attention import sdpa_kernel

                with sdpa_kernel([ctx]):
                    ms = run(step, a.reps)
            else:
                ms = run(step, a.reps)
            fwd = 4.0 * (T * T / 2) * D * H * B
            report(f"{key} T={T}", ms, 3.5 * fwd, a.peak, f" (sdpa {backend}, fwd+bwd)")
            del q, k, v, do


# ---- lightning attention --------------------------------------------------------------------


def lightning_torch(q, k, v, lam, L):
    """o_t = sum_{s<=t} exp(-lam (t-s)) q_t.k_s v_s in blocks of L: q, k, v (B,H,T,D), T % L == 0,
    lam (H) fp32. Intra-block part batched over all blocks; the fp32 state across blocks."""
    B, H, T, D = q.shape
    n = T // L
    qb, kb, vb = (x.reshape(B, H, n, L, D) for x in (q, k, v))
    i = torch.arange(L, device=q.device, dtype=torch.float32)
    lam4 = lam.view(1, H, 1, 1)
    diff = i.view(L, 1) - i.view(1, L)
    mask = torch.where(diff >= 0, torch.exp(-lam4 * diff.clamp(min=0)), torch.zeros((), device=q.device))
    s = torch.matmul(qb, kb.transpose(-1, -2))  # (B,H,n,L,L)
    o = torch.matmul((s.float() * mask.unsqueeze(2)).to(q.dtype), vb)
    kdec = torch.exp(-lam4 * (L - 1 - i).view(1, 1, L, 1)).unsqueeze(2)  # to the block end
    qdec = torch.exp(-lam4 * (i + 1).view(1, 1, L, 1)).unsqueeze(2)  # from the previous end
    kv = torch.matmul((kb.float() * kdec).to(q.dtype).transpose(-1, -2), vb).float()  # (B,H,n,D,D)
    gamma = torch.exp(-lam * L).view(1, H, 1, 1)
    state = torch.zeros(B, H, D, D, device=q.device, dtype=torch.float32)
    states = []
    for b in range(n):
        states.append(state)
        state = gamma * state + kv[:, :, b]
    S = torch.stack(states, 2)  # state before each block
    inter = torch.matmul((qb.float() * qdec).to(q.dtype), S.to(q.dtype))
    return (o.float() + inter.float()).reshape(B, H, T, D)


def bench_lightning(a, run, dev):
    B, H, D, L = 1, 16, 128, 256
    Ts = [512, 1024] if a.tiny else [2048, 8192, 32768]
    if a.tiny:
        D, L = 32, 64
    lam = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device=dev)
    prev = None
    for T in Ts:
        q, k, v = (
            (0.1 * torch.randn(B, H, T, D, device=dev)).to(torch.bfloat16).requires_grad_()
            for _ in range(3)
        )
        do = torch.randn(B, H, T, D, device=dev)

        def step():
            lightning_torch(q, k, v, lam, L).backward(do)

        ms = run(step, a.reps)
        fwd = (2.0 * L * D + 4.0 * D * D) * T * H * B
        ratio = f", x{ms / prev:.2f} per 4x T" if prev and T == 4 * Ts[Ts.index(T) - 1] else ""
        report(f"lightning T={T}", ms, 3.0 * fwd, a.peak, f" (torch chunked, fwd+bwd{ratio})")
        prev = ms


# ---- MoE layer ------------------------------------------------------------------------------


def bench_moe(a, run, dev):
    from transformers import MiniMaxConfig
    from transformers.models.minimax.modeling_minimax import MiniMaxSparseMoeBlock

    N, C, Fd, E, K = (256, 128, 192, 8, 2) if a.tiny else (4096, 2048, 3072, 32, 2)
    cfg = MiniMaxConfig(hidden_size=C, intermediate_size=Fd, num_local_experts=E, num_experts_per_tok=K)
    # what a model built by transformers picks: grouped_mm (torch's grouped GEMM) where it runs
    grouped = dev == "cuda" and (hasattr(F, "grouped_mm") or hasattr(torch, "_grouped_mm"))
    cfg._experts_implementation = "grouped_mm" if grouped else "eager"
    with torch.device(dev):
        blk = MiniMaxSparseMoeBlock(cfg).to(torch.bfloat16)
    for p in blk.parameters():
        torch.nn.init.normal_(p, std=0.02)
    x = torch.randn(1, N, C, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(1, N, C, device=dev, dtype=torch.bfloat16)

    def step():
        out = blk(x)
        (out[0] if isinstance(out, tuple) else out).backward(dy)

    ms = run(step, a.reps)
    flops = 3 * 2.0 * N * K * 3 * Fd * C  # expert GEMMs only, as bench-gpu-ops counts them
    impl = cfg._experts_implementation
    report("moe", ms, flops, a.peak, f" (transformers MiniMaxSparseMoeBlock, experts {impl}, fwd+bwd)")


# ---- full training step ---------------------------------------------------------------------


def bench_step(a, run, dev):
    from transformers import MiniMaxConfig, MiniMaxForCausalLM

    if a.tiny:
        C, H, Hkv, D, E, K, Fd, V, T, L = 128, 4, 2, 32, 4, 2, 128, 512, 128, 32
    else:
        C, H, Hkv, D, E, K, Fd, V, T, L = 2048, 16, 8, 128, 32, 2, 2048, 200064, 4096, 256
    B, layers = 1, 2
    cfg = MiniMaxConfig(
        vocab_size=V, hidden_size=C, intermediate_size=Fd, num_hidden_layers=layers,
        num_attention_heads=H, num_key_value_heads=Hkv, head_dim=D, partial_rotary_factor=0.5,
        num_local_experts=E, num_experts_per_tok=K, block_size=L,
        layer_types=["linear_attention", "full_attention"], max_position_embeddings=T,
        output_router_logits=False, tie_word_embeddings=False,
    )
    cfg._attn_implementation = "sdpa"
    with torch.device(dev):
        model = MiniMaxForCausalLM(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=dev == "cuda")
    ids = torch.randint(0, V, (B, T), device=dev)

    def step():
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    ms = run(step, max(3, a.reps), warmup=2)

    def fwd_bwd():  # the same without the optimizer (bench-gpu-step's "fwd+bwd" key)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    ms_fb = run(fwd_bwd, max(3, a.reps), warmup=1)
    # bench-gpu-step's count: 6 x active matmul parameters + attention terms, per token
    lin = 5 * H * D * C
    soft = (2 * H * D + 2 * Hkv * D) * C
    moe = E * C + 3 * K * Fd * C
    n_active = V * C + 2 * moe + lin + soft
    per_tok = 6.0 * n_active + 3 * 2 * 2 * (T / 2) * D * H + 3 * H * (2 * min(L, T) * D + 4 * D * D)
    flops = per_tok * B * T
    tf = flops / (ms * 1e-3) / 1e12
    print(
        f"PEER step bf16: {ms:.2f} ms, {B * T / (ms * 1e-3):.0f} tokens/s, {tf:.3g} TFLOP/s, "
        f"MFU {100 * tf / a.peak:.3g}% (transformers MiniMaxForCausalLM, autocast bf16, fused AdamW, "
        f"experts {getattr(model.config, '_experts_implementation', '?')}, attention sdpa)",
        flush=True,
    )
    tf_fb = flops / (ms_fb * 1e-3) / 1e12
    print(f"PEER step bf16 fwd+bwd: {ms_fb:.2f} ms, {tf_fb:.3g} TFLOP/s, MFU {100 * tf_fb / a.peak:.3g}%",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="attention,lightning,moe,step")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--peak", type=float, default=989.4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="small shapes (a smoke test)")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("SKIP gpu_peer: torch sees no CUDA device")
        return 77
    import transformers

    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"== PyTorch peer: torch {torch.__version__}, transformers {transformers.__version__}, {name}")
    torch.manual_seed(0)
    run = timer(a.device)
    parts = dict(attention=bench_attention, lightning=bench_lightning, moe=bench_moe, step=bench_step)
    rc = 0
    for p in a.only.split(","):
        try:
            parts[p](a, run, a.device)
        except Exception as e:  # one part failing (memory, an old transformers) keeps the others
            print(f"PEER {p}: FAILED ({type(e).__name__}: {str(e).splitlines()[0][:200]})", flush=True)
            rc = 1
        if a.device == "cuda":
            torch.cuda.empty_cache()
    return rc


if __name__ == "__main__":
    sys.exit(main())
