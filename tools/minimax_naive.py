"""minimax_naive.py: a direct float64 PyTorch transcription of the MiniMax-Text-01 math
(docs/parity.md, spec sections 2-7), used by make_fixtures.py only to cross-check the
reference outputs it records. It is written from the formulas, not from any model code:
lightning attention as the O(T^2) decayed sum, softmax attention with an explicit partial
NeoX RoPE, MoE with softmax -> top-k -> renormalise. Two semantic variants:

  variant="hf"        transformers 5.24: slope factor 1 - l/(L-1+1e-5) + 1e-5, base**(h+1) slopes
  variant="original"  original remote code: slope factor 1 - l/(L-1) + 1e-5, ALiBi get_slopes

The RoPE width is an argument (rotary_dim); transformers 5.24 rotates the whole head.
Weights are a dict of transformers v4.5x names -> tensors.
"""

import math

import torch


def alibi_slopes(n):
    """ALiBi slopes as the original release builds them (interleave for non powers of two)."""

    def pow2(m):
        start = 2.0 ** (-(2.0 ** -(math.log2(m) - 3)))
        return [start * start**i for i in range(m)]

    if math.log2(n).is_integer():
        return pow2(n)
    p = 2 ** math.floor(math.log2(n))
    return pow2(p) + alibi_slopes(2 * p)[0::2][: n - p]


def decay_rates(variant, num_heads, layer, num_layers):
    """lambda per head for one layer (float64)."""
    if variant == "hf":
        base = 1.0 / (2.0 ** (8.0 / num_heads))
        s = [base ** (h + 1) for h in range(num_heads)]
        f = 1.0 - layer / (num_layers - 1 + 1e-5) + 1e-5
    elif variant == "original":
        s = alibi_slopes(num_heads)
        f = (1.0 - layer / (num_layers - 1) + 1e-5) if num_layers > 1 else 1.0 + 1e-5
    else:
        raise ValueError(variant)
    return torch.tensor(s, dtype=torch.float64) * f


def rmsnorm(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def lightning(q, k, v, lam):
    """o_t = sum_{s<=t} exp(-lam (t-s)) (q_t . k_s) v_s. q,k,v (B,H,T,D), lam (H)."""
    T = q.shape[2]
    t = torch.arange(T, dtype=torch.float64)
    dist = t[:, None] - t[None, :]
    mask = dist >= 0
    m = torch.exp(-lam[:, None, None] * dist.clamp(min=0)) * mask  # (H,T,T)
    return ((q @ k.transpose(-1, -2)) * m) @ v


def rope(x, pos, rotary_dim, theta):
    """Partial NeoX RoPE on x (B,T,H,D): first rotary_dim dims as rotate_half pairs."""
    half = rotary_dim // 2
    inv = theta ** (-(torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    ang = pos.to(torch.float64)[:, :, None] * inv  # (B,T,half)
    cos = torch.cos(ang)[:, :, None, :]
    sin = torch.sin(ang)[:, :, None, :]
    x1, x2, rest = x[..., :half], x[..., half:rotary_dim], x[..., rotary_dim:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def forward(w, cfg, ids, labels=None, variant="hf", rotary_dim=None):
    """cfg: dict with the transformers-style keys. Returns (logits, loss, aux) in float64."""
    B, T = ids.shape
    C = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg["num_key_value_heads"]
    D = cfg["head_dim"]
    L = cfg["num_hidden_layers"]
    E = cfg["num_local_experts"]
    K = cfg["num_experts_per_tok"]
    eps = cfg["rms_norm_eps"]
    theta = cfg["rope_parameters"]["rope_theta"]
    rot = rotary_dim if rotary_dim is not None else D
    pos = torch.arange(T)[None, :].expand(B, T)
    x = w["model.embed_tokens.weight"][ids]
    router_logits = []
    for layer in range(L):
        p = f"model.layers.{layer}."
        kind = cfg["layer_types"][layer]
        h1 = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        if kind == "linear_attention":
            qkv = torch.nn.functional.silu(h1 @ w[p + "self_attn.qkv_proj.weight"].T)
            qkv = qkv.view(B, T, H, 3 * D).transpose(1, 2)
            q, k, v = qkv[..., :D], qkv[..., D : 2 * D], qkv[..., 2 * D :]
            o = lightning(q, k, v, decay_rates(variant, H, layer, L))
            o = o.transpose(1, 2).reshape(B, T, H * D)
            o = rmsnorm(o, w[p + "self_attn.norm.weight"], 1e-6)
            o = torch.sigmoid(h1 @ w[p + "self_attn.output_gate.weight"].T) * o
            a = o @ w[p + "self_attn.out_proj.weight"].T
            alpha, beta = cfg["linear_attn_alpha_factor"], cfg["linear_attn_beta_factor"]
        else:
            q = (h1 @ w[p + "self_attn.q_proj.weight"].T).view(B, T, H, D)
            k = (h1 @ w[p + "self_attn.k_proj.weight"].T).view(B, T, Hkv, D)
            v = (h1 @ w[p + "self_attn.v_proj.weight"].T).view(B, T, Hkv, D)
            q, k = rope(q, pos, rot, theta), rope(k, pos, rot, theta)
            g = H // Hkv
            k = k.repeat_interleave(g, dim=2)
            v = v.repeat_interleave(g, dim=2)
            s = torch.einsum("bthd,bshd->bhts", q, k) * D**-0.5
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            s = s.masked_fill(~causal, float("-inf"))
            pr = torch.softmax(s, dim=-1)
            o = torch.einsum("bhts,bshd->bthd", pr, v).reshape(B, T, H * D)
            a = o @ w[p + "self_attn.o_proj.weight"].T
            alpha, beta = cfg["full_attn_alpha_factor"], cfg["full_attn_beta_factor"]
        y = alpha * h1 + beta * a
        h2 = rmsnorm(y, w[p + "post_attention_layernorm.weight"], eps)
        xs = h2.reshape(B * T, C)
        r = xs @ w[p + "block_sparse_moe.gate.weight"].T
        router_logits.append(r)
        pr = torch.softmax(r, dim=-1)
        top, idx = torch.topk(pr, K, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        m = torch.zeros_like(xs)
        for e in range(E):
            q_ = f"{p}block_sparse_moe.experts.{e}."
            ye = torch.nn.functional.silu(xs @ w[q_ + "w1.weight"].T) * (xs @ w[q_ + "w3.weight"].T)
            ye = ye @ w[q_ + "w2.weight"].T
            wt = (top * (idx == e)).sum(-1, keepdim=True)
            m = m + wt * ye
        x = cfg["mlp_alpha_factor"] * h2 + cfg["mlp_beta_factor"] * m.view(B, T, C)
    hN = rmsnorm(x, w["model.norm.weight"], eps)
    logits = hN @ w["lm_head.weight"].T
    loss = aux = None
    if cfg.get("output_router_logits"):
        rl = torch.cat(router_logits, 0)
        pr = torch.softmax(rl, dim=-1)
        sel = torch.topk(pr, K, dim=-1).indices
        f = torch.nn.functional.one_hot(sel, E).to(torch.float64).mean(0)  # (K,E)
        aux = E * (f * pr.mean(0)[None, :]).sum()
    if labels is not None:
        sl = torch.cat([labels[:, 1:], torch.full((B, 1), -100)], 1).reshape(-1)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), sl)
        if aux is not None:
            loss = loss + cfg["router_aux_loss_coef"] * aux
    return logits, loss, aux
