"""A case's tensors, its run, and its check against a float32 reference of the same math.

The check (DESIGN.md, "Measuring honestly"): fresh random inputs from a seeded generator; the buffers the op
writes in place (the KV cache) poisoned with NaN, the others new tensors torch allocates; one run; the relative
error ‖out − ref‖/‖ref‖ in float64 (``kernels.base.relative_error``: NaN or inf never passes) against the
reference, within the tolerance of the case's data type (``tolerance``); the shapes and types written must be the
ones the case counted. Torch is imported inside the functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...kernels.base import torch_dtype
from . import runners
from .cases import Case, TensorSpec

# Relative error allowed per data type. The reference is float32 math on the same (rounded) inputs, so what is left
# is the kernel's own rounding: the output rounded once (bf16's unit roundoff 2⁻⁸ = 3.9e-3, fp16's 2⁻¹¹ = 4.9e-4)
# and the few intermediate roundings of the eager ops (RoPE's products and sums, SiLU then × up), each of them
# about one roundoff in norm; 1e-2 and 5e-3 leave 2.5 and 10 roundoffs. fp32: accumulation in another order than
# the reference's, well under DESIGN.md's 1e-3 (TF32 is off for F.linear, torch's default); the Triton
# rmsnorm_linear kernel keeps its own tolerances (its fp32 goes through TF32).
TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 1e-4}
# The gather and the KV-cache copy move bits: exact.
EXACT = ("embed", "kv_write")


def tolerance(case: Case) -> float:
    if case.family in EXACT:
        return 0.0
    if case.family == "norm_linear":
        from ...kernels.rmsnorm_linear import KERNEL

        return float(KERNEL.tolerance(case.dtype))
    return TOLERANCE[case.dtype]


def _tensor(spec: TensorSpec, device: str, gen: Any) -> Any:
    import torch

    dt = torch_dtype(spec.dtype)
    if spec.init == "ids":  # distinct rows: min(N, V) of them, the engine's count of the rows a gather reads
        vocab = int(spec.counted or 0)
        return torch.randperm(vocab, generator=gen, device=device)[: spec.shape[0]].to(dt) if vocab >= spec.shape[0] \
            else torch.arange(spec.shape[0], device=device) % max(vocab, 1)
    if spec.init == "nan":
        return torch.full(spec.shape, math.nan, dtype=dt, device=device)
    x = torch.randn(spec.shape, generator=gen, device=device, dtype=torch.float32)
    if spec.init == "weight":
        x = x / math.sqrt(spec.shape[-1])
    elif spec.init == "gain":
        x = 1.0 + 0.5 * x  # far from 1, so that a gain left out fails the check
    elif spec.init in ("cos", "sin"):  # a rotation by random angles: cos² + sin² = 1 as RoPE's tables
        x = torch.cos(x * 3.0) if spec.init == "cos" else torch.sin(x * 3.0)
    return x.to(dt)


def materialize(case: Case, device: str, gen: Any) -> dict[str, Any]:
    """One set of the case's inputs on ``device``, filled as each TensorSpec says."""
    out = {}
    for spec in case.inputs:
        if spec.init == "ids":
            table = case.spec("table")
            spec = TensorSpec(spec.name, spec.shape, spec.dtype, "ids", read=False, counted=table.shape[0])
        out[spec.name] = _tensor(spec, device, gen)
    return out


def run(case: Case, t: dict[str, Any]) -> tuple[Any, ...]:
    """The case's kernels on one input set: what they wrote, one tensor per output of the case."""
    f = case.family
    if f == "linear":
        return (runners.linear(t["x"], t["w"], t.get("bias"), t.get("residual")),)
    if f == "norm_linear":
        return (runners.norm_linear(t["x"], t["w"], t.get("bias")),)
    if f == "rmsnorm":
        return (runners.rmsnorm(t["x"], t["g"]),)
    if f == "rope":
        return runners.rope(t["q"], t["k"], t["cos"], t["sin"])
    if f == "kv_write":
        return runners.kv_write(t["k_new"].transpose(1, 2), t["v_new"].transpose(1, 2), t["cache_k"], t["cache_v"],
                                int(case.params["start"]))
    if f == "sdpa":
        return (runners.sdpa(t["q"].transpose(1, 2), t["k"], t["v"], bool(case.params["causal"])),)
    if f == "qk":
        return (runners.qk(t["q"], t["k"]),)
    if f == "softmax":
        return (runners.softmax(t["s"]),)
    if f == "pv":
        return (runners.pv(t["p"], t["v"]),)
    if f == "act":
        return (runners.gated_act(t["gate"], t["up"]),)
    if f == "residual":
        return (runners.residual(t["a"], t["b"]),)
    if f == "embed":
        return (runners.embed(t["ids"], t["table"]),)
    raise ValueError(f"no runner for family {f}")


