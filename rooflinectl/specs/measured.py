"""What ``rooflinectl calibrate`` measures on a real device and writes into a hardware YAML's ``measured`` section:
the ceilings (copy bandwidth, matmul peaks) that ``Roofs.with_ceilings`` puts in place of the spec's figures, the
collectives ``calibrate --comm`` measured, and the calibrated op model (engine/calibrated.py reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator
from typing_extensions import Self  # typing.Self is 3.11+; the floor is 3.10

from .dtypes import TensorDType, VectorDType
from .load import Count, Peak, Rate, Strict

# A measured ceiling may pass the datasheet's by this share (datasheet rounding, clocks above the rated boost)
# before it is taken for another chip's: the H200's copy reached 4,278 of 4,800 GB/s and its bf16 matmul 788 of
# 989 TFLOP/s on the lent H200 (docs/results/h200-2026-12-03-*), far inside it.
MEASURED_OVER_SPEC = 0.05


class Ceilings(Strict):
    """Ceilings measured on a real device: what :meth:`Roofs.with_ceilings` puts in place of the spec's figures.

    ``copy_bandwidth_gbps`` is bytes read + bytes written per second of a large device-to-device copy (None: not
    measured); each peak is a large matmul's (tensor) or an elementwise probe's (vector) rate for that data type.
    """

    copy_bandwidth_gbps: Rate | None = None
    tensor_tflops: dict[TensorDType, Peak] = Field(default_factory=dict)
    vector_tflops: dict[VectorDType, Peak] = Field(default_factory=dict)

    def above(self, hbm_gbps: float, tensor: Mapping[TensorDType, float],
              vector: Mapping[VectorDType, float]) -> list[str]:
        """The ceilings that pass a datasheet's (its HBM bandwidth and peaks by data type) by more than
        ``MEASURED_OVER_SPEC``, each in words: no chip outruns its own datasheet, so such a section was measured on
        another GPU (an A100 file whose section an H200 measured copies at 4,281 GB/s against 2,039)."""
        limit = 1 + MEASURED_OVER_SPEC
        over = []
        if self.copy_bandwidth_gbps is not None and self.copy_bandwidth_gbps > limit * hbm_gbps:
            over.append(f"a copy at {self.copy_bandwidth_gbps:,.0f} GB/s against HBM's {hbm_gbps:,.0f}")
        over += [f"{t} tensor at {v:,.0f} TFLOP/s against the datasheet's {tensor[t]:,.0f}"
                 for t, v in self.tensor_tflops.items() if t in tensor and v > limit * tensor[t]]
        over += [f"{t} vector at {v:,.0f} TFLOP/s against the datasheet's {vector[t]:,.0f}"
                 for t, v in self.vector_tflops.items() if t in vector and v > limit * vector[t]]
        return over


# The collectives ``rooflinectl calibrate --comm`` times (calibrate/comm.py), by nccl-tests' names.
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
COLLECTIVES: tuple[Collective, ...] = get_args(Collective)


def bus_factor(collective: Collective, n: int) -> float:
    """busbw / algbw for ``collective`` over n ranks, as nccl-tests defines the bus bandwidth (NVIDIA/nccl-tests,
    doc/PERFORMANCE.md, "Bus bandwidth"): 2(n−1)/n for an all-reduce (a reduce-scatter then an all-gather), (n−1)/n
    for an all-gather, a reduce-scatter and an all-to-all. algbw = S / t, S the collective's size as nccl-tests
    counts it (an all-reduce's buffer; an all-gather's output and a reduce-scatter's input, all n ranks' parts;
    an all-to-all's send buffer). busbw × t is then the bytes one rank sends: the engine's ring bytes
    (engine/parallel/), so busbw compares with the interconnect's one-direction roof."""
    return (2 if collective == "all_reduce" else 1) * (n - 1) / n


# A collective's time (s) and bandwidth (GB/s): positive and finite. No floor as Rate's: a 4 KiB collective of gloo
# on a CPU runs at well under a thousandth of a GB/s.
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
Gbps = Annotated[float, Field(gt=0, le=1e7, allow_inf_nan=False)]


class CommPoint(Strict):
    """One message size of one collective: ``bytes`` = S (see :func:`bus_factor`), ``time_s`` one collective's time
    (the mean over the timed iterations, the slowest rank's), algbw = S / t and busbw = algbw × the bus factor."""

    bytes: Count
    time_s: Seconds
    algbw_gbps: Gbps
    busbw_gbps: Gbps


# The most of the largest size's bus bandwidth the smallest size may reach for its time to be read as a latency:
# at busbw_small ≤ ½ busbw_large its bytes take at most half its time at the largest size's rate. A curve from
# calibrate --comm's 4 KiB is far below (NVLink, NCCL: about 0.4 of 376 GB/s, tests/measure/test_comm.py).
LATENCY_BUSBW_SHARE = 0.5


class MeasuredInterconnect(Strict):
    """What ``rooflinectl calibrate --comm`` measured: each collective's curve over message sizes, on ``gpu_count``
    ranks, with where, when and how. Written beside the datasheet's ``interconnect``; ``analyze --calibrated``
    times the collectives with it (:meth:`fit`)."""

    device_name: str
    gpu_count: int = Field(ge=2)
    backend: Literal["nccl", "gloo"]
    date: str
    command: str
    torch_version: str
    nccl_version: str | None = None
    collectives: dict[Collective, list[CommPoint]] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        for name, points in self.collectives.items():
            sizes = [p.bytes for p in points]
            if not sizes:
                raise ValueError(f"collectives.{name}: no message sizes")
            if sizes != sorted(set(sizes)):
                raise ValueError(f"collectives.{name}: message sizes must rise, each once")
            factor = bus_factor(name, self.gpu_count)
            for p in points:
                # algbw and busbw are arithmetic on bytes and time_s (rounded to 4 significant digits when
                # written): a file whose three disagree was edited by hand or by another tool, and is refused.
                if abs(p.algbw_gbps - p.bytes / p.time_s / 1e9) > 1e-3 * p.algbw_gbps:
                    raise ValueError(f"collectives.{name}: at {p.bytes} bytes algbw_gbps is not bytes / time_s")
                if abs(p.busbw_gbps - p.algbw_gbps * factor) > 1e-3 * p.busbw_gbps:
                    raise ValueError(f"collectives.{name}: at {p.bytes} bytes busbw_gbps is not algbw_gbps × "
                                     f"{factor:g} (nccl-tests' bus factor for {self.gpu_count} GPUs)")
        return self

    def fit(self, collective: Collective) -> tuple[float, float] | None:
        """(GB/s, µs) the engine times ``collective`` with: the bus bandwidth at the largest size measured (where
        the fixed cost is a negligible share of the time) and the time at the smallest (where the bytes are);
        None when that collective was not measured. t = latency + sent / busbw is nccl-tests' own reading of its
        curves (doc/PERFORMANCE.md, "Time": overhead + size / bw)."""
        points = self.collectives.get(collective)
        if not points:
            return None
        return points[-1].busbw_gbps, points[0].time_s * 1e6

    def no_latency(self, collective: Collective) -> str | None:
        """Why ``collective``'s curve gives no latency to read (:meth:`fit` reads it at the smallest size), or
        None where it does. Only a time mostly made of fixed cost is a latency: one size alone gives its whole
        time, and a smallest size already at over half the largest's bus bandwidth spends over half its time on
        its bytes; either read as the latency would charge every small collective a large transfer (one 1 GiB
        point made each 8 KB decode all-reduce 3.6 ms). The engine refuses to time that collective with it rather
        than extrapolate one point."""
        points = self.collectives.get(collective)
        if not points:
            return None
        if len(points) < 2:
            return (f"measured {collective} at one size ({points[0].bytes} bytes), which gives a bandwidth and no "
                    f"latency; measure two sizes or more from a few KiB (calibrate --comm starts at 4 KiB)")
        if points[0].busbw_gbps > LATENCY_BUSBW_SHARE * points[-1].busbw_gbps:
            return (f"measured {collective} from {points[0].bytes} bytes, which already runs at "
                    f"{points[0].busbw_gbps:g} GB/s, over half the {points[-1].busbw_gbps:g} of the largest size: "
                    f"its time is no latency; measure from a few KiB up to where the bandwidth levels off")
        return None


# --- the calibrated op model (``calibrate``'s probes; engine/calibrated.py fits and predicts with it) ----------

# The classes of ops the model has curves for (engine.calibrated.op_class maps each op to one): matmuls against
# weights or activations, the attention core, and the kernels that only move data, apart where a PyTorch stack
# runs them differently (a norm; RoPE in several eager ops; the MLP's activation in two; the residual add in one;
# the embedding gather; the KV-cache write), and "memory" for any other elementwise op (biases, the MoE combine).
# A collective has no class: it keeps its measured-collective timing (engine/parallel/).
OpClass = Literal["gemm", "attention", "norm", "rope", "activation", "residual", "gather", "copy", "memory"]
# A probe's time in seconds: finite, from a picosecond (no kernel launches in less than a nanosecond; the floor keeps
# a ratio measured / roof finite, where a subnormal 5e-324 made it infinite) to an hour (no single kernel runs longer).
ProbeSeconds = Annotated[float, Field(ge=1e-12, le=3600, allow_inf_nan=False)]


class OpPoint(Strict):
    """One probe: its roofline time under the calibrated roofs (max(bytes / bandwidth, FLOPs / peak), one instance)
    and its measured median, both in seconds."""

    label: str = Field(min_length=1)  # what was run, e.g. "linear 1x4096x4096 bf16"
    roof_s: ProbeSeconds
    measured_s: ProbeSeconds


class OpCurve(Strict):
    """The probes of one class of ops bound by one roof, in order of their roofline time: what
    ``analyze --calibrated`` reads an op's time from (engine.calibrated.curve_time)."""

    op_class: OpClass
    bound: Literal["memory", "compute"]
    points: list[OpPoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _roof_times_rise(self) -> Self:
        roofs = [p.roof_s for p in self.points]
        if any(b <= a for a, b in zip(roofs, roofs[1:], strict=False)):
            raise ValueError(f"the {self.op_class} {self.bound}-bound curve's roof_s must rise strictly, point by "
                             f"point (probes of equal roofline time are merged into one when fitted)")
        return self


class OpModel(Strict):
    """The calibrated model of where time goes (engine/calibrated.py states it): per (class, bound) a curve of
    measured time over roofline time, and the launch floor no kernel runs under."""

    launch_floor_s: ProbeSeconds
    grid: str = Field(min_length=1)  # what was probed, in words (sizes, shapes, data types), for the record
    timer: str = Field(min_length=1)  # how the probes were timed, e.g. "cuda_graph"
    curves: list[OpCurve]

    @model_validator(mode="after")
    def _one_curve_each(self) -> Self:
        keys = [(c.op_class, c.bound) for c in self.curves]
        for key in keys:
            if keys.count(key) > 1:
                raise ValueError(f"two {key[0]} {key[1]}-bound curves: give each (op_class, bound) once")
        return self

    def curve(self, op_class: OpClass, bound: str) -> OpCurve | None:
        """The curve of ``op_class`` ops bound by ``bound``, or None where none was calibrated."""
        return next((c for c in self.curves if c.op_class == op_class and c.bound == bound), None)


class Measured(Ceilings):
    """The ``measured`` section of a hardware YAML: ceilings written by ``rooflinectl calibrate``, with where,
    when and how they were measured, and the collectives ``calibrate --comm`` measured (``interconnect``). The
    one-GPU ceilings' fields (device_name, date, command, torch_version, copy_bandwidth_gbps) come together or,
    in a section of collectives alone, not at all."""

    device_name: str | None = None
    date: str | None = None
    command: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    driver: str | None = None
    copy_bandwidth_gbps: Rate | None = None  # bytes read + bytes written of a large device-to-device copy
    # How calibrate timed the ceilings ("cuda_graph": replays of a CUDA graph, or "events"), and its matmul peaks
    # timed again in the same run by the other method: a check on the figures above, never used as a roof.
    timer: Literal["cuda_graph", "events"] | None = None
    tensor_tflops_check: dict[TensorDType, Peak] = Field(default_factory=dict)
    interconnect: MeasuredInterconnect | None = None
    # The calibrated op model (``calibrate``): each op's time read from its class's curve (engine/calibrated.py).
    op_model: OpModel | None = None

    @model_validator(mode="after")
    def _one_gpu_fields_together(self) -> Self:
        given = {n: getattr(self, n) is not None for n in _ONE_GPU_FIELDS}
        if all(given.values()):
            return self
        if self.op_model is not None:  # its roofline times are under the measured ceilings: it needs them
            missing = ", ".join(n for n, g in given.items() if not g)
            raise ValueError(f"op_model needs the measured ceilings its roof times were computed under: {missing}")
        if any(given.values()) or self.tensor_tflops or self.vector_tflops or self.triton_version or self.driver \
                or self.timer or self.tensor_tflops_check:
            missing = ", ".join(n for n, g in given.items() if not g)
            raise ValueError(f"the measured ceilings need {missing} as well")
        if self.interconnect is None:
            raise ValueError("holds nothing: give the ceilings 'rooflinectl calibrate' writes, or 'interconnect'")
        return self

    def devices(self) -> list[tuple[str, str | None]]:
        """(what, the device it names) for each part measured on a device: the ceilings with their op model, and
        the collectives; what ``--calibrated`` checks against the spec it is used as (specs.devices)."""
        parts: list[tuple[str, str | None]] = []
        if self.has_ceilings:
            parts.append(("ceilings", self.device_name))
        if self.interconnect is not None:
            parts.append(("collectives", self.interconnect.device_name))
        return parts

    @property
    def has_ceilings(self) -> bool:
        """Whether the one-GPU ceilings (copy bandwidth, matmul peaks) were measured."""
        return self.copy_bandwidth_gbps is not None


_ONE_GPU_FIELDS = ("device_name", "date", "command", "torch_version", "copy_bandwidth_gbps")
