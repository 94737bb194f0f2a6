"""The record of one ``measure --workload`` run (kind "workload"), saved as JSON; and its ops as measure's
ShapeRecords, so that ``plot --measured run.json`` draws each op where it ran.

Units in the names: ``*_s`` seconds, ``*_gbps`` 1e9 bytes/s, ``*_tflops`` 1e12 FLOP/s, ``*_pct`` percent.
``error_*_pct`` is prediction / measurement − 1, in percent: negative when the prediction is optimistic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ..engine.count.op import Elementwise, OpKind
from ..errors import UserError
from ..files import write_atomic
from ..specs.load import read_json, validate
from .kernel import MAX_BYTES, MAX_FLOPS, DeviceInfo, MeasurementFile, Record, ShapeRecord

WORKLOAD_SCHEMA_VERSION = 1
# How a run's times were taken: CUDA-graph replays on the GPU (bench.do_bench, timer "cuda_graph"), or the CPU's
# wall clock (--device cpu: a test of every path, not a GPU figure).
WorkloadTimer = Literal["cuda_graph", "cpu_wall"]
CPU_TIME_NOTE = "CPU wall time (time.perf_counter), not a GPU figure: --device cpu runs every path for the tests"


class OpCheck(Record):
    """The op's output against a float32 reference on fresh random inputs (``execute.check``)."""

    rel_error: float
    tolerance: float
    passed: bool
    seed: int
    note: str | None = None


class OpTiming(Record):
    median_s: float = Field(gt=0)
    p20_s: float = Field(gt=0)
    p80_s: float = Field(gt=0)
    input_sets: int = Field(ge=1)  # sets rotated among (one for the step: its layers are its rotation)


class WorkloadOp(Record):
    name: str  # the engine's name
    kind: OpKind
    count: int = Field(ge=1)  # instances in the step
    flops: int = Field(ge=0, le=MAX_FLOPS)  # one instance, the engine's count (the case's own count equals it)
    bytes: int = Field(ge=1, le=MAX_BYTES)
    unit: Literal["tensor", "vector"]
    op_dtype: str
    fuses: list[OpKind] = Field(default_factory=list)
    elementwise: Elementwise | None = None  # which elementwise operation (engine.count.op.Elementwise), where it is one
    dtype: str  # the tensors' data type
    runner: str  # the kernel that ran it, in words
    backend: str | None = None  # SDPA's backend, as torch picked it
    check: OpCheck | None = None
    error: str | None = None  # what the run raised, on one line
    timing: OpTiming | None = None
    bound: Literal["memory", "compute"] | None = None  # under the spec's roofs
    predicted_spec_s: float | None = None  # one instance, engine.roofline.place under the spec's roofs
    predicted_calibrated_s: float | None = None  # one instance, the calibrated model (None: no model)
    error_spec_pct: float | None = None
    error_calibrated_pct: float | None = None
    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    roof_pct: float | None = None  # predicted (spec) / measured × 100: the share of the spec's roof reached

    @property
    def failed(self) -> bool:
        return self.error is not None or (self.check is not None and not self.check.passed)


class WorkloadStep(Record):
    """The whole step: every op in order, captured as one CUDA graph (on the CPU: run in sequence)."""

    sum_ops_s: float | None = None  # Σ each op's median × its count
    timing: OpTiming | None = None  # the step, timed as one
    capture: Literal["cuda_graph", "sequential"]
    layers: Literal["distinct", "shared_weights", "shared_weights_and_caches"]
    memory_bytes: int  # what the step's weights, caches and activations were estimated to take
    output_finite: bool | None = None
    predicted_spec_s: float | None = None
    predicted_calibrated_s: float | None = None
    error_spec_pct: float | None = None
    error_calibrated_pct: float | None = None
    error: str | None = None


class WorkloadSpec(Record):
    """The workload measured, as ``analyze`` builds it from the same options."""

    model: str
    phase: str
    batch: int
    tokens_per_seq: int
    kv_len: int
    dtype: str
    kv_dtype: str
    attention: str
    causal: bool
    fused: list[str]


class WorkloadRun(Record):
    kind: Literal["workload"] = "workload"
    schema_version: int = WORKLOAD_SCHEMA_VERSION
    command: str
    gpu: DeviceInfo
    device: Literal["cuda", "cpu"]
    torch_version: str
    triton_version: str
    python_version: str
    date: str
    seed: int  # op i's inputs use seed + 1000·i; the step's weights seed − 1
    timer: WorkloadTimer
    warmup_ms: float
    rep_ms: float
    workload: WorkloadSpec
    ops: list[WorkloadOp] = Field(default_factory=list)
    step: WorkloadStep | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def failed(self) -> list[WorkloadOp]:
        return [o for o in self.ops if o.failed]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def save(run: WorkloadRun, path: Path) -> None:
    write_atomic(path, run.to_json(), "--save")


def load_workload(path: Path) -> WorkloadRun:
    data = read_json(path, "a measure --workload record (a JSON object)")
    if data.get("schema_version") != WORKLOAD_SCHEMA_VERSION:
        raise UserError(f"{path}: schema_version {data.get('schema_version')!r}: this rooflinectl reads workload "
                        f"records of version {WORKLOAD_SCHEMA_VERSION}")
    return validate(WorkloadRun, data, str(path))


def as_measurement(run: WorkloadRun) -> MeasurementFile:
    """The run's timed ops as measure's records (one ShapeRecord an op, its kernel the op's name), for the chart;
    a CPU run's times are no GPU's and are left out (the chart would place them under a GPU's roofs)."""
    records = []
    for o in run.ops:
        timed = o.timing is not None and run.device == "cuda" and not o.failed
        records.append(ShapeRecord(
            kernel=o.name, op=o.name, shape=[], shape_text="", shape_format="", dtype=o.dtype, flops=o.flops,
            bytes=o.bytes, unit=o.unit, op_dtype=o.op_dtype, op_kind=o.kind, op_fuses=list(o.fuses),
            status="passed" if not o.failed else "failed", time_s=o.timing.median_s if timed and o.timing else None,
            achieved_gbps=o.achieved_gbps, achieved_tflops=o.achieved_tflops, bound=o.bound,
            predicted_time_s=o.predicted_spec_s, spec_roof_pct=o.roof_pct,
            notes=[f"measure --workload {run.workload.model} {run.workload.phase}: {o.runner}, ×{o.count}"]))
    return MeasurementFile(gpu=run.gpu, torch_version=run.torch_version, triton_version=run.triton_version,
                           python_version=run.python_version, date=run.date, command=run.command, interpret=False,
                           seed=run.seed, timer="cuda_graph" if run.device == "cuda" else None,
                           records=records, notes=run.notes)