def _rms(x: Any) -> Any:
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + runners.EPS)


def _rot(x: Any, c: Any, s: Any) -> Any:
    import torch

    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def reference(case: Case, t: dict[str, Any]) -> tuple[Any, ...]:
    """The same math in float32 on the same inputs (K and V repeated per query head where GQA shares them)."""
    import torch

    f32 = {k: v.float() if v.is_floating_point() else v for k, v in t.items()}
    f = case.family
    if f in ("linear", "norm_linear"):
        x = _rms(f32["x"]) if f == "norm_linear" else f32["x"]
        y = x @ f32["w"].t()
        for extra in ("bias", "residual"):
            if extra in f32:
                y = y + f32[extra]
        return (y,)
    if f == "rmsnorm":
        return (_rms(f32["x"]) * f32["g"],)
    if f == "rope":
        c, s = f32["cos"][:, None, :], f32["sin"][:, None, :]
        return _rot(f32["q"], c, s), _rot(f32["k"], c, s)
    if f == "kv_write":
        return f32["k_new"].transpose(1, 2), f32["v_new"].transpose(1, 2)
    if f == "sdpa":
        q = f32["q"].transpose(1, 2)
        r = q.shape[1] // f32["k"].shape[1]
        k, v = f32["k"].repeat_interleave(r, dim=1), f32["v"].repeat_interleave(r, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if case.params["causal"]:
            t_q, lk = s.shape[-2], s.shape[-1]
            # query i (of the last T of Lk positions) sees positions 0 … Lk − T + i
            allowed = torch.ones(t_q, lk, dtype=torch.bool, device=s.device).tril(lk - t_q)
            s = s.masked_fill(~allowed, -math.inf)
        return (torch.softmax(s, dim=-1) @ v,)
    if f == "qk":
        return (f32["q"] @ f32["k"].transpose(1, 2) / math.sqrt(f32["q"].shape[-1]),)
    if f == "softmax":
        return (torch.softmax(f32["s"], dim=-1),)
    if f == "pv":
        return (f32["p"] @ f32["v"],)
    if f == "act":
        g = f32["gate"]
        return (g / (1 + torch.exp(-g)) * f32["up"],)
    if f == "residual":
        return (f32["a"] + f32["b"],)
    if f == "embed":
        return (f32["table"][t["ids"]],)
    raise ValueError(f"no reference for family {f}")


@dataclass(frozen=True)
class Check:
    rel_error: float
    tolerance: float
    passed: bool
    seed: int
    note: str | None = None  # why it failed, beyond the error (a wrong shape or type)


def check(case: Case, device: str, seed: int) -> Check:
    """Run the case once on fresh inputs (seed ``seed``) and compare with the reference."""
    import torch

    from ...kernels.base import relative_error

    gen = torch.Generator(device=device).manual_seed(seed)
    t = materialize(case, device, gen)
    outs = run(case, t)
    tol = tolerance(case)
    shapes = [tuple(o.shape) for o in outs]
    if shapes != list(case.outputs) or any(o.dtype != torch_dtype(case.dtype) for o in outs):
        return Check(math.inf, tol, False, seed, f"wrote {shapes} {[str(o.dtype) for o in outs]}, counted "
                                                 f"{list(case.outputs)} {case.dtype}")
    refs = reference(case, t)
    out = torch.cat([o.reshape(-1) for o in outs])
    ref = torch.cat([r.reshape(-1) for r in refs])
    err = relative_error(out, ref)
    return Check(err, tol, err <= tol, seed)
