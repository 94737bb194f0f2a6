"""The whole step runs every op in order on its own weights: its logits equal an independent float64 forward pass
of the same model (written here with plain torch math) on the same weights, caches and RoPE tables."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rooflinectl.measure.step.cases import build_cases
from rooflinectl.measure.step.graph import build_step, plan_memory
from rooflinectl.specs.scenario import resolve_workload

TINY = str(Path(__file__).parent / "data" / "tiny-gqa.yaml")
EPS = 1e-6


def _rms(x, g):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * g


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def _weights(layer: dict, h: int, i: int) -> dict:
    """One layer's weights by the unfused op's name, split out of the fused ones' (qkv_proj's rows: q, k, v;
    gate_up_proj's: gate, up)."""
    p = {name.removesuffix("+residual"): q for name, q in layer.items()}
    if "qkv_proj" in p:
        fused = p.pop("qkv_proj")
        kv = (len(fused["w"]) - h) // 2
        ws, bs = fused["w"].split([h, kv, kv]), fused["bias"].split([h, kv, kv])
        p |= {name: {"w": wt, "bias": bt} for name, wt, bt in zip(("q_proj", "k_proj", "v_proj"), ws, bs, strict=True)}
    if "gate_up_proj" in p:
        gate, up = p.pop("gate_up_proj")["w"].split([i, i])
        p |= {"gate_proj": {"w": gate}, "up_proj": {"w": up}}
    return p


def _reference(w, step):
    """Llama-style forward in float64: the weights read from the step's own tensors."""
    m = w.model
    b, t, h, g, d = w.batch, w.tokens_per_seq, m.num_heads, m.num_kv_heads, m.head_dim
    f = {k: {n: v.double() if v.is_floating_point() else v for n, v in p.items()}
         for k, p in step.model_weights.items()}
    cos, sin = step.cos.double(), step.sin.double()
    x = f["embed"]["table"][f["embed"]["ids"]]
    for i in range(m.num_layers):
        p = _weights({k: {n: v.double() for n, v in q.items()} for k, q in step.layer_weights[i].items()},
                     h * d, m.intermediate_size)
        ck, cv = (c.double().clone() for c in step.caches[i])
        hn = _rms(x, p["attn_norm"]["g"])
        q = hn @ p["q_proj"]["w"].T + p["q_proj"]["bias"]
        k = hn @ p["k_proj"]["w"].T + p["k_proj"]["bias"]
        v = hn @ p["v_proj"]["w"].T + p["v_proj"]["bias"]
        q, k = _rope(q.view(-1, h, d), cos, sin), _rope(k.view(-1, g, d), cos, sin)
        start = 0 if w.phase == "prefill" else w.kv_len - 1
        ck[:, :, start:start + t] = k.view(b, t, g, d).transpose(1, 2)
        cv[:, :, start:start + t] = v.view(b, t, g, d).transpose(1, 2)
        qh = q.view(b, t, h, d).transpose(1, 2)
        kk, vv = ck.repeat_interleave(h // g, dim=1), cv.repeat_interleave(h // g, dim=1)
        s = qh @ kk.transpose(-1, -2) / math.sqrt(d)
        if t > 1:
            s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), -math.inf)
        o = (torch.softmax(s, -1) @ vv).transpose(1, 2).reshape(b * t, h * d)
        x = x + o @ p["o_proj"]["w"].T
        hn = _rms(x, p["mlp_norm"]["g"])
        gate, up = hn @ p["gate_proj"]["w"].T, hn @ p["up_proj"]["w"].T
        x = x + (gate * torch.sigmoid(gate) * up) @ p["down_proj"]["w"].T
    x = _rms(x, f["final_norm"]["g"])
    last = x.view(b, t, -1)[:, -1]
    return last @ f["lm_head"]["w"].T


@pytest.mark.parametrize("phase, sizes", [
    ("decode", dict(batch=2, context=24)),
    ("prefill", dict(batch=2, seq_len=8)),
    # The fused projections' outputs are split by the parts they cover, the residual taken in their epilogue.
    ("decode", dict(batch=2, context=24, fused=["qkv", "gate_up", "residual"])),
    ("prefill", dict(batch=2, seq_len=8, fused=["qkv", "residual"])),
    ("decode", dict(batch=3, context=20, attention="naive", fused=["gate_up"])),
])
def test_the_step_is_the_models_forward_pass(phase, sizes):
    w = resolve_workload(phase, model=TINY, dtype="fp32", **sizes)
    cases = build_cases(w)
    memory = plan_memory(w, cases, None)
    step = build_step(w, cases, memory, "cpu", torch.Generator().manual_seed(5))
    ref = _reference(w, step)  # before the step writes its new K and V into the caches
    out = step()
    assert out.shape == (w.batch, w.model.vocab_size)
    err = float(torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref))
    assert err < 1e-4  # fp32 throughout against float64: accumulation order only (execute.TOLERANCE's fp32)
