"""The primitive counts every op is built from (engine/op.py), by the rules in DESIGN.md."""

from __future__ import annotations

import pytest

from rooflinectl.engine.op import (
    RMSNORM_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    Op,
    copy_op,
    matmul_op,
    matmul_unit,
    rmsnorm_linear_op,
    rmsnorm_op,
    softmax_op,
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
