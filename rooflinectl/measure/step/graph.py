"""The whole step as one callable: every case's kernel in the step's order, layer after layer, on weights and KV
caches of their own, the activations flowing from op to op. ``run.py`` captures it as one CUDA graph and times
its replays (on the CPU it runs in sequence).

Memory (``plan_memory``): every layer gets its own weights and its own K and V caches when they fit in the free
memory (``STEP_MEMORY_SHARE`` of it); otherwise the weights of one layer are replayed for every layer, and then,
if still too large, its caches too, and the record says so. Replaying a layer's weights still reads them from HBM
at every layer: one layer of Llama 3 8B holds 436 MB of weights (4 · 4096² + 2 · 4096 · 1024 + 3 · 4096 · 14336
elements of 2 bytes) against the H200's 50–60 MB of L2, so by the time a layer comes round again the other ops
have streamed eight L2s through since its weights were last read. A replayed cache is the same argument, weaker
for a small cache (batch 1 × 4,096 positions × 1,024 K and V values × 2 bytes = 16 MB a layer, under the L2):
the 436 MB of weights in between still evict it.

The step's own glue is views, never copies: Q, K and V split from a fused qkv output, the [N, h·d] activations
viewed as [B, T, h, d] for SDPA and back, the last token of each sequence for the LM head.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ...engine.count.attention import kv_positions_held
from ...engine.count.op import Op
from ...errors import UserError
from ...kernels.base import torch_dtype
from ...specs.workload import Workload
from ...units import dtype_bytes
from . import runners
from .cases import Case
from .execute import materialize

# Share of the free device memory the step may take with distinct layers (the rest: torch's allocator, the CUDA
# graph's pool, the per-op sets already freed but cached).
STEP_MEMORY_SHARE = 0.8
WEIGHT_NAMES = ("w", "g", "bias", "table")
Layers = Literal["distinct", "shared_weights", "shared_weights_and_caches"]


@dataclass(frozen=True)
class StepMemory:
    layers: Layers
    bytes: int
    note: str | None


def _layer_cases(cases: list[Case]) -> list[Case]:
    return [c for c in cases if not c.op.per_model]


def _weights_bytes(cases: list[Case]) -> int:
    return sum(t.nbytes for c in cases for t in c.inputs if t.name in WEIGHT_NAMES)


def _cache_bytes(w: Workload, sliding: bool) -> int:
    m = w.model
    held = kv_positions_held(w, m.sliding_window if sliding else None)
    return 2 * w.batch * m.kv_dim * held * int(dtype_bytes(w.dtype))


def plan_memory(w: Workload, cases: list[Case], free_bytes: int | None) -> StepMemory:
    """Distinct layers where they fit in ``STEP_MEMORY_SHARE`` of ``free_bytes`` (the device's: bench.available_memory;
    None: not known, no limit)."""
    m = w.model
    layer, per_model = _layer_cases(cases), [c for c in cases if c.op.per_model]
    layer_w = _weights_bytes(layer)
    caches = [_cache_bytes(w, m.layer_slides(i)) for i in range(m.num_layers)]
    # Activations: every output of one layer and of the model's ops alive at once, an upper bound.
    acts = sum(math.prod(s) for c in cases for s in c.outputs) * int(dtype_bytes(w.dtype))
    fixed = _weights_bytes(per_model) + acts
    options: list[tuple[Layers, int]] = [("distinct", fixed + m.num_layers * layer_w + sum(caches)),
               ("shared_weights", fixed + layer_w + sum(caches)),
               ("shared_weights_and_caches", fixed + layer_w + max(caches))]
    limit = math.inf if free_bytes is None else STEP_MEMORY_SHARE * free_bytes
    for layers, need in options:
        if need <= limit:
            note = None if layers == "distinct" else (
                f"the step replays one layer's weights{' and KV caches' if 'caches' in layers else ''} for all "
                f"{m.num_layers} layers ({need / 1e9:.1f} GB fits, distinct layers would take "
                f"{options[0][1] / 1e9:.1f} GB); a layer's {layer_w / 1e6:.0f} MB of weights are still read from "
                f"HBM each time, the other layers' traffic having flushed the L2 in between")
            return StepMemory(layers, int(need), note)
    raise UserError(f"measure --workload: the step needs {options[-1][1] / 1e9:.1f} GB even with one layer's "
                    f"weights and caches replayed, and {free_bytes / 1e9 if free_bytes else 0:.1f} GB is free: "
                    f"try a smaller --batch or length")


def _split(y: Any, op: Op) -> list[Any]:
    """A linear op's output [rows, n], one slice per linear op it covers (q, k and v of a fused qkv_proj, by
    each one's n), or whole."""
    widths = [part.gemm.n for part in op.parts if part.gemm is not None]
    return list(y.split(widths, dim=1)) if len(widths) > 1 else [y]


@dataclass
class Step:
    """The step as a callable of no arguments returning the logits [B, V], with the tensors it runs on: each
    layer's weights by op name (one entry per distinct layer), the model's, the K and V caches, cos and sin."""

    run: Callable[[], Any]
    layer_weights: list[dict[str, dict[str, Any]]]
    model_weights: dict[str, dict[str, Any]]
    caches: list[tuple[Any, Any]]
    cos: Any
    sin: Any

    def __call__(self) -> Any:
        return self.run()


