"""The kernels a PyTorch serving stack runs for each engine op, as plain torch calls: one function per kind of
op, used both by the per-op cases (``cases.py``) and by the whole step (``step.py``), so that the step runs exactly
the kernels the per-op table timed.

Each function states what it launches. Torch is imported inside each one: importing this module costs nothing.

- ``linear``: ``F.linear`` (cuBLAS): ``mm`` for y = x·Wᵀ, ``addmm`` with the bias (cuBLAS adds it in the GEMM's
  epilogue), and, for a residual fused into the projection (``--fuse residual``), ``torch.addmm(res, x, Wᵀ)``:
  cuBLAS's β·C + α·A·B epilogue reads the residual stream and writes the sum in one kernel.
- ``norm_linear``: the project's Triton kernel ``kernels/rmsnorm_linear/`` (RMSNorm in the matmul's prologue,
  the gain folded into W once, as a serving engine does at load time).
- ``rmsnorm``: ``F.rms_norm`` (torch's fused RMSNorm kernel where the build has one).
- ``rope``: Q and K rotated by torch ops, the half-split convention of Hugging Face's ``rotate_half``
  (x₁·cos − x₂·sin, x₂·cos + x₁·sin), the cos and sin rows (N × d/2 each) precomputed: several elementwise
  kernels and a concatenation per tensor, as an eager stack runs it.
- ``kv_write``: K and V copied into a slice of the preallocated cache (two ``copy_`` kernels).
- ``sdpa``: ``F.scaled_dot_product_attention`` with ``enable_gqa=True`` (K and V never repeated per query head);
  torch picks the backend (``sdpa_backend`` names it).
- naive attention: ``qk`` = ``baddbmm`` (cuBLAS, the 1/√d scale as its α, the scores written to HBM), ``softmax`` =
  ``torch.softmax`` over the scores, ``pv`` = ``bmm``. Query heads are grouped by their KV head ([B·g, h/g·T, d]),
  so K and V are read once per KV head, as the engine counts.
- ``gated_act``: ``F.silu(gate) * up`` (two elementwise kernels); ``residual``: ``a + b``; ``embed``:
  ``F.embedding`` (a gather).
"""

from __future__ import annotations

import math
from typing import Any

# RMSNorm's ε (Llama 3's and Qwen2.5's config.json rms_norm_eps are 1e-5 and 1e-6: the time does not depend on it).
EPS = 1e-6


def linear(x: Any, w: Any, bias: Any = None, residual: Any = None) -> Any:
    """y[M,N] = x[M,K]·W[N,K]ᵀ (+ bias[N]) (+ residual[M,N]): one cuBLAS GEMM."""
    import torch
    import torch.nn.functional as F

    if residual is None:
        return F.linear(x, w, bias)
    if bias is not None:  # support.py refuses a biased projection with the residual fused: never reached
        raise ValueError("a residual and a bias in one projection")
    return torch.addmm(residual, x, w.t())


def norm_linear(x: Any, w_g: Any, bias: Any = None) -> Any:
    """RMSNorm(x)·Wᵀ in one Triton kernel (kernels/rmsnorm_linear/), W_g = W·diag(g) folded beforehand."""
    import torch

    from ...kernels.rmsnorm_linear import KERNEL

    out = torch.empty((x.shape[0], w_g.shape[0]), dtype=x.dtype, device=x.device)
    inputs = {"x": x, "w_g": w_g} | ({"bias": bias} if bias is not None else {})
    KERNEL.run(inputs, out)
    return out


def rmsnorm(x: Any, g: Any) -> Any:
    import torch.nn.functional as F

    return F.rms_norm(x, (x.shape[-1],), g, EPS)


def _rotate(x: Any, cos: Any, sin: Any) -> Any:
    import torch

    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rope(q: Any, k: Any, cos: Any, sin: Any) -> tuple[Any, Any]:
    """q [N, h, d], k [N, g, d], cos and sin [N, d/2]: the rotated q and k."""
    c, s = cos[:, None, :], sin[:, None, :]
    return _rotate(q, c, s), _rotate(k, c, s)


def kv_write(k_new: Any, v_new: Any, cache_k: Any, cache_v: Any, start: int) -> tuple[Any, Any]:
    """k_new, v_new [B, g, T, d] into cache[:, :, start:start + T]: the written slices."""
    t = k_new.shape[2]
    ks, vs = cache_k[:, :, start:start + t], cache_v[:, :, start:start + t]
    ks.copy_(k_new)
    vs.copy_(v_new)
    return ks, vs


def sdpa(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """q [B, h, T, d], k and v [B, g, Lk, d]: O [B, h, T, d]. A decode step (T = 1) attends to every cached
    position (is_causal False: torch's causal mask is aligned to the top left, which would leave one position)."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal and q.shape[2] > 1, enable_gqa=True)


def sdpa_backend(q: Any, k: Any, v: Any, causal: bool) -> str:
    """The backend torch's dispatcher picks for these inputs (``torch._fused_sdp_choice``, the function
    ``scaled_dot_product_attention`` itself asks), by its SDPBackend name."""
    import torch
    from torch.nn.attention import SDPBackend

    try:
        choice = torch._fused_sdp_choice(q, k, v, None, 0.0, causal and q.shape[2] > 1, enable_gqa=True)
        return str(SDPBackend(choice).name)
    except Exception as err:  # a torch without the private function: say so rather than guess
        return f"unknown ({type(err).__name__})"


def qk(q: Any, k: Any) -> Any:
    """Naive attention's scores: q [B·g, r·T, d] (the r = h/g query heads of each KV head), k [B·g, Lk, d]:
    S = q·kᵀ/√d [B·g, r·T, Lk], written to HBM (the scale is the GEMM's α)."""
    import torch

    s = torch.empty((q.shape[0], q.shape[1], k.shape[1]), dtype=q.dtype, device=q.device)
    return torch.baddbmm(s, q, k.transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(q.shape[-1]))


def softmax(s: Any) -> Any:
    import torch

    return torch.softmax(s, dim=-1)


def pv(p: Any, v: Any) -> Any:
    """p [B·g, r·T, Lk], v [B·g, Lk, d]: O [B·g, r·T, d]."""
    import torch

    return torch.bmm(p, v)


def gated_act(gate: Any, up: Any) -> Any:
    import torch.nn.functional as F

    return F.silu(gate) * up


def residual(a: Any, b: Any) -> Any:
    return a + b


def embed(ids: Any, table: Any) -> Any:
    import torch.nn.functional as F

    return F.embedding(ids, table)
