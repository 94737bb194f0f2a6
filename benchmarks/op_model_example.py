"""Issue 14's H200 measurements as probes of the calibrated op model: the engine op each one ran and its measured
median. ``docs/results/op-model-example/h200-issue14.yaml`` carries the model fitted from them
(``engine.calibrated.fit``) under the calibrated roofs of ``docs/results/h200-2026-12-02/calibrated.yaml``
(copy 4,245.5 GB/s, bf16 678.1 TFLOP/s); ``tests/engine/test_calibrated.py`` re-fits and compares, and
``python benchmarks/op_model_example.py`` writes the file again through the calibrate writer.

Measured on the H200 (issue 14: CUDA-graph replay, buffers rotated past the L2):
- F.linear 1×4096×4096 bf16 (a decode GEMV): 13.8 µs;
- c = a + b: 8.1 µs for 25 MB, 3.4 µs for 6.3 MB, 2.2 µs for 1.6 MB: three fp32 tensors of 2²¹, 2¹⁹ and 2¹⁷
  elements (3 × 4 × 2²¹ = 25,165,824 B, and so on), whose roofline times at 4,245.5 GB/s, 5.93, 1.48 and 0.370 µs,
  give the issue's 73%, 43% and 17%;
- SDPA decode, GQA 32/8, d 128: 12.0 µs at batch 1 × 4,096 positions, and 100% of the ceiling at 16 × 16,384
  (taken as measured = roofline time);
- the calibrated bf16 ceiling itself, torch.matmul 8192³ at 678.1 TFLOP/s (calibrate's probe): measured = roofline
  time by construction, the one compute-bound GEMM point.
The launch floor: 1.82 µs, the intercept of the least-squares line through the three elementwise probes
(t = 1.82 µs + t_roof / 0.943).
"""

from __future__ import annotations

import os
from pathlib import Path

from rooflinectl.engine.count.op import Op
from rooflinectl.engine.count.primitives import flash_attention_op, matmul_op
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.specs.scenario import resolve_workload

ROOT = Path(__file__).parents[1]
CALIBRATED = ROOT / "docs" / "results" / "h200-2026-12-02" / "calibrated.yaml"
EXAMPLE = ROOT / "docs" / "results" / "op-model-example" / "h200-issue14.yaml"
LAUNCH_FLOOR_S = 1.82e-6
TIMER = "cuda_graph"
GRID = ("issue 14's H200 measurements, assembled by hand (not a calibrate run): F.linear 1x4096x4096 bf16; "
        "c = a + b over 3 fp32 tensors of 2^17, 2^19, 2^21 elements; SDPA decode GQA 32/8 d128 at batch 1 x 4096 "
        "and 16 x 16384 positions; torch.matmul 8192^3 bf16 (the calibrated ceiling); launch floor the intercept "
        "of the elementwise probes' least-squares line")


def add_op(elements: int) -> Op:
    """c = a + b over fp32 tensors of ``elements``: reads a and b, writes c (3 × 4 bytes an element), one add."""
    return Op(name="add", kind="elementwise", flops=elements, bytes=3 * 4 * elements, unit="vector", dtype="fp32",
              reads="a, b", writes="c", computes="a + b", elementwise="residual")


def decode_attention(batch: int, context: int) -> Op:
    """SDPA decode, GQA 32 query heads over 8 KV heads of d 128, bf16, as the engine counts one layer's flash
    attention (engine.count.primitives.flash_attention_op): it reads Q (batch·32·128) and the cache's K and V
    (2·batch·8·context·128) and writes O (batch·32·128), two bytes each; 32·context scores a sequence.
    ``llama_attention`` is the same op from Llama-3-8B's decode step, where its 8,192 positions allow."""
    return flash_attention_op("attention", batch * 32 * context, 128, 128, q_bytes=batch * 32 * 128 * 2,
                              kv_bytes=2 * batch * 8 * context * 128 * 2, o_bytes=batch * 32 * 128 * 2,
                              dtype="bf16", reads="q, K, V", writes="o", computes="softmax(qKᵀ)V")


def llama_attention(batch: int, context: int) -> Op:
    """Llama-3-8B's decode attention op for one layer, from the engine's own step."""
    ops = step_ops(resolve_workload("decode", model="llama-3-8b", batch=batch, context=context))
    return next(op for op in ops if op.kind == "attention").times(1)


def samples(roof_of) -> list[tuple[Op, float, str]]:
    """The probes; ``roof_of(op)`` gives an op's roofline time under the calibrated roofs (for the two points
    measured at 100% of their ceiling)."""
    big_attention = decode_attention(16, 16384)
    ceiling = matmul_op("matmul", 8192, 8192, 8192, "bf16", b_is_weight=False)
    return [
        (matmul_op("linear", 1, 4096, 4096, "bf16"), 13.8e-6, "linear 1x4096x4096 bf16"),
        (add_op(2**17), 2.2e-6, "c = a + b, 3 x 2^17 fp32"),
        (add_op(2**19), 3.4e-6, "c = a + b, 3 x 2^19 fp32"),
        (add_op(2**21), 8.1e-6, "c = a + b, 3 x 2^21 fp32"),
        (decode_attention(1, 4096), 12.0e-6, "sdpa decode 1 x 4096, GQA 32/8 d128 bf16"),
        (big_attention, roof_of(big_attention), "sdpa decode 16 x 16384, GQA 32/8 d128 bf16 (100% of the ceiling)"),
        (ceiling, roof_of(ceiling), "matmul 8192^3 bf16 (the calibrated ceiling)"),
    ]


def fitted():
    """The model fitted from the probes under the calibrated roofs of CALIBRATED."""
    from rooflinectl.engine.calibrated import fit
    from rooflinectl.engine.placement import place
    from rooflinectl.specs.hardware import load_gpu_file

    roofs = load_gpu_file(CALIBRATED).roofs(calibrated=True)
    return fit(samples(lambda op: place(op, roofs).roofline_time_s), roofs, LAUNCH_FLOOR_S, GRID, TIMER)


def write_example() -> None:
    """The example file: the H200 spec with CALIBRATED's measured section and the fitted op model, through
    ``specs.write.write_measured`` (the writer ``calibrate -o`` uses)."""
    from rooflinectl.specs.hardware import load_gpu, load_gpu_file
    from rooflinectl.specs.write import write_measured

    measured = load_gpu_file(CALIBRATED).measured
    assert measured is not None
    EXAMPLE.parent.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)  # the header's "use them with" names the file as the docs do, from the repository's root
    write_measured(load_gpu("h200"), EXAMPLE.relative_to(ROOT), ceilings=measured, op_model=fitted())
    note = ("# The ceilings are a real calibrate run's (docs/results/h200-2026-12-02/calibrated.yaml); the op_model\n"
            "# is fitted by engine.calibrated.fit from issue 14's H200 measurements, assembled by hand\n"
            "# (benchmarks/op_model_example.py), not measured by a calibrate run.\n")
    EXAMPLE.write_text(note + EXAMPLE.read_text())


if __name__ == "__main__":
    write_example()
