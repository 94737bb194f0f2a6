"""The primitive counts every op is built from (engine/count/op.py and primitives.py), by the rules in DESIGN.md."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.op import (
    RMSNORM_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    Gemm,
    Op,
    covering,
    matmul_unit,
)
from rooflinectl.engine.count.primitives import (
    copy_op,
    expert_matmul_op,
    gated_act_op,
    matmul_op,
    rmsnorm_linear_op,
    rmsnorm_op,
    router_op,
    softmax_op,
    with_gated_act,
)


def test_matmul_counts_two_flops_per_multiply_add_and_each_tensor_once():
    op = matmul_op("mm", 3, 5, 7, "bf16")
    assert op.flops == 2 * 3 * 5 * 7
    assert op.bytes == (3 * 5 + 5 * 7 + 3 * 7) * 2
    assert (op.kind, op.unit, op.weight_bytes) == ("linear", "tensor", 5 * 7 * 2)
    activations = matmul_op("mm", 3, 5, 7, "bf16", b_is_weight=False)
    assert (activations.kind, activations.weight_bytes) == ("matmul", 0.0)


def test_fp32_matmuls_run_on_the_vector_units():
    assert matmul_unit("fp32") == "vector"
    assert matmul_unit("tf32") == matmul_unit("bf16") == "tensor"


def test_fused_norm_linear_saves_the_normalized_round_trip():
    m, k, n = 4, 64, 32
    fused = rmsnorm_linear_op("x", m, k, n, "bf16")
    apart = [rmsnorm_op("norm", m, k, "bf16"), matmul_op("x", m, k, n, "bf16")]
    # Apart, the norm writes m·k and the matmul reads them back: 2·m·k elements the fused op never moves.
    assert sum(o.bytes for o in apart) - fused.bytes == 2 * m * k * 2
    assert fused.flops == 2 * m * k * n + RMSNORM_FLOPS_PER_ELEMENT * m * k
    assert fused.fuses == ("norm",) and fused.kind == "linear"


def test_softmax_and_copy():
    s = softmax_op("softmax", 8, 16, "fp16")
    assert (s.flops, s.bytes, s.kind) == (SOFTMAX_FLOPS_PER_ELEMENT * 128, 2 * 128 * 2, "attention")
    c = copy_op("copy", 1000, "fp32")
    assert (c.flops, c.bytes, c.kind) == (0.0, 8000, "copy")


def test_an_op_without_bytes_or_count_is_refused():
    with pytest.raises(ValueError):
        Op(name="x", kind="copy", flops=0.0, bytes=0.0, unit="vector", dtype="fp32", reads="", writes="",
           computes="")
    with pytest.raises(ValueError):
        matmul_op("x", 1, 1, 1, "bf16").times(0)


def test_each_op_carries_its_shape():
    """What a runner needs is a field of the op, set by the constructor that was given the sizes."""
    assert matmul_op("mm", 3, 5, 7, "bf16").gemm == Gemm(3, 5, 7)
    assert rmsnorm_linear_op("x", 3, 5, 7, "bf16").gemm == Gemm(3, 5, 7)
    assert router_op("router", 4, 64, 8, 2, "bf16").gemm == Gemm(4, 64, 8)
    # 4 tokens × top-2 = 8 (token, expert) pairs, reading the weights of 5.5 experts (an expectation).
    assert expert_matmul_op("expert_up_proj", 8, 64, 32, 5.5, "bf16").gemm == Gemm(8, 64, 32, experts=5.5)
    assert rmsnorm_op("norm", 6, 64, "bf16").tensor == (6, 64)
    assert softmax_op("softmax", 8, 16, "fp16").tensor == (8, 16)
    assert gated_act_op("act", 6, 128, "bf16").tensor == (6, 128)
    assert matmul_op("mm", 3, 5, 7, "bf16").tensor is None and rmsnorm_op("n", 1, 2, "bf16").gemm is None


def test_a_fused_op_covers_the_ops_whose_work_it_does():
    m, k, i = 4, 64, 32
    gate, up = matmul_op("gate_proj", m, k, i, "bf16"), matmul_op("up_proj", m, k, i, "bf16")
    gate_up = covering(matmul_op("gate_up_proj", m, k, 2 * i, "bf16"), gate, up)
    fused = with_gated_act(gate_up, m, i, "bf16")
    assert [c.name for c in fused.parts] == ["gate_proj", "up_proj", "act"]
    assert fused.parts[-1] == gated_act_op("act", m, i, "bf16")
    # One kernel does their FLOPs; the bytes are fewer by gate and up's round trip.
    assert fused.flops == sum(c.flops for c in fused.covers)
    assert gate.parts == (gate,) and gate.covers == ()
