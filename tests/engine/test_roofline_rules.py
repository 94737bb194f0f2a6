"""The roofline's three rules that a planted bug once broke without a test noticing (issue 14): a tie between the
memory and the compute time is memory-bound (engine/roofline.py's module docstring: "memory on a tie: the op sits
exactly at the ridge"); the ridge is the PEAK over the bandwidth, never the attainable rate over it; and a budget
"fits" when it is at most the capacity, equality included. Each case is built so that the two sides are exactly
equal in floating point (integers whose quotients are the same real number round to the same double)."""

from __future__ import annotations

from rooflinectl.engine.count.attention_io import AttentionShape, flash_tiling
from rooflinectl.engine.count.op import Op
from rooflinectl.engine.memory import LiveSet, MemoryBudget
from rooflinectl.engine.roofline import analyze, place
from rooflinectl.specs.hardware import Roofs, load_gpu
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.units import GIB

# 300 TFLOP/s and 2,000 GB/s: 3e14 and 2e12, both exact doubles; the ridge is 150 FLOP/byte.
ROOFS = Roofs(gpu_id="test", label="spec", bandwidth_gbps=2000.0, tensor_tflops={"bf16": 300.0},
              vector_tflops={"fp32": 20.0})


def op(flops: float, nbytes: float) -> Op:
    return Op(name="x", kind="matmul", flops=flops, bytes=nbytes, unit="tensor", dtype="bf16", reads="", writes="",
              computes="")


def test_a_tie_is_memory_bound():
    # 3e8 FLOPs / 3e14 = 1e-6 s and 2e6 bytes / 2e12 = 1e-6 s: the same real number, so the same double.
    p = place(op(3e8, 2e6), ROOFS)
    assert p.compute_time_s == p.memory_time_s == 1e-6
    assert p.bound == "memory"
    assert p.intensity == p.ridge == 150.0  # a tie sits exactly at the ridge
    # One FLOP more and it is compute-bound; one byte more, memory-bound.
    assert place(op(3e8 + 1, 2e6), ROOFS).bound == "compute"
    assert place(op(3e8, 2e6 + 1), ROOFS).bound == "memory"


def test_the_ridge_is_the_peak_over_the_bandwidth_for_every_op():
    # A memory-bound op (intensity 10) attains 10 × 2e12 = 2e13 FLOP/s; its ridge is still 3e14 / 2e12 = 150.
    memory_bound = place(op(2e7, 2e6), ROOFS)
    assert memory_bound.attainable_flops == 2e13
    assert memory_bound.ridge == 150.0 == ROOFS.ridge("bf16")
    assert place(op(3e10, 2e6), ROOFS).ridge == 150.0  # compute-bound at 15,000 FLOP/byte: the same ridge


def test_the_analysis_ridge_is_the_peak_over_the_bandwidth():
    a = analyze(resolve_workload("decode", batch=1), load_gpu("h100"))
    # H100 SXM: 989.4 TFLOP/s bf16 dense over 3,350 GB/s (hardware/h100-sxm.yaml): 295.34 FLOP/byte, whatever the
    # attainable rate of the (memory-bound) decode step.
    assert a.ridge == 989.4e12 / 3350e9
    assert a.ridge == a.roofs.ridge("bf16")


def test_a_budget_equal_to_the_capacity_fits():
    live = LiveSet(phase="decode", op="x", bytes=1 * GIB)
    at = MemoryBudget(capacity_bytes=80 * GIB, weight_bytes=60 * GIB, kv_cache_bytes=15 * GIB,
                      kv_cache_bytes_per_sequence=GIB, activations=live, reserve_bytes=4 * GIB)
    assert at.total_bytes == at.capacity_bytes and at.fits
    over = MemoryBudget(capacity_bytes=80 * GIB, weight_bytes=60 * GIB + 1, kv_cache_bytes=15 * GIB,
                        kv_cache_bytes_per_sequence=GIB, activations=live, reserve_bytes=4 * GIB)
    assert not over.fits


def test_a_step_whose_weights_and_cache_equal_the_hbm_fits():
    w = resolve_workload("decode", batch=1, context=4096)
    h100 = load_gpu("h100")
    need = analyze(w, h100).totals.memory_bytes
    # A GPU of exactly that much HBM: need / 2**30 GiB is exact (a division by a power of two), so capacity == need.
    exact = h100.model_copy(update={"memory": h100.memory.model_copy(update={"hbm_capacity_gib": need / GIB})})
    t = analyze(w, exact).totals
    assert t.capacity_bytes == t.memory_bytes and t.fits
    smaller = h100.model_copy(update={"memory": h100.memory.model_copy(
        update={"hbm_capacity_gib": (need - 4096) / GIB})})
    assert not analyze(w, smaller).totals.fits


def test_a_kv_working_set_equal_to_the_l2_is_served_from_the_l2():
    s = AttentionShape(1, 1, 1, 3, 10, 16, causal=False)
    working = 10 * 2 * 16 * 2  # 10 positions of K and V, 16 bf16 each
    assert flash_tiling(s, "bf16", l2_bytes=working, block_q=2).served_from == "l2"
    assert flash_tiling(s, "bf16", l2_bytes=working - 1, block_q=2).served_from == "hbm"


def test_the_verdict_names_a_tie_memory_bound_as_the_placement_does():
    from rooflinectl.render.verdict import side_of_ridge

    assert side_of_ridge(150.0, 150.0) == ("at", "memory-bound")
    assert side_of_ridge(149.9, 150.0) == ("left of", "memory-bound")
    assert side_of_ridge(150.1, 150.0) == ("right of", "compute-bound")