def build_step(w: Workload, cases: list[Case], memory: StepMemory, device: str, gen: Any) -> Step:
    """The step on weights and caches of its own (``memory`` says how many distinct layers)."""
    import torch

    m = w.model
    b, t, n_tok = w.batch, w.tokens_per_seq, w.tokens
    h, g, d = m.num_heads, m.num_kv_heads, m.head_dim
    layer = _layer_cases(cases)
    before = [c for c in cases if c.op.per_model and c.family == "embed"]
    after = [c for c in cases if c.op.per_model and c.family != "embed"]

    def weights(c: Case) -> dict[str, Any]:
        full = materialize(c, device, gen)  # activations made with them are dropped at once
        return {k: v for k, v in full.items() if k in WEIGHT_NAMES or k == "ids"}

    n_w = m.num_layers if memory.layers == "distinct" else 1
    layer_w = [{c.name: weights(c) for c in layer} for _ in range(n_w)]
    model_w = {c.name: weights(c) for c in before + after}
    n_c = 1 if memory.layers == "shared_weights_and_caches" else m.num_layers

    def cache(i: int) -> tuple[Any, Any]:
        held = kv_positions_held(w, m.sliding_window if m.layer_slides(i) else None)
        k, v = (torch.randn((b, g, held, d), generator=gen, device=device).to(torch_dtype(w.dtype))
                for _ in range(2))
        return k, v

    caches = [cache(i) for i in range(n_c)]
    cos, sin = (torch.cos(torch.randn((n_tok, d // 2), generator=gen, device=device) * 3).to(caches[0][0].dtype),
                torch.sin(torch.randn((n_tok, d // 2), generator=gen, device=device) * 3).to(caches[0][0].dtype))
    prefill = w.phase == "prefill"

    def run_layer(i: int, x: Any) -> Any:
        """One layer, its ops in the step's order, by kind: a norm gives the branch's input; each linear op
        reads the latest of those (the norm's output, attention's, the activation's; or x with the norm in its
        prologue) and leaves its output, split by the parts it covers (q, k, v of a fused qkv); RoPE, the KV
        write, attention and the activation take the outputs they need in that order; a residual add (its own op
        or in a GEMM's epilogue) moves x on. A sliding layer runs the ops whose attention has a window, a full
        layer the others."""
        wts = layer_w[i % n_w]
        ck, cv = caches[i % n_c]
        held = ck.shape[2]
        start = 0 if prefill else (w.kv_len - 1) % held
        branch: Any = None  # what the next linear op reads
        out: list[Any] = []  # the linear ops' outputs not yet taken: q, k, v; gate, up; o_proj's; down_proj's
        scores: Any = None  # naive attention's, from qk to pv
        for c in layer:
            op, p = c.op, wts[c.name]
            if op.attention is not None and (op.attention.window is not None) != m.layer_slides(i):
                continue  # the other kind of layer's attention core
            if c.family == "rmsnorm":
                branch = runners.rmsnorm(x, p["g"])
            elif c.family == "norm_linear":
                out += _split(runners.norm_linear(x, p["w"], p.get("bias")), op)
            elif c.family == "linear":
                residual = any(part.elementwise == "residual" for part in op.parts)
                y = runners.linear(branch, p["w"], p.get("bias"), x if residual else None)
                if residual:
                    x, out = y, []
                else:
                    out += _split(y, op)
            elif c.family == "rope":
                out[0], out[1] = runners.rope(out[0].view(n_tok, h, d), out[1].view(n_tok, g, d), cos, sin)
            elif c.family == "kv_write":
                runners.kv_write(out[1].view(b, t, g, d).transpose(1, 2), out[2].view(b, t, g, d).transpose(1, 2),
                                 ck, cv, start)
            elif c.family == "sdpa":
                o = runners.sdpa(out[0].view(b, t, h, d).transpose(1, 2), ck, cv, bool(c.params["causal"]))
                branch, out = o.transpose(1, 2).reshape(n_tok, h * d), []
            elif c.family == "qk":  # naive, decode only (support.py): T = 1, so these are views
                scores = runners.qk(out[0].reshape(b * g, h // g, d), ck.reshape(b * g, held, d))
            elif c.family == "softmax":
                scores = runners.softmax(scores)
            elif c.family == "pv":
                branch, out = runners.pv(scores, cv.reshape(b * g, held, d)).reshape(n_tok, h * d), []
            elif c.family == "act":
                branch, out = runners.gated_act(out[0], out[1]), []
            elif c.family == "residual":
                x, out = runners.residual(x, out[-1]), []
            else:
                raise ValueError(f"op {c.name}: no place in the layer")
        return x

    def step() -> Any:
        e = before[0]
        x = runners.embed(model_w[e.name]["ids"], model_w[e.name]["table"])
        for i in range(m.num_layers):
            x = run_layer(i, x)
        out = x
        for c in after:
            p = model_w[c.name]
            if c.family == "rmsnorm":
                out = runners.rmsnorm(out, p["g"])
            else:  # lm_head: the last token of each sequence
                last = out.view(b, t, -1)[:, -1] if prefill else out
                out = runners.linear(last, p["w"])
        return out

    return Step(step, layer_w, model_w, caches, cos, sin)
