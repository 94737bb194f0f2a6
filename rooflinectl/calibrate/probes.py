"""The probes ``calibrate`` times for its op model: a documented grid of cases run by the same runners as
``measure --workload`` (``runners.py``, through ``execute.run``), each returned as (the engine Op for that case,
its measured times, a label), and the launch floor. No fitting here: the calibrated model (engine/calibrated.py)
fits what this returns.

The grid (``DEFAULT_GRID``), chosen to span the shapes of the models the calibration is tested on while leaving
the held-out model's shapes out (Qwen2.5 14B: K×N of 5120×5120, 5120×1024, 5120×13824, 13824×5120 are not in it,
so its error is an honest test of the model's interpolation):

- GEMMs (F.linear, cuBLAS): M ∈ {1, 2, 4, …, 8192} (14 values: decode batches to prefill tokens) × (K, N) ∈
  Llama 3 8B's projections 4096×4096 (Q, O), 4096×1024 (K, V), 4096×14336 (gate, up), 14336×4096 (down); Llama 3
  70B's 8192×8192 and 8192×28672 (the wide ones); and the LM head 4096×128256: 7 × 14 = 98 cases. (Mistral 7B's
  projections are Llama 3 8B's, so it is not held out from these.)
- SDPA decode (one query, GQA 32 heads over 8 KV heads, d 128): batch {1, 4, 16, 64, 256} × positions {512, 1024,
  4096, 16384}: 20 cases (a case whose K and V do not fit in half the free memory is skipped, and listed).
- SDPA causal prefill, same heads: tokens {512, 2048, 8192} × batch {1, 4}: 6 cases.
- The memory-bound runners, RMSNorm (rows of 4096), RoPE (32 + 8 heads of 128), SiLU·up (rows of 14336), the
  residual add (rows of 1024), the embedding gather (Llama 3's 128256×4096 table) and the KV-cache write (8 KV
  heads of 128), each at 16 KiB, 64 KiB, … 1 GiB moved (9 sizes, powers of 4): 54 cases.
- The launch floor: a one-element add, graph-replayed.

179 cases in all. Each is timed by ``bench.do_bench(timer="cuda_graph")`` with a short window, ``rep_ms`` 20
(warmup_ms 5 is what the events timer would use: triton's do_bench_cudagraph warms up with one call and one
estimating replay), so a case costs its graph's 10 replays of about 20 ms plus two captures: about 179 × 0.25 s ≈
45 s of replays. The captures add to that for the smallest cases (a 2 µs op is captured rep / 2 µs = 10,000 times
in one graph; RoPE's several kernels each time), and so does making the rotated input sets; the budget is ~90 s on
an H200, an estimate not yet timed there. The probes are not checked against a reference here: the runners are the
ones ``measure --workload`` checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.count.op import RESIDUAL_FLOPS_PER_ELEMENT, ROPE_FLOPS_PER_ELEMENT, Op
from ..engine.count.primitives import copy_op, flash_attention_op, gated_act_op, matmul_op, rmsnorm_op
from ..measure import bench
from ..measure.harness import Reporter
from ..measure.step.cases import INDEX_DTYPE, Case, TensorSpec
from ..measure.step.execute import materialize, run
from ..units import KIB, binary_size, dtype_bytes

# Shapes of the memory-bound probes (Llama 3 8B's widths; module docstring).
NORM_WIDTH = 4096
MLP_WIDTH = 14336
RESIDUAL_WIDTH = 1024
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
VOCAB = 128256
KV_WRITE_HELD = 16  # cache slots of the KV-write probe (not counted: the op writes the new token's slot only)


@dataclass(frozen=True)
class ProbeGrid:
    gemm_m: tuple[int, ...] = tuple(2**i for i in range(14))  # 1 … 8192
    gemm_kn: tuple[tuple[int, int], ...] = ((4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096),
                                           (8192, 8192), (8192, 28672), (4096, 128256))
    decode_batch: tuple[int, ...] = (1, 4, 16, 64, 256)
    decode_positions: tuple[int, ...] = (512, 1024, 4096, 16384)
    prefill_tokens: tuple[int, ...] = (512, 2048, 8192)
    prefill_batch: tuple[int, ...] = (1, 4)
    memory_bytes: tuple[int, ...] = tuple(16 * KIB * 4**i for i in range(9))  # 16 KiB … 1 GiB
    vocab: int = VOCAB  # rows of the gather probe's table
    warmup_ms: float = 5
    rep_ms: float = 20


DEFAULT_GRID = ProbeGrid()


@dataclass(frozen=True)
class ProbeSample:
    op: Op  # the engine's op for the case (count 1): what the calibrated model predicts
    median_s: float
    p20_s: float
    p80_s: float
    label: str
    family: str  # the runner: linear, sdpa, rmsnorm, rope, act, residual, embed, kv_write
    input_sets: int


@dataclass(frozen=True)
class ProbeRun:
    samples: list[ProbeSample]
    launch_floor_s: float
    grid: ProbeGrid
    device: str
    dtype: str
    timer: str  # "cuda_graph", or "cpu_wall" on the CPU (a test of the structure, no GPU figure)
    skipped: list[str] = field(default_factory=list)  # labels of cases left out, and why


def _gemm(m: int, k: int, n: int, dtype: str) -> Case:
    specs = (TensorSpec("x", (m, k), dtype, "randn"), TensorSpec("w", (n, k), dtype, "weight"))
    return Case(matmul_op("linear", m, k, n, dtype), "linear", "F.linear (cuBLAS mm)", specs, ((m, n),), dtype)


def _sdpa(b: int, t: int, lk: int, dtype: str) -> Case:
    a = int(dtype_bytes(dtype))
    causal = t > 1
    per_head = t * (t + 1) // 2 if causal else lk  # a prefill attends to its own t = lk tokens
    scores = b * HEADS * per_head
    q = b * t * HEADS * HEAD_DIM * a
    kv = 2 * b * lk * KV_HEADS * HEAD_DIM * a
    op = flash_attention_op("attention", scores, HEAD_DIM, HEAD_DIM, q, kv, q, dtype,
                            reads=f"Q, K and V ({lk} positions × {KV_HEADS} KV heads)", writes="O",
                            computes=f"{scores:,} scores on chip")
    specs = (TensorSpec("q", (b, t, HEADS, HEAD_DIM), dtype, "randn"),
             TensorSpec("k", (b, KV_HEADS, lk, HEAD_DIM), dtype, "randn"),
             TensorSpec("v", (b, KV_HEADS, lk, HEAD_DIM), dtype, "randn"))
    return Case(op, "sdpa", "F.scaled_dot_product_attention (enable_gqa)", specs, ((b, HEADS, t, HEAD_DIM),),
                dtype, {"causal": causal})


def _vector_op(name: str, kind: Any, flops: int, nbytes: int, what: str, elementwise: Any = None) -> Op:
    """An op on the vector units in fp32, as the engine places its elementwise, gather and copy ops (and names
    which elementwise operation it is, as the engine's rope and residual ops do)."""
    return Op(name=name, kind=kind, flops=flops, bytes=nbytes, unit="vector", dtype="fp32", reads=what,
              writes=what, computes=f"{flops} FLOPs", elementwise=elementwise)


def _memory_case(family: str, size: int, dtype: str, vocab: int = VOCAB) -> Case:
    """The ``family`` probe moving about ``size`` bytes (whole rows: at least one)."""
    a = int(dtype_bytes(dtype))
    if family == "rmsnorm":
        rows = max(1, size // (2 * NORM_WIDTH * a))
        specs: tuple[TensorSpec, ...] = (TensorSpec("x", (rows, NORM_WIDTH), dtype, "randn"),
                                         TensorSpec("g", (NORM_WIDTH,), dtype, "gain"))
        op = rmsnorm_op("rmsnorm", rows, NORM_WIDTH, dtype)
        return Case(op, family, "F.rms_norm", specs, ((rows, NORM_WIDTH),), dtype)
    if family == "act":
        rows = max(1, size // (3 * MLP_WIDTH * a))
        specs = (TensorSpec("gate", (rows, MLP_WIDTH), dtype, "randn"), TensorSpec("up", (rows, MLP_WIDTH), dtype,
                                                                                      "randn"))
        op = gated_act_op("act", rows, MLP_WIDTH, dtype)
        return Case(op, family, "F.silu(gate) * up", specs, ((rows, MLP_WIDTH),), dtype)
    if family == "residual":
        rows = max(1, size // (3 * RESIDUAL_WIDTH * a))
        n = rows * RESIDUAL_WIDTH
        specs = (TensorSpec("a", (rows, RESIDUAL_WIDTH), dtype, "randn"),
                 TensorSpec("b", (rows, RESIDUAL_WIDTH), dtype, "randn"))
        op = _vector_op("residual", "elementwise", RESIDUAL_FLOPS_PER_ELEMENT * n, 3 * n * a, f"{rows}×1024",
                        "residual")
        return Case(op, family, "a + b", specs, ((rows, RESIDUAL_WIDTH),), dtype)
    if family == "rope":
        per_token = 2 * (HEADS + KV_HEADS) * HEAD_DIM * a + HEAD_DIM * a  # Q, K in and out; cos and sin rows
        n = max(1, size // per_token)
        rotated = n * (HEADS + KV_HEADS) * HEAD_DIM
        specs = (TensorSpec("q", (n, HEADS, HEAD_DIM), dtype, "randn"),
                 TensorSpec("k", (n, KV_HEADS, HEAD_DIM), dtype, "randn"),
                 TensorSpec("cos", (n, HEAD_DIM // 2), dtype, "cos"), TensorSpec("sin", (n, HEAD_DIM // 2), dtype, "sin"))
        op = _vector_op("rope", "elementwise", ROPE_FLOPS_PER_ELEMENT * rotated, 2 * rotated * a + n * HEAD_DIM * a,
                        f"Q and K of {n} tokens", "rope")
        return Case(op, family, "torch ops (mul, sub, add, cat)", specs,
                    ((n, HEADS, HEAD_DIM), (n, KV_HEADS, HEAD_DIM)), dtype)
    if family == "embed":
        n = min(vocab, max(1, size // (2 * NORM_WIDTH * a)))  # n distinct rows read, n rows written
        specs = (TensorSpec("ids", (n,), INDEX_DTYPE, "ids", read=False),
                 TensorSpec("table", (vocab, NORM_WIDTH), dtype, "randn", counted=n * NORM_WIDTH * a))
        op = _vector_op("embed", "gather", 0, 2 * n * NORM_WIDTH * a, f"{n} rows of {vocab}×{NORM_WIDTH}")
        return Case(op, family, "F.embedding", specs, ((n, NORM_WIDTH),), dtype)
    if family == "kv_write":
        b = max(1, size // (4 * KV_HEADS * HEAD_DIM * a))  # K and V of b tokens, read and written
        specs = (TensorSpec("k_new", (b, 1, KV_HEADS, HEAD_DIM), dtype, "randn"),
                 TensorSpec("v_new", (b, 1, KV_HEADS, HEAD_DIM), dtype, "randn"),
                 TensorSpec("cache_k", (b, KV_HEADS, KV_WRITE_HELD, HEAD_DIM), dtype, "nan", read=False),
                 TensorSpec("cache_v", (b, KV_HEADS, KV_WRITE_HELD, HEAD_DIM), dtype, "nan", read=False))
        op = copy_op("kv_write", 2 * b * KV_HEADS * HEAD_DIM, dtype)
        return Case(op, family, "Tensor.copy_ into the cache's slice", specs,
                    ((b, KV_HEADS, 1, HEAD_DIM), (b, KV_HEADS, 1, HEAD_DIM)), dtype, {"start": KV_WRITE_HELD - 1})
    raise ValueError(f"no probe for {family}")


MEMORY_FAMILIES = ("rmsnorm", "rope", "act", "residual", "embed", "kv_write")


def probe_cases(grid: ProbeGrid, dtype: str) -> list[tuple[str, Case]]:
    """(label, case) for every probe of ``grid`` (the tests hold each case's bytes to its engine op's)."""
    out: list[tuple[str, Case]] = []
    for k, n in grid.gemm_kn:
        out += [(f"linear {m}x{k}x{n}", _gemm(m, k, n, dtype)) for m in grid.gemm_m]
    out += [(f"sdpa decode b{b} L{lk}", _sdpa(b, 1, lk, dtype)) for b in grid.decode_batch
            for lk in grid.decode_positions]
    out += [(f"sdpa prefill b{b} S{s}", _sdpa(b, s, s, dtype)) for b in grid.prefill_batch
            for s in grid.prefill_tokens]
    for family in MEMORY_FAMILIES:
        out += [(f"{family} {binary_size(size)}", _memory_case(family, size, dtype, grid.vocab))
                for size in grid.memory_bytes]
    return out


def launch_floor_case(dtype: str) -> Case:
    """A one-element add: what a graph-replayed launch costs when it moves nothing."""
    return Case(
        _vector_op("launch", "elementwise", 1, 3 * int(dtype_bytes(dtype)), "1 element", "residual"), "residual", "a + b",
        (TensorSpec("a", (1, 1), dtype, "randn"), TensorSpec("b", (1, 1), dtype, "randn")), ((1, 1),), dtype)


TimeFn = Callable[[Callable[[], object]], tuple[float, float, float]]


def probe_samples(device: str, dtype: str, reporter: Reporter, grid: ProbeGrid = DEFAULT_GRID,
                  time_fn: TimeFn | None = None) -> ProbeRun:
    """Time every probe of ``grid`` on ``device`` in ``dtype``, and the launch floor; no fitting."""
    import torch

    from ..measure.step.run import cpu_time, gpu_time, set_count

    if time_fn is None:
        time_fn = gpu_time(grid.warmup_ms, grid.rep_ms) if device == "cuda" else cpu_time
    l2 = 0
    if device == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
    cases = probe_cases(grid, dtype)
    reporter.start(len(cases) + 1)
    samples: list[ProbeSample] = []
    skipped: list[str] = []
    gen = torch.Generator(device=device).manual_seed(0)
    for label, case in cases:
        reporter.step(f"probe {label}")
        free = bench.free_memory(device)
        one_set = sum(t.nbytes for t in case.inputs) + case.bytes
        if free is not None and one_set > bench.MAX_FREE_MEMORY_SHARE * free:
            skipped.append(f"{label}: {one_set / 1e9:.1f} GB a set, over half the free memory")
            reporter.advance()
            continue
        n_sets = set_count(case, l2, device) if device == "cuda" else 1
        sets = [materialize(case, device, gen) for _ in range(n_sets)]
        median, p20, p80 = time_fn(bench.rotated(_call(case), sets))
        del sets
        samples.append(ProbeSample(case.op, median, p20, p80, label, case.family, n_sets))
        reporter.advance()
    reporter.step("launch floor")
    floor = launch_floor_case(dtype)
    one = materialize(floor, device, gen)
    launch = time_fn(bench.rotated(_call(floor), [one]))[0]
    reporter.advance()
    return ProbeRun(samples, launch, grid, device, dtype, "cuda_graph" if device == "cuda" else "cpu_wall", skipped)


def _call(case: Case) -> Callable[[dict[str, Any]], object]:
    def call(tensors: dict[str, Any]) -> object:
        return run(case, tensors)
    return call
