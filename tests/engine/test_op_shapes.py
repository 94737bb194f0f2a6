"""Each op carries its shape and what it covers (engine/count/op.py: ``gemm``, ``tensor``, ``attention``, ``covers``),
and those fields agree with its count: what runs an op (measure, profile, explore) reads them instead of its
name, so they must say what the engine counted. Over every bundled model, the phases, naive and flash attention,
several fusion sets and a mixed step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rooflinectl.engine.count.attention import group_scores
from rooflinectl.engine.count.op import (
    BIAS_FLOPS_PER_ELEMENT,
    GATED_RMSNORM_FLOPS_PER_ELEMENT,
    NORM_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT,
    Op,
)
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.specs.models import list_models
from rooflinectl.specs.scenario import resolve_step, resolve_workload
from rooflinectl.specs.step import Seqs
from rooflinectl.specs.workload import Workload

MODELS = [m.id for m in list_models()]
FUSIONS = [["norm_linear"], ["qkv", "gate_up"], ["gate_up", "act"], ["residual"],
           ["norm_linear", "qkv", "gate_up", "act", "residual"]]


def _steps(model: str, attention: str, fused: list[str]) -> list[Workload]:
    out = []
    for phase, sizes in (("decode", dict(batch=8, context=2048)), ("prefill", dict(batch=2, seq_len=512))):
        try:
            out.append(resolve_workload(phase, model=model, attention=attention, fused=fused, **sizes))
        except Exception:  # a fusion the model refuses (gate_up without a gate)
            continue
    return out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("attention", ["flash", "naive"])
def test_a_fused_op_covers_the_unfused_ops_whose_work_it_does(model, attention):
    """The parts of every fused op are ops of the unfused step, exactly as it counts them; their FLOPs add up
    to the fused op's; every unfused op is some fused op's part or an op of the fused step itself."""
    for fused in FUSIONS:
        for w in _steps(model, attention, fused):
            plain = {op.name: op.times(1) for op in step_ops(w.model_copy(update={"fused": ()}))}
            seen: set[str] = set()
            for op in step_ops(w):
                if not op.covers:
                    assert op.name in plain, op.name
                    seen.add(op.name)
                    continue
                assert op.flops == sum(part.flops for part in op.covers), op.name
                for part in op.covers:
                    assert part == plain[part.name], (op.name, part.name)
                    seen.add(part.name)
            assert seen == set(plain), (w.label(), set(plain) - seen)


def _gemm_flops(op: Op) -> int:
    g = op.gemm
    assert g is not None
    return g.batch * (2 * g.m * g.k * g.n + (BIAS_FLOPS_PER_ELEMENT * g.m * g.n if g.bias else 0))


@pytest.mark.parametrize("model", MODELS)
def test_shapes_say_what_the_engine_counted(model):
    """A plain matmul's FLOPs are 2·m·k·n (and its bias's m·n), a norm's its per-element FLOPs over its rows ×
    width; an attention op's groups are the step's (those of its form, for MLA), and a window only in a sliding
    layer's core."""
    steps = [w for fused in ([], *FUSIONS) for att in ("flash", "naive") for w in _steps(model, att, fused)]
    steps.append(resolve_step((Seqs(count=4, new=1, cached=1000), Seqs(count=1, new=128, cached=256)), model=model))
    for w in steps:
        m = w.model
        for op in step_ops(w):
            for part in op.parts:
                if part.kind in ("linear", "expert") and not part.per_model:  # the LM head: a soft cap
                    assert part.flops == _gemm_flops(part), part.name
                if part.kind == "norm":
                    assert part.tensor is not None
                    rows, width = part.tensor
                    # The model's norms, Llama 4 Scout's weightless Q/K norm, or Gated DeltaNet's gated norm.
                    pers = {*NORM_FLOPS_PER_ELEMENT.values(), WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT,
                            GATED_RMSNORM_FLOPS_PER_ELEMENT}
                    assert part.flops in {per * rows * width for per in pers}, part.name
            if op.kind in ("linear", "expert", "router", "matmul"):
                assert op.gemm is not None, op.name
            if op.kind == "attention":
                s = op.attention
                # MLA runs a mixed step's decode tokens and its prompts in two forms, each over its own groups.
                assert s is not None, op.name
                assert s.groups == w.seqs or (m.mla is not None and set(s.groups) < set(w.seqs)), op.name
                assert (s.window is not None) == op.name.endswith("_local"), op.name
                assert (s.chunk is not None) == op.name.endswith("_chunked"), op.name
                assert s.heads == m.num_heads and s.heads % s.kv_heads == 0


@pytest.mark.parametrize("model", ["llama-3-8b", "mistral-7b", "qwen2.5-14b", "mixtral-8x7b", "deepseek-v3"])
def test_a_flash_kernels_flops_follow_from_its_shape(model):
    """Flash attention: 2·d_qk + 2·d_v FLOPs and the online softmax's per score computed, over each group's
    scores (``engine.count.attention.group_scores``): the shape alone gives the count (no sinks, no soft cap here)."""
    for w in (resolve_workload("decode", model=model, batch=4, context=8192),
              resolve_workload("prefill", model=model, batch=1, seq_len=2048),
              resolve_step((Seqs(count=4, new=1, cached=3000), Seqs(count=2, new=64, cached=100)), model=model)):
        cores = [op for op in step_ops(w) if op.attention is not None and op.attention.part == "flash"]
        assert cores
        for op in cores:
            s = op.attention
            assert s is not None
            scores = sum(g.count * group_scores(g, s.causal, causal_skip=True, window=s.window) for g in s.groups)
            assert op.flops == s.heads * scores * (2 * s.d_qk + 2 * s.d_v + SOFTMAX_FLOPS_PER_ELEMENT), op.name


def test_a_naive_cores_three_ops_name_their_part():
    w = resolve_workload("decode", model="gemma-3-27b", batch=2, context=4096, attention="naive")
    parts = {op.name: op.attention.part for op in step_ops(w) if op.attention is not None}
    assert parts == {"qk": "qk", "softmax": "softmax", "pv": "pv", "qk_local": "qk", "softmax_local": "softmax",
                     "pv_local": "pv"}
    local = next(op for op in step_ops(w) if op.name == "qk_local")
    assert local.attention is not None and local.attention.window == 1024
    # The shape is not a name: the same op renamed keeps it.
    assert replace(local, name="x").attention == local.attention


@pytest.mark.parametrize("tp, ep", [(1, 4), (2, 2)])
def test_expert_parallelism_keeps_a_fused_ops_parts_adding_up(tp, ep):
    """Under EP each GPU reads its share of the experts touched (TP + EP: and runs 1/e of the pairs); a fused
    op's parts are adjusted alike, and its expert ops' shape says how many experts they read."""
    from rooflinectl.engine.count.moe import experts_touched
    from rooflinectl.engine.parallel import Layout, expert_ops_per_gpu, per_gpu_workload

    w = resolve_workload("decode", model="mixtral-8x7b", batch=64, context=2048, fused=["gate_up", "act", "residual"])
    layout = Layout(tp=tp, ep=ep)
    per_gpu = per_gpu_workload(w, layout)
    ops = expert_ops_per_gpu(step_ops(per_gpu), w, per_gpu, layout)
    for op in ops:
        if op.covers:
            assert op.flops == sum(part.flops for part in op.covers), op.name
        if op.kind == "expert":
            assert op.gemm is not None and op.gemm.experts == experts_touched(w) / ep
