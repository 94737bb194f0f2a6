"""The profile record: what ``rooflinectl profile`` found, typed, saved (``--save``) and loaded (``plot --measured``).

Units in the names: ``*_s`` seconds, ``*_gbps`` 1e9 bytes/s, ``*_tflops`` 1e12 FLOP/s, ``*_pct`` percent. Counts
(FLOPs, bytes) are the engine's for the whole step: one instance times the op's count (its layers). Times are a
GPU's kernel (device) time, or on the CPU the CPU ops' self time (``clock`` says which).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..engine.count.op import OpKind
from ..errors import UserError
from ..files import write_atomic
from ..specs.load import read_json, validate
from .kernel import MAX_BYTES, MAX_FLOPS, MAX_TIME_S, DeviceInfo, MeasurementFile, ShapeRecord

KIND = "profile"
SCHEMA_VERSION = 1
Clock = Literal["gpu kernels", "cpu ops"]
Timer = Literal["cuda_graph", "eager"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KernelTime(_Record):
    """Kernels (or CPU ops) of one shortened name: their time in one step, how many, their share of the step."""

    name: str
    time_s: float = Field(ge=0)
    launches: int = Field(ge=0)
    step_pct: float = Field(ge=0)  # of the profiled total


class OpProfile(_Record):
    """One engine op in the step: the engine's count and prediction beside what ran for it."""

    op: str
    kind: OpKind
    fuses: list[OpKind] = Field(default_factory=list)
    unit: Literal["tensor", "vector"]
    op_dtype: str
    count: int = Field(ge=1)  # instances in the step (layers)
    # The step's (one instance × count), bounded as a measure record's, which plot --measured makes of it.
    flops: int = Field(ge=0, le=MAX_FLOPS)
    bytes: int = Field(ge=1, le=MAX_BYTES)
    predicted_s: float | None = None  # under the spec's roofs
    calibrated_s: float | None = None  # under the GPU file's measured ceilings, where it has them
    # the op's work; None: nothing ran in its range
    measured_s: float | None = Field(default=None, ge=0, le=MAX_TIME_S, allow_inf_nan=False)
    launches: int = Field(ge=0)
    achieved_gbps: float | None = None  # bytes / measured_s
    achieved_tflops: float | None = None  # flops / measured_s
    roof_pct: float | None = None  # predicted_s / measured_s × 100 (GPU only)
    overhead: list[KernelTime] = Field(default_factory=list)  # in its range, not counted by the roofline


class ProfileRecord(_Record):
    kind: Literal["profile"] = "profile"
    schema_version: int = SCHEMA_VERSION
    gpu: DeviceInfo
    torch_version: str
    transformers_version: str
    python_version: str
    date: str
    command: str
    model: str  # the model's id, or the config.json path
    workload: str  # the engine's label of the step (engine.Workload.label)
    phase: Literal["decode", "prefill"]
    batch: int
    length: int  # decode: context (the new token included); prefill: seq_len
    attn_implementation: str
    device: Literal["cuda", "cpu"]
    clock: Clock
    timer: Timer
    step_s: float = Field(gt=0)  # one step's wall time (graph replay or eager), averaged over the timed steps
    profiled_s: float = Field(ge=0)  # the profiled total: Σ work + Σ overhead + Σ unattributed
    work_s: float = Field(ge=0)
    overhead_s: float = Field(ge=0)
    unattributed_s: float = Field(ge=0)
    launches: int = Field(ge=0)
    ops: list[OpProfile]
    unattributed: list[KernelTime] = Field(default_factory=list)
    summary: str
    notes: list[str] = Field(default_factory=list)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def to_measurement(self) -> MeasurementFile:
        """The ops with a measured time, as a measure record (one ShapeRecord an op, the step's whole count,
        named by the op, as a workload record's are), so that ``plot --measured`` draws them with the engine's measured_share like any
        measured kernel. A CPU profile has no place under a GPU's roofs: a one-line UserError."""
        if self.clock != "gpu kernels":
            raise UserError(f"this profile ran on the CPU ({self.gpu.name}): its CPU times have no place under a "
                            f"GPU's roofs; profile with --device cuda to plot it")
        records = [
            ShapeRecord(kernel=o.op, op=o.op, shape=[], shape_text="", shape_format="", dtype=o.op_dtype,
                        flops=o.flops, bytes=o.bytes, unit=o.unit, op_dtype=o.op_dtype, op_kind=o.kind,
                        op_fuses=list(o.fuses), status="passed", time_s=o.measured_s,
                        achieved_gbps=o.achieved_gbps, achieved_tflops=o.achieved_tflops,
                        predicted_time_s=o.predicted_s, spec_roof_pct=o.roof_pct)
            for o in self.ops if o.measured_s is not None and o.measured_s >= 1e-9
        ]
        return MeasurementFile(gpu=self.gpu, torch_version=self.torch_version, triton_version="",
                               python_version=self.python_version, date=self.date, command=self.command,
                               interpret=False, seed=0, records=records,
                               notes=[f"from a profile: {self.workload}, {self.clock}"])


def is_profile(data: dict[str, Any]) -> bool:
    return data.get("kind") == KIND


def save(record: ProfileRecord, path: Path) -> None:
    write_atomic(path, record.to_json(), "--save")


def load(path: Path, data: dict[str, Any] | None = None) -> ProfileRecord:
    """A saved profile record, validated; a malformed one is a one-line UserError."""
    data = read_json(path, "a profile record (a JSON object)") if data is None else data
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(f"{path}: schema_version {data.get('schema_version')!r}: this rooflinectl reads profile "
                        f"records of version {SCHEMA_VERSION}")
    return validate(ProfileRecord, data, str(path))
